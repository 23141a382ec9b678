"""Session steps shared by cases: ending a session whose begin the broker may have answered
without remote-channel.

Owns `REMOTE_CHANNEL` (2.7.2 begin, remote-channel: "When an endpoint responds to a remotely
initiated Session, the remote-channel MUST be set to the channel on which the remote Session
sent the begin"), `must_name_our_channel` and `end_session`. A broker that answers our begin
without remote-channel has answered no session of ours, so the end it sends for ours never
comes: the case's verdict is that MUST, not the end the probe waited for.
"""

from __future__ import annotations

from amqpspec.amqp10.engine import Session
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.verdicts import CaseFailed

REMOTE_CHANNEL = "2.7.2/begin.remote-channel.2"  # the answering begin names our channel


def must_name_our_channel(probe: Probe, ctx: CaseContext) -> None:
    """MUST 2.7.2: every begin the broker sent names the channel of ours it answers."""
    unanswered = [f for f in probe.server_frames("begin") if f.performative.remote_channel is None]
    ctx.must(
        not unanswered,
        "expected remote-channel set in the broker's begin answering ours; observed "
        f"{unanswered[0].performative if unanswered else ''} without it, so its end answers "
        "no session of ours",
        REMOTE_CHANNEL,
    )


def end_session(probe: Probe, ctx: CaseContext, session: Session) -> None:
    """`probe.end(session)`; when the broker's end never comes, the MUST on its begin first."""
    try:
        probe.end(session)
    except CaseFailed:
        must_name_our_channel(probe, ctx)
        raise
