"""2.4 / 2.7.1 connections: open, negotiated limits (max-frame-size, channel-max) and the
idle time-out (2.4.5). Owns the cases `2.4.*/*` and `2.7.1/*`.
"""

from __future__ import annotations

import itertools

from amqp10.composites import Begin, Open
from amqp10.frames import Frame
from conformance.cases.checks import small_frame_probe
from conformance.cases.refusals import sent_frame_outcome
from conformance.registry import MUST, case
from conformance.steps import consumer, fill
from traces.model import SERVER

CLOSE_ANY = {
    "close:amqp:connection:framing-error",
    "close:amqp:invalid-field",
    "close:amqp:not-allowed",
    "close:amqp:frame-size-too-small",
    "close:amqp:resource-limit-exceeded",
    "close:amqp:decode-error",
    "tcp-close",
}


@case(
    "2.4.1/open-answered",
    MUST,
    "Each peer sends an open to begin a connection: the broker answers ours with its open "
    "(container-id mandatory, 2.7.1).",
)
def open_answered(probe, ctx):
    """Headers, SASL and our open: the broker's open arrives with a container-id."""
    event = probe.open()
    ctx.check(bool(event.open.container_id), "the broker's open has no container-id")


@case(
    "2.7.1/max-frame-size-respected",
    MUST,
    "max-frame-size: the largest frame size that the sending peer is able to accept on this "
    "connection; the broker never sends a bigger frame.",
    requires={"queues", "multi-frame"},
)
def max_frame_size_respected(probe, ctx):
    """We open with max-frame-size 512 and consume three 3,000-byte messages: every broker
    frame is at most 512 bytes."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 3, size=3000)
    small = small_frame_probe(ctx)
    _, link = consumer(small, ctx, queue, credit=3)
    small.receive(link, 3)
    sizes = [
        len(t.raw)
        for t in small.recording.items
        if t.direction == SERVER and isinstance(t.item, Frame)
    ]
    ctx.check(max(sizes) <= 512, f"broker frame of {max(sizes)} bytes (max-frame-size 512)")


@case(
    "2.7.1/max-frame-size-below-minimum",
    MUST,
    "max-frame-size: both peers MUST accept frames of up to MIN-MAX-FRAME-SIZE (512) octets; "
    "an open announcing less is refused (amqp:frame-size-too-small or a connection error).",
    outcomes=CLOSE_ANY,
    lenient={"close:*"},
)
def max_frame_size_too_small(probe, ctx):
    """Our (crafted) open says max-frame-size 256: the broker closes the connection."""
    probe.raw_handshake()
    open_ = Open(container_id="amqpspec-small", max_frame_size=256)
    ctx.outcome(sent_frame_outcome(probe, open_))


@case(
    "2.4.5/broker-heartbeats",
    MUST,
    "idle-time-out: a peer that advertised T closes the connection when nothing arrives for "
    "T; its partner MUST send frames (empty ones if it has nothing to say) within T.",
    requires={"heartbeats"},
    budget=20.0,
)
def broker_heartbeats(probe, ctx):
    """We open with idle-time-out 2,000 ms and stay silent except for our own heartbeats:
    over 5 s the broker never lets 2 s pass without a frame."""
    probe.open(idle_timeout_ms=2000)
    opened = next(t for t in probe.recording.items if t.name == "open" and t.direction == SERVER)
    probe.idle(5.0)
    times = [opened.time] + [
        t.time for t in probe.recording.items if t.direction == SERVER and t.index > opened.index
    ]
    times.append(probe.recording.end or times[-1])
    gap = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
    ctx.check(not probe.closed, "connection closed during the idle period")
    ctx.check(gap < 2.0, f"{gap:.2f} s without a broker frame (our idle-time-out 2 s)")


@case(
    "2.7.1/channel-max-respected",
    MUST,
    "channel-max: the highest channel number that can be used on the connection; the broker "
    "never begins a session on a higher channel.",
)
def channel_max_respected(probe, ctx):
    """We open with channel-max 1 and begin two sessions: the broker's begins use channels
    0 and 1 only (the checker verifies each frame)."""
    probe.open(channel_max=1)
    probe.begin()
    probe.begin()
    channels = [f.channel for f in probe.server_frames("begin")]
    ctx.check(all(c <= 1 for c in channels), f"broker begins on channels {channels}")


@case(
    "2.7.1/channel-above-max",
    MUST,
    "channel-max: a peer MUST NOT use a channel above its partner's channel-max; a begin on "
    "a higher channel is a connection error.",
    outcomes=CLOSE_ANY | {"end:amqp:connection:framing-error", "end:amqp:resource-limit-exceeded"},
    lenient={"close:*", "end:*"},
)
def channel_above_max(probe, ctx):
    """A crafted begin on channel (broker's channel-max + 1): the broker refuses it."""
    event = probe.open()
    channel_max = event.open.channel_max
    if channel_max is None or channel_max >= 0xFFFF:
        from conformance.verdicts import Unsupported

        raise Unsupported(f"broker channel-max {channel_max}: no channel above it")
    begin = Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)
    ctx.outcome(sent_frame_outcome(probe, begin, channel_max + 1))
