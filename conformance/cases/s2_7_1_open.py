"""2.7.1 open: the limits it negotiates — the broker's max-frame-size is at least 512 and
it keeps to ours, it keeps to our channel-max (also 0) and closes the connection with
framing-error on a channel above its own (MUST, the broker bound as the receiver of
frames); how it answers an open announcing less than 512 (the probe breaks the MUST) is
recorded (MAY), and so is how it answers an open to a hostname it does not serve (2.7.1
hostname: no sentence binds the receiver beyond a default when none is given).

Owns the cases `2.7.1/*` (except `2.7.1/open-every-field`, s2_7_fields.py, and
`2.7.1/sole-connection-*`, s2_7_1_sole_connection.py).
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Begin, Open
from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.run.registry import MAY, MUST, case
from amqpspec.conformance.steps.declaring import above_max_case, opening_case
from amqpspec.conformance.steps.links import consumer, small_frame_probe
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.steps.refusals import sent_frame_outcome

FRAME_FLOOR = "2.7.1/open.max-frame-size.3"  # both peers MUST accept 512-octet frames
FRAME_LIMIT = "2.7.1/open.max-frame-size.1"  # no frame above the partner's max-frame-size
CHANNEL_LIMIT = "2.7.1/open.channel-max.1"  # no channel above the partner's channel-max
CHANNEL_ABOVE = "2.7.1/open.channel-max.2"  # a channel above ours: close, framing-error
CLOSE_ANY = {
    "close:amqp:connection:framing-error",
    "close:amqp:invalid-field",
    "close:amqp:not-allowed",
    "close:amqp:frame-size-too-small",
    "close:amqp:resource-limit-exceeded",
    "close:amqp:decode-error",
    "tcp-close",
}


@opening_case(
    "2.7.1/open-max-frame-size-floor",
    MUST,
    "Both peers MUST accept frames of up to 512 (MIN-MAX-FRAME-SIZE) octets large: the "
    "broker's open announces no less.",
    sentences=(FRAME_FLOOR,),
)
def max_frame_size_floor(probe, ctx):
    """The broker's open: max-frame-size absent (2^32-1) or >= 512."""
    event = probe.open()
    size = event.open.max_frame_size
    ctx.check(
        size is None or size >= 512,
        f"expected max-frame-size at least 512 in the broker's open; observed {size}",
    )


@case(
    "2.7.1/max-frame-size-respected",
    MUST,
    "A peer MUST NOT send frames larger than its partner can handle: with our max-frame-size "
    "512 the broker sends no bigger frame.",
    sentences=(FRAME_LIMIT,),
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
    ctx.check(
        max(sizes) <= 512,
        f"expected broker frames of at most 512 bytes (our max-frame-size); observed one of "
        f"{max(sizes)} bytes",
    )


@case(
    "2.7.1/max-frame-size-below-minimum",
    MAY,
    "Both peers MUST accept frames of up to 512 octets (binds the probe, whose open announces "
    "256); no sentence says how the receiver answers (amqp:frame-size-too-small, a close).",
    sentences=(FRAME_FLOOR,),
    outcomes=CLOSE_ANY,
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
    "A peer MUST not use channel numbers outside the range that its partner can handle: with "
    "our channel-max 1 the broker begins no session above channel 1.",
    sentences=(CHANNEL_LIMIT,),
)
def channel_max_respected(probe, ctx):
    """We open with channel-max 1 and begin two sessions: the broker's begins use channels
    0 and 1 only (the checker verifies each frame)."""
    probe.open(channel_max=1)
    probe.begin()
    probe.begin()
    channels = [f.channel for f in probe.server_frames("begin")]
    ctx.check(
        all(c <= 1 for c in channels),
        f"expected begins on channels 0 and 1 (our channel-max 1); observed channels {channels}",
    )


@opening_case(
    "2.7.1/open-channel-max-zero",
    MUST,
    "A peer MUST not use channel numbers outside the range that its partner can handle: with "
    "our channel-max 0 only channel 0 exists, so the broker answers our begin on channel 0.",
    sentences=(CHANNEL_LIMIT,),
)
def channel_max_zero(probe, ctx):
    """We open with channel-max 0 and begin one session: the broker's begin is on
    channel 0 (the checker verifies every frame's channel)."""
    probe.open(channel_max=0)
    probe.begin()
    channels = [f.channel for f in probe.server_frames("begin")]
    ctx.check(
        channels == [0], f"expected one begin on channel 0 (our channel-max 0); observed {channels}"
    )


@above_max_case("2.7.1/channel-above-max", "channel number", CHANNEL_ABOVE)
def channel_above_max(probe, ctx):
    """A crafted begin on channel (broker's channel-max + 1): the broker refuses it."""
    event = probe.open()
    channel_max = event.open.channel_max
    if channel_max is None or channel_max >= 0xFFFF:
        from amqpspec.conformance.verdicts import Unsupported

        raise Unsupported(f"broker channel-max {channel_max}: no channel above it")
    begin = Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)
    ctx.outcome(sent_frame_outcome(probe, begin, channel_max + 1))


@case(
    "2.7.1/open-unknown-hostname",
    MAY,
    "hostname: the dns name of the host to which the sending peer is connecting (2.7.1); no "
    "sentence says how a receiver answers a name it does not serve (a close with "
    "amqp:not-found, as Qpid Broker-J does, or its default host: recorded).",
    outcomes={"close:amqp:not-found", "opened"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def open_unknown_hostname(probe, ctx):
    """Headers (and SASL), then an open with hostname amqpspec-no-such-host.invalid (RFC
    2606 reserves .invalid): the broker's answer is recorded."""
    probe.raw_handshake()
    since = probe.mark()
    opening = Open(container_id="amqpspec-hostname", hostname="amqpspec-no-such-host.invalid")
    observed = sent_frame_outcome(probe, opening, timeout=0.5)
    if observed == "timeout" and list(probe.frames_since(since, "open")):
        observed = "opened"
    ctx.outcome(observed)
