"""2.5.6 session flow control: transfers beyond the broker's incoming-window end the session
with amqp:session:window-violation. Owns the cases `2.5.6/*`.
"""

from __future__ import annotations

from amqp10.frames import Frame
from conformance.cases.alarm_windows import (
    memory_alarm,
    one_delivery_frames,
    transfer_frames,
    window_closed_or_unsupported,
    window_flow,
)
from conformance.cases.checks import publisher
from conformance.registry import MUST, SHOULD, case
from conformance.steps_more import server_flows, session_flow
from conformance.verdicts import Unsupported

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
    session, sender = publisher(probe, ctx, ctx.queue())
    window = session.remote_incoming_window
    if window > MAX_BURST:
        raise Unsupported(f"broker incoming-window {window} frames: too large to exceed")
    first_id = session.next_outgoing_id
    burst = one_delivery_frames(session, sender, b"window", window + 1)
    since = probe.mark()
    probe.send_raw(burst)
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
    session, sender = publisher(probe, ctx, ctx.queue())
    since = probe.mark()
    with memory_alarm(ctx):
        refusal = "the broker did not close its incoming window on a memory alarm"
        window_closed_or_unsupported(probe, since, 10.0, refusal, see="2.5.6/alarm-closes-window")
        burst = one_delivery_frames(session, sender, b"closed-window", 1000)
        since = probe.mark()
        probe.send_raw(burst)
        ctx.outcome(probe.error_outcome(since=since, timeout=5.0))


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
        window_flow(probe, since, lambda w: w == 0, 10.0)
    finally:
        since = probe.mark()
        ctx.admin.clear_alarm("memory")
    window_flow(probe, since, lambda w: w > 0, 10.0)


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
    session, sender = publisher(probe, ctx, ctx.queue())
    since = probe.mark()
    with memory_alarm(ctx):
        refusal = "the broker did not close its window on an alarm"
        window_closed_or_unsupported(probe, since, 10.0, refusal)
        in_flight = transfer_frames(session, sender, [b"in-flight"])
        since = probe.mark()
        probe.send_raw(in_flight)
        echo = session_flow(session, next_outgoing_id=session.next_outgoing_id + 1, echo=True)
        probe.send_frame(echo, session.channel)
        observed = probe.error_outcome(since=since, timeout=2.0)
        if observed == "timeout":
            flows = server_flows(probe, since, session_only=True)
            observed = f"window:{flows[-1].incoming_window}" if flows else "no session flow"
        ctx.outcome(observed)
