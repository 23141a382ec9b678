"""The SQL-like source filters (amqp:sql-filter and the JMS selector): the reference broker's
evaluator (reference_broker/features/selectors.py) and the suite's
(conformance/steps/sql_expressions.py) each on the rules, the two against each other on
generated messages and expressions, the broker over a socket (the filter in place on a
stream, left out on a classic queue and when invalid), and the conformance cases
(conformance/cases/s3_5_sql_filters.py): OK clean, DIFFERS with the
selector-like-escape-ignored fault, UNSUPPORTED on a profile without the capabilities."""

from __future__ import annotations

import pytest
from broker_support import connected_client, management, running_broker
from broker_support.case_verdicts import case_verdicts
from broker_support.filtered import drained
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10.composites import Header, Properties
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import Described, symbol
from amqpspec.conformance.cases import s3_5_sql_filters as sql_cases
from amqpspec.conformance.steps import sql_expressions as suite
from amqpspec.conformance.steps.sql_expressions import SELECTOR, SQL, InvalidExpressionError
from amqpspec.conformance.steps.sql_strategies import expressions, messages
from amqpspec.conformance.verdicts import Verdict
from amqpspec.reference_broker.faults.catalog import parse_faults
from amqpspec.reference_broker.features.selectors import SelectorError, compile_expression
from amqpspec.reference_broker.queues.classic import (
    MODIFIED,
    RELEASED,
    ClassicQueue,
    CreditReply,
    Delivery,
)

MESSAGE = Message.of(
    b"m",
    header=Header(priority=7, durable=True),
    properties=Properties(subject="apple", correlation_id="c-1", user_id=b"guest"),
    application_properties={"name": "a_b", "size": 3, "ratio": 2.5, "flag": True, "nil": None},
)
# (expression, dialect, selected?) on MESSAGE: each rule of the module docstrings
RULES = [
    ("size = 3", SQL, True),
    ("size = 3.0", SQL, True),  # exact and approximate numbers compare
    ("size <> '3'", SQL, False),  # unlike types: false, even <>
    ("name > 'a'", SQL, False),  # strings: = and <> only
    ("missing = 1", SQL, False),  # unknown
    ("NOT (missing = 1)", SQL, False),  # NOT unknown is unknown
    ("missing = 1 OR size = 3", SQL, True),
    ("missing = 1 AND size = 4", SQL, False),
    ("NOT (missing = 1 AND size = 4)", SQL, True),  # unknown AND false is false
    ("missing IS NULL AND nil IS NULL AND size IS NOT NULL", SQL, True),
    ("name LIKE 'a_b' AND name LIKE 'a%' AND name LIKE '%b'", SQL, True),
    ("name LIKE 'a!_b' ESCAPE '!'", SQL, True),
    ("name LIKE 'a!%' ESCAPE '!'", SQL, False),
    ("NOT (size LIKE '3')", SQL, False),  # LIKE of a non-string: unknown
    ("size BETWEEN 3 AND 4 AND NOT (ratio BETWEEN 3 AND 4)", SQL, True),
    ("name IN ('x', 'a_b')", SQL, True),
    ("NOT (missing IN ('x'))", SQL, False),
    ("size * 2 - 1 = 5 AND size / 2 = 1 AND -size = -3 AND ratio * 2 = 5", SQL, True),
    ("size / 0 = 1 OR NOT (size / 0 = 1)", SQL, False),  # a zero divisor: unknown
    ("flag AND flag = TRUE", SQL, True),
    ("h.priority = 7 AND header.durable AND p.subject = 'apple'", SQL, True),
    ("properties.correlation_id = 'c-1'", SQL, True),
    ("p.user_id = p.user_id OR p.user_id IS NULL", SQL, False),  # binary: no selector type
    ("name = 'a_b' and Size = 3", SQL, False),  # identifiers are case-sensitive
    ("JMSPriority = 7 AND JMSDeliveryMode = 'PERSISTENT' AND JMSCorrelationID = 'c-1'",
     SELECTOR, True),
    ("name = 'it''s' OR name <> 'it''s'", SELECTOR, True),
]  # fmt: skip
INVALID = [
    ("size = ", SQL),
    ("name LIKE 'a!' ESCAPE '!'", SQL),  # the pattern ends with its escape
    ("name LIKE 'a' ESCAPE '!!'", SQL),
    ("x.subject = 'a'", SQL),
    ("p.nosuchfield = 1", SQL),
    ("p.subject = 'a'", SELECTOR),
    ("size = 1)", SQL),
    ("NOT", SELECTOR),
]


@pytest.mark.parametrize(("text", "dialect", "selected"), RULES)
def test_rules(text: str, dialect: str, selected: bool) -> None:
    assert compile_expression(text, dialect).passes(MESSAGE) is selected
    assert suite.selects(text, dialect, MESSAGE) is selected


@pytest.mark.parametrize(("text", "dialect"), INVALID)
def test_invalid(text: str, dialect: str) -> None:
    with pytest.raises(SelectorError):
        compile_expression(text, dialect)
    with pytest.raises(InvalidExpressionError):
        suite.parse(text, dialect)


def test_fixed_selections() -> None:
    """The selections the fixed cases write out are the suite evaluator's."""
    for dialect, rows in sql_cases.FIXED.items():
        for text, want in rows:
            got = [sql_cases.body_of(m) for m in sql_cases.FIXED_MESSAGES]
            got = [b for b, m in zip(got, sql_cases.FIXED_MESSAGES, strict=True)
                   if suite.selects(text, dialect, m)]  # fmt: skip
            assert got == want, (dialect, text)


FIXED_CASES = ("3.5.3/sql-filter-fixed", "3.5.3/selector-filter-fixed")
GENERATED_CASE = "3.5.3/sql-filter-generated"


def test_fault_keeps_wildcards() -> None:
    faults = parse_faults(["selector-like-escape-ignored"])
    expression = compile_expression("name LIKE 'a!_b' ESCAPE '!'", SQL, faults=faults)
    assert not expression.passes(MESSAGE)  # 'a!_b' without escape wants a literal '!'


@pytest.mark.parametrize("dialect", [SQL, SELECTOR])
def test_evaluators_agree(dialect: str) -> None:
    """The two evaluators, written apart, decide alike on generated messages and
    expressions (60 examples of 3 expressions over 8 to 12 messages)."""

    @settings(
        max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(messages(), st.lists(expressions(dialect), min_size=3, max_size=3))
    def agree(batch: list[Message], texts: list[str]) -> None:
        for text in texts:
            broker = compile_expression(text, dialect)
            for message in batch:
                assert broker.passes(message) == suite.selects(text, dialect, message), text

    agree()


def test_filters_over_a_socket() -> None:
    """A stream and a classic queue of three messages (size 1, 2, 3): a selector `size >= 2`
    is in place on both and lets m1, m2 through; on the classic queue m0 stays queued for
    a receiver without a filter; an invalid SQL filter is left out of the attach (every
    message comes)."""
    offset = {symbol("rabbitmq:stream-offset-spec"): Described(symbol("x"), "first")}
    with running_broker() as b:
        management(b).declare_queue("s", arguments={"x-queue-type": "stream"})
        management(b).declare_queue("q", durable=False)

        def fill() -> None:
            for name in ("s", "q"):
                for i in range(3):
                    message = Message.of(f"m{i}".encode(), application_properties={"size": i + 1})
                    b.server.vhost.get_queue(name).publish(message.encode())

        b.call(fill)
        selector = {symbol("jms-selector"): suite.selector_filter("size >= 2")}
        invalid = {symbol("sql-filter"): suite.sql_filter("size >= ", by_name=True)}
        with connected_client(b) as c:
            reported, got = drained(c, {**selector, **offset}, "/queues/s")
            assert symbol("jms-selector") in reported and got == [b"m1", b"m2"]
            reported, got = drained(c, {**invalid, **offset}, "/queues/s")
            assert symbol("sql-filter") not in reported and got == [b"m0", b"m1", b"m2"]
            reported, got = drained(c, selector, "/queues/q")
            assert symbol("jms-selector") in reported and got == [b"m1", b"m2"]
            assert drained(c, {}, "/queues/q")[1] == [b"m0"]


def test_cases_against_the_broker() -> None:
    """The cases: OK on a clean broker, DIFFERS with the escape fault (the LIKE ESCAPE
    expressions let the wrong messages through), UNSUPPORTED on a profile without the
    capabilities (rabbitmq3)."""
    with running_broker() as b:
        clean = case_verdicts(b, *FIXED_CASES, GENERATED_CASE)
        assert {v for v, _ in clean.values()} == {Verdict.OK}, clean
        other = case_verdicts(b, *FIXED_CASES, profile_name="rabbitmq3")
        assert {v for v, _ in other.values()} == {Verdict.UNSUPPORTED}, other
    with running_broker(faults=("selector-like-escape-ignored",)) as b:
        faulty = case_verdicts(b, *FIXED_CASES)
    assert {v for v, _ in faulty.values()} == {Verdict.DIFFERS}, faulty
    assert all("ESCAPE" in reason for _, reason in faulty.values()), faulty


def test_a_queue_hands_a_selector_consumer_only_what_it_accepts() -> None:
    """queues/selection.py through ClassicQueue: a consumer accepting payloads b"a*" gets
    a1 and a2 in order, a plain consumer the rest; a2 released goes back and is the
    selector consumer's again, undeliverable-here keeps it from that consumer."""
    queue = ClassicQueue("q")
    for payload in (b"b0", b"a1", b"b2", b"a2"):
        queue.publish(payload)
    queue.add_consumer("sel", accepts=lambda payload: payload.startswith(b"a"))
    queue.flow("sel", delivery_count=None, link_credit=5)
    got = [e.message for e in queue.dispatch() if isinstance(e, Delivery)]
    assert [m.payload for m in got] == [b"a1", b"a2"]
    assert [m.payload for m in queue.ready_messages()] == [b"b0", b"b2"]
    queue.flow("sel", delivery_count=None, link_credit=5, echo=True)
    (reply,) = [e for e in queue.dispatch() if isinstance(e, CreditReply)]
    assert reply.available == 0  # b0 and b2 await no credit of this link (2.6.7)
    queue.settle("sel", [got[1].msg_id], RELEASED)
    again = [e.message.payload for e in queue.dispatch() if isinstance(e, Delivery)]
    assert again == [b"a2"]
    queue.settle("sel", [got[1].msg_id], MODIFIED, undeliverable_here=True)
    assert [e for e in queue.dispatch() if isinstance(e, Delivery)] == []
    queue.add_consumer("plain")
    queue.flow("plain", delivery_count=None, link_credit=5)
    rest = [e.message.payload for e in queue.dispatch() if isinstance(e, Delivery)]
    assert sorted(rest) == [b"a2", b"b0", b"b2"]
