"""Steps for session windows under resource alarms (2.5.6): a memory alarm raised and
always cleared, and waiting for the broker's flow that closes or reopens a window (or
UNSUPPORTED when it never closes one). The transfer frames that exceed such a window are
in `frames`.

Waiting for the flow that closes a window is decided once per run (docs/conformance.md "Concurrent
cases"): a case that waited its full bound and got no flow with incoming-window 0 on any session of
its connection records that in the run's facts (`conformance.facts`); a later case whose bound is no
longer waits only `AFTER_MISS_S` (RabbitMQ 3.x never sends one: 24 alarm cases used to wait 5-10 s
each, alone). A broker that sends the flow, even late, answers the first full wait, so nothing is
recorded and every case waits in full.

Owns the alarm's raise/clear through the admin adapter; registers no case. Touches
nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from amqpspec.amqp10.composites import Flow
from amqpspec.amqp10.engine import Link, Session
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.steps.frames import send_transfers
from amqpspec.conformance.steps.links import session_flow
from amqpspec.conformance.verdicts import CaseFailed, Unsupported

ALARM_WINDOW_0 = "a flow with incoming-window 0 after a memory alarm"  # the facts' key
AFTER_MISS_S = 1.0  # the wait for that flow once a full wait of this run got none
ECHO_WAIT = 2.0  # seconds for the broker's answer to a session echo (or an ending)


@contextmanager
def memory_alarm(ctx: CaseContext) -> Iterator[None]:
    """A memory alarm raised through the admin adapter, cleared whatever happens."""
    ctx.admin.raise_alarm("memory")
    try:
        yield
    finally:
        ctx.admin.clear_alarm("memory")


def window_flow(
    probe: Probe,
    since: int,
    wanted: Callable[[Any], bool],
    timeout: float,
    channel: int | None = None,
) -> Flow:
    """The broker's first flow after `since` (on `channel`, if given) whose incoming-window
    satisfies `wanted`; the failure says which windows its flows did carry."""
    try:
        return probe.wait_for_frame(
            "flow",
            timeout,
            lambda f: (
                (channel is None or f.channel == channel) and wanted(f.performative.incoming_window)
            ),
            since=since,
        ).performative
    except CaseFailed as exc:
        flows = [
            t.item.performative.incoming_window
            for t in probe.frames_since(since, "flow")
            if channel is None or t.item.channel == channel
        ]
        where = f" on channel {channel}" if channel is not None else ""
        seen = f"its flows{where} carried incoming-window {flows}" if flows else f"no flow{where}"
        raise CaseFailed(f"{exc}; {seen}") from exc


def window_closed(
    probe: Probe, ctx: CaseContext, since: int, timeout: float, channel: int | None = None
) -> Flow:
    """The broker's first flow after `since` (the alarm; on `channel`, if given) with
    incoming-window 0, waited for `timeout` seconds, or `AFTER_MISS_S` when an earlier
    case of the run waited at least as long for one in vain (CaseFailed naming that case)."""
    known = ctx.facts.shortened(ALARM_WINDOW_0, timeout, AFTER_MISS_S)
    bound = timeout if known is None else AFTER_MISS_S
    try:
        return window_flow(probe, since, lambda w: w == 0, bound, channel)
    except CaseFailed as exc:
        if known is not None:
            raise CaseFailed(
                f"{exc}; {known.case_id} waited {known.bound:g}s for one in vain this run"
            ) from exc
        flows = [item.item.performative for item in probe.frames_since(since, "flow")]
        if not any(flow.incoming_window == 0 for flow in flows):
            # none on any session: the broker does not close windows (within `timeout`)
            ctx.facts.record_unanswered(ALARM_WINDOW_0, timeout, ctx.case.case_id)
        raise


def window_closed_or_unsupported(
    probe: Probe,
    ctx: CaseContext,
    since: int,
    timeout: float,
    refusal: str,
    *,
    see: str = "",
    channel: int | None = None,
) -> None:
    """Wait for the broker's flow with incoming-window 0 (on `channel`, if given) after an
    alarm (`window_closed`). Without one the case cannot go on: UNSUPPORTED "`refusal`
    (why); see `see`"."""
    try:
        window_closed(probe, ctx, since, timeout, channel)
    except CaseFailed as exc:
        raise Unsupported(f"{refusal} ({exc})" + (f"; see {see}" if see else "")) from exc


def in_flight_then_echo(
    probe: Probe, session: Session, sender: Link, tags: list[bytes]
) -> tuple[str, int]:
    """Unsettled transfers `tags` past the closed window (as if in flight), then a session
    flow with echo: (what ended, `error_outcome`, or 'timeout' when nothing did; the trace
    position before the transfers). The wait ends on an ending or on the broker's session
    flow on our channel after them, the echo's answer (2.7.4 echo): a session's frames are
    processed in order, so whatever the transfers make the broker do comes before that
    answer. Without an answer (echo is a SHOULD) it waits `ECHO_WAIT`."""
    since = probe.mark()
    send_transfers(probe, session, sender, tags)
    probe.send_frame(session_flow(session, echo=True), session.channel, strict=False)

    def answered() -> bool:
        return any(
            item.item.channel == session.remote_channel and item.item.performative.handle is None
            for item in probe.frames_since(since, "flow")
        )

    return probe.error_outcome(since=since, timeout=ECHO_WAIT, until=answered), since
