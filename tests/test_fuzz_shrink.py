"""Field-level minimising (fuzz.shrink): after ddmin over frames, the fields within each
frame are reset, shortened and lowered while the finding still reproduces. In memory with
a predicate over the bytes, then over the network: a parser fault of the reference broker
(die-on-credit-overflow) found on a flow with every field set is minimised to the flow's
link-credit, and the minimised case still triggers it."""

from __future__ import annotations

import pytest

from amqpspec.amqp10 import codec
from amqpspec.amqp10.builder import build_frame, mutate, read_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.frames import decode_frame
from amqpspec.amqp10.types import Described, symbol, ulong
from amqpspec.fuzz.campaign import FIELD_TESTS_OTHER, triage
from amqpspec.fuzz.case import Case, Step, step
from amqpspec.fuzz.detection import Supervised
from amqpspec.fuzz.model import QUEUE_HANDSHAKE as QUEUE
from amqpspec.fuzz.model import Conversation
from amqpspec.fuzz.oracle import VIOLATION, Bounds, Target, run_case
from amqpspec.fuzz.shrink import non_default_fields, shrink_fields

C = COMPOSITE_CLASSES
FAT_FLOW = C["flow"](
    next_incoming_id=5,
    incoming_window=900,
    next_outgoing_id=7,
    outgoing_window=900,
    handle=0,
    delivery_count=3,
    link_credit=2**32 - 1,
    available=12,
    echo=True,
    properties={"k": "v" * 40},
)
BAD_BEGIN = (
    mutate(C["begin"](next_outgoing_id=3, incoming_window=10, outgoing_window=10, handle_max=9))
    .replace_field("incoming-window", b"\xa1\x02\xff\xfe")  # str8 with bad UTF-8 for a uint
    .frame(1)
)


def _conversation() -> list[Step]:
    conv = Conversation(QUEUE).open()
    conv.attach_receiver(conv.begin(), credit=1)
    return conv.steps()


def _field(s: Step, name: str) -> bytes | None:
    parts = read_frame(s.data)
    if parts is None or isinstance(parts.body, bytes):
        return None
    try:
        return parts.body.field_bytes(name)
    except KeyError:
        return None


def _fails(steps: list[Step]) -> bool:
    """The stand-in bug: a flow with link-credit >= 2^31 and a begin whose incoming-window
    is a str8."""
    credit = begin = False
    for s in steps:
        parts = read_frame(s.data)
        if parts is None or isinstance(parts.body, bytes):
            continue
        name = parts.body.layout.composite
        if name == "flow" and (value := _field(s, "link-credit")):
            credit = (codec.decode(value) or 0) >= 2**31
        if name == "begin" and (_field(s, "incoming-window") or b"")[:1] == b"\xa1":
            begin = True
    return credit and begin


def test_fields_are_reset_and_the_trigger_kept():
    steps = [*_conversation(), step(build_frame(FAT_FLOW)), step(BAD_BEGIN, "begin[bad]")]
    assert _fails(steps)
    result = shrink_fields(steps, _fails, max_tests=200)
    assert _fails(result.steps) and result.tests <= 200
    flow, begin = result.steps[-2], result.steps[-1]
    assert non_default_fields(flow) < non_default_fields(steps[-2])
    assert non_default_fields(flow) == 1 and flow.label == "flow[fields: link-credit]"
    assert decode_frame(flow.data).performative.link_credit == 2**31  # lowered to the boundary
    assert decode_frame(flow.data).performative.properties is None
    # the malformed field stays as it was (it is the trigger), the others are reset
    assert _field(begin, "incoming-window") == b"\xa1\x02\xff\xfe"
    assert begin.label == "begin[bad][fields: incoming-window]" and begin.malformed
    assert result.after < result.before
    assert len(result.steps) == len(steps)  # fields only: ddmin over frames is the caller's


def test_values_are_shortened_and_lowered():
    def fails(steps: list[Step]) -> bool:
        container = codec.decode(_field(steps[0], "container-id") or codec.encode(""))
        size = codec.decode(_field(steps[0], "max-frame-size") or codec.encode(None))
        return len(container) >= 10 and (size or 0) >= 600

    opening = C["open"](container_id="c" * 40, hostname="h" * 30, max_frame_size=70000)
    result = shrink_fields([step(build_frame(opening))], fails, max_tests=200)
    assert fails(result.steps)
    shrunk = decode_frame(result.steps[0].data).performative
    assert 10 <= len(shrunk.container_id) < 40  # halved, not below what fails
    assert shrunk.max_frame_size == 65536  # lowered to the largest boundary that fails
    assert shrunk.hostname is None  # reset


def test_nothing_to_minimise_costs_nothing():
    headers = [Step(b"AMQP\x00\x01\x00\x00", "protocol-header 0.1.0.0", "header")]
    result = shrink_fields(headers, lambda _: pytest.fail("no test is needed"), max_tests=10)
    assert result.steps == headers and result.tests == 0


@pytest.fixture(scope="module")
def nested_fault():
    broker = Supervised(["die-on-nested-descriptor"])
    try:
        yield Target("127.0.0.1", broker.port, QUEUE, Bounds(reply=1.5, restart_wait=20.0))
    finally:
        broker.stop()


def test_a_parser_fault_is_minimised_field_by_field(nested_fault):
    target = nested_fault
    nested = {symbol("k"): Described(Described(ulong(1), ulong(2)), 3)}
    fat_begin = C["begin"](
        next_outgoing_id=5,
        incoming_window=900,
        outgoing_window=900,
        handle_max=9,
        offered_capabilities=[symbol("x" * 20)],
        desired_capabilities=[symbol("y")],
        properties=nested,
    )
    steps = [*_conversation(), step(build_frame(fat_begin, 1), "begin[properties=nested]")]
    outcome = run_case(target, steps)
    assert outcome.verdict is not None and outcome.verdict.kind == VIOLATION
    result = triage(target, Case(steps, "fields", "test:0"), outcome)
    assert result is not None
    finding, small, _ = result
    last = small.steps[-1]
    assert (
        finding.frames == small.labels
        and last.label == "begin[properties=nested][fields: properties]"
    )
    assert non_default_fields(last) < non_default_fields(steps[-1])
    assert read_frame(last.data).body.field_bytes("properties") == codec.encode(nested)
    counts = finding.extra["non_default_fields"]
    assert counts["after"] < counts["before"] and counts["tests"] <= FIELD_TESTS_OTHER
    assert finding.original_frames == [s.label for s in steps]
    replay = run_case(target, small.steps)  # the minimised case still triggers the fault
    assert replay.verdict is not None and replay.verdict.rule == finding.rule
