"""Crash thresholds: mutation sites that keep crashing the broker are fuzzed no more.

Owns: `site_keys(case)` (the mutation site of a case: its element, the mutated frame's
performative and the kind of mutation with the values left out, e.g. 'attach[size=#]' or
'attach[snd-settle-mode constructor #]', and its request, the performative: 'attach') and
`CrashSites`: the crashes counted per site and the sites exhausted, shared by the worker
processes (fuzz.processes) through shared memory, so that a worker skips a case whose site
is exhausted before it sends a byte.

Why: a broker that crashes on one kind of input (the Proton C example broker dies on a
transfer or flow on a link whose attach lost its address: reports/fuzz-brokers.md) is
brought down by that input again and again, about once per hundred cases, and every crash
stalls every case in flight until the broker is back. The bug is found after the first
few; the rest of the budget is better spent on inputs that still teach something. This
is boofuzz's crash threshold (`Session(crash_threshold_element=3,
crash_threshold_request=12)`: after that many crashes an element's remaining mutations,
then the whole request's, are skipped), with the same defaults.

What counts as a crash of a site: the culprit of an outage of the broker, as the campaign
settles it (fuzz.campaign: a replay that brought the broker down again, or an outage whose
likeliest culprit is a crash confirmed already); never a case that was merely in flight.
A skipped case is not run and not counted as a case (`Stats.skipped`); a case is a
function of (seed, index), so skipping one changes no other. A threshold of 0 turns this
off (`amqpspec fuzz --crash-threshold 0`).
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

from amqpspec.fuzz.case import Case, mutation_label

ELEMENT_THRESHOLD = 3  # boofuzz's crash_threshold_element default
REQUEST_THRESHOLD = 12  # boofuzz's crash_threshold_request default
MAX_EXHAUSTED = 512  # sites a campaign can exhaust (shared memory slots)
_VALUES = re.compile(r"0x[0-9a-fA-F]+|\d+")


def site_keys(case: Case) -> tuple[str, str] | None:
    """(element, request) of the case's first mutated step, or None for a case none of
    whose steps carries a mutator's mark (the case's own legal conversation)."""
    for step in case.steps:
        label = mutation_label(step.label)
        performative, mark, rest = label.partition("[")
        if not mark or not performative:
            continue
        if performative.startswith("protocol-header") and rest.startswith("3.1.0.0"):
            continue
        element = f"{performative}[{_VALUES.sub('#', rest)}"
        return element, performative
    return None


def _slot(key: str) -> int:
    """A site's key as a signed 64-bit number (stable across processes and runs)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class CrashSites:
    """Crashes per site (kept by the campaign's process) and the exhausted sites (read by
    every worker, in shared memory when `ctx` is a multiprocessing context)."""

    def __init__(
        self,
        ctx: Any = None,
        element_threshold: int = ELEMENT_THRESHOLD,
        request_threshold: int | None = None,
    ) -> None:
        self.element_threshold = max(0, element_threshold)
        if request_threshold is None:
            request_threshold = 4 * self.element_threshold
        self.request_threshold = max(0, request_threshold)
        self._counts: dict[str, int] = {}
        self.exhausted_sites: list[str] = []  # in the order they were exhausted
        self._lock = threading.Lock()
        if ctx is not None:
            self._slots: Any = ctx.Array("q", MAX_EXHAUSTED, lock=False)
            self._used: Any = ctx.Value("i", 0, lock=False)
        else:
            self._slots = [0] * MAX_EXHAUSTED
            self._used = _Box()
        self._local: set[int] = set()  # this process's copy of the slots read so far
        self._read = 0

    @property
    def enabled(self) -> bool:
        return self.element_threshold > 0

    def record(self, case: Case, crashes: int = 1) -> list[str]:
        """`crashes` crashes whose culprit is `case` (a confirmed crash: the case as found
        and each replay that brought the broker down again), counted for its element and
        request; returns the sites they exhausted (for the campaign's progress line)."""
        keys = site_keys(case) if self.enabled else None
        if keys is None:
            return []
        element, request = keys
        newly: list[str] = []
        with self._lock:
            for key, threshold in (
                (element, self.element_threshold),
                ("request:" + request, self.request_threshold),
            ):
                if threshold <= 0:
                    continue
                before = self._counts.get(key, 0)
                count = before + crashes
                self._counts[key] = count
                if before < threshold <= count and self._used.value < MAX_EXHAUSTED:
                    self._slots[self._used.value] = _slot(key)
                    self._used.value += 1
                    self.exhausted_sites.append(key)
                    newly.append(key)
        return newly

    def exhausted(self, case: Case) -> bool:
        """The case's element or request has crashed the broker its threshold's times."""
        if not self.enabled or not self._used.value:
            return False
        keys = site_keys(case)
        if keys is None:
            return False
        used = self._used.value
        if used != self._read:  # new slots since this process last looked
            self._local.update(self._slots[self._read : used])
            self._read = used
        element, request = keys
        return _slot(element) in self._local or _slot("request:" + request) in self._local

    def crashes(self) -> dict[str, int]:
        """Crashes counted per site so far (elements, and requests as 'request:NAME')."""
        with self._lock:
            return dict(self._counts)


class _Box:
    """A plain stand-in for a shared `Value` (threads only)."""

    def __init__(self) -> None:
        self.value = 0
