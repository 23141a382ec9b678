"""2.4 / 2.7.1 / 2.7.9 connection open and close, more: the broker's max-frame-size floor,
an oversized frame before open, channel-max 0, a second open, a begin before open, a close
with an error answered, and nothing after the broker's close.

Owns the cases `2.7.1/open-more-*`, `2.4.1/open-more-*` and `2.4.6/close-more-*`.
"""

from __future__ import annotations

from amqp10.composites import Begin, Error, Open
from amqp10.engine import RemoteClose
from conformance.cases.refusals import sent_frame_outcome
from conformance.registry import MUST, SHOULD, case
from conformance.steps import consumer, fill
from conformance.verdicts import CaseFailed
from traces.model import SERVER

REFUSE = {
    "close:amqp:connection:framing-error",
    "close:amqp:illegal-state",
    "close:amqp:not-allowed",
    "close:amqp:decode-error",
    "tcp-close",
}


@case(
    "2.7.1/open-more-max-frame-size-floor",
    MUST,
    "max-frame-size: both peers MUST accept frames of up to 512 (MIN-MAX-FRAME-SIZE) "
    "octets; the broker's open cannot announce less.",
)
def max_frame_size_floor(probe, ctx):
    """The broker's open: max-frame-size absent (2^32-1) or >= 512."""
    event = probe.open()
    size = event.open.max_frame_size
    ctx.check(size is None or size >= 512, f"broker max-frame-size {size}")


@case(
    "2.4.1/open-more-frame-over-512-before-open",
    SHOULD,
    "Prior to the open exchange the maximum frame size is 512 octets (MIN-MAX-FRAME-SIZE, "
    "2.4.1); a larger frame is a framing error.",
    outcomes={"close:amqp:connection:framing-error", "tcp-close"},
    lenient={"close:*"},
)
def frame_over_512_before_open(probe, ctx):
    """Our open padded with a 1,000-byte property (a ~1,050-byte frame) before the
    broker's open limits are known: refused with framing-error (accepting it is lenient
    towards us, not a MUST broken)."""
    probe.raw_handshake()
    big = Open(container_id="amqpspec-big-open", properties={"pad": "x" * 1000})
    observed = sent_frame_outcome(probe, big, timeout=2.0)
    if observed == "timeout" and probe.server_frames("open"):
        observed = "opened"
    ctx.outcome(observed)


@case(
    "2.7.1/open-more-channel-max-zero",
    MUST,
    "channel-max: the maximum channel number that can be used on the connection; with "
    "channel-max 0 only channel 0 exists, so the broker answers our begin on channel 0.",
)
def channel_max_zero(probe, ctx):
    """We open with channel-max 0 and begin one session: the broker's begin is on
    channel 0 (the checker verifies every frame's channel)."""
    probe.open(channel_max=0)
    probe.begin()
    channels = [f.channel for f in probe.server_frames("begin")]
    ctx.check(channels == [0], f"broker begins on channels {channels}")


@case(
    "2.4.1/open-more-second-open",
    SHOULD,
    "open is the first frame of a connection and sent once (2.4.1, 2.4.6 states): a second "
    "open on an opened connection is illegal and ends it.",
    outcomes=REFUSE,
    lenient={"close:*"},
)
def second_open(probe, ctx):
    """After the open exchange, a second (crafted) open: the broker closes the connection."""
    probe.open()
    ctx.outcome(sent_frame_outcome(probe, Open(container_id="amqpspec-again"), timeout=2.0))


@case(
    "2.4.1/open-more-begin-before-open",
    SHOULD,
    "After the protocol header the first frame is open (2.4.1); a begin first is illegal "
    "and the connection ends.",
    outcomes=REFUSE,
    lenient={"close:*"},
)
def begin_before_open(probe, ctx):
    """Headers (and SASL), then a begin without an open: the broker closes."""
    probe.raw_handshake()
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    ctx.outcome(sent_frame_outcome(probe, begin, timeout=2.0))


@case(
    "2.4.6/close-more-with-error-answered",
    MUST,
    "close: an endpoint that receives a close (with or without error) answers with its own "
    "close (2.4.6, 2.7.9).",
)
def close_with_error(probe, ctx):
    """Open, begin, close with amqp:internal-error: the broker answers with a close."""
    probe.open_session()
    probe.conn.close(Error(condition="amqp:internal-error", description="amqpspec"))
    probe.flush()
    probe.expect_type(RemoteClose)


@case(
    "2.4.6/close-more-nothing-after",
    MUST,
    "After sending a close the endpoint MUST NOT send any more frames (2.4.6, 2.7.9).",
    requires={"queues"},
)
def nothing_after_close(probe, ctx):
    """Three times: 300 messages queued, a receiver with credit 300 on a fresh connection,
    closed as soon as the first transfer arrives: after the broker's close frame no frame
    follows (the checker flags any)."""
    queue = ctx.queue()
    for _ in range(3):
        fill(probe, ctx, queue, 300)
        other = ctx.probe()
        _, link = consumer(other, ctx, queue, credit=300)
        other.next_transfer(link)
        other.conn.close()
        other.flush()
        try:
            other.expect_type(RemoteClose)
        except CaseFailed:
            ctx.check(other.closed, "no close from the broker and the socket stays open")
        other.idle(0.3)
        items = other.recording.items
        close_at = next(
            (i for i, t in enumerate(items) if t.direction == SERVER and t.name == "close"), None
        )
        if close_at is not None:
            after = [
                t for t in items[close_at + 1 :] if t.direction == SERVER and t.item is not None
            ]
            ctx.check(not after, f"{len(after)} frames after the broker's close")
        other.disconnect()
