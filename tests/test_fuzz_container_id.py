"""Each fuzz connection opens with its own container-id (fuzz.model.case_container_id, set
by the campaign when it makes a case): 2.6.1 names a link by (container-id, name,
direction), so two cases running at once with one container-id attach the same link and the
broker steals one of them. Against a real reference broker: two concurrent conversations
under one container-id do get amqp:link:stolen (the failure this prevents), under their
cases' own ids never. Recorded reproducers keep their bytes (nothing rewrites them)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from amqpspec.amqp10.frames import Frame, decode_frame
from amqpspec.amqp10.origins import SERVER
from amqpspec.fuzz.campaign import CampaignConfig, make_case
from amqpspec.fuzz.case import load_case
from amqpspec.fuzz.model import (
    FUZZ_CONTAINER,
    Conversation,
    Handshake,
    case_container_id,
    with_container_id,
)
from amqpspec.fuzz.oracle import Bounds, Outcome, Target, run_case
from amqpspec.reference_broker.runtime.process import BrokerProcess

ROOT = Path(__file__).resolve().parents[1]
STOLEN = "amqp:link:stolen"


def _open_of(steps) -> object:
    return next(decode_frame(s.data).performative for s in steps if s.label == "open")


def _conversation() -> list:
    """Open, begin, a sender and a receiver on the fuzz queue (a v1 name: declared on
    attach), as the seeds' conversations attach them: the same link names every time."""
    conv = Conversation(Handshake()).open()
    session = conv.begin()
    conv.attach_sender(session)
    conv.attach_receiver(session, credit=5)
    return conv.steps()


def test_with_container_id_changes_the_open_alone():
    steps = _conversation()
    changed = with_container_id(steps, "amqpspec-fuzz-7-12")
    assert _open_of(steps).container_id == FUZZ_CONTAINER
    assert _open_of(changed).container_id == "amqpspec-fuzz-7-12"
    assert _open_of(changed).replace(container_id=FUZZ_CONTAINER) == _open_of(steps)
    assert [s.label for s in changed] == [s.label for s in steps]
    assert [s.data for s, t in zip(changed, steps, strict=True) if s.label != "open"] == [
        t.data for t in steps if t.label != "open"
    ]
    no_open = [s for s in steps if s.label != "open"]
    assert with_container_id(no_open, "x") == no_open


def test_each_case_of_a_campaign_has_its_own_container_id():
    config = CampaignConfig(Target("127.0.0.1", 1), "/nonexistent", seed=7, strategies=("fields",))
    seen = {}
    for index in range(40):
        case = make_case(config, index)
        again = make_case(config, index)
        assert [s.data for s in case.steps] == [s.data for s in again.steps]  # replayable
        opens = [s for s in case.steps if s.label == "open"]  # not mutated itself
        for s in opens:
            container_id = decode_frame(s.data).performative.container_id
            assert container_id == case_container_id(7, index)
            assert seen.setdefault(container_id, index) == index
    assert len(seen) >= 20  # most cases leave their open as it is


def test_recorded_reproducers_are_sent_as_recorded():
    paths = sorted((ROOT / "reports" / "fuzz-brokers").glob("**/reproducer.json"))
    if not paths:
        pytest.skip("no recorded reproducers in reports/fuzz-brokers")
    for path in paths:
        case, record = load_case(str(path))
        assert [s.data.hex() for s in case.steps] == [r["hex"] for r in record["steps"]]


def _stolen(outcome: Outcome) -> list[str]:
    assert outcome.recording is not None
    found = []
    for item in outcome.recording.items:
        frame = item.item
        if item.direction == SERVER and isinstance(frame, Frame) and frame.name == "detach":
            error = frame.performative.error
            if error is not None and str(error.condition) == STOLEN:
                found.append(str(error.description))
    return found


def _side_by_side(target: Target, cases: list[list]) -> list[Outcome]:
    """Run the cases at once, each on its own connection, paced so that they overlap."""
    outcomes: list[Outcome | None] = [None] * len(cases)

    def run(index: int) -> None:
        outcomes[index] = run_case(target, cases[index], pace=0.15)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert all(o is not None for o in outcomes)
    return outcomes  # type: ignore[return-value]


@pytest.fixture(scope="module")
def broker():
    process = BrokerProcess()
    try:
        yield process
    finally:
        process.kill()


def test_concurrent_conversations_never_steal_each_others_links(broker):
    target = Target("127.0.0.1", broker.port, Handshake(), Bounds(reply=2.0))
    shared = _conversation()
    # the failure this prevents: one container-id on both connections, links stolen
    assert any(_stolen(o) for o in _side_by_side(target, [shared, shared]))
    for round_ in range(3):
        cases = [with_container_id(shared, case_container_id(round_, i)) for i in range(2)]
        for outcome in _side_by_side(target, cases):
            assert _stolen(outcome) == []
