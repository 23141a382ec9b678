"""2.3 frames: malformed frame headers and undecodable bodies end the connection with
amqp:connection:framing-error or amqp:decode-error. Owns the cases `2.3.*/*`.

Malformed frames are core-encoded frames with one header field set out of range
(`amqp10.frames.FRAME_HEADER`), or bodies encoded by the core codec that are not a valid
performative.
"""

from __future__ import annotations

from amqp10.codec import encode
from amqp10.composites import Transfer
from amqp10.frames import FRAME_HEADER
from amqp10.types import Described, ulong
from conformance.cases.refusals import refused_after_open, sent_bytes_outcome, sent_frame_outcome
from conformance.registry import MUST, case
from conformance.verdicts import Unsupported

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
    MUST,
    "DOFF: gives the position of the body within the frame; the value MUST be 2 or greater; "
    "a malformed frame is a connection error (framing-error).",
    outcomes=FRAMING,
    lenient={"close:*"},
)
def doff_below_two(probe, ctx):
    """After open, an 8-byte frame whose DOFF is 1: the broker closes the connection."""
    refused_after_open(probe, ctx, FRAME_HEADER.pack(8, 1, 0, 0))


@case(
    "2.3.1/size-below-header",
    MUST,
    "SIZE: the total size of the frame including the frame header (at least 8); a smaller "
    "size is malformed (framing-error).",
    outcomes=FRAMING,
    lenient={"close:*"},
)
def size_below_header(probe, ctx):
    """After open, a frame header announcing SIZE 4: the broker closes the connection."""
    refused_after_open(probe, ctx, FRAME_HEADER.pack(4, 2, 0, 0) + bytes(8))


@case(
    "2.3.1/frame-above-max-frame-size",
    MUST,
    "A peer MUST NOT send frames larger than its partner can handle (max-frame-size); a "
    "bigger frame is a framing-error.",
    outcomes=FRAMING | {"end:amqp:connection:framing-error"},
    lenient={"close:*"},
)
def frame_too_big(probe, ctx):
    """After open, one frame larger than the broker's max-frame-size: the broker closes."""
    event = probe.open()
    limit = event.open.max_frame_size
    if limit is None or limit > 4 * 1024 * 1024:
        raise Unsupported(f"broker max-frame-size {limit}: too large to exceed here")
    session = probe.begin()
    transfer = Transfer(handle=0, delivery_id=0, delivery_tag=b"big", message_format=0)
    ctx.outcome(sent_frame_outcome(probe, transfer, session.channel, bytes(limit + 1)))


@case(
    "2.3.2/malformed-performative",
    MUST,
    "A frame body that does not decode as a performative is a decode-error (2.8.15: data "
    "could not be decoded).",
    outcomes=DECODE,
    lenient={"close:*", "end:*"},
)
def malformed_performative(probe, ctx):
    """After open and begin, a frame whose body is the flow descriptor around a string
    instead of a list: the broker ends with decode-error (or framing-error)."""
    session = probe.open_session()
    body = encode(Described(ulong(0x13), "not a list of fields"))
    frame = FRAME_HEADER.pack(8 + len(body), 2, 0, session.channel) + body
    ctx.outcome(sent_bytes_outcome(probe, frame))


@case(
    "2.3.2/unknown-performative",
    MUST,
    "The body of an AMQP frame is one of the nine performatives; an unknown descriptor "
    "cannot be decoded (decode-error / framing-error).",
    outcomes=DECODE | {"close:amqp:not-implemented"},
    lenient={"close:*", "end:*"},
)
def unknown_performative(probe, ctx):
    """After open, a frame whose body is a described list with descriptor 0x99: refused."""
    body = encode(Described(ulong(0x99), [1, 2]))
    refused_after_open(probe, ctx, FRAME_HEADER.pack(8 + len(body), 2, 0, 0) + body)
