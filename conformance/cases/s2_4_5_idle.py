"""2.4.5 idle time-out: the broker closes a silent peer when it advertised an
idle-time-out (a peer "should try to gracefully close the connection using a close frame
with an error explaining why": SHOULD), its frames keep within our idle-time-out while a
session is open (a peer that exceeds its partner's idle time-out SHOULD close the
connection with an error: NON-STRICT at worst); whether it keeps a peer alive that sends
only empty frames and accepts empty frames at any point after open no sentence says (MAY,
recorded).

Owns the cases `2.4.5/idle-*`.
"""

from __future__ import annotations

import itertools

from amqpspec.amqp10.composites import Open
from amqpspec.amqp10.frames import EMPTY_FRAME
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.run.registry import MAY, SHOULD, case
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.verdicts import Unsupported

IDLE_THRESHOLD = "2.4.5/idle-time-out-of-a-connection.1"  # should close with an error
IDLE_EXCEEDED = "2.4.5/idle-time-out-of-a-connection.8"  # exceeding it: SHOULD close with an error
LONGEST_WAITED_MS = 15000  # a broker advertising more than this: UNSUPPORTED (bounded case)


def _broker_idle_timeout(probe) -> int | None:
    opens = probe.server_frames("open")
    return opens[-1].performative.idle_time_out if opens else None


@case(
    "2.4.5/idle-broker-closes-silent-peer",
    SHOULD,
    "If the threshold is exceeded, then a peer should try to gracefully close the connection "
    "using a close frame with an error explaining why.",
    sentences=(IDLE_THRESHOLD,),
    outcomes={"close:amqp:*"},
    lenient=set(),
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
    if not observed.startswith("close:amqp:") and observed != "tcp-close":  # the SHOULD
        ctx.should(
            False,
            f"expected a close with an error within {2 * timeout_ms / 1000 + 2:g}s of "
            f"silence (threshold {timeout_ms} ms); {probe.observed(since)}",
        )
        return
    ctx.outcome(observed)


@case(
    "2.4.5/idle-empty-frames-keep-alive",
    MAY,
    "A peer keeps a connection alive by sending empty frames (heartbeats): an empty frame is "
    "a valid frame, otherwise to be ignored (2.4.5; no sentence binds the receiver).",
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
    ctx.check(
        not probe.closed,
        f"expected the connection kept open; {probe.observed(0)} while we sent empty frames",
    )
    probe.begin()


@case(
    "2.4.5/idle-empty-frame-between-performatives",
    MAY,
    "An AMQP frame with no body is used as a heartbeat and may be sent at any time after "
    "the open: the partner ignores it (2.3.2, 2.4.5; no sentence binds the receiver).",
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
    SHOULD,
    "If during operation a peer exceeds the remote peer's idle time-out's threshold, it "
    "SHOULD gracefully close the connection with a close frame with an error explaining why: "
    "a broker keeps within our idle-time-out, also while sessions and links carry nothing.",
    sentences=(IDLE_EXCEEDED,),
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
    ctx.check(not probe.closed, f"expected the connection open while idle; {probe.observed(start)}")
    ctx.check(
        gap < 2.0,
        f"expected a broker frame at least every 2 s (our idle-time-out); observed {gap:.2f} s "
        "without one and no close",
    )
