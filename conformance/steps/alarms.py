"""Steps for session windows under resource alarms (2.5.6): a memory alarm raised and
always cleared, and waiting for the broker's flow that closes or reopens a window (or
UNSUPPORTED when it never closes one). The transfer frames that exceed such a window are
in `frames`.

Owns the alarm's raise/clear through the admin adapter; registers no case. Touches
nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from amqp10.composites import Flow
from conformance.probe import Probe
from conformance.runner import CaseContext
from conformance.verdicts import CaseFailed, Unsupported


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
    satisfies `wanted`."""
    return probe.wait_for_frame(
        "flow",
        timeout,
        lambda f: (
            (channel is None or f.channel == channel) and wanted(f.performative.incoming_window)
        ),
        since=since,
    ).performative


def window_closed_or_unsupported(
    probe: Probe,
    since: int,
    timeout: float,
    refusal: str,
    *,
    see: str = "",
    channel: int | None = None,
) -> None:
    """Wait for the broker's flow with incoming-window 0 (on `channel`, if given) after an
    alarm. Without one the case cannot go on: UNSUPPORTED "`refusal` (why); see `see`"."""
    try:
        window_flow(probe, since, lambda w: w == 0, timeout, channel)
    except CaseFailed as exc:
        raise Unsupported(f"{refusal} ({exc})" + (f"; see {see}" if see else "")) from exc
