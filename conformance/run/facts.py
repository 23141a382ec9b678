"""What one conformance run learns about its broker that later cases of the same run reuse
(docs/conformance.md "Concurrent cases").

Owns `RunFacts`: for a named wait (e.g. "a flow with incoming-window 0 after a memory
alarm"), the longest bound a case of this run waited without the broker answering, and
which case that was. A later case that would wait no longer than that bound may wait
less (`shortened`): a broker that answers at all within a bound B answers within B in
every case, so a broker that answered late would have answered the first, full wait, and
the verdicts stay those of full waits. One object per run (`amqpspec run`, shared by the
case threads of --jobs N: thread-safe); a case run alone gets a fresh one and waits in
full. Touches nothing else.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Unanswered:
    """A wait the broker did not answer: its bound (seconds) and the case that waited."""

    bound: float
    case_id: str


class RunFacts:
    """Thread-safe record of the waits a run's broker left unanswered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unanswered: dict[str, Unanswered] = {}

    def unanswered(self, wait: str) -> Unanswered | None:
        """The longest unanswered full wait named `wait` so far, if any."""
        with self._lock:
            return self._unanswered.get(wait)

    def record_unanswered(self, wait: str, bound: float, case_id: str) -> None:
        """A case waited `bound` seconds in full for `wait` and the broker did not answer."""
        with self._lock:
            known = self._unanswered.get(wait)
            if known is None or bound > known.bound:
                self._unanswered[wait] = Unanswered(bound, case_id)

    def shortened(self, wait: str, bound: float, short: float) -> Unanswered | None:
        """The earlier unanswered wait that lets a wait of `bound` seconds last only `short`
        (its bound is at least `bound`), or None: wait in full."""
        known = self.unanswered(wait)
        if known is None or known.bound < bound or short >= bound:
            return None
        return known
