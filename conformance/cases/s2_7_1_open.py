"""2.7.1 open: the limits it negotiates — the broker's max-frame-size is at least 512 and
it keeps to ours, an open announcing less than 512 is refused, the broker keeps to our
channel-max (also 0) and refuses a channel above its own.

Owns the cases `2.7.1/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Begin, Open
from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.registry import MUST, case
from amqpspec.conformance.steps.links import consumer, small_frame_probe
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.steps.refusals import sent_frame_outcome

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
    "2.7.1/open-max-frame-size-floor",
    MUST,
    "max-frame-size: both peers MUST accept frames of up to 512 (MIN-MAX-FRAME-SIZE) "
    "octets; the broker's open cannot announce less.",
    pipelined=False,  # reads the broker's open or begin
)
def max_frame_size_floor(probe, ctx):
    """The broker's open: max-frame-size absent (2^32-1) or >= 512."""
    event = probe.open()
    size = event.open.max_frame_size
    ctx.check(size is None or size >= 512, f"broker max-frame-size {size}")


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
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def max_frame_size_too_small(probe, ctx):
    """Our (crafted) open says max-frame-size 256: the broker closes the connection."""
    probe.raw_handshake()
    open_ = Open(container_id="amqpspec-small", max_frame_size=256)
    ctx.outcome(sent_frame_outcome(probe, open_))


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
    "2.7.1/open-channel-max-zero",
    MUST,
    "channel-max: the maximum channel number that can be used on the connection; with "
    "channel-max 0 only channel 0 exists, so the broker answers our begin on channel 0.",
    pipelined=False,  # reads the broker's open or begin
)
def channel_max_zero(probe, ctx):
    """We open with channel-max 0 and begin one session: the broker's begin is on
    channel 0 (the checker verifies every frame's channel)."""
    probe.open(channel_max=0)
    probe.begin()
    channels = [f.channel for f in probe.server_frames("begin")]
    ctx.check(channels == [0], f"broker begins on channels {channels}")


@case(
    "2.7.1/channel-above-max",
    MUST,
    "channel-max: a peer MUST NOT use a channel above its partner's channel-max; a begin on "
    "a higher channel is a connection error.",
    outcomes=CLOSE_ANY | {"end:amqp:connection:framing-error", "end:amqp:resource-limit-exceeded"},
    lenient={"close:*", "end:*"},
    pipelined=False,  # reads the broker's open or begin
)
def channel_above_max(probe, ctx):
    """A crafted begin on channel (broker's channel-max + 1): the broker refuses it."""
    event = probe.open()
    channel_max = event.open.channel_max
    if channel_max is None or channel_max >= 0xFFFF:
        from amqpspec.conformance.verdicts import Unsupported

        raise Unsupported(f"broker channel-max {channel_max}: no channel above it")
    begin = Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)
    ctx.outcome(sent_frame_outcome(probe, begin, channel_max + 1))
