"""Pipelined input gets the answers stepwise input gets: a client may send open,
begin, attach and more in one write without waiting for the broker's (2.4.1, 2.5.1); an
error the engine detects while the broker's open or begin is still to go is sent once it is
out, as are the end and detach replies due by then.

In memory (the engine and the broker logic) for the shapes that were lost, then over a real
socket: every conformance case that grades the broker's answer to its input (its
`outcomes`) and has a pipelined variant, run against the reference broker one frame at a
time and pipelined, gets the same verdict and the same observed outcomes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from amqpspec.amqp10 import composites
from amqpspec.amqp10.builder import build_frame, protocol_header
from amqpspec.amqp10.frames import Frame, FrameDecoder
from amqpspec.amqp10.origins import CLIENT
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.admin import make_admin
from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.profile import load_profile
from amqpspec.conformance.run.context import BrokerTarget, CaseResult
from amqpspec.conformance.run.registry import Case, load_cases, suite_cases
from amqpspec.conformance.run.runner import run_case
from amqpspec.reference_broker.runtime.memory import MemoryBroker
from amqpspec.reference_broker.runtime.process import BrokerProcess

FLOW_77 = composites.Flow(
    handle=77, incoming_window=10, next_outgoing_id=0, outgoing_window=10, link_credit=5
)
ATTACH = composites.Attach(
    name="r",
    handle=0,
    role=Role.RECEIVER,
    source=composites.Source(address="/queues/q"),
    target=composites.Target(),
)
PUBLISHER = composites.Attach(
    name="p",
    handle=0,
    role=Role.SENDER,
    source=composites.Source(),
    target=composites.Target(address="/queues/q"),
    initial_delivery_count=0,
)
ATTACH_PAST_MAX = composites.Attach(
    name="r",
    handle=2**31 + 1,
    role=Role.RECEIVER,
    source=composites.Source(address="/queues/q"),
    target=composites.Target(),
)
# frames after open + begin on channel 0, and what the broker answers after its begin
SHAPES = {
    # the transfer meets the credit the broker grants on attach, not a link still unanswered
    "a publisher's attach then a transfer": (
        [PUBLISHER, composites.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", settled=True)],
        ["attach"],
    ),
    # 2.7.2 / 2.5.1: the handle-max of the broker's begin holds for the attach behind it
    "an attach past handle-max": (
        [ATTACH_PAST_MAX],
        ["close:amqp:connection:framing-error"],
    ),
    "flow on an unattached handle": ([FLOW_77], ["end:amqp:session:unattached-handle"]),
    "transfer on an unattached handle": (
        [composites.Transfer(handle=99, delivery_id=0, delivery_tag=b"t", message_format=0)],
        ["end:amqp:session:unattached-handle"],
    ),
    "detach on an unattached handle": (
        [composites.Detach(handle=41, closed=True)],
        ["end:amqp:session:unattached-handle"],
    ),
    "end": ([composites.End()], ["end:none"]),
    "attach then detach": (
        [ATTACH, composites.Detach(handle=0, closed=True)],
        ["attach", "detach:none"],
    ),
    "attach then a flow on another handle": (
        [ATTACH, FLOW_77],
        ["attach", "end:amqp:session:unattached-handle"],
    ),
}


def _answers(output: bytes) -> list[str]:
    """What the broker sent after its open and begin, as attach / end:<condition> / ..."""
    decoder = FrameDecoder()
    decoder.feed(output)
    names = []
    while (item := decoder.next_item()) is not None:
        if not isinstance(item, Frame) or item.name in ("open", "begin", "flow"):
            continue
        error = getattr(item.performative, "error", None)
        if item.name == "attach":
            names.append("attach")
        else:
            names.append(f"{item.name}:{error.condition if error is not None else 'none'}")
    return names


def _broker_output(frames: list[object], pipelined: bool) -> bytes:
    broker = MemoryBroker()
    broker.vhost.declare_queue("q", durable=False)
    conn = broker.connect(raw=True)
    writes = [protocol_header(0), build_frame(composites.Open(container_id="c"))]
    writes.append(
        build_frame(composites.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10))
    )
    writes += [build_frame(frame) for frame in frames]
    for data in [b"".join(writes)] if pipelined else writes:
        conn.send(data)
        broker.pump()
    assert broker.failures == []
    return conn.take_output()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_pipelined_input_is_answered_as_stepwise_input(shape: str) -> None:
    frames, expected = SHAPES[shape]
    assert _answers(_broker_output(frames, pipelined=False)) == expected
    assert _answers(_broker_output(frames, pipelined=True)) == expected


# --- over a real socket: the conformance cases that grade the broker's answer --------------

PROFILE = load_profile("reference")
GRADED = [case for case in load_cases() if case.outcomes and case.pipelined]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = reference_broker()
    yield running
    running.stop()


def _run(case: Case, broker: BrokerProcess, pipelined: bool) -> CaseResult:
    admin = make_admin(PROFILE.admin, broker.admin_url)
    try:
        return run_case(case, BrokerTarget("127.0.0.1", broker.port), PROFILE, admin,
                        pipelined=pipelined)  # fmt: skip
    finally:
        admin.close()


def _outcomes(result: CaseResult) -> list[str]:
    return [note for note in result.notes if note.startswith("outcome ")]


def _first_write(result: CaseResult) -> bytes:
    """The probe's first write after SASL (the AMQP header onward)."""
    chunks = [c.data for c in result.recordings[0].chunks if c.direction == CLIENT]
    return next(data for data in chunks if data.startswith(b"AMQP\x00"))


def test_the_graded_cases_are_the_refusal_cases() -> None:
    ids = {case.case_id for case in GRADED}
    assert len(GRADED) >= 25  # the others (protocol headers, SASL) have nothing to pipeline
    assert {"2.6.2/unattached-handle-flow", "2.6.2/unattached-handle-transfer"} <= ids


@pytest.mark.parametrize("case", GRADED, ids=[case.case_id for case in GRADED])
def test_every_graded_case_gets_the_same_answer_pipelined(
    case: Case, broker: BrokerProcess
) -> None:
    stepwise = _run(case, broker, pipelined=False)
    pipelined = _run(case, broker, pipelined=True)
    assert (pipelined.verdict, _outcomes(pipelined)) == (stepwise.verdict, _outcomes(stepwise)), (
        pipelined.reason
    )
    assert _outcomes(stepwise) or stepwise.verdict.value in ("UNSUPPORTED", "ERROR")


def test_a_pipelined_case_sends_its_frames_up_to_the_first_wait_in_one_write(
    broker: BrokerProcess,
) -> None:
    case = next(case for case in GRADED if case.case_id == "2.6.2/unattached-handle-flow")
    first = _first_write(_run(case, broker, pipelined=True))
    decoder = FrameDecoder()
    decoder.feed(first)
    items = []
    while (item := decoder.next_item()) is not None:
        items.append(getattr(item, "name", "header"))
    assert items == ["header", "open", "begin", "flow"]
    decoder = FrameDecoder()
    decoder.feed(_first_write(_run(case, broker, pipelined=False)))
    items = []
    while (item := decoder.next_item()) is not None:
        items.append(getattr(item, "name", "header"))
    assert items == ["header", "open"]  # stepwise: the begin waits for the broker's open


def test_the_pipelined_mode_chooses_the_cases_of_a_run() -> None:
    cases = load_cases()
    variants = [f"{case.case_id}/pipelined" for case in cases if case.pipelined]
    assert [c.case_id for c in suite_cases("never")] == [c.case_id for c in cases]
    assert [c.case_id for c in suite_cases("only")] == variants
    also = [c.case_id for c in suite_cases("also")]
    assert len(also) == len(cases) + len(variants) and set(also) == {
        *variants,
        *(c.case_id for c in cases),
    }
    variant = suite_cases("only")[0]
    assert variant.variant == "pipelined" and variant.base_id + "/pipelined" == variant.case_id
    # some read the open, begin or the coordinator's attach before their next frame (the
    # anonymous relay's offered capability, Part 4's gate, sole connection's negotiation in
    # the open), have nothing to pipeline (a protocol header, the SASL exchange or an open
    # alone), only record an answer, or re-run a base case that has its twin (the quorum
    # variants); most cases have a pipelined twin
    assert 0 < len(cases) - len(variants) < len(variants)
