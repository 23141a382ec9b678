"""A broker connection's deadlines besides the engine's own timer (2.4.5 heartbeats and idle
time-out are the engine's): the handshake time-out (RabbitMQ's handshake_timeout, from the
TCP accept), the SASL time-out (from the SASL header to the outcome) and the close grace
(after our close, the peer has CLOSE_GRACE_S to answer).

Owns: those three due times and the one scheduler wake-up armed for the earliest of them and
the engine's. May touch: the injected scheduler (runtime/scheduler.py); the connection
decides what is due (connection.py, `handle_timer`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime.scheduler import Scheduler, Timer

CLOSE_GRACE_S = 5.0  # after our close, wait this long for the peer's before dropping it


class Deadlines:
    """The handshake and close-grace deadlines of one connection and its wake-up."""

    __slots__ = (
        "_scheduler",
        "_timer",
        "_timer_at",
        "_wake",
        "handshake_due",
        "hard_close_due",
        "sasl_due",
    )

    def __init__(
        self, scheduler: Scheduler, handshake_timeout: float, wake: Callable[[float], None]
    ) -> None:
        self._scheduler = scheduler
        self._wake = wake
        bound = handshake_timeout
        self.handshake_due: float | None = scheduler.now() + bound if bound else None
        self.hard_close_due: float | None = None
        self.sasl_due: float | None = None  # start_sasl: the SASL exchange's bound
        self._timer: Timer | None = None
        self._timer_at: float | None = None

    def earliest(self, engine: Any) -> float | None:
        """The earliest deadline: the engine's (heartbeat, idle time-out), the handshake's,
        the close grace's and the SASL exchange's."""
        due = None if engine is None else engine.get_timer()
        for deadline in (self.handshake_due, self.hard_close_due, self.sasl_due):
            if deadline is not None and (due is None or deadline < due):
                due = deadline
        return due

    def arm(self, engine: Any) -> None:
        """One wake-up at the earliest deadline (kept when an earlier one is set)."""
        due = self.earliest(engine)
        if due is None:
            return
        if self._timer_at is not None and self._timer_at <= due:
            return  # an earlier (or equal) wake-up is already set; it re-arms itself
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        self._timer = self._scheduler.call_at(due, self._wake)

    def fired(self) -> None:
        """The wake-up ran: none is armed any more."""
        self._timer = None
        self._timer_at = None

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = None

    def start_sasl(self, engine: Any, bound: float) -> None:
        """The client's SASL header arrived: its outcome is due within `bound` seconds."""
        if bound:
            self.sasl_due = self._scheduler.now() + bound
            self.arm(engine)

    def schedule_hard_close(self) -> None:
        """Our close went out (or will at the turn's end): drop the peer after the grace."""
        if self.hard_close_due is None:
            self.hard_close_due = self._scheduler.now() + CLOSE_GRACE_S
