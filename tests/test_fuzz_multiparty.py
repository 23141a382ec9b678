"""Multi-party fuzz cases (fuzz.multiparty) and the cross-connection oracle
(fuzz.cross_oracle): the invariants on ledgers written by hand (each fires, and the races
they must allow do not), the concurrency faults of the queue in memory, a scripted case
against each faulty reference broker (the oracle names the fault's rule; the same script
against the clean broker: nothing), and a short fixed-seed multi-party campaign against the
clean broker (0 findings), replayable findings through the CLI."""

from __future__ import annotations

import json
import os

import pytest
from fuzz_support import run_campaign, run_fuzz

from amqpspec.fuzz.cross_oracle import (
    CONFIRMED,
    DELIVER,
    ENDED,
    OUTCOME,
    Ledger,
    judge_ledger,
)
from amqpspec.fuzz.detection import target_for
from amqpspec.fuzz.findings import FindingStore
from amqpspec.fuzz.multiparty import (
    Action,
    LockedAdmin,
    MultiCase,
    chosen,
    keep_multi,
    load_multi,
    make_multi_case,
    run_multi,
    triage_multi,
)
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.faults.catalog import CATALOG, CONCURRENCY_FAULTS, Faults
from amqpspec.reference_broker.queues.classic import ACCEPTED, ClassicQueue, Delivery
from amqpspec.reference_broker.runtime.process import BrokerProcess

# ----------------------------------------------------------------- the ledger, by hand


def _ledger(*events: tuple, firm: tuple[str, ...] = ("R1", "R2"), collected: bool = True):
    ledger = Ledger(firm=set(firm), collected=collected)
    for kind, party, *rest in events:
        number = rest[0] if rest else -1
        detail = rest[1] if len(rest) > 1 else ""
        ledger.add(kind, party, number, detail)
    return ledger


def _rule(ledger: Ledger) -> str | None:
    verdict = judge_ledger(ledger)
    return verdict.rule if verdict is not None else None


def test_a_clean_story_breaks_nothing():
    ledger = _ledger(
        (CONFIRMED, "S1", 0),
        (DELIVER, "R1", 0),
        (OUTCOME, "R1", 0, "released"),  # 3.4.4: back to AVAILABLE
        (DELIVER, "R2", 0),
        (OUTCOME, "R2", 0, "accepted"),
    )
    assert _rule(ledger) is None


def test_a_second_delivery_while_the_first_holder_holds_it():
    ledger = _ledger((CONFIRMED, "S1", 0), (DELIVER, "R1", 0), (DELIVER, "R2", 0))
    verdict = judge_ledger(ledger)
    assert verdict is not None and verdict.rule == "multi.acquired-twice"
    assert verdict.section == "3.3.1" and "R1" in verdict.summary


@pytest.mark.parametrize("how", ["detach", "drop", "close", "broker"])
def test_a_holder_that_ended_frees_what_it_held(how):
    # 2.6.6: the broker requeues what a detached link held; a drop may lose our accept
    ledger = _ledger((DELIVER, "R1", 0), (ENDED, "R1", -1, how), (DELIVER, "R2", 0))
    assert _rule(ledger) is None


def test_a_holder_the_broker_ended_frees_it_even_when_read_late():
    # the broker detached R1 and gave the message to R2; we read R2 first
    ledger = _ledger((DELIVER, "R1", 0), (DELIVER, "R2", 0), (ENDED, "R1", -1, "broker"))
    assert _rule(ledger) is None


def test_redelivery_after_an_accept_the_broker_read_is_a_must():
    ledger = _ledger((DELIVER, "R1", 0), (OUTCOME, "R1", 0, "accepted"), (DELIVER, "R2", 0))
    verdict = judge_ledger(ledger)
    assert verdict is not None and verdict.rule == "multi.redelivered-after-accept"
    assert verdict.level == "MUST" and verdict.sentence == "3.5.2/distribution-modes.1"


def test_an_accept_that_may_not_have_reached_the_broker_allows_a_redelivery():
    ledger = _ledger(
        (DELIVER, "R1", 0), (OUTCOME, "R1", 0, "accepted"), (DELIVER, "R2", 0), firm=("R2",)
    )
    assert _rule(ledger) is None


def test_copy_links_are_not_judged_for_acquisition():
    ledger = _ledger((DELIVER, "R1", 0), (DELIVER, "R2", 0))
    ledger.copy_links.add("R1")
    assert _rule(ledger) is None


def test_a_confirmed_message_nobody_got_back_is_lost():
    ledger = _ledger((CONFIRMED, "S1", 0), (DELIVER, "R1", 0), (ENDED, "R1", -1, "close"))
    assert _rule(ledger) == "multi.accepted-message-lost"


def test_what_the_collector_got_was_not_lost_even_unsettled():
    # RabbitMQ 3.10 ends the collector's session on its drain before it could accept
    ledger = _ledger(
        (CONFIRMED, "S1", 0), (DELIVER, "collector", 0), (ENDED, "collector", -1, "broker")
    )
    assert _rule(ledger) is None


def test_loss_is_not_judged_without_the_collector_or_when_the_source_archives():
    events = ((CONFIRMED, "S1", 0), (DELIVER, "R1", 0), (ENDED, "R1", -1, "close"))
    assert _rule(_ledger(*events, collected=False)) is None
    archiving = _ledger(*events)
    archiving.archives_on_end = True  # the broker's source: default-outcome accepted
    assert _rule(archiving) is None


def test_rejected_and_settled_deliveries_are_not_lost():
    ledger = _ledger(
        (CONFIRMED, "S1", 0),
        (CONFIRMED, "S1", 1),
        (DELIVER, "R1", 0),
        (OUTCOME, "R1", 0, "rejected"),
    )
    ledger.add(DELIVER, "R2", 1, settled=True)
    assert _rule(ledger) is None


# ----------------------------------------------------------------- cases


def test_kind_both_makes_every_other_case_multi_party():
    assert [chosen("both", i) for i in range(4)] == [False, True, False, True]
    assert all(chosen("multi", i) for i in range(4))
    assert not any(chosen("single", i) for i in range(4))


def test_cases_are_a_function_of_seed_and_index_and_round_trip(tmp_path):
    first, again = make_multi_case(7, 3), make_multi_case(7, 3)
    assert first.actions == again.actions and first.actions
    assert {make_multi_case(7, i).note for i in range(40)} >= {
        "template regrant-race",
        "template drain-detach",
        "template drop-mid-delivery",
        "template mix",
    }
    managed = [make_multi_case(7, i) for i in range(40)]
    assert any(Action("attach", "M1") in case.actions for case in managed)
    path = tmp_path / "reproducer.json"
    path.write_text(json.dumps(first.to_json(kind="violation", rule="x")))
    loaded, record = load_multi(str(path))
    assert loaded.actions == first.actions and record["steps"] == []


# ----------------------------------------------------------------- the queue faults


def _queue(fault: str) -> ClassicQueue:
    return ClassicQueue("q", faults=Faults([fault]))


def _delivered(events: list) -> list[tuple[str, int]]:
    return [(e.consumer.tag, e.message.msg_id) for e in events if isinstance(e, Delivery)]


def test_every_concurrency_fault_is_in_the_catalog():
    assert len(CONCURRENCY_FAULTS) >= 2
    assert all(CATALOG[name].layer == "queue" for name in CONCURRENCY_FAULTS)


def test_shared_credit_gives_a_link_with_no_credit_a_delivery():
    queue = _queue("shared-credit-across-links")
    queue.add_consumer("a")
    queue.add_consumer("b")
    queue.flow("a", delivery_count=None, link_credit=2)
    queue.publish(b"1")
    queue.publish(b"2")
    assert "b" in {tag for tag, _ in _delivered(queue.dispatch())}  # b granted nothing
    alone = _queue("shared-credit-across-links")
    alone.add_consumer("a")
    alone.flow("a", delivery_count=None, link_credit=1)
    alone.publish(b"1")
    assert _delivered(alone.dispatch()) == [("a", 1)]  # one consumer: no difference


def test_two_detaches_before_a_dispatch_lose_the_first_ones_messages():
    queue = _queue("lose-requeue-on-concurrent-detach")
    for tag in ("a", "b"):
        queue.add_consumer(tag)
        queue.flow(tag, delivery_count=None, link_credit=1)
    queue.publish(b"1")
    queue.publish(b"2")
    assert len(_delivered(queue.dispatch())) == 2
    queue.remove_consumer("a")
    queue.remove_consumer("b")
    queue.add_consumer("c")
    queue.flow("c", delivery_count=None, link_credit=10)
    assert len(_delivered(queue.dispatch())) == 1  # one of the two is gone
    one = _queue("lose-requeue-on-concurrent-detach")
    one.add_consumer("a")
    one.flow("a", delivery_count=None, link_credit=1)
    one.publish(b"1")
    one.dispatch()
    one.remove_consumer("a")
    one.add_consumer("c")
    one.flow("c", delivery_count=None, link_credit=10)
    assert _delivered(one.dispatch()) == [("c", 1)]  # one detach alone loses nothing


def test_a_new_consumer_gets_a_message_another_still_holds():
    queue = _queue("deliver-to-two-consumers")
    queue.add_consumer("a")
    queue.flow("a", delivery_count=None, link_credit=1)
    queue.publish(b"1")
    assert _delivered(queue.dispatch()) == [("a", 1)]
    queue.add_consumer("b")
    queue.flow("b", delivery_count=None, link_credit=1)
    assert _delivered(queue.dispatch()) == [("b", 1)]  # a never settled it
    queue.settle("a", [1], ACCEPTED)


# ----------------------------------------------------------------- against the broker


def _attached(*links: str) -> list[Action]:
    """The links attached, in this order."""
    return [Action("attach", link) for link in links]


_SCRIPTS = {
    # R2 attached, granted nothing: the round-robin gives it a delivery on R1's credit
    "shared-credit-across-links": [
        *_attached("S1", "R1", "R2"),
        Action("grant", "R1", (5, False, False)),
        Action("publish", "S1", (4,)),
        Action("wait", "-", (300,)),
    ],
    # R1 holds one unsettled, R2 nothing and no credit; both detach: R1's is not requeued
    "lose-requeue-on-concurrent-detach": [
        *_attached("S1", "R1", "R2"),
        Action("grant", "R1", (1, False, False)),
        Action("publish", "S1", (1,)),
        Action("wait", "-", (500,)),
        Action("detach", "R1"),
        Action("detach", "R2"),
    ],
    # R1 holds one unsettled; R2 attaches and gets it too
    "deliver-to-two-consumers": [
        *_attached("S1", "R1"),
        Action("grant", "R1", (1, False, False)),
        Action("publish", "S1", (1,)),
        Action("wait", "-", (500,)),
        Action("attach", "R2"),
        Action("grant", "R2", (1, False, False)),
        Action("wait", "-", (300,)),
    ],
}
_RULES = {
    "shared-credit-across-links": "link.credit.transfer-without-credit",
    "lose-requeue-on-concurrent-detach": "multi.accepted-message-lost",
    "deliver-to-two-consumers": "multi.acquired-twice",
}


class _Broker:
    """detection.target_for's shape: a BrokerProcess with its ports."""

    def __init__(self, process: BrokerProcess) -> None:
        self.process = process
        self.port = int(process.url.rsplit(":", 1)[1])
        self.admin_port = int(process.admin_url.rsplit(":", 1)[1])
        self.admin_url = process.admin_url


def _play(process: BrokerProcess, actions: list[Action]):
    broker = _Broker(process)
    target = target_for(broker)  # type: ignore[arg-type]
    admin = LockedAdmin(ManagementClient(f"http://127.0.0.1:{broker.admin_port}"))
    return run_multi(target, MultiCase(actions), admin)


@pytest.fixture(scope="module")
def clean_broker():
    with BrokerProcess(admin=True) as process:
        yield process


@pytest.mark.parametrize("fault", sorted(_SCRIPTS))
def test_the_oracle_names_each_concurrency_fault(fault, clean_broker):
    with BrokerProcess(faults=[fault], admin=True) as process:
        outcome = _play(process, _SCRIPTS[fault])
    assert outcome.verdict is not None, f"{fault}: no verdict; {outcome.ledger.events}"
    assert outcome.verdict.rule == _RULES[fault], outcome.verdict
    assert outcome.verdict.expected and outcome.verdict.observed
    clean = _play(clean_broker, _SCRIPTS[fault])  # the same script, no fault: nothing
    assert clean.verdict is None, clean.verdict
    assert clean.ledger.collected


def test_a_management_client_beside_is_judged_like_every_party(clean_broker):
    actions = [
        Action("attach", "S1"),
        Action("attach", "M1"),
        Action("attach", "R1"),
        Action("grant", "R1", (2, False, False)),
        Action("publish", "S1", (2,)),
        Action("manage", "M1", ("queue",)),
        Action("manage", "M1", ("queues",)),
    ]
    outcome = _play(clean_broker, actions)
    assert outcome.verdict is None, outcome.verdict
    names = [getattr(i.item, "name", "") for i in outcome.recordings["M1"].items]
    assert names.count("transfer") == 4  # two requests, two answers of the /management node


def test_a_short_multi_party_campaign_on_the_clean_broker_finds_nothing(tmp_path, clean_broker):
    result = run_campaign(clean_broker, tmp_path, "--kind", "multi", "--cases", "8", "--seed", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 cases" in result.stdout and "0 new finding" in result.stdout
    assert json.loads((tmp_path / "findings.json").read_text()) == []


def test_a_multi_party_finding_is_minimised_kept_and_replayed_with_every_party(tmp_path):
    fault = "lose-requeue-on-concurrent-detach"
    with BrokerProcess(faults=[fault], admin=True) as process:
        broker = _Broker(process)
        target = target_for(broker)  # type: ignore[arg-type]
        admin = LockedAdmin(ManagementClient(f"http://127.0.0.1:{broker.admin_port}"))
        case = MultiCase(_SCRIPTS[fault], seed="script")
        outcome = run_multi(target, case, admin)
        assert outcome.verdict is not None
        result = triage_multi(target, case, outcome, confirm=2, queues=admin, max_tests=4)
        assert result is not None
        finding, small, final = result
        store = FindingStore(str(tmp_path))
        assert keep_multi(store, finding, small, final)
        assert len(small.actions) <= len(case.actions)
        findings = json.loads((tmp_path / "findings.json").read_text())
        assert [f["rule"] for f in findings] == ["multi.accepted-message-lost"]
        folder = tmp_path / os.path.dirname(findings[0]["reproducer"])
        assert {"reproducer.json", "reproducer.txt", "reproducer-S1.pcap"} <= set(
            os.listdir(folder)
        )
        assert "schedule: S1 attach" in (tmp_path / "findings.md").read_text()
        replay = run_fuzz(
            "replay", str(folder), "--broker", process.url, "--profile", "reference",
            "--admin", process.admin_url, "--times", "1",
        )  # fmt: skip
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "reproduced 1/1" in replay.stdout


def test_multi_party_cases_need_the_admin_api_where_queues_are_declared(tmp_path, clean_broker):
    result = run_fuzz(
        "--broker", clean_broker.url, "--profile", "reference", "--kind", "multi",
        "--cases", "1", "--out", str(tmp_path), "--quiet",
    )  # fmt: skip
    assert result.returncode == 2
    assert "--admin" in result.stderr
