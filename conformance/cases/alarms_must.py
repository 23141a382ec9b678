"""Resource alarms held as MUST for brokers whose profile claims RabbitMQ-4-style alarms.

Owns the cases `2.5.6/alarm-must-*`. The spec has no alarm sentence: 2.5.6 gives the
mechanism (a flow with incoming-window 0 stops the peer's transfers). A profile with the
`alarms` capability declares that the broker blocks publishers that way during a resource
alarm (RabbitMQ 4's model, /work/shared/SPEC-NOTES.md "Resource alarms"), so these cases
hold such a broker to its claim: not blocking (RabbitMQ PR #9953: 3.x never did) or
reopening the window by arithmetic wrap (RabbitMQ #12904) breaks what the profile promised
and is graded FAILED. The SHOULD-level siblings are `2.5.6/alarm-closes-window` and
`2.5.6/alarm-window-stays-closed`. Every case clears the alarm it raised.
"""

from __future__ import annotations

from conformance.cases.alarm_windows import (
    memory_alarm,
    transfer_frames,
    window_closed_or_unsupported,
    window_flow,
)
from conformance.cases.checks import publisher
from conformance.registry import MUST, case
from conformance.steps_more import session_flow
from conformance.verdicts import CaseFailed

ALARM_NEEDS = {"queues", "alarms"}
ALARM_WAIT = 10.0  # seconds for the window-0 flow after the alarm is raised
CLAIM = (
    "(profile capability `alarms`: the broker declares RabbitMQ-4-style resource alarms, "
    "which it MUST then honour; the spec itself only defines the 2.5.6 mechanism)"
)


def _session_window(probe, session, since, wanted):
    """Wait for a flow on `session`'s channel whose incoming-window satisfies `wanted`."""
    return window_flow(probe, since, wanted, ALARM_WAIT, session.remote_channel)


@case(
    "2.5.6/alarm-must-publishers-blocked",
    MUST,
    "A broker in a resource alarm blocks every publishing session through 2.5.6 session flow "
    'control: each session is sent a flow with incoming-window 0 ("the maximum number of '
    'incoming transfer frames the endpoint can currently receive"), and a flow reopening '
    "the window when the alarm clears " + CLAIM + ". RabbitMQ 3.x never blocked AMQP 1.0 "
    "publishers (PR #9953).",
    requires=ALARM_NEEDS,
)
def publishers_blocked(probe, ctx):
    """Two publisher sessions on one connection (each with link credit); memory alarm: each
    session gets a flow with incoming-window 0 within 10 s; alarm cleared: each gets a
    flow with incoming-window > 0."""
    sessions = [publisher(probe, ctx, ctx.queue(name))[0] for name in ("a", "b")]
    since = probe.mark()
    ctx.admin.raise_alarm("memory")
    try:
        for index, session in enumerate(sessions):
            try:
                _session_window(probe, session, since, lambda w: w == 0)
            except CaseFailed as exc:
                raise CaseFailed(
                    f"publisher session {index + 1} of 2 got no flow with incoming-window 0 "
                    f"on a memory alarm ({exc}): publishers are not blocked"
                ) from exc
    finally:
        since = probe.mark()
        ctx.admin.clear_alarm("memory")
    for index, session in enumerate(sessions):
        try:
            _session_window(probe, session, since, lambda w: w is not None and w > 0)
        except CaseFailed as exc:
            raise CaseFailed(
                f"publisher session {index + 1} of 2: window not reopened after the alarm "
                f"cleared ({exc})"
            ) from exc


@case(
    "2.5.6/alarm-must-window-no-wrap",
    MUST,
    'incoming-window is a uint: "the maximum number of incoming transfer frames the endpoint '
    'can currently receive" (2.5.6). A broker in alarm keeps it at 0 until the alarm clears '
    + CLAIM
    + "; a transfer that was in flight when the window closed may be refused "
    "(amqp:session:window-violation) but must not turn the window into 0 - overshoot "
    "wrapped to ~2^32, which unblocks publishers in the middle of the alarm (RabbitMQ "
    "#12904).",
    requires=ALARM_NEEDS,
    outcomes={
        "window:0",
        "end:amqp:session:window-violation",
        "close:amqp:session:window-violation",
    },
)
def window_no_wrap(probe, ctx):
    """Memory alarm; once the publisher session's window is 0, three unsettled transfers
    as if in flight, then a session flow with echo: every session flow the broker sends
    until the alarm clears says incoming-window 0 (or the session ends with
    window-violation); a wrapped window (e.g. 4294967293) is FAILED."""
    queue = ctx.queue()
    session, sender = publisher(probe, ctx, queue)
    since = probe.mark()
    with memory_alarm(ctx):
        window_closed_or_unsupported(
            probe,
            since,
            ALARM_WAIT,
            "the broker did not close its window on an alarm",
            see="2.5.6/alarm-must-publishers-blocked",
            channel=session.remote_channel,
        )
        overshoot = 3
        tags = [f"in-flight-{index}".encode() for index in range(overshoot)]
        frames = transfer_frames(session, sender, tags)
        since = probe.mark()
        probe.send_raw(frames)
        echo = session_flow(
            session, next_outgoing_id=session.next_outgoing_id + overshoot, echo=True
        )
        probe.send_frame(echo, session.channel)
        observed = probe.error_outcome(since=since, timeout=2.0)
        if observed == "timeout":
            windows = [
                t.item.performative.incoming_window
                for t in probe.frames_since(since, "flow")
                if t.item.channel == session.remote_channel
            ]
            opened = [w for w in windows if w]
            if opened:
                observed = f"window:{max(opened)}"
            else:  # no flow since: the window stays at the 0 we saw (echo is a SHOULD)
                observed = f"window:{windows[-1]}" if windows else "window:0"
        ctx.outcome(observed)
