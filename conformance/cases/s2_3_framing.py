"""2.3 frames and 1.x encodings: a frame above the broker's max-frame-size closes the
connection with framing-error (MUST, 2.7.1); how a broker answers malformed frame headers
(DOFF below 2, SIZE below the header) and undecodable bodies (not a performative, an
unknown descriptor, a truncated list, an unassigned format code, a mandatory field null),
a frame on a channel nobody began, and two valid but unusual forms (an extended frame
header, a symbolic descriptor) no sentence prescribes: those cases are MAY, they record
the answer (the checker judges the broker's frames up to the probe's malformed one; a TCP
close without a close frame after the open breaks 2.4.3 whatever the case's level).

Owns the cases `2.3.*/*` and the malformed-input cases of other sections
(`2.5.1/frame-on-unbegun-channel`, `2.7.2/mandatory-field-null`, `2.7.3/attach-name-null`).
Malformed frames come from `amqp10.builder`: a frame header with one field out of range
(`build_frame`), or a performative's encoding cut, with one field's format code replaced or
mandatory fields null, at offsets the encoder reports (`mutate`); the valid but unusual
begins go through the engine, which records them as sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from amqpspec.amqp10.builder import build_frame, mutate
from amqpspec.amqp10.composites import Attach, Begin, Flow, Transfer
from amqpspec.amqp10.spec import Role
from amqpspec.amqp10.types import Described, ulong
from amqpspec.conformance.run.registry import MAY, MUST, RunFunction, case
from amqpspec.conformance.steps.declaring import opening_case
from amqpspec.conformance.steps.links import publisher
from amqpspec.conformance.steps.refusals import (
    refused_after_open,
    sent_bytes_outcome,
    sent_frame_outcome,
)
from amqpspec.conformance.steps.sentences import PERFORMATIVE_ENCODED
from amqpspec.conformance.verdicts import Unsupported

OVERSIZED = "2.7.1/open.max-frame-size.2"  # an oversized frame: close with framing-error

FRAMING = {"close:amqp:connection:framing-error", "close:amqp:decode-error", "tcp-close"}
DECODE = {
    "close:amqp:decode-error",
    "close:amqp:connection:framing-error",
    "end:amqp:decode-error",
    "close:amqp:invalid-field",
    "tcp-close",
}


@case(
    "2.3.1/doff-below-two",
    MAY,
    "DOFF: the frame is malformed if the value is less than 2; no sentence says how the "
    "receiver answers (typically a close with framing-error).",
    outcomes=FRAMING,
)
def doff_below_two(probe, ctx):
    """After open, an 8-byte frame whose DOFF is 1: the broker closes the connection."""
    refused_after_open(probe, ctx, build_frame(None, doff=1))


@case(
    "2.3.1/size-below-header",
    MAY,
    "SIZE: the frame is malformed if the size is less than the size of the frame header (8 "
    "bytes); no sentence says how the receiver answers (typically framing-error).",
    outcomes=FRAMING,
)
def size_below_header(probe, ctx):
    """After open, a frame header announcing SIZE 4: the broker closes the connection."""
    refused_after_open(probe, ctx, build_frame(None, size=4, trailer=bytes(8)))


@opening_case(
    "2.3.1/frame-above-max-frame-size",
    MUST,
    "A peer that receives an oversized frame MUST close the Connection with the "
    "framing-error error-code.",
    sentences=(OVERSIZED,),
    requires={"queues"},
    outcomes={"close:amqp:connection:framing-error"},
)
def frame_too_big(probe, ctx):
    """After open, on an attached sender link with credit, one transfer frame larger than
    the broker's max-frame-size (the frame's only fault): the broker closes the connection
    with framing-error."""
    event = probe.open()
    limit = event.open.max_frame_size
    if limit is None or limit > 4 * 1024 * 1024:
        raise Unsupported(f"broker max-frame-size {limit}: too large to exceed here")
    session, sender = publisher(probe, ctx, ctx.queue())
    transfer = Transfer(
        handle=sender.handle,
        delivery_id=session.next_delivery_id,
        delivery_tag=b"big",
        message_format=0,
    )
    ctx.outcome(sent_frame_outcome(probe, transfer, session.channel, bytes(limit + 1)))


def _undecodable_case(
    case_id: str, sentence: str, *, outcomes: Iterable[str]
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a frame body the probe makes undecodable as a performative (2.3.2: the
    performative MUST be encoded as a described list; binds the sender, the probe here): no
    sentence says how the receiver answers, recorded (MAY, `outcomes`)."""
    return case(case_id, MAY, sentence, sentences=(PERFORMATIVE_ENCODED,), outcomes=outcomes)


@_undecodable_case(
    "2.3.2/malformed-performative",
    "A frame body that does not decode as a performative: no sentence says how the receiver "
    "answers (typically amqp:decode-error, 2.8.15: data could not be decoded).",
    outcomes=DECODE,
)
def malformed_performative(probe, ctx):
    """After open and begin, a frame whose body is the flow descriptor around a string
    instead of a list: the broker ends with decode-error (or framing-error)."""
    session = probe.open_session()
    body = Described(ulong(Flow.DESCRIPTOR_CODE), "not a list of fields")
    ctx.outcome(sent_bytes_outcome(probe, build_frame(body, session.channel)))


@_undecodable_case(
    "2.3.2/unknown-performative",
    "The performative MUST be one of those defined (binds the sender, here the probe); "
    "no sentence says how the receiver answers an unknown descriptor.",
    outcomes=DECODE | {"close:amqp:not-implemented"},
)
def unknown_performative(probe, ctx):
    """After open, a frame whose body is a described list with descriptor 0x99 (no type of
    the spec): refused."""
    refused_after_open(probe, ctx, build_frame(Described(ulong(UNKNOWN_DESCRIPTOR), [1, 2])))


# a body that is not a valid performative may also be refused on the session
BODY_DECODE = DECODE | {"end:amqp:invalid-field"}
UNKNOWN_DESCRIPTOR = 0x99  # no performative (nor any type of the spec) has this code
UNASSIGNED_CODE = 0xFF  # a format code 1.6 assigns to no type
LENIENT = {"close:*", "end:*"}
BEGIN = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)


@_undecodable_case(
    "2.3.2/truncated-list",
    "A performative whose list encoding ends before its declared size/count cannot be "
    "decoded; no sentence says how the receiver answers (typically amqp:decode-error).",
    outcomes=BODY_DECODE,
)
def truncated_list(probe, ctx):
    """After open, a begin whose body is cut 4 bytes short (the frame size matches the cut
    body): decode-error."""
    refused_after_open(probe, ctx, mutate(BEGIN).truncate(-4).frame(0))


@_undecodable_case(
    "2.3.2/bad-constructor",
    "Each encoded value starts with a constructor (format code); an unassigned format code "
    "(0xff) cannot be decoded; no sentence says how the receiver answers.",
    outcomes=BODY_DECODE,
)
def bad_constructor(probe, ctx):
    """After open, a begin whose next-outgoing-id format code is replaced by 0xff."""
    frame = mutate(BEGIN).set_constructor("next-outgoing-id", UNASSIGNED_CODE).frame(0)
    refused_after_open(probe, ctx, frame)


@_undecodable_case(
    "2.3.2/body-not-described",
    "The performative MUST be encoded as a described type (binds the sender, here the "
    "probe); no sentence says how the receiver answers other bytes.",
    outcomes=BODY_DECODE,
)
def body_not_described(probe, ctx):
    """After open, a frame whose body is an encoded string (not a described list)."""
    refused_after_open(probe, ctx, build_frame("not a performative", 0))


@_undecodable_case(
    "2.7.2/mandatory-field-null",
    "begin next-outgoing-id is mandatory (null is not permitted, 1.3); no sentence says how "
    "the receiver answers a begin with it null.",
    outcomes=BODY_DECODE | {"end:amqp:decode-error"},
)
def mandatory_null(probe, ctx):
    """After open, a begin (described list 0x11) with next-outgoing-id and the windows
    null: refused."""
    refused_after_open(probe, ctx, mutate(Begin(), count=4).frame(0))


@_undecodable_case(
    "2.7.3/attach-name-null",
    "attach name, handle and role are mandatory (null is not permitted, 1.3); no sentence "
    "says how the receiver answers an attach with a null name.",
    outcomes=BODY_DECODE | {"detach:amqp:invalid-field", "detach:amqp:decode-error"},
)
def attach_name_null(probe, ctx):
    """After begin, an attach (0x12) whose name is null: refused."""
    session = probe.open_session()
    attach = mutate(Attach(handle=0, role=Role.RECEIVER), count=3)  # [null, 0, true]
    ctx.outcome(sent_bytes_outcome(probe, attach.frame(session.channel)))


@case(
    "2.3.1/extended-header",
    MAY,
    "DOFF gives the position of the body; the bytes between the 8-byte header and the body "
    "are the extended header, ignored in an AMQP frame (2.3.2's layout; no sentence binds "
    "the receiver).",
)
def extended_header(probe, ctx):
    """After open, a begin in a frame with DOFF 3 and 4 bytes of extended header: the
    broker answers with its begin."""
    probe.open()
    probe.send_frame(BEGIN, 0, raw=build_frame(BEGIN, 0, doff=3, extended_header=bytes(4)))
    probe.wait_for_frame("begin")


@case(
    "2.3.2/symbolic-descriptor",
    MAY,
    "A described type's descriptor may be its symbolic name or its numeric code (1.5, the "
    "descriptor amqp:begin:list or 0x00000000:0x00000011): both denote the same type (no "
    "sentence binds the receiver to accept the symbolic one).",
)
def symbolic_descriptor(probe, ctx):
    """After open, a begin described by the symbol 'amqp:begin:list': the broker answers
    with its begin."""
    probe.open()
    probe.send_frame(BEGIN, 0, raw=mutate(BEGIN).descriptor("amqp:begin:list").frame(0))
    frame = probe.wait_for_frame("begin")
    ctx.check(
        frame.performative.remote_channel == 0,
        f"expected remote-channel 0 in the begin answering ours; observed "
        f"{frame.performative.remote_channel}",
    )


@case(
    "2.5.1/frame-on-unbegun-channel",
    MAY,
    "Frames on a channel refer to the session begun on it; no sentence says how the "
    "receiver answers a flow on a channel with no session.",
    outcomes={
        "close:amqp:connection:framing-error",
        "close:amqp:illegal-state",
        "close:amqp:not-found",
        "close:amqp:session:unattached-handle",
        "tcp-close",
    },
)
def frame_on_unbegun_channel(probe, ctx):
    """After open, a session flow on channel 7 (never begun): the broker closes."""
    probe.open()
    flow = Flow(next_incoming_id=0, incoming_window=10, next_outgoing_id=0, outgoing_window=10)
    ctx.outcome(sent_frame_outcome(probe, flow, 7, timeout=1.5, silence="ignored"))
