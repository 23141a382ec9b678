"""2.5.6 session flow control: transfers beyond the broker's incoming-window end the
session with amqp:session:window-violation (RabbitMQ 4's model: no sentence requires the
receiver to; MODEL, DIFFERS when not); whether the broker keeps within our incoming-window
(a window begun at 0 and opened later, a one-frame window, a small window over multi-frame
deliveries), handles transfer-ids that wrap at 2^32 (a publisher session whose
next-outgoing-id starts just below it, rhea#426) and starts its next-incoming-id at our
begin's next-outgoing-id: 2.5.6's MUSTs on the remote-incoming-window a sender keeps
(session-flow-control.1) and the next-incoming-id taken from the partner's
next-outgoing-id (.3), as the manifest links them; a session flow whose next-outgoing-id
goes backwards (Qpid Broker-J ends the session) either ends the session (recorded) or
moves the broker's next-incoming-id to it (.3: "update ... directly"); a receiver detached
while our incoming-window is 0 gets nothing for its handle once the window opens (2.7.4
flow.handle: a frame for a handle no longer attached is an error the recipient MUST end
the session for).

Owns the cases `2.5.6/window-*` and `2.5.6/session-*` (the alarm cases are in
s2_5_6_alarms.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from amqpspec.amqp10.composites import Flow
from amqpspec.amqp10.engine import RemoteDetach, UsageError
from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.serial import serial_add, serial_offset
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.run.registry import MODEL, MUST, RunFunction, case
from amqpspec.conformance.steps.alarms import memory_alarm, window_closed_or_unsupported
from amqpspec.conformance.steps.credit import server_flows
from amqpspec.conformance.steps.deliveries import check_split, collect, consumed_exactly, exactly
from amqpspec.conformance.steps.frames import send_one_delivery
from amqpspec.conformance.steps.links import (
    consumer,
    publisher,
    small_frame_probe,
    wait_credit,
)
from amqpspec.conformance.steps.queues import body, fill
from amqpspec.conformance.steps.refusals import sent_frame_outcome
from amqpspec.conformance.steps.sentences import FLOW_UNATTACHED, RABBITMQ4
from amqpspec.conformance.verdicts import Unsupported

VIOLATION = {"end:amqp:session:window-violation", "close:amqp:session:window-violation"}
MAX_BURST = 70000
WRAP_START = serial_add(0, -4)  # a first transfer-id 4 below the 2^32 wrap


@case(
    "2.5.6/window-violation-burst",
    MODEL,
    "Transfers beyond the receiver's incoming-window end the session with "
    "amqp:session:window-violation (RabbitMQ 4's model; no sentence requires it).",
    model=RABBITMQ4,
    requires={"queues", "window-enforced"},
    outcomes=VIOLATION,
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
    MODEL,
    "Transfers beyond a closed window (incoming-window 0 on a resource alarm) end the "
    "session with amqp:session:window-violation (RabbitMQ 4's model; no sentence requires "
    "it).",
    model=RABBITMQ4,
    requires={"queues", "alarms", "window-enforced"},
    outcomes=VIOLATION,
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
    "This value MUST be decremented after every transfer frame is sent, and recomputed when "
    "informed of the remote session endpoint state."
)
IDS = (
    "When the endpoint receives a flow frame from its peer, it MUST update the "
    "next-incoming-id directly from the next-outgoing-id of the frame, as well as copy the "
    "remote-outgoing-window directly from the outgoing-window of the frame."
)
REMOTE_WINDOW = "2.5.6/session-flow-control.1"  # the sender keeps remote-incoming-window
NEXT_INCOMING = "2.5.6/session-flow-control.3"  # next-incoming-id from the next-outgoing-id


def _remote_window_case(
    case_id: str, sentence: str, *, requires: Iterable[str] = frozenset({"queues"})
) -> Callable[[RunFunction], RunFunction]:
    """`case` for the broker as a sender keeping to our session's incoming-window (2.5.6:
    REMOTE_WINDOW)."""
    return case(
        case_id, MUST, sentence, sentences=(REMOTE_WINDOW,), role="sender", requires=requires
    )


@_remote_window_case("2.5.6/session-window-zero-then-open", WINDOW)
def window_zero_then_open(probe, ctx):
    """Begin with incoming-window 0, a receiver with credit 3, 3 queued: no transfer for
    0.6 s; then a session flow with incoming-window 10: exactly 3."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 3)
    session = probe.open_session(incoming_window=0, auto_window=False)
    _, link = consumer(probe, ctx, queue, credit=3, session=session)
    early = collect(probe, link, 0.6)
    ctx.check(
        not early,
        f"expected no transfer into our incoming-window of 0; observed {len(early)} "
        f"(the first: delivery-id {early[0].delivery_id if early else ''})",
    )
    session.flow(incoming_window=10)
    probe.flush()
    exactly(probe, link, 3)


HANDLE_GONE = (
    "If set to a handle that is not currently associated with an attached Link, the "
    "recipient MUST respond by ending the session with an unattached-handle session error: "
    "a link detached by both ends while our incoming-window is 0 gets no transfer or flow "
    "once the window opens."
)


@case(
    "2.5.6/session-window-zero-detached-link",
    MUST,
    HANDLE_GONE,
    sentences=(FLOW_UNATTACHED, REMOTE_WINDOW),
    role="sender",
    model=RABBITMQ4,
    requires={"queues"},
    pipelined=False,  # the detach and the window's opening wait for the broker's answers
)
def window_zero_detached_link(probe, ctx):
    """Counters RabbitMQ's incoming_window_closed_close_link: one message queued, a
    session begun with incoming-window 0, a receiver granted 2 with drain: nothing for 0.3
    s; the receiver detached (closed) and the broker's detach awaited; then a session flow
    opening the window to 10: for 0.3 s no transfer or flow for the detached link's handle
    (both ends destroyed it). Whether the message is then still queued is recorded."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1)
    session = probe.open_session(incoming_window=0, auto_window=False)
    _, link = consumer(probe, ctx, queue, session=session)
    granted = probe.mark()
    probe.grant(link, 2, drain=True)
    early = collect(probe, link, 0.3)
    ctx.check(
        not early,
        f"expected no transfer into our incoming-window of 0; observed {len(early)} (the "
        f"first: delivery-id {early[0].delivery_id if early else ''})",
    )
    handle = link.remote_handle
    try:
        probe.detach(link, wait=False)
    except UsageError:  # RabbitMQ 3.10 ends the session on the drain (internal-error)
        raise Unsupported(
            f"the broker ended the session before our detach: {probe.observed(granted)}"
        ) from None
    try:
        probe.expect(lambda e: isinstance(e, RemoteDetach) and e.link is link, 2.0, "detach")
    except WaitTimeout:
        ctx.model(
            False,
            f"expected our detach answered while our incoming-window is 0 (RabbitMQ 4 "
            f"answers it); {probe.observed()}",
        )
    since = probe.mark()
    session.flow(incoming_window=10)
    probe.flush()
    probe.idle(0.3)
    late = [
        f"{item.item.name} (handle {item.item.performative.handle})"
        for item in probe.frames_since(since)
        if item.item.name in ("transfer", "flow")
        and getattr(item.item.performative, "handle", None) == handle
    ]
    ctx.check(
        not late,
        f"expected nothing for handle {handle} after both ends detached its link; observed "
        f"{', '.join(late)} once our window opened",
    )
    _, again = consumer(probe, ctx, queue, credit=1)
    ctx.note(f"the message queued again after the detach: {bool(collect(probe, again, 0.3))}")


@_remote_window_case("2.5.6/session-window-one", WINDOW)
def window_one(probe, ctx):
    """incoming-window 1, re-opened by one frame at a time (our engine's auto window), 30
    deliveries with credit 30: all arrive, never beyond the window (checker)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 30)
    session = probe.open_session(incoming_window=1)
    _, link = consumer(probe, ctx, queue, credit=30, session=session)
    got = probe.receive(link, 30, timeout=10.0)
    ctx.check(len(got) == 30, f"expected 30 deliveries; observed {len(got)}")


@_remote_window_case(
    "2.5.6/session-window-small-multi-frame",
    WINDOW,
    requires={"queues", "multi-frame"},
)
def window_small_multi_frame(probe, ctx):
    """max-frame-size 512, incoming-window 2, three 3,000-byte messages (7 frames each):
    the broker waits for our window between frames; all 3 arrive whole."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 3, size=3000)
    receiver = small_frame_probe(ctx)
    session = receiver.open_session(incoming_window=2)
    _, link = consumer(receiver, ctx, queue, credit=3, session=session)
    check_split(ctx, receiver.receive(link, 3, timeout=10.0))


@case("2.5.6/session-outgoing-id-wrap", MUST, IDS, sentences=(NEXT_INCOMING,), requires={"queues"})
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
    ctx.check(
        session.next_outgoing_id == 8,
        f"expected our next-outgoing-id 8 after 12 transfers from 2^32 - 4; it is "
        f"{session.next_outgoing_id}",
    )
    for flow in server_flows(probe, since):
        nid = flow.next_incoming_id
        ctx.check(
            nid is not None and serial_offset(WRAP_START, nid) <= 12,
            f"expected next-incoming-id within the ids we sent ({WRAP_START} + 0..12, across "
            f"the wrap); observed {nid}",
        )
    consumed_exactly(probe, ctx, queue, 12)


@case(
    "2.5.6/session-outgoing-id-wrap-multi-frame",
    MUST,
    IDS,
    sentences=(NEXT_INCOMING,),
    requires={"queues", "multi-frame"},
)
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
    ctx.check(
        len(delivery.payload) >= 4000,
        f"expected the 4,000-byte message whole; observed {len(delivery.payload)} bytes",
    )


@case(
    "2.5.6/session-begin-next-incoming-id",
    MUST,
    IDS + " The broker's next-incoming-id starts at our begin's next-outgoing-id.",
    sentences=(NEXT_INCOMING,),
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
    if not flows:  # no sentence makes the broker send a flow here: recorded
        ctx.note("no flow from the broker")
        return
    ctx.check(
        flows[0].next_incoming_id == 1_000_000,
        f"expected next-incoming-id 1000000 (our begin's next-outgoing-id) in the broker's "
        f"first flow; observed {flows[0].next_incoming_id}",
    )


REWOUND_START = 10  # our begin's next-outgoing-id
REWOUND_TO = 5  # the next-outgoing-id of our rewound flow (no transfer sent in between)


@case(
    "2.5.6/session-flow-rewound-next-outgoing-id",
    MUST,
    IDS,
    sentences=(NEXT_INCOMING,),
    outcomes={"end:*", "close:*", "updated", "ignored"},
)
def flow_rewound_next_outgoing_id(probe, ctx):
    """A session begun with next-outgoing-id 10, then (no transfer sent) a session flow
    with next-outgoing-id 5 and echo: the broker ends the session or closes (recorded), or
    its answering flow says next-incoming-id 5."""
    session = probe.begin(initial_outgoing_id=REWOUND_START)
    since = probe.mark()
    rewound = Flow(
        next_incoming_id=session.next_incoming_id,
        incoming_window=2048,
        next_outgoing_id=REWOUND_TO,
        outgoing_window=2048,
        echo=True,
    )
    observed = sent_frame_outcome(probe, rewound, session.channel, timeout=0.5)
    flows = server_flows(probe, since, session_only=False)
    if observed == "timeout":
        if not flows:
            ctx.note("no flow answered our echo (2.7.4 echo: SHOULD)")
            ctx.outcome("ignored")
            return
        ids = [flow.next_incoming_id for flow in flows]
        ctx.check(
            ids[-1] == REWOUND_TO,
            f"expected the broker's next-incoming-id {REWOUND_TO}, taken directly from our "
            f"flow's next-outgoing-id; observed its flow(s) after ours with next-incoming-id "
            f"{ids}",
        )
        observed = "updated"
    ctx.outcome(observed)
