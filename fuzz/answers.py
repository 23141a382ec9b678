"""How long a campaign's quick look waits for the broker: learnt from its own answers.

Owns: `AnswerTimes` (one per `fuzz.oracle.Target`, per process): the answer times of the
quick runs the broker answered, the quick reply bound derived from them (`bound`), and the
silence keys this process has already seen silent for the full bound (`known_silent`).

A quick run (the campaign's first look at a case: fuzz.oracle.run_case, quick=True) sends
the fuzzer's close at once and waits for the broker's close. The full reply bound
(`Bounds.reply`, the profile's wait: 5 s) is what a broker is granted before its silence is
called a hang; a broker that answers in milliseconds and leaves some malformed frames
unanswered (the Proton C example broker) then costs 5 s of a worker per such case. Once
`WARMUP` answers are in, a quick run waits `FACTOR` times the 99th percentile of the last
`WINDOW` answers instead (at least `FLOOR`, at most the full bound). A run silent for that shorter
bound only is no hang: `fuzz.oracle` marks it `Outcome.short`, and the campaign runs it
again with the full bound before it is even a candidate (unless this process has already
seen that silence last the full bound), and the triage holds the close for the full bound
before anything is a finding (fuzz.campaign.triage). A slow answer the re-run gets is
learnt: the bound grows to cover it. RabbitMQ 3.10 answers many bad frames only after
1-1.6 s on purpose: its answers keep the bound at the full one. bench/README.md ("Whole
campaigns against real brokers") holds the measurements this rests on.
"""

from __future__ import annotations

import threading
from collections import deque

WARMUP = 32  # answers before the quick bound is shortened (the full bound until then)
WINDOW = 1024  # the bound follows the last this many answers ...
QUANTILE = 0.99  # ... this quantile of them (one late answer, a pause of the machine's,
FACTOR = 4.0  # does not hold every later case), times this ...
FLOOR = 0.1  # ... but never less (what came while a thread waited for a core is still read)
REFRESH = 32  # the quantile is computed again after this many new answers
KNOWN_SILENT = 4096  # silence keys remembered per process, at most


class AnswerTimes:
    """The answer times of one broker, as this process saw them (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._times: deque[float] = deque(maxlen=WINDOW)
        self._quantile = 0.0  # of the window, as of the last refresh
        self._fresh = 0  # answers since then
        self._silent: set[str] = set()

    def add(self, seconds: float) -> None:
        """A quick run's answer came `seconds` after the fuzzer's close (or last step)."""
        with self._lock:
            self._times.append(seconds)
            self._fresh += 1
            if seconds > self._quantile:
                self._quantile = seconds  # a late answer counts at once, until the refresh
            elif self._fresh >= REFRESH or len(self._times) <= WARMUP:
                ordered = sorted(self._times)
                self._quantile = ordered[min(len(ordered) - 1, int(QUANTILE * len(ordered)))]
                self._fresh = 0

    def bound(self, full: float, cold: float | None = None) -> float:
        """How long a quick run waits for the broker's answer: `full` (or `cold`) until
        WARMUP answers are in, then FACTOR times their QUANTILE, within [FLOOR, full]."""
        with self._lock:
            if len(self._times) < WARMUP:
                return full if cold is None else cold
            return min(full, max(FLOOR, FACTOR * self._quantile))

    def known_silent(self, key: str) -> bool:
        """This process has seen a run of this key stay silent for the full bound."""
        with self._lock:
            return key in self._silent

    def silent(self, key: str) -> None:
        with self._lock:
            if len(self._silent) < KNOWN_SILENT:
                self._silent.add(key)

    @property
    def count(self) -> int:
        return len(self._times)
