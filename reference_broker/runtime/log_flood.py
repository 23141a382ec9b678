"""A bound on the broker's per-connection log lines when many connections fail at once.

Owns: `FloodLimit` (a logging.Filter) and `limit_connection_lines()`, which `amqpspec
broker` installs on the `reference_broker.connection` logger: each connection refused
for a protocol error (2.4.1, 2.8.16), a failed login or an idle time-out logs one info
line. A fuzzer or a storm of bad clients makes hundreds of those a second; writing them
all cost the broker a tenth of its CPU under `amqpspec fuzz` (bench/README.md, "Fuzzer
speed"). Within each second the first `per_second` info lines pass; the rest are counted,
and the first line of a later second (or, at shutdown, a line of its own) says how many
were left out, so a reader knows lines are missing and how many. Warnings and errors
always pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

CONNECTION_LOGGER = "reference_broker.connection"
LINES_PER_SECOND = 50  # a conformance run's connections all get their line


class FloodLimit(logging.Filter):
    """At most `per_second` records at INFO or below pass in each one-second window."""

    def __init__(
        self, per_second: int = LINES_PER_SECOND, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.per_second = per_second
        self._clock = clock
        self._window = float("-inf")  # start of the current one-second window
        self._passed = 0
        self._left_out = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        now = self._clock()
        if now - self._window >= 1.0:
            left_out, self._left_out = self._left_out, 0
            self._window, self._passed = now, 0
            if left_out:
                record.msg = f"{record.msg} [{left_out} more such lines left out before this one]"
        if self._passed >= self.per_second:
            self._left_out += 1
            return False
        self._passed += 1
        return True

    def report_left_out(self) -> None:
        """At shutdown: the lines left out since the last that passed, as a count."""
        if self._left_out:
            count, self._left_out = self._left_out, 0
            self._window, self._passed = self._clock(), 0
            logging.getLogger(CONNECTION_LOGGER).info("%d more such lines left out", count)


def limit_connection_lines(per_second: int = LINES_PER_SECOND) -> FloodLimit:
    limit = FloodLimit(per_second)
    logging.getLogger(CONNECTION_LOGGER).addFilter(limit)
    return limit
