"""2.5.6 session flow control: transfers beyond the broker's incoming-window end the session
with amqp:session:window-violation. Owns the cases `2.5.6/*`.
"""

from __future__ import annotations

from amqp10.composites import Flow, Transfer
from amqp10.engine import FlowReceived
from amqp10.frames import Frame, encode_frame
from amqp10.message import Message
from conformance.registry import MUST, SHOULD, case
from conformance.verdicts import CaseFailed, Unsupported

VIOLATION = {"end:amqp:session:window-violation", "close:amqp:session:window-violation"}
MAX_BURST = 70000


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
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    if sender.link_credit <= 0:
        probe.expect(
            lambda e: isinstance(e, FlowReceived) and e.link is sender and sender.link_credit > 0,
            what="link credit",
        )
    window = session.remote_incoming_window
    if window > MAX_BURST:
        raise Unsupported(f"broker incoming-window {window} frames: too large to exceed")
    first_id = session.next_outgoing_id
    head = Transfer(
        handle=sender.handle,
        delivery_id=session.next_delivery_id,
        delivery_tag=b"window",
        message_format=0,
        more=True,
    )
    rest = encode_frame(Transfer(handle=sender.handle, more=True), session.channel, b"\x00")
    since = probe.mark()
    probe.send_raw(encode_frame(head, session.channel, b"\x00") + rest * window)
    observed = probe.error_outcome(since=since, timeout=3.0)
    if observed not in VIOLATION:
        horizon = _widest_window(probe, since)
        if horizon is not None and (horizon - first_id) % 2**32 > window:
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
            edge = (flow.next_incoming_id + flow.incoming_window) % 2**32
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
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    if sender.link_credit <= 0:
        probe.expect(
            lambda e: isinstance(e, FlowReceived) and e.link is sender and sender.link_credit > 0,
            what="link credit",
        )
    since = probe.mark()
    ctx.admin.raise_alarm("memory")
    try:
        try:
            probe.wait_for_frame(
                "flow", 10.0, lambda f: f.performative.incoming_window == 0, since=since
            )
        except CaseFailed as exc:
            raise Unsupported(
                f"the broker did not close its incoming window on a memory alarm ({exc}); "
                "see 2.5.6/alarm-closes-window"
            ) from exc
        head = Transfer(
            handle=sender.handle,
            delivery_id=session.next_delivery_id,
            delivery_tag=b"closed-window",
            message_format=0,
            more=True,
        )
        rest = encode_frame(Transfer(handle=sender.handle, more=True), session.channel, b"\x00")
        since = probe.mark()
        probe.send_raw(encode_frame(head, session.channel, b"\x00") + rest * 999)
        ctx.outcome(probe.error_outcome(since=since, timeout=5.0))
    finally:
        ctx.admin.clear_alarm("memory")


@case(
    "2.5.6/alarm-closes-window",
    SHOULD,
    "A broker in a resource alarm stops publishers through session flow control: every "
    "session sends a flow with incoming-window 0 (RabbitMQ 4; 3.x never did, PR #9953), and "
    "restores the window when the alarm clears.",
    requires={"queues", "alarms"},
)
def alarm_closes_window(probe, ctx):
    """A publisher session; a memory alarm: a flow with incoming-window 0 arrives; the alarm
    cleared: a flow with incoming-window > 0 arrives."""
    queue = ctx.queue()
    session = probe.open_session()
    probe.attach_sender(session, ctx.target_address(queue))
    since = probe.mark()
    ctx.admin.raise_alarm("memory")
    try:
        probe.wait_for_frame(
            "flow", 10.0, lambda f: f.performative.incoming_window == 0, since=since
        )
    finally:
        since = probe.mark()
        ctx.admin.clear_alarm("memory")
    probe.wait_for_frame("flow", 10.0, lambda f: f.performative.incoming_window > 0, since=since)


@case(
    "2.5.6/alarm-window-stays-closed",
    SHOULD,
    "incoming-window: the maximum number of incoming transfer frames the endpoint can "
    "currently receive; a broker in alarm keeps it at 0 — a transfer that was in flight "
    "must not wrap it into a huge window (RabbitMQ #12904).",
    requires={"queues", "alarms"},
    outcomes={"window:0", "end:amqp:session:window-violation"},
)
def alarm_window_stays_closed(probe, ctx):
    """Memory alarm: once the broker's session flow says incoming-window 0, one transfer
    (as if in flight) and a session echo: the answer still says incoming-window 0 (or the
    session ends with window-violation), never a reopened or wrapped window."""
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    if sender.link_credit <= 0:
        probe.expect(
            lambda e: isinstance(e, FlowReceived) and e.link is sender and sender.link_credit > 0,
            what="link credit",
        )
    since = probe.mark()
    ctx.admin.raise_alarm("memory")
    try:
        try:
            probe.wait_for_frame(
                "flow", 10.0, lambda f: f.performative.incoming_window == 0, since=since
            )
        except CaseFailed as exc:
            raise Unsupported(f"the broker did not close its window on an alarm ({exc})") from exc
        transfer = Transfer(
            handle=sender.handle,
            delivery_id=session.next_delivery_id,
            delivery_tag=b"in-flight",
            message_format=0,
        )
        since = probe.mark()
        probe.send_raw(encode_frame(transfer, session.channel, Message.of(b"x").encode()))
        echo = Flow(
            next_incoming_id=session.next_incoming_id,
            incoming_window=session.incoming_window,
            next_outgoing_id=session.next_outgoing_id + 1,
            outgoing_window=session.outgoing_window,
            echo=True,
        )
        probe.send_frame(echo, session.channel)
        observed = probe.error_outcome(since=since, timeout=2.0)
        if observed == "timeout":
            flows = [
                t.item.performative
                for t in probe.frames_since(since, "flow")
                if t.item.performative.handle is None
            ]
            observed = f"window:{flows[-1].incoming_window}" if flows else "no session flow"
        ctx.outcome(observed)
    finally:
        ctx.admin.clear_alarm("memory")
