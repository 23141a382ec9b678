"""The campaign's candidates: a case with a verdict counted, queued for triage, or kept.

Owns: `CandidateIntake` (a part of fuzz.campaign.Campaign): `_candidate` (a verdict's
signature known: counted; its broker behaviour triaged `per_behaviour` times already:
kept as a further example; else queued, into the overflow while the queue is full (no
case waits for triage), a crash joining the outage queued, `_crash_candidate`), `_seen`,
`_enqueue`, `_refill` (the overflow into the queue as the triage threads take from it),
`_keep_left` (what the triage threads left at the end, kept), `_keep` and
`_write_candidate` (a candidate left untriaged, written as a reproducer under
DIR/candidates/<id>/ so that none is lost), `_triaged_by` (a queued candidate's triage
run and counted out of the queue, or kept when the campaign abandons it), `_budget_spent`
and `_grace_over`.
Reads and changes the campaign's counters and signature sets under its lock.
"""

from __future__ import annotations

import json
import os
import queue
import time
from collections.abc import Callable
from typing import Any

from amqpspec.fuzz import multiparty
from amqpspec.fuzz.buckets import case_behaviour, case_signature
from amqpspec.fuzz.case import Case
from amqpspec.fuzz.findings import finding_id, verdict_record
from amqpspec.fuzz.oracle import CRASH, Outcome, Verdict
from amqpspec.fuzz.stops import TriageAbandonedError

CANDIDATES_DIR = "candidates"  # DIR/candidates/<id>/reproducer.json: queued, never triaged
OVERFLOW = 4096  # candidates waiting beyond the triage queue; past it kept at once


class CandidateIntake:
    """The candidate intake of fuzz.campaign.Campaign (a base class of it)."""

    config: Any
    store: Any
    stats: Any
    _lock: Any
    _stop: Any
    _queue: Any
    _overflow: Any
    _deadline: float | None
    _grace_end: float | None
    _interrupted: bool
    _gone: bool

    def _candidate(
        self, case: Case, outcome: Outcome, sig: str = "", behaviour: str | None = None
    ) -> None:
        """A case with a verdict: counted when its signature is known; kept as an example
        when its behaviour has been triaged enough; else queued for the triage thread
        (or its overflow while the queue is full: no case waits). `sig`, `behaviour`:
        as `CaseResult.describe` found them, if it did."""
        verdict = outcome.verdict
        assert verdict is not None
        sig = sig or case_signature(case, verdict)
        if verdict.kind == CRASH and not isinstance(case, multiparty.MultiCase):
            self._crash_candidate(case, outcome, sig)
            return
        with self._lock:
            if self._seen(sig):
                self.stats.duplicates += 1
                return
        if behaviour is None:
            behaviour = case_behaviour(case, verdict)
        with self._lock:
            if self._seen(sig):  # another worker queued it meanwhile
                self.stats.duplicates += 1
                return
            cap = self.config.per_behaviour if behaviour else 0
            example = cap > 0 and self._behaviour_triages.get(behaviour, 0) >= cap
            if example:
                self._examples.add(sig)
                self.stats.examples += 1
            else:
                self._behaviour_triages[behaviour] = self._behaviour_triages.get(behaviour, 0) + 1
                self._behaviour_of[sig] = behaviour
                self._waiting.add(sig)
                self.stats.candidates += 1
                self.stats.queued += 1
        if example:
            self._write_candidate(case, verdict, sig, behaviour)
            return
        self._enqueue(case, outcome, sig)

    def _enqueue(self, case: Case, outcome: Outcome, sig: str) -> None:
        """Into the triage queue, or its overflow while the queue is full: the cases never
        wait for triage (with worker processes the thread that counts every process's
        results calls this, and one wait there stalls them all). Past OVERFLOW candidates
        waiting, or once the budget is spent, kept under DIR/candidates/ at once."""
        if self._budget_spent() or self._stop.is_set():
            self._keep(case, outcome, sig)
            return
        try:
            self._queue.put_nowait((case, outcome, sig))
            return
        except queue.Full:
            pass
        with self._lock:
            room = len(self._overflow) < OVERFLOW
            if room:
                self._overflow.append((case, outcome, sig))
        if not room:
            self._keep(case, outcome, sig)

    def _refill(self) -> None:
        """The overflow, oldest first, into the queue while it has room (a triage thread
        calls this each time it takes a candidate)."""
        while True:
            with self._lock:
                if not self._overflow:
                    return
                item = self._overflow.popleft()
            try:
                self._queue.put_nowait(item)
            except queue.Full:
                with self._lock:
                    self._overflow.appendleft(item)
                return

    def _keep_left(self) -> None:
        """After the triage threads ended: every candidate still queued or in the overflow
        kept under DIR/candidates/, so none is lost."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self._keep(*item)
        while True:
            with self._lock:
                if not self._overflow:
                    return
                item = self._overflow.popleft()
            self._keep(*item)

    def _seen(self, sig: str) -> bool:
        """Confirmed, triaged, queued, kept (as an example or untriaged) or rejected twice
        (under the lock)."""
        return (
            self.store.known(sig)
            or sig in self._triaged
            or sig in self._waiting
            or sig in self._examples
            or sig in self._kept
            or self._rejected.get(sig, 0) >= 2
        )

    def _triaged_by(
        self, triage: Callable[[], Any], case: Case, found: Any, sig: str
    ) -> tuple[bool, Any]:
        """Run the `triage` of a queued candidate (`case`, `found`: as it was queued):
        (True, its result), counted out of the queue as triaged; (False, None) when the
        campaign abandoned it (`_keep`: kept under DIR/candidates/, counted out there). An
        error of ours counts it out of the queue and goes on up."""
        try:
            result = triage()
        except TriageAbandonedError:
            self._keep(case, found, sig)  # counted out of the queue there
            return False, None
        except BaseException:
            with self._lock:
                self.stats.queued -= 1
            raise
        with self._lock:
            self.stats.queued -= 1
            self.stats.triaged += 1
        return True, result

    def _budget_spent(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _grace_over(self) -> bool:
        """Triage stops here: after a Ctrl-C or once the broker is gone for good at once,
        else once the grace has ended."""
        if self._interrupted or self._gone:
            return True
        return self._grace_end is not None and time.monotonic() >= self._grace_end

    def _keep(self, case: Case, outcome: Outcome, sig: str) -> None:
        """A candidate the grace left untriaged: its case written as a reproducer under
        DIR/candidates/<id>/ (`amqpspec fuzz replay` runs it), so none is lost."""
        assert outcome.verdict is not None
        self._write_candidate(case, outcome.verdict, sig, self._behaviour_of.get(sig, ""))
        with self._lock:
            self.stats.queued -= 1
            self.stats.kept += 1
            self._waiting.discard(sig)
            self._kept.add(sig)
        outage = self._take_outage(sig)  # an outage untriaged: its other suspects kept too
        for suspect, seen, suspect_sig in outage.suspects[1:] if outage is not None else ():
            assert seen.verdict is not None
            self._write_candidate(suspect, seen.verdict, suspect_sig, "")
            with self._lock:
                self.stats.kept += 1

    def _write_candidate(self, case: Case, verdict: Verdict, sig: str, behaviour: str) -> None:
        """DIR/candidates/<id>/reproducer.json: an untriaged case, replayable."""
        folder = os.path.join(self.config.out, CANDIDATES_DIR, finding_id(sig))
        os.makedirs(folder, exist_ok=True)
        record = case.to_json(**verdict_record(verdict, sig), triaged=False, behaviour=behaviour)
        with open(os.path.join(folder, "reproducer.json"), "w", encoding="utf-8") as file:
            json.dump(record, file, indent=2)
