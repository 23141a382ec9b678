"""The campaign's watch on the broker's memory: a case that makes it grow is a candidate.

Owns: `MemoryWatch._sample_memory` (a part of fuzz.campaign.Campaign: every
MEMORY_SAMPLE_S the broker's memory; if it grew past `growth_bound` since the last sample,
the cases run since then are searched by halving if the growth stays once the cases are
paused and the broker is quiet (`_growth_stays`; else counted as transient) and the
searches have not had their share of the time (`_memory_share_spent`, MEMORY_SHARE),
`bisect_growth` (batches run as the workers ran them, `grows`), and the suspects left
replayed carefully, within MEMORY_SEARCH_S, the workers paused at the campaign's gate) and
the MEMORY_* bounds.
Reads the campaign's config, lock, gate and recent case indices; hands what it finds to
the campaign's `_candidate`.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from amqpspec.fuzz.case import Case
from amqpspec.fuzz.making import make_case
from amqpspec.fuzz.oracle import RESOURCE, Target, run_case

MEMORY_SAMPLE_S = 1.0  # how often a campaign reads the broker's memory
MEMORY_PER_CONNECTION = 1024 * 1024  # what one open connection of a case may hold (RabbitMQ
# 3.10: a reader, a writer and a session process each; bench/README.md "Fuzzer speed")
MEMORY_SEARCH_S = 120.0  # the search for a case that made memory grow, at most (the
# workers wait meanwhile); past it, the suspects left are replayed until this again
MEMORY_SHARE = 0.15  # the searches pause the cases for at most this share of the time
MEMORY_FREED_S = 20.0  # a growth gone within this, the cases paused, was no leak
MEMORY_SUSPECTS = 2000  # the cases since the last sample searched when memory grew (a
# second of cases at the campaign's rate: a leaking case must still be among them)


class MemoryWatch:
    """The memory sampling of fuzz.campaign.Campaign (a base class of it)."""

    config: Any
    gate: Any
    _lock: Any
    _sampled: tuple[float, int | None]
    _recent: Any
    stats: Any

    def _sample_memory(self) -> None:
        """Every MEMORY_SAMPLE_S: the broker's memory; if it grew past the bound since the
        last sample (`growth_bound`: more with more connections in flight), search the cases
        run since then (halving, batches run as the workers ran them), then replay the
        suspects left carefully to find the one, within MEMORY_SEARCH_S."""
        target = self.config.target
        if target.memory is None:
            return
        with self._lock:
            last_time, last_value = self._sampled
            if time.monotonic() - last_time < MEMORY_SAMPLE_S:
                return
            self._sampled = (time.monotonic(), last_value)
            indices = list(self._recent)
            self._recent.clear()
        value = target.memory()
        self._sampled = (time.monotonic(), value)
        workers = self.config.workers
        if (
            value is None
            or last_value is None
            or value - last_value <= growth_bound(target, workers)
        ):
            return
        if self._memory_share_spent():
            return  # counted: the searches had their share of the campaign's time
        found = None
        with self.gate.exclusive():
            if not self._growth_stays(last_value):
                return  # what grew was freed with the connections: no case to look for
            started = time.monotonic()
            deadline = started + MEMORY_SEARCH_S
            batch = [make_case(self.config, i) for i in indices[-MEMORY_SUSPECTS:]]
            for case in bisect_growth(target, batch, min(workers, 16), deadline):
                if time.monotonic() >= deadline:
                    break  # bounded: the workers wait for this search
                outcome = run_case(target, case.steps, careful=True, quick=True)
                if outcome.verdict is not None and outcome.verdict.kind == RESOURCE:
                    found = (case, outcome)
                    break
            with self._lock:
                self.stats.memory_searches += 1
                self.stats.memory_search_s += time.monotonic() - started
        if found is not None:
            self._candidate(*found)
        self._sampled = (time.monotonic(), target.memory())

    def _memory_share_spent(self) -> bool:
        """Have the memory searches paused the cases for MEMORY_SHARE of the campaign's
        time so far? Then a growth is counted (`memory_unsearched`), not searched: a broker
        whose memory grows with load in ways no case explains (RabbitMQ 3.10 under 128
        connections: its queue and its statistics) would otherwise pause every case for
        MEMORY_SEARCH_S at each sample (fuzz.crash_triage caps time alone the same way)."""
        elapsed = time.monotonic() - self.stats.started
        if self.stats.memory_search_s <= MEMORY_SHARE * elapsed:
            return False
        with self._lock:
            self.stats.memory_unsearched += 1
        return True

    def _growth_stays(self, before: int) -> bool:
        """The workers paused (no case in flight): does the broker's memory stay more than
        one connection's bound above the reading before the growth, at every reading for
        MEMORY_FREED_S (or twice `Bounds.memory_quiet`)? A broker's buffers for many
        connections at once go with them (RabbitMQ 3.10 frees them and refreshes `mem_used`
        within seconds, not at once: a reading 7 s after the pause still saw the peak); a
        leak stays. A growth gone is counted
        (`memory_transient`), not searched: a search pauses every case for up to
        MEMORY_SEARCH_S."""
        target = self.config.target
        bounds = target.bounds
        until = time.monotonic() + max(2 * bounds.memory_quiet, MEMORY_FREED_S)
        while True:
            time.sleep(min(bounds.memory_settle, bounds.memory_quiet))
            quiet = target.memory()
            if quiet is not None and quiet - before <= bounds.memory_growth:
                with self._lock:
                    self.stats.memory_transient += 1
                self._sampled = (time.monotonic(), quiet)
                return False
            if time.monotonic() >= until:
                return quiet is not None


def grows(target: Target, cases: list[Case], workers: int = 1) -> bool:
    """Run `cases` (`workers` at once, as the campaign ran them), let the broker settle;
    did its memory grow past the bound meanwhile? (Connections closed by then: what is
    left is what they leaked.)"""
    assert target.memory is not None
    time.sleep(target.bounds.memory_quiet)
    before = target.memory()
    if workers <= 1:
        for case in cases:
            run_case(target, case.steps, quick=True)
        time.sleep(target.bounds.memory_settle)
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="fuzz-memory") as pool:
            list(pool.map(lambda case: run_case(target, case.steps, quick=True), cases))
        time.sleep(target.bounds.memory_quiet)  # many connections just closed
    after = target.memory()
    return before is not None and after is not None and after - before > target.bounds.memory_growth


def bisect_growth(
    target: Target, suspects: list[Case], workers: int = 1, deadline: float | None = None
) -> list[Case]:
    """The suspects narrowed by halving to the few that make memory grow (group testing:
    a batch is measured once), or all of them when no half does on its own or the
    deadline passed."""
    while len(suspects) > 2 and (deadline is None or time.monotonic() < deadline):
        half = len(suspects) // 2
        first, second = suspects[:half], suspects[half:]
        if grows(target, second, workers):
            suspects = second
        elif grows(target, first, workers):
            suspects = first
        else:
            break
    return list(reversed(suspects))


def growth_bound(target: Target, workers: int) -> int:
    """How much the broker's memory may grow between two samples of a campaign with
    `workers` connections in flight: the bound of one connection, plus what each
    connection open at the second reading holds (MEMORY_PER_CONNECTION)."""
    return target.bounds.memory_growth + max(0, workers - 1) * MEMORY_PER_CONNECTION
