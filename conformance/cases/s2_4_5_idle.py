"""2.4.5 idle time-out: the broker closes a silent peer when it advertised an
idle-time-out, it keeps a peer alive that sends only empty frames, empty frames are
accepted at any point after open, and heartbeats continue while a session is open.

Owns the cases `2.4.5/idle-*`.
"""

from __future__ import annotations

import itertools

from amqpspec.amqp10.composites import Open
from amqpspec.amqp10.frames import EMPTY_FRAME
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.verdicts import Unsupported

LONGEST_WAITED_MS = 15000  # a broker advertising more than this: UNSUPPORTED (bounded case)


def _broker_idle_timeout(probe) -> int | None:
    opens = probe.server_frames("open")
    return opens[-1].performative.idle_time_out if opens else None


@case(
    "2.4.5/idle-broker-closes-silent-peer",
    SHOULD,
    "If the threshold (the advertised idle-time-out) is exceeded, then a peer SHOULD try to "
    "gracefully close the connection using a close frame with an error explaining why.",
    outcomes={"close:amqp:resource-limit-exceeded"},
    lenient={"close:*", "tcp-close"},
    budget=45.0,
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def broker_closes_silent_peer(probe, ctx):
    """A crafted open (no heartbeats from us afterwards); when the broker's open advertises
    an idle-time-out T <= 15 s, we stay silent for up to 2T + 2 s: the broker closes the
    connection (resource-limit-exceeded). UNSUPPORTED when it advertises none."""
    probe.raw_handshake()
    since = probe.mark()
    probe.send_frame(Open(container_id="amqpspec-silent"))
    probe.wait_for_frame("open", since=since)
    timeout_ms = _broker_idle_timeout(probe)
    if not timeout_ms:
        raise Unsupported("the broker advertises no idle-time-out")
    if timeout_ms > LONGEST_WAITED_MS:
        raise Unsupported(f"broker idle-time-out {timeout_ms} ms: too long to wait for here")
    ctx.note(f"broker idle-time-out {timeout_ms} ms")
    observed = probe.error_outcome(timeout=2 * timeout_ms / 1000 + 2.0, since=since)
    ctx.check(observed != "timeout", f"still open {2 * timeout_ms / 1000 + 2:.1f} s later")
    ctx.outcome(observed)


@case(
    "2.4.5/idle-empty-frames-keep-alive",
    MUST,
    "A peer keeps a connection alive by sending empty frames (heartbeats): an empty frame "
    "is a valid frame and resets the partner's idle timer (2.3.2, 2.4.5).",
    budget=30.0,
)
def empty_frames_keep_alive(probe, ctx):
    """Open (our engine sends heartbeats at half the broker's idle-time-out when it has
    one); over 3 s we also send an empty frame every 0.25 s: the connection stays open and
    a session can still begin."""
    probe.open()
    for _ in range(12):
        probe.send_raw(EMPTY_FRAME)
        probe.idle(0.25)
    ctx.check(not probe.closed, "the broker closed a connection that sent empty frames")
    probe.begin()


@case(
    "2.4.5/idle-empty-frame-between-performatives",
    MUST,
    "An AMQP frame with no body is used as a heartbeat and may be sent at any time after "
    "the open (2.3.2): the partner ignores it.",
    requires={"queues"},
)
def empty_frame_between(probe, ctx):
    """Empty frames between begin, attach and flow: a receiver still gets its message."""
    queue = ctx.queue()
    fill(ctx.probe(), ctx, queue, 1)
    probe.open()
    probe.send_raw(EMPTY_FRAME)
    session = probe.begin()
    probe.send_raw(EMPTY_FRAME * 3)
    link = probe.attach_receiver(session, ctx.source(queue))
    probe.send_raw(EMPTY_FRAME)
    probe.grant(link, 1)
    probe.next_transfer(link)


@case(
    "2.4.5/idle-heartbeats-with-session",
    MUST,
    "idle-time-out: the partner MUST send frames within our advertised idle-time-out, also "
    "while sessions and links exist but carry no traffic.",
    requires={"heartbeats", "queues"},
    budget=20.0,
)
def heartbeats_with_session(probe, ctx):
    """idle-time-out 2,000 ms, a session with an idle receiver: for 4.5 s the broker never
    leaves 2 s without a frame."""
    probe.open(idle_timeout_ms=2000)
    session = probe.begin()
    probe.attach_receiver(session, ctx.source(ctx.queue()))
    start = probe.mark()
    probe.idle(4.5)
    items = probe.recording.items
    times = [items[start - 1].time] + [
        t.time for t in items[start:] if t.direction == SERVER and t.item is not None
    ]
    gap = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
    ctx.check(not probe.closed, "connection closed while idle")
    ctx.check(gap < 2.0, f"{gap:.2f} s without a broker frame (our idle-time-out 2 s)")
