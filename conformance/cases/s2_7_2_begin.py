"""2.5 / 2.7.2 / 2.7.8 sessions: the broker's begin names our channel in remote-channel
(2.7.2 MUST, also on a channel reused after end) and keeps to our channel-max (2.7.1 MUST);
a begin on a channel in use, an end on a channel never begun and an end with an error
answered are recorded (MAY: no sentence prescribes the answer; the checker does not grade
the broker's frames after the probe's deliberately illegal one).

Owns the cases `2.7.2/begin-*` and `2.7.8/end-*` except `2.7.8/end-answered` (in
s2_7_performatives.py).
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Begin, End, Error
from amqpspec.amqp10.engine import RemoteEnd
from amqpspec.conformance.run.registry import MAY, MUST, case
from amqpspec.conformance.steps.declaring import opening_case
from amqpspec.conformance.steps.refusals import sent_frame_outcome
from amqpspec.conformance.steps.sessions import REMOTE_CHANNEL, end_session, must_name_our_channel
from amqpspec.conformance.verdicts import CaseFailed, HarnessError

CHANNEL_LIMIT = "2.7.1/open.channel-max.1"  # no channel above the partner's channel-max


@opening_case(
    "2.7.2/begin-remote-channel",
    MUST,
    "When an endpoint responds to a remotely initiated Session, the remote-channel MUST be "
    "set to the channel on which the remote Session sent the begin.",
    sentences=(REMOTE_CHANNEL,),
)
def begin_remote_channel(probe, ctx):
    """Three sessions: each broker begin names our channel in remote-channel."""
    probe.open()
    sessions = [probe.begin() for _ in range(3)]
    for session in sessions:
        reply = session.remote_begin
        ctx.check(
            reply is not None and reply.remote_channel == session.channel,
            f"expected remote-channel {session.channel} in the begin answering ours; observed "
            f"{reply.remote_channel if reply else None}",
        )


@opening_case(
    "2.7.2/begin-many-sessions",
    MUST,
    "A peer MUST not use channel numbers outside the range that its partner can handle: "
    "with our channel-max 31, twenty begins answered on channels up to 31.",
    sentences=(CHANNEL_LIMIT,),
)
def many_sessions(probe, ctx):
    """channel-max 31, twenty sessions: twenty begins answered, every broker channel <= 31."""
    probe.open(channel_max=31)
    for _ in range(20):
        probe.begin(wait=False)
    probe.idle(1.0)
    channels = [f.channel for f in probe.server_frames("begin")]
    if len(channels) < 20:  # no sentence makes the broker answer every begin: recorded
        ctx.note(f"{len(channels)} of 20 begins answered")
    ctx.check(
        not channels or max(channels) <= 31,
        f"expected begins on channels up to 31 (our channel-max); observed {max(channels)}",
    )


@case(
    "2.7.2/begin-channel-reused",
    MUST,
    "When an endpoint responds to a remotely initiated Session, the remote-channel MUST be "
    "set to the channel on which the remote Session sent the begin: also on a channel whose "
    "session ended (2.5.5 UNMAPPED; whether it answers at all is recorded).",
    sentences=(REMOTE_CHANNEL,),
)
def channel_reused(probe, ctx):
    """Begin on channel 0, end it, begin again (channel 0 again): answered."""
    first = probe.open_session()
    channel = first.channel
    end_session(probe, ctx, first)
    second = probe.begin(wait=False)
    probe.idle(0.5)
    if second.channel != channel:
        raise HarnessError(f"our engine chose channel {second.channel}, not {channel} again")
    answers = [f for f in probe.server_frames("begin") if f.performative.remote_channel is not None]
    if len(answers) < 2:
        ctx.note("no begin answering ours on the reused channel")
        return
    ctx.check(
        answers[-1].performative.remote_channel == channel,
        f"expected remote-channel {channel} in the begin answering ours; observed "
        f"{answers[-1].performative.remote_channel}",
    )


@case(
    "2.7.2/begin-channel-in-use",
    MAY,
    "A begin on a channel already carrying a session (2.5.1: sessions use an unused "
    "channel): no sentence says how the receiver answers (a begin for it naming that channel "
    "in remote-channel is what 2.7.2 requires of an answer).",
    outcomes={"close:amqp:connection:framing-error", "close:amqp:illegal-state"},
)
def channel_in_use(probe, ctx):
    """A session on channel 0, then a crafted begin on channel 0 again: refused."""
    session = probe.open_session()
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    ctx.outcome(sent_frame_outcome(probe, begin, session.channel, timeout=2.0))


@case(
    "2.7.8/end-unknown-channel",
    MAY,
    "An end on a channel with no session refers to nothing (2.5.5); no sentence says how "
    "the receiver answers it.",
    outcomes={"close:amqp:connection:framing-error", "close:amqp:illegal-state", "ignored"},
)
def end_unknown_channel(probe, ctx):
    """After open, an end on channel 9 that was never begun: the broker closes (ignoring
    it is lenient)."""
    probe.open()
    ctx.outcome(sent_frame_outcome(probe, End(), 9, timeout=1.5, silence="ignored"))


@case(
    "2.7.8/end-with-error-answered",
    MAY,
    "end: an endpoint that receives an end (with or without error) answers with its own end "
    "(2.5.2, 2.5.5: the states, no keyword); an answering begin names our channel (2.7.2).",
    sentences=(REMOTE_CHANNEL,),
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
        must_name_our_channel(probe, ctx)
        raise
    if probe.closed or (probe.conn is not None and probe.conn.remote_close is not None):
        ctx.note("the broker closed the connection after its end (allowed, 2.4.3)")
        return
    probe.begin()
