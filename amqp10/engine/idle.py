"""Idle time-out and heartbeats of a connection (2.4.5).

Owns: the clock values the engine was given (`now` of the last call, the last bytes in
and out, when our open went out), the deadline of our idle threshold and the heartbeat
due at half the peer's idle-time-out: `get_timer()`, `handle_timer(now)`. A part of
`Connection` (connection.py composes it); reads the hub's `state`, `idle_timeout_ms`,
`idle_threshold_ms`, `remote_idle_timeout_ms` and output buffer, and closes through its
`close()` when our threshold passes.
"""

from __future__ import annotations

from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.transitions import ConnState
from amqpspec.amqp10.frames import EMPTY_FRAME
from amqpspec.amqp10.spec import Cond

# states in which our idle-time-out is watched / heartbeats are sent (2.4.5)
LIVE = frozenset(
    {
        ConnState.OPEN_PIPE,
        ConnState.OPEN_SENT,
        ConnState.OPEN_RCVD,
        ConnState.OPENED,
    }
)


class IdleTimers:
    """get_timer() / handle_timer(now) (a part of Connection)."""

    def _init_idle(self, idle_timeout_ms: int | None, idle_threshold_ms: int | None) -> None:
        self.idle_timeout_ms = idle_timeout_ms  # advertised in our open
        # 2.4.5: how long silence is tolerated before we close; the advertised value
        # "SHOULD be half the peer's actual timeout threshold" (default: the advertised one)
        self.idle_threshold_ms = idle_threshold_ms or idle_timeout_ms
        self._now: float | None = None
        self._last_received: float | None = None
        self._last_sent: float | None = None
        self._open_sent_at: float | None = None  # our idle clock runs from here (2.4.5)

    def get_timer(self) -> float | None:
        """When handle_timer() must next be called (same clock as `now`), or None."""
        times = [t for t in (self._idle_deadline(), self._heartbeat_due()) if t is not None]
        return min(times) if times else None

    def _idle_deadline(self) -> float | None:
        if not self.idle_timeout_ms or self.state not in LIVE:
            return None
        base = self._last_received
        if base is None or (self._open_sent_at is not None and self._open_sent_at > base):
            base = self._open_sent_at
        threshold = self.idle_threshold_ms or self.idle_timeout_ms
        return None if base is None else base + threshold / 1000

    def _heartbeat_due(self) -> float | None:
        if not self.remote_idle_timeout_ms or self.state not in LIVE:
            return None
        last = self._last_sent if self._last_sent is not None else self._now
        if last is None:
            return None
        # 2.4.5: send frames well within the peer's idle timeout: at half of it
        return last + self.remote_idle_timeout_ms / 2000

    def handle_timer(self, now: float) -> None:
        self._now = now
        deadline = self._idle_deadline()
        if deadline is not None and now >= deadline:
            self.emit(ev.IdleTimeout(self.idle_threshold_ms or self.idle_timeout_ms or 0))
            self.close(Cond.RESOURCE_LIMIT_EXCEEDED, "local idle-time-out expired")
            return
        due = self._heartbeat_due()
        if due is not None and now >= due and not self._out:
            self._out += EMPTY_FRAME
            self.frames_sent += 1
            self._last_sent = now
