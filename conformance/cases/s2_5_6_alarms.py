"""2.5.6 session flow control under resource alarms (broker behaviour modelled on RabbitMQ
4): a broker in a memory alarm stops publishers with a session flow of incoming-window 0
on every publishing session, keeps its window at 0 until the alarm clears (a transfer in
flight must not wrap it), stops a publisher that ignores the closed window the way the
spec names, keeps everything else working (consumers consume, new connections and
attaches are allowed) and reopens the window when the alarm clears.

The spec has no alarm sentence: 2.5.6 gives the mechanism, and none requires the receiver
to end a session on transfers beyond its window. Every case here is of RabbitMQ 4's model
(level MODEL, `model = "rabbitmq4"`): a broker that does otherwise is DIFFERS, never FAILED
(not blocking, RabbitMQ PR #9953: 3.x never did; reopening the window by arithmetic wrap,
RabbitMQ #12904; docs/spec-notes.md, "Resource alarms"); `amqpspec run --gate-differs`
fails a run on it when the profile claims the model (docs/conformance.md, "Verdicts"). The
checker still judges every frame.

Owns the cases `2.5.6/alarm-*`. Needs the admin adapter (`alarms` capability); every case
clears the alarm it raised, whatever happens.
"""

from __future__ import annotations

from amqpspec.conformance.run.registry import MODEL, case
from amqpspec.conformance.steps.alarms import (
    in_flight_then_echo,
    memory_alarm,
    window_closed,
    window_closed_or_unsupported,
    window_flow,
)
from amqpspec.conformance.steps.credit import server_flows
from amqpspec.conformance.steps.deliveries import consumed_exactly, exactly
from amqpspec.conformance.steps.frames import send_transfers
from amqpspec.conformance.steps.links import consumer, publisher, wait_credit
from amqpspec.conformance.steps.queues import body, fill
from amqpspec.conformance.steps.sentences import RABBITMQ4
from amqpspec.conformance.verdicts import CaseFailed, Unsupported

ALARM_NEEDS = {"queues", "alarms"}
ALARM_WAIT = 5.0  # seconds for the window-0 flow after the alarm is raised (SHOULD cases)
BLOCKED = (
    "A broker in a resource alarm stops publishers through session flow control (a flow "
    "with incoming-window 0, 2.5.6) and keeps everything else working, so queues can be "
    "drained (RabbitMQ 4); the window is restored when the alarm clears."
)


def _window_closed(probe, ctx, since):
    refusal = "no flow with incoming-window 0 for the publisher session on a memory alarm"
    window_closed_or_unsupported(
        probe, ctx, since, ALARM_WAIT, refusal, see="2.5.6/alarm-closes-window"
    )


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


@case("2.5.6/alarm-consumer-keeps-consuming", MODEL, BLOCKED, model=RABBITMQ4, requires=ALARM_NEEDS)
def consumer_keeps_consuming(probe, ctx):
    """A publisher session and a consumer session on one connection; memory alarm: the
    publisher's window closes, and the consumer still receives 5 queued messages."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 5)
    publisher(probe, ctx, ctx.queue("p"))
    _, link = consumer(probe, ctx, queue)
    since = probe.mark()
    with memory_alarm(ctx):
        _window_closed(probe, ctx, since)
        probe.grant(link, 5)
        exactly(probe, link, 5)


@case("2.5.6/alarm-new-connection-allowed", MODEL, BLOCKED, model=RABBITMQ4, requires=ALARM_NEEDS)
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


@case("2.5.6/alarm-attach-sender-allowed", MODEL, BLOCKED, model=RABBITMQ4, requires=ALARM_NEEDS)
def attach_sender_allowed(probe, ctx):
    """During a memory alarm a publisher can still attach (its attach is answered with a
    target); only its transfers wait."""
    queue = ctx.queue()
    session = probe.open_session()
    with memory_alarm(ctx):
        probe.idle(0.3)
        sender = probe.attach_sender(session, ctx.target_address(queue))
        ctx.check(
            sender.remote_attach.target is not None,
            "expected the broker's attach with a target during the alarm; observed a null target",
        )


@case("2.5.6/alarm-every-session-blocked", MODEL, BLOCKED, model=RABBITMQ4, requires=ALARM_NEEDS)
def every_session_blocked(probe, ctx):
    """Two publisher sessions on one connection: on a memory alarm each gets a flow with
    incoming-window 0."""
    first, _ = publisher(probe, ctx, ctx.queue("a"))
    second, _ = publisher(probe, ctx, ctx.queue("b"))
    since = probe.mark()
    with memory_alarm(ctx):
        for session in (first, second):
            window_closed(probe, ctx, since, ALARM_WAIT, session.remote_channel)


@case(
    "2.5.6/alarm-publisher-beyond-window",
    MODEL,
    "Transfers beyond a window the alarm closed end the session with "
    "amqp:session:window-violation (a transfer without link-credit may instead detach the "
    "link with amqp:link:transfer-limit-exceeded): RabbitMQ 4's model, no sentence requires "
    "the receiver to.",
    model=RABBITMQ4,
    requires=ALARM_NEEDS | {"window-enforced"},
    outcomes={
        "end:amqp:session:window-violation",
        "close:amqp:session:window-violation",
        "detach:amqp:link:transfer-limit-exceeded",
    },
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
        _window_closed(probe, ctx, since)
        beyond = _widest_horizon(probe, session) - session.next_outgoing_id + 50
        if beyond > MAX_FRAMES:
            raise Unsupported(f"the broker's widest window needs {beyond} frames to exceed")
        ctx.note(f"{beyond} transfer frames after the window closed")
        tags = [f"over-{index}".encode() for index in range(beyond)]
        since = probe.mark()
        send_transfers(probe, session, sender, tags, settled=True)
        ctx.outcome(probe.error_outcome(since=since, timeout=5.0))


@case("2.5.6/alarm-publish-after-clear", MODEL, BLOCKED, model=RABBITMQ4, requires=ALARM_NEEDS)
def publish_after_clear(probe, ctx):
    """Alarm raised (window 0) and cleared (window > 0): the same publisher link then
    publishes 3 messages, each accepted, and a consumer gets them."""
    queue = ctx.queue()
    _, sender = publisher(probe, ctx, queue)
    since = probe.mark()
    with memory_alarm(ctx):
        _window_closed(probe, ctx, since)
        since = probe.mark()
    window_flow(probe, since, lambda w: w > 0, 10.0)
    wait_credit(probe, sender)
    probe.publish(sender, 3, lambda i: body(i), timeout=10.0)
    consumed_exactly(probe, ctx, queue, 3)


@case("2.5.6/alarm-held-transfer-completes", MODEL, BLOCKED, model=RABBITMQ4, requires=ALARM_NEEDS)
def held_transfer_completes(probe, ctx):
    """A message our engine holds back while the window is 0 (it never sends beyond the
    window) goes out once the alarm clears, and is accepted."""
    queue = ctx.queue()
    _, sender = publisher(probe, ctx, queue)
    since = probe.mark()
    with memory_alarm(ctx):
        _window_closed(probe, ctx, since)
        probe.send_message(sender, body(0), settled=False)
        probe.idle(0.3)
    probe.publish(sender, 1, lambda i: body(1), timeout=10.0)
    consumed_exactly(probe, ctx, queue, 2)


CLAIM_WAIT = 10.0  # the MUST cases give the broker longer for its window-0 flow
CLAIM = "(RabbitMQ 4's model; the spec itself only defines the 2.5.6 mechanism)"


def _session_window(probe, session, since, wanted):
    """Wait for a flow on `session`'s channel whose incoming-window satisfies `wanted`."""
    return window_flow(probe, since, wanted, CLAIM_WAIT, session.remote_channel)


@case(
    "2.5.6/alarm-publishers-blocked-then-reopened",
    MODEL,
    "A broker in a resource alarm blocks every publishing session through 2.5.6 session flow "
    'control: each session is sent a flow with incoming-window 0 ("the maximum number of '
    'incoming transfer frames the endpoint can currently receive"), and a flow reopening '
    "the window when the alarm clears " + CLAIM + ". RabbitMQ 3.x never blocked AMQP 1.0 "
    "publishers (PR #9953).",
    model=RABBITMQ4,
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
                window_closed(probe, ctx, since, CLAIM_WAIT, session.remote_channel)
            except CaseFailed as exc:
                raise CaseFailed(
                    f"expected a flow with incoming-window 0 on publisher session {index + 1} of 2 "
                    f"on a memory alarm; {exc}"
                ) from exc
    finally:
        since = probe.mark()
        ctx.admin.clear_alarm("memory")
    for index, session in enumerate(sessions):
        try:
            _session_window(probe, session, since, lambda w: w is not None and w > 0)
        except CaseFailed as exc:
            raise CaseFailed(
                f"expected a flow reopening the window of publisher session {index + 1} of 2 "
                f"after the alarm cleared; {exc}"
            ) from exc


@case(
    "2.5.6/alarm-window-no-wrap",
    MODEL,
    'incoming-window is a uint: "the maximum number of incoming transfer frames the endpoint '
    'can currently receive" (2.5.6). A broker in alarm keeps it at 0 until the alarm clears '
    + CLAIM
    + "; a transfer that was in flight when the window closed may be refused "
    "(amqp:session:window-violation) but must not turn the window into 0 - overshoot "
    "wrapped to ~2^32, which unblocks publishers in the middle of the alarm (RabbitMQ "
    "#12904).",
    model=RABBITMQ4,
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
            ctx,
            since,
            CLAIM_WAIT,
            "the broker did not close its window on an alarm",
            see="2.5.6/alarm-publishers-blocked-then-reopened",
            channel=session.remote_channel,
        )
        overshoot = 3
        tags = [f"in-flight-{index}".encode() for index in range(overshoot)]
        observed, since = in_flight_then_echo(probe, session, sender, tags)
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


@case(
    "2.5.6/alarm-closes-window",
    MODEL,
    "A broker in a resource alarm stops publishers through session flow control: every "
    "session sends a flow with incoming-window 0 (RabbitMQ 4; 3.x never did, PR #9953), and "
    "restores the window when the alarm clears.",
    model=RABBITMQ4,
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
        window_closed(probe, ctx, since, 10.0)
    finally:
        since = probe.mark()
        ctx.admin.clear_alarm("memory")
    window_flow(probe, since, lambda w: w > 0, 10.0)


@case(
    "2.5.6/alarm-window-stays-closed",
    MODEL,
    "incoming-window: the maximum number of incoming transfer frames the endpoint can "
    "currently receive; a broker in alarm keeps it at 0 — a transfer that was in flight "
    "must not wrap it into a huge window (RabbitMQ #12904).",
    model=RABBITMQ4,
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
        window_closed_or_unsupported(probe, ctx, since, 10.0, refusal)
        observed, since = in_flight_then_echo(probe, session, sender, [b"in-flight"])
        if observed == "timeout":
            flows = server_flows(probe, since, session_only=True)
            observed = f"window:{flows[-1].incoming_window}" if flows else "no session flow"
        ctx.outcome(observed)
