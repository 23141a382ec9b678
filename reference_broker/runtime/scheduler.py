"""Time and deferred work for the broker's logic, injected instead of read (aioquic's shape).

Owns: the `Scheduler` interface the broker's logic (protocol/connection.py, store.GroupCommit) uses
instead of a clock, an event loop or a thread pool, and `ManualScheduler`, its
deterministic implementation with a clock the caller advances (the in-memory harness,
tests, in-process fuzzing). The asyncio implementation is `pump.LoopScheduler`. Touches
nothing else.

Every callback gets `now` (the scheduler's monotonic seconds) as its one argument, so the
logic never asks the time of anything but the scheduler.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

Callback = Callable[[float], None]
Done = Callable[[float, Any], None]  # (now, result or the exception the work raised)


class Timer(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def now(self) -> float:
        """Monotonic seconds: the `now` every engine call and deadline uses."""
        ...

    def call_at(self, when: float, callback: Callback) -> Timer:
        """Run callback(now) once the clock reaches `when`."""
        ...

    def call_soon(self, callback: Callback) -> Timer:
        """Run callback(now) after the current turn (never inside the caller)."""
        ...

    def run_blocking(self, work: Callable[[], Any], done: Done) -> None:
        """Run work() where it may block (fsync, compaction), then done(now, result) in a
        later turn; `result` is the exception if work() raised one."""
        ...


@dataclass(slots=True, eq=False)
class _Entry:
    """A scheduled callback; `done` once it ran or was cancelled."""

    owner: ManualScheduler
    when: float
    seq: int
    callback: Callback
    done: bool = False

    def cancel(self) -> None:
        if not self.done:
            self.done = True
            self.owner._cancelled_one()

    def __lt__(self, other: _Entry) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)


class ManualScheduler:
    """A Scheduler whose clock moves only when told: `run_due()` runs what is due now
    (in time, then submission order), `advance(seconds)` moves the clock timer by timer.
    Blocking work runs inline when its turn comes, so a run is reproducible."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[_Entry] = []
        self._seq = itertools.count()
        self._cancelled = 0  # cancelled entries still in the heap

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callback) -> _Entry:
        entry = _Entry(self, when, next(self._seq), callback)
        heapq.heappush(self._heap, entry)
        return entry

    def call_soon(self, callback: Callback) -> _Entry:
        return self.call_at(self._now, callback)

    def run_blocking(self, work: Callable[[], Any], done: Done) -> None:
        def run(now: float) -> None:
            try:
                result = work()
            except Exception as exc:  # handed to done, as an executor would
                result = exc
            done(now, result)

        self.call_soon(run)

    @property
    def pending(self) -> int:
        """Live callbacks scheduled (due or not)."""
        return len(self._heap) - self._cancelled

    def _cancelled_one(self) -> None:
        """Cancelled timers stay in the heap until popped; once they are most of it (many
        short-lived connections and a clock that does not move) they go at once."""
        self._cancelled += 1
        if self._cancelled > 1000 and self._cancelled * 2 > len(self._heap):
            self._heap = [entry for entry in self._heap if not entry.done]
            heapq.heapify(self._heap)
            self._cancelled = 0

    def _next_live(self) -> _Entry | None:
        heap = self._heap
        while heap and heap[0].done:
            heapq.heappop(heap)
            self._cancelled -= 1
        return heap[0] if heap else None

    def next_due(self) -> float | None:
        """When the earliest live callback is due (None: nothing scheduled)."""
        entry = self._next_live()
        return None if entry is None else entry.when

    def run_due(self, limit: int = 100_000) -> int:
        """Run every callback due at the current time, including those they schedule for
        now; returns how many ran. More than `limit` means something reschedules itself
        forever: RuntimeError."""
        ran = 0
        while True:
            entry = self._next_live()
            if entry is None or entry.when > self._now:
                return ran
            heapq.heappop(self._heap)
            entry.done = True
            ran += 1
            if ran > limit:
                raise RuntimeError(f"more than {limit} callbacks due at {self._now}")
            entry.callback(self._now)

    def advance(self, seconds: float) -> int:
        """Move the clock forward by `seconds`, stopping at each timer on the way to run
        it at its own time; returns how many callbacks ran."""
        end = self._now + seconds
        ran = self.run_due()
        while True:
            due = self.next_due()
            if due is None or due > end:
                break
            self._now = max(self._now, due)
            ran += self.run_due()
        self._now = end
        return ran + self.run_due()
