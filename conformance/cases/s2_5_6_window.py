"""2.5.6 session flow control: transfers beyond the broker's incoming-window end the
session with amqp:session:window-violation; the broker keeps within our incoming-window (a
window begun at 0 and opened later, a one-frame window, a small window over multi-frame
deliveries); transfer-ids are serial numbers that wrap at 2^32 (a publisher session whose
next-outgoing-id starts just below it, rhea#426) and the broker's session numbers follow
ours.

Owns the cases `2.5.6/window-*` and `2.5.6/session-*` (the alarm cases are in
s2_5_6_alarms.py).
"""

from __future__ import annotations

from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.serial import serial_add, serial_offset
from amqpspec.conformance.registry import MUST, case
from amqpspec.conformance.steps.alarms import memory_alarm, window_closed_or_unsupported
from amqpspec.conformance.steps.credit import server_flows
from amqpspec.conformance.steps.deliveries import check_split, collect, exactly
from amqpspec.conformance.steps.frames import send_one_delivery
from amqpspec.conformance.steps.links import (
    consumer,
    publisher,
    small_frame_probe,
    wait_credit,
)
from amqpspec.conformance.steps.queues import body, fill
from amqpspec.conformance.verdicts import Unsupported

VIOLATION = {"end:amqp:session:window-violation", "close:amqp:session:window-violation"}
MAX_BURST = 70000
WRAP_START = serial_add(0, -4)  # a first transfer-id 4 below the 2^32 wrap


@case(
    "2.5.6/window-violation-burst",
    MUST,
    "A sender MUST NOT send a transfer frame when the remote-incoming-window is zero; "
    "transfers beyond the receiver's incoming-window are a session error "
    "amqp:session:window-violation.",
    requires={"queues", "window-enforced"},
    outcomes=VIOLATION,
    lenient={"end:*", "close:*"},
    budget=60.0,
)
def window_violation(probe, ctx):
    """One delivery split into (broker's incoming-window + 1) one-byte transfer frames, sent
    in one burst: the broker ends the session with window-violation."""
    session, sender = publisher(probe, ctx, ctx.queue())
    window = session.remote_incoming_window
    if window > MAX_BURST:
        raise Unsupported(f"broker incoming-window {window} frames: too large to exceed")
    first_id = session.next_outgoing_id
    since = probe.mark()
    send_one_delivery(probe, session, sender, b"window", window + 1)
    observed = probe.error_outcome(since=since, timeout=3.0)
    if observed not in VIOLATION:
        horizon = _widest_window(probe, since)
        if horizon is not None and serial_offset(first_id, horizon) > window:
            raise Unsupported(
                f"the broker widened its window during the burst (to id {horizon}); "
                "the burst did not exceed it"
            )
    ctx.outcome(observed)


def _widest_window(probe, since):
    widest = None
    for item in probe.frames_since(since, "flow"):
        flow = item.item.performative if isinstance(item.item, Frame) else None
        if flow is not None and flow.next_incoming_id is not None:
            edge = serial_add(flow.next_incoming_id, flow.incoming_window)
            widest = edge if widest is None else max(widest, edge)
    return widest


@case(
    "2.5.6/window-violation-closed-window",
    MUST,
    "A sender MUST NOT send a transfer frame when the remote-incoming-window is zero; "
    "transfers beyond a closed window (incoming-window 0, e.g. on a resource alarm) are a "
    "session error amqp:session:window-violation.",
    requires={"queues", "alarms", "window-enforced"},
    outcomes=VIOLATION,
    lenient={"end:*", "close:*"},
)
def window_violation_alarm(probe, ctx):
    """A memory alarm closes the broker's incoming window (a session flow with
    incoming-window 0); 1,000 transfer frames sent anyway end the session."""
    session, sender = publisher(probe, ctx, ctx.queue())
    since = probe.mark()
    with memory_alarm(ctx):
        refusal = "the broker did not close its incoming window on a memory alarm"
        window_closed_or_unsupported(
            probe, ctx, since, 10.0, refusal, see="2.5.6/alarm-closes-window"
        )
        since = probe.mark()
        send_one_delivery(probe, session, sender, b"closed-window", 1000)
        ctx.outcome(probe.error_outcome(since=since, timeout=5.0))


WINDOW = (
    "A sender MUST NOT send a transfer frame when the remote-incoming-window is zero "
    "(2.5.6); the receiver's incoming-window bounds the transfer frames in flight."
)
IDS = (
    "Transfer-ids are serial numbers (RFC 1982): next-incoming-id and next-outgoing-id "
    "wrap at 2^32, and the partner's session flows track them across the wrap (2.5.6)."
)


@case("2.5.6/session-window-zero-then-open", MUST, WINDOW, requires={"queues"})
def window_zero_then_open(probe, ctx):
    """Begin with incoming-window 0, a receiver with credit 3, 3 queued: no transfer for
    0.6 s; then a session flow with incoming-window 10: exactly 3."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 3)
    session = probe.open_session(incoming_window=0, auto_window=False)
    _, link = consumer(probe, ctx, queue, credit=3, session=session)
    early = collect(probe, link, 0.6)
    ctx.check(not early, f"{len(early)} transfers into an incoming-window of 0")
    session.flow(incoming_window=10)
    probe.flush()
    exactly(probe, link, 3)


@case("2.5.6/session-window-one", MUST, WINDOW, requires={"queues"})
def window_one(probe, ctx):
    """incoming-window 1, re-opened by one frame at a time (our engine's auto window), 30
    deliveries with credit 30: all arrive, never beyond the window (checker)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 30)
    session = probe.open_session(incoming_window=1)
    _, link = consumer(probe, ctx, queue, credit=30, session=session)
    got = probe.receive(link, 30, timeout=10.0)
    ctx.check(len(got) == 30, f"{len(got)} of 30")


@case("2.5.6/session-window-small-multi-frame", MUST, WINDOW, requires={"queues", "multi-frame"})
def window_small_multi_frame(probe, ctx):
    """max-frame-size 512, incoming-window 2, three 3,000-byte messages (7 frames each):
    the broker waits for our window between frames; all 3 arrive whole."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 3, size=3000)
    receiver = small_frame_probe(ctx)
    session = receiver.open_session(incoming_window=2)
    _, link = consumer(receiver, ctx, queue, credit=3, session=session)
    check_split(ctx, receiver.receive(link, 3, timeout=10.0))


@case("2.5.6/session-outgoing-id-wrap", MUST, IDS, requires={"queues"})
def outgoing_id_wrap(probe, ctx):
    """A publisher session begun with next-outgoing-id 2^32 - 4 sends 12 messages across
    the wrap (rhea#426): all accepted; the broker's flows name next-incoming-id in serial
    terms (the checker follows every id)."""
    queue = ctx.queue()
    session, sender = publisher(
        probe, ctx, queue, session=probe.begin(initial_outgoing_id=WRAP_START)
    )
    since = probe.mark()
    probe.publish(sender, 12, lambda i: body(i), timeout=10.0)
    ctx.check(session.next_outgoing_id == 8, f"our next-outgoing-id {session.next_outgoing_id}")
    for flow in server_flows(probe, since):
        nid = flow.next_incoming_id
        ctx.check(
            nid is not None and serial_offset(WRAP_START, nid) <= 12,
            f"broker flow next-incoming-id {nid} outside the ids we sent",
        )
    _, link = consumer(probe, ctx, queue, credit=12)
    exactly(probe, link, 12)


@case("2.5.6/session-outgoing-id-wrap-multi-frame", MUST, IDS, requires={"queues", "multi-frame"})
def outgoing_id_wrap_multi_frame(probe, ctx):
    """max-frame-size 512 both ways, next-outgoing-id 2^32 - 2, one 4,000-byte message
    (about 9 frames across the wrap): accepted and delivered whole."""
    queue = ctx.queue()
    small = small_frame_probe(ctx)
    _, sender = publisher(
        small, ctx, queue, session=small.begin(initial_outgoing_id=serial_add(0, -2))
    )
    small.publish(sender, 1, body(0, 4000), timeout=10.0)
    _, link = consumer(probe, ctx, queue, credit=1)
    delivery = probe.next_transfer(link)
    ctx.check(len(delivery.payload) >= 4000, f"{len(delivery.payload)} bytes delivered")


@case(
    "2.5.6/session-begin-next-incoming-id",
    MUST,
    "next-incoming-id: the sender's flows carry the next transfer-id they expect, which "
    "starts at the partner's begin next-outgoing-id (2.5.6, 2.7.2).",
    requires={"queues"},
)
def begin_next_incoming_id(probe, ctx):
    """A session begun with next-outgoing-id 1,000,000 attaches a publisher: the broker's
    first flow says next-incoming-id 1,000,000."""
    queue = ctx.queue()
    session = probe.begin(initial_outgoing_id=1_000_000)
    since = probe.mark()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    wait_credit(probe, sender)
    flows = server_flows(probe, since)
    ctx.check(bool(flows), "no flow from the broker")
    ctx.check(
        flows[0].next_incoming_id == 1_000_000,
        f"first flow next-incoming-id {flows[0].next_incoming_id}, our begin said 1000000",
    )
