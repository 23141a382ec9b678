"""Resource alarms (broker behaviour modelled on RabbitMQ 4, expressed through 2.5.6 session
flow control): consumers keep consuming on the blocked connection, new connections and
attaches are allowed, every publishing session is blocked, a publisher that ignores the
closed window is stopped the way the spec names, and publishing works again after the
alarm clears.

Owns the cases `2.5.6/alarm-more-*`. Needs the admin adapter (`alarms` capability); every
case clears the alarm it raised, whatever happens.
"""

from __future__ import annotations

from conformance.cases.alarm_windows import (
    memory_alarm,
    transfer_frames,
    window_closed_or_unsupported,
    window_flow,
)
from conformance.cases.checks import publisher
from conformance.registry import MUST, SHOULD, case
from conformance.steps import body, consumer, fill
from conformance.steps_more import exactly, wait_credit
from conformance.verdicts import Unsupported

ALARM_NEEDS = {"queues", "alarms"}
ALARM_WAIT = 5.0  # seconds for the window-0 flow after the alarm is raised
BLOCKED = (
    "A broker in a resource alarm stops publishers through session flow control (a flow "
    "with incoming-window 0, 2.5.6) and keeps everything else working, so queues can be "
    "drained (RabbitMQ 4); the window is restored when the alarm clears."
)


def _window_closed(probe, since):
    refusal = "no flow with incoming-window 0 for the publisher session on a memory alarm"
    window_closed_or_unsupported(probe, since, ALARM_WAIT, refusal, see="2.5.6/alarm-closes-window")


MAX_FRAMES = 20000


def _widest_horizon(probe, session) -> int:
    """The highest transfer-id + 1 any window of the broker admitted on `session`: its
    begin (counted from our first transfer-id) and every session flow it sent."""
    widest = session.initial_outgoing_id + (session.remote_begin.incoming_window or 0)
    for item in probe.frames_since(0, "flow"):
        flow = item.item.performative
        if item.item.channel == session.remote_channel and flow.next_incoming_id is not None:
            widest = max(widest, flow.next_incoming_id + flow.incoming_window)
    return widest


@case("2.5.6/alarm-more-consumer-keeps-consuming", SHOULD, BLOCKED, requires=ALARM_NEEDS)
def consumer_keeps_consuming(probe, ctx):
    """A publisher session and a consumer session on one connection; memory alarm: the
    publisher's window closes, and the consumer still receives 5 queued messages."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 5)
    publisher(probe, ctx, ctx.queue("p"))
    _, link = consumer(probe, ctx, queue)
    since = probe.mark()
    with memory_alarm(ctx):
        _window_closed(probe, since)
        probe.grant(link, 5)
        exactly(probe, link, 5)


@case("2.5.6/alarm-more-new-connection-allowed", SHOULD, BLOCKED, requires=ALARM_NEEDS)
def new_connection_allowed(probe, ctx):
    """During a memory alarm a new connection opens, begins and attaches a receiver that
    gets a queued message."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1)
    with memory_alarm(ctx):
        probe.idle(0.3)
        other = ctx.probe()
        _, link = consumer(other, ctx, queue, credit=1)
        exactly(other, link, 1)


@case("2.5.6/alarm-more-attach-sender-allowed", SHOULD, BLOCKED, requires=ALARM_NEEDS)
def attach_sender_allowed(probe, ctx):
    """During a memory alarm a publisher can still attach (its attach is answered with a
    target); only its transfers wait."""
    queue = ctx.queue()
    session = probe.open_session()
    with memory_alarm(ctx):
        probe.idle(0.3)
        sender = probe.attach_sender(session, ctx.target_address(queue))
        ctx.check(sender.remote_attach.target is not None, "attach refused during the alarm")


@case("2.5.6/alarm-more-every-session-blocked", SHOULD, BLOCKED, requires=ALARM_NEEDS)
def every_session_blocked(probe, ctx):
    """Two publisher sessions on one connection: on a memory alarm each gets a flow with
    incoming-window 0."""
    first, _ = publisher(probe, ctx, ctx.queue("a"))
    second, _ = publisher(probe, ctx, ctx.queue("b"))
    since = probe.mark()
    with memory_alarm(ctx):
        for session in (first, second):
            window_flow(probe, since, lambda w: w == 0, ALARM_WAIT, session.remote_channel)


@case(
    "2.5.6/alarm-more-publisher-beyond-window",
    MUST,
    "A sender MUST NOT send a transfer frame when the remote-incoming-window is zero; "
    "transfers beyond the window are a session error amqp:session:window-violation (a "
    "transfer without link-credit may instead detach the link with "
    "amqp:link:transfer-limit-exceeded).",
    requires=ALARM_NEEDS | {"window-enforced"},
    outcomes={
        "end:amqp:session:window-violation",
        "close:amqp:session:window-violation",
        "detach:amqp:link:transfer-limit-exceeded",
    },
    lenient={"end:*", "close:*", "detach:*"},
)
def publisher_beyond_window(probe, ctx):
    """Memory alarm, window 0: single-frame settled messages sent anyway, 50 more than the
    widest window the broker ever granted on the session (transfers within an earlier
    window could have been in flight, so only those beyond it prove a violation): the
    broker ends the session with window-violation or detaches the link with
    transfer-limit-exceeded."""
    queue = ctx.queue()
    session, sender = publisher(probe, ctx, queue)
    since = probe.mark()
    with memory_alarm(ctx):
        _window_closed(probe, since)
        beyond = _widest_horizon(probe, session) - session.next_outgoing_id + 50
        if beyond > MAX_FRAMES:
            raise Unsupported(f"the broker's widest window needs {beyond} frames to exceed")
        ctx.note(f"{beyond} transfer frames after the window closed")
        tags = [f"over-{index}".encode() for index in range(beyond)]
        frames = transfer_frames(session, sender, tags, settled=True)
        since = probe.mark()
        probe.send_raw(frames)
        ctx.outcome(probe.error_outcome(since=since, timeout=5.0))


@case("2.5.6/alarm-more-publish-after-clear", SHOULD, BLOCKED, requires=ALARM_NEEDS)
def publish_after_clear(probe, ctx):
    """Alarm raised (window 0) and cleared (window > 0): the same publisher link then
    publishes 3 messages, each accepted, and a consumer gets them."""
    queue = ctx.queue()
    _, sender = publisher(probe, ctx, queue)
    since = probe.mark()
    with memory_alarm(ctx):
        _window_closed(probe, since)
        since = probe.mark()
    window_flow(probe, since, lambda w: w > 0, 10.0)
    wait_credit(probe, sender)
    probe.publish(sender, 3, lambda i: body(i), timeout=10.0)
    _, link = consumer(probe, ctx, queue, credit=3)
    exactly(probe, link, 3)


@case("2.5.6/alarm-more-held-transfer-completes", SHOULD, BLOCKED, requires=ALARM_NEEDS)
def held_transfer_completes(probe, ctx):
    """A message our engine holds back while the window is 0 (it never sends beyond the
    window) goes out once the alarm clears, and is accepted."""
    queue = ctx.queue()
    _, sender = publisher(probe, ctx, queue)
    since = probe.mark()
    with memory_alarm(ctx):
        _window_closed(probe, since)
        probe.send_message(sender, body(0), settled=False)
        probe.idle(0.3)
    probe.publish(sender, 1, lambda i: body(1), timeout=10.0)
    _, link = consumer(probe, ctx, queue, credit=2)
    exactly(probe, link, 2)
