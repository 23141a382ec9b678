"""2.5 / 2.7.2 / 2.7.8 sessions: begin answered on the right channel, many sessions, a
channel reused after end, a begin on a channel in use, an end on a channel never begun,
and an end with an error answered.

Owns the cases `2.7.2/begin-*` and `2.7.8/end-*` except `2.7.8/end-answered` (in
s2_7_performatives.py).
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Begin, End, Error
from amqpspec.amqp10.engine import RemoteEnd
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.refusals import sent_frame_outcome
from amqpspec.conformance.verdicts import CaseFailed

ANY_END = {"close:*", "end:*", "tcp-close"}


@case(
    "2.7.2/begin-remote-channel",
    MUST,
    "remote-channel: if a session is locally initiated, the remote-channel MUST NOT be set; "
    "when an endpoint responds to a remotely initiated session, the remote-channel MUST be "
    "set to the channel on which the remote session sent the begin.",
    pipelined=False,  # reads the broker's open or begin
)
def begin_remote_channel(probe, ctx):
    """Three sessions: each broker begin names our channel in remote-channel."""
    probe.open()
    sessions = [probe.begin() for _ in range(3)]
    for session in sessions:
        reply = session.remote_begin
        ctx.check(
            reply is not None and reply.remote_channel == session.channel,
            f"begin for our channel {session.channel} says remote-channel "
            f"{reply.remote_channel if reply else None}",
        )


@case(
    "2.7.2/begin-many-sessions",
    MUST,
    "channel-max bounds the channels the broker uses; each begin is answered (2.5.2).",
    pipelined=False,  # reads the broker's open or begin
)
def many_sessions(probe, ctx):
    """channel-max 31, twenty sessions: twenty begins answered, every broker channel <= 31."""
    probe.open(channel_max=31)
    for _ in range(20):
        probe.begin()
    channels = [f.channel for f in probe.server_frames("begin")]
    ctx.check(len(channels) == 20, f"{len(channels)} begins answered")
    ctx.check(max(channels) <= 31, f"broker channel {max(channels)} above our channel-max 31")


@case(
    "2.7.2/begin-channel-reused",
    MUST,
    "After both ends of a session, its channel is free again (2.5.5 UNMAPPED) and a new "
    "begin on it is answered.",
)
def channel_reused(probe, ctx):
    """Begin on channel 0, end it, begin again (channel 0 again): answered."""
    first = probe.open_session()
    channel = first.channel
    probe.end(first)
    second = probe.begin()
    ctx.check(second.channel == channel, f"engine chose channel {second.channel}")
    ctx.check(second.remote_begin is not None, "no begin answer on the reused channel")


@case(
    "2.7.2/begin-channel-in-use",
    SHOULD,
    "A begin on a channel already carrying a session is illegal (2.5.1: a channel carries "
    "one session at a time): the broker ends the session or closes the connection.",
    outcomes={"close:amqp:connection:framing-error", "close:amqp:illegal-state", "tcp-close"},
    lenient=ANY_END,
)
def channel_in_use(probe, ctx):
    """A session on channel 0, then a crafted begin on channel 0 again: refused."""
    session = probe.open_session()
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    ctx.outcome(sent_frame_outcome(probe, begin, session.channel, timeout=2.0))


@case(
    "2.7.8/end-unknown-channel",
    SHOULD,
    "An end on a channel with no session refers to nothing (2.5.5): a connection error.",
    outcomes={"close:amqp:connection:framing-error", "close:amqp:illegal-state", "tcp-close"},
    lenient=ANY_END | {"ignored"},
)
def end_unknown_channel(probe, ctx):
    """After open, an end on channel 9 that was never begun: the broker closes (ignoring
    it is lenient)."""
    probe.open()
    ctx.outcome(sent_frame_outcome(probe, End(), 9, timeout=1.5, silence="ignored"))


@case(
    "2.7.8/end-with-error-answered",
    MUST,
    "end: an endpoint that receives an end (with or without error) answers with its own "
    "end (2.5.5).",
)
def end_with_error(probe, ctx):
    """Begin, end with amqp:internal-error: the broker answers with an end. The connection
    stays usable (a new begin is answered) unless the broker closes it after its end, which
    any peer may do (noted)."""
    session = probe.open_session()
    session.end(Error(condition="amqp:internal-error", description="amqpspec"))
    probe.flush()
    try:
        probe.expect(lambda e: isinstance(e, RemoteEnd) and e.session is session, what="end")
    except CaseFailed:
        unanswered = [
            f for f in probe.server_frames("begin") if f.performative.remote_channel is None
        ]
        ctx.check(
            not unanswered,
            "the broker's begin has no remote-channel (2.7.2 MUST when answering our begin): "
            "its end answers no session of ours",
        )
        raise
    if probe.closed or (probe.conn is not None and probe.conn.remote_close is not None):
        ctx.note("the broker closed the connection after its end (allowed, 2.4.3)")
        return
    probe.begin()
