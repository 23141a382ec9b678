"""2.3 frames and 1.x encodings, more malformed and unusual input: a truncated performative
list, an invalid format code inside a performative, a mandatory field null, a body that is
not a described type, a frame on a channel nobody began, and two valid but unusual forms
the broker must accept (an extended frame header; a symbolic descriptor).

Owns the cases `2.3.*/framing-more-*`. Malformed bodies are core encodings of
performatives (`amqp10.codec.encode`), cut or with one byte replaced.
"""

from __future__ import annotations

from amqp10.codec import encode
from amqp10.composites import Begin, Flow
from amqp10.types import Described, symbol, uint, ulong
from conformance.cases.refusals import refused_after_open, sent_bytes_outcome, sent_frame_outcome
from conformance.registry import MUST, SHOULD, case
from conformance.steps_more import raw_frame

DECODE = {
    "close:amqp:decode-error",
    "close:amqp:connection:framing-error",
    "end:amqp:decode-error",
    "close:amqp:invalid-field",
    "end:amqp:invalid-field",
    "tcp-close",
}
LENIENT = {"close:*", "end:*"}
BEGIN = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)


@case(
    "2.3.2/framing-more-truncated-list",
    MUST,
    "A performative whose list encoding ends before its declared size/count cannot be "
    "decoded: a connection error amqp:decode-error (2.8.15, 1.2 list encoding).",
    outcomes=DECODE,
    lenient=LENIENT,
)
def truncated_list(probe, ctx):
    """After open, a begin whose body is cut 4 bytes short (the frame size matches the cut
    body): decode-error."""
    refused_after_open(probe, ctx, raw_frame(BEGIN.encode()[:-4], channel=0))


@case(
    "2.3.2/framing-more-bad-constructor",
    MUST,
    "Each encoded value starts with a constructor (format code); an unassigned format code "
    "(0xff) cannot be decoded: amqp:decode-error.",
    outcomes=DECODE,
    lenient=LENIENT,
)
def bad_constructor(probe, ctx):
    """After open, a begin whose next-outgoing-id format code is replaced by 0xff."""
    body = bytearray(BEGIN.encode())
    body[7] = 0xFF  # 00 53 11 c0 size count [remote-channel] [next-outgoing-id] ...
    refused_after_open(probe, ctx, raw_frame(bytes(body), channel=0))


@case(
    "2.3.2/framing-more-body-not-described",
    MUST,
    "The frame body of an AMQP frame is a performative, a described list; other bytes "
    "cannot be decoded as one (decode-error / framing-error).",
    outcomes=DECODE,
    lenient=LENIENT,
)
def body_not_described(probe, ctx):
    """After open, a frame whose body is an encoded string (not a described list)."""
    refused_after_open(probe, ctx, raw_frame(encode("not a performative"), channel=0))


@case(
    "2.7.2/framing-more-mandatory-field-null",
    MUST,
    "begin next-outgoing-id is mandatory; a performative with a mandatory field null is "
    "invalid (decode-error or invalid-field).",
    outcomes=DECODE | {"end:amqp:decode-error"},
    lenient=LENIENT,
)
def mandatory_null(probe, ctx):
    """After open, a begin (described list 0x11) with next-outgoing-id and the windows
    null: refused."""
    refused_after_open(
        probe, ctx, raw_frame(encode(Described(ulong(0x11), [None, None, None, None])), channel=0)
    )


@case(
    "2.7.3/framing-more-attach-name-null",
    MUST,
    "attach name, handle and role are mandatory; an attach with a null name is invalid "
    "(decode-error or invalid-field, on the session or the connection).",
    outcomes=DECODE | {"detach:amqp:invalid-field", "detach:amqp:decode-error"},
    lenient=LENIENT | {"detach:*"},
)
def attach_name_null(probe, ctx):
    """After begin, an attach (0x12) whose name is null: refused."""
    session = probe.open_session()
    attach = Described(ulong(0x12), [None, uint(0), True])
    ctx.outcome(sent_bytes_outcome(probe, raw_frame(encode(attach), channel=session.channel)))


@case(
    "2.3.1/framing-more-extended-header",
    MUST,
    "DOFF gives the position of the body; the bytes between the 8-byte header and the body "
    "are the extended header, which a peer that does not use it ignores (2.3.1).",
)
def extended_header(probe, ctx):
    """After open, a begin in a frame with DOFF 3 and 4 bytes of extended header: the
    broker answers with its begin."""
    probe.open()
    probe.send_raw(raw_frame(BEGIN.encode(), channel=0, doff=3, extended=bytes(4)))
    probe.wait_for_frame("begin")


@case(
    "2.3.2/framing-more-symbolic-descriptor",
    MUST,
    "A described type's descriptor may be its symbolic name or its numeric code (1.5, the "
    "descriptor amqp:begin:list or 0x00000000:0x00000011): both denote the same type.",
)
def symbolic_descriptor(probe, ctx):
    """After open, a begin described by the symbol 'amqp:begin:list': the broker answers
    with its begin."""
    probe.open()
    begin = Described(symbol("amqp:begin:list"), [None, uint(0), uint(10), uint(10)])
    probe.send_raw(raw_frame(encode(begin), channel=0))
    frame = probe.wait_for_frame("begin")
    ctx.check(frame.performative.remote_channel == 0, "the begin answer names no channel 0")


@case(
    "2.5.1/framing-more-frame-on-unbegun-channel",
    SHOULD,
    "Frames on a channel refer to the session begun on it; a flow on a channel with no "
    "session is illegal and ends the connection.",
    outcomes={
        "close:amqp:connection:framing-error",
        "close:amqp:illegal-state",
        "close:amqp:not-found",
        "close:amqp:session:unattached-handle",
        "tcp-close",
    },
    lenient={"close:*", "end:*"},
)
def frame_on_unbegun_channel(probe, ctx):
    """After open, a session flow on channel 7 (never begun): the broker closes."""
    probe.open()
    flow = Flow(next_incoming_id=0, incoming_window=10, next_outgoing_id=0, outgoing_window=10)
    ctx.outcome(sent_frame_outcome(probe, flow, 7, timeout=1.5, silence="ignored"))
