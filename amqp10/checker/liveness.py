"""Time-based link rules (2.6.7): a drain or an echo never answered, and the liveness
(stall) rule: credit outstanding and messages available, nothing delivered.

Owns: `LivenessRules`, the checker mixin the sweep (`Checker.sweep`) and the end of a link
call. May touch: the link state records (`drain_pending`, `echo_pending`, `stall_reported`)
and a session's `echo_pending` (`_unanswered_echoes`, for sessions.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqpspec.amqp10.checker.state import Link
from amqpspec.amqp10.serial import serial_diff, serial_lt

if TYPE_CHECKING:
    from amqpspec.amqp10.checker.core import Checker


class LivenessRules:
    def _link_sweep(self: Checker, link: Link, now: float, bound: float) -> None:
        """Time-based checks of one link: unanswered drain and echo, stall."""
        sender_origin = link.sender_origin()
        if link.drain_pending is not None and sender_origin is not None:
            drain_idx, _horizon, asked = link.drain_pending
            if asked is not None and now - asked >= bound:
                self._report(
                    "link.drain.no-reply",
                    drain_idx,
                    sender_origin,
                    f"no flow answered the drain request of frame {drain_idx} on "
                    f"{link.name!r} within {bound} s",
                )
                link.drain_pending = None
        if link.echo_pending:
            where = f" on {link.name!r}"
            self._unanswered_echoes(link.echo_pending, now, bound, "echo request", where)
        if sender_origin is not None and not link.stall_reported:
            self._check_stall(link, sender_origin, now, bound)

    def _unanswered_echoes(
        self: Checker,
        pending: dict[str, tuple[int, float | None]],
        now: float,
        bound: float,
        request: str,
        where: str,
    ) -> None:
        """2.7.4: an echo request of a link or a session that no flow answered within
        `bound`; `pending` maps the asking origin to (frame index, time asked)."""
        for asked_origin, (echo_idx, asked) in list(pending.items()):
            if asked is not None and now - asked >= bound:
                self._report(
                    "link.echo.unanswered",
                    echo_idx,
                    asked_origin,
                    f"no flow answered the {request} of frame {echo_idx}{where} within {bound} s",
                )
                del pending[asked_origin]

    def _check_stall(self: Checker, link: Link, sender_origin: str, now: float, bound: float):
        last = link.grants.last
        since = link.progress_time
        if last is None or since is None or now - since < bound:
            return
        if any(e.detached for e in link.ends.values()):
            return
        if not serial_lt(self._lenient_count(link), last.horizon):
            return  # no credit outstanding
        if not (link.available or link.caller_available):
            return  # no messages known to be available
        credit = serial_diff(self._lenient_count(link), last.horizon)
        self._report(
            "link.liveness.stall",
            last.idx,
            sender_origin,
            f"link {link.name!r}: credit {credit} outstanding (grant of frame {last.idx}) and "
            f"messages available, nothing delivered for {now - since:.3f} s",
        )
        link.stall_reported = True

    def _link_finish(self: Checker, link: Link) -> None:
        """A drain request the sender provably read and never answered (2.6.7)."""
        sender_origin = link.sender_origin()
        if link.drain_pending is None or sender_origin is None:
            return
        drain_idx = link.drain_pending[0]
        if self.proven[sender_origin] >= drain_idx:
            self._report(
                "link.drain.no-reply",
                drain_idx,
                sender_origin,
                f"the sender read the drain request of frame {drain_idx} on {link.name!r} "
                f"and sent no flow back",
            )
            link.drain_pending = None
