"""fuzz.consequences: a broker's rule break that answers the fuzzer's own earlier break
(the pairs read against real traces) is set apart; the same break without that cause, or
with the cause after it, stays the broker's."""

from __future__ import annotations

from amqpspec.amqp10.checker.rules import RULES, Violation
from amqpspec.fuzz.consequences import CONSEQUENCES, attributable


def _v(rule: str, index: int, origin: str) -> Violation:
    return Violation(rule, "2.7.2", "MUST", index, origin, f"{rule} at {index}")


def test_a_break_answering_the_fuzzers_own_is_set_apart() -> None:
    broker = [_v("session.remote-channel", 12, "server")]
    fuzzer = [_v("session.channel-in-use", 11, "client")]
    assert attributable(broker, fuzzer) == []


def test_without_its_cause_or_before_it_the_break_stays_the_brokers() -> None:
    broker = [_v("session.remote-channel", 12, "server")]
    assert attributable(broker, []) == broker
    later = [_v("session.channel-in-use", 13, "client")]
    assert attributable(broker, later) == broker
    unrelated = [_v("link.attach.handle-in-use", 5, "client")]
    assert attributable(broker, unrelated) == broker
    credit = [_v("link.credit.transfer-beyond-credit", 20, "server")]  # never excused
    assert attributable(credit, [_v("session.channel-in-use", 1, "client")]) == credit


def test_every_pair_names_rules_the_checker_has() -> None:
    for broker_rule, causes in CONSEQUENCES.items():
        assert broker_rule in RULES, broker_rule
        assert causes <= set(RULES), causes - set(RULES)
