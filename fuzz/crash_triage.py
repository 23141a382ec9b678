"""The campaign's crashes: outages of the broker, their culprits, confirmed and minimised.

Owns: `Outage` (the crash candidates of one outage of the broker and its clusters) and
`CrashTriage` (a part of fuzz.campaign.Campaign): a crash candidate joins the outage queued
(`_crash_candidate`); an outage is settled without a replay when its likeliest culprit is a
known crash (`_settled`, `_explained`), else its likeliest suspects are replayed alone, the
workers paused at the campaign's `Gate`, until one brings the broker down again
(`_triage_outage`). The site of a confirmed crash is counted (fuzz.crash_sites).

What a crash costs the cases, and how that is bounded (bench/README.md, "Whole campaigns
against real brokers"): a triage alone drains the cases in flight and pauses the workers,
and each test of a crash waits for the broker to restart. So, while the cases run:
- a crash is only confirmed (a few replays of the case as found), kept at once, and
  minimised after the budget, within the triage grace (`_polish_crashes`); what the grace
  leaves stays as confirmed (`minimal` false), never lost;
- the triages alone take at most ALONE_SHARE of the time so far (drains included); an
  outage past that share is replayed after the budget, and what the grace leaves of it is
  kept under DIR/candidates/ (replayable).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from amqpspec.fuzz.buckets import case_behaviour
from amqpspec.fuzz.case import Case
from amqpspec.fuzz.oracle import Outcome
from amqpspec.fuzz.stops import TriageAbandonedError

OUTAGE_SUSPECTS = 256  # the crash candidates of one outage replayed alone, at most
OUTAGE_GAP_S = 0.25  # drops further apart are two outages (a restart takes longer)
OUTAGE_REPLAYS = 8  # the likeliest culprits of one outage replayed alone, at most (with 128
# cases in flight, most are not it; a crash missed here comes again)
ALONE_SHARE = 0.15  # of the budget so far, at most, in crash triages alone (drains included)


@dataclass(slots=True)
class Outage:
    """The crash candidates of one outage of the broker. Every case in flight when the
    broker went down saw a drop and a refused connection; at most one of them (the first
    queued, or another) caused it. The outage is triaged once, alone: each suspect
    replayed until one brings the broker down again (`CrashTriage._triage_outage`), instead
    of a triage alone, the workers paused, per case that was merely in flight."""

    suspects: list = field(default_factory=list)  # (case, outcome, sig); the first queued

    def clusters(self) -> list[list]:
        """The suspects split into the broker's outages (drops more than OUTAGE_GAP_S
        apart: the broker came back and went down again while this one was queued), in
        time order, each with the likeliest culprit first: the case whose last step went
        out last before the drop (`Verdict.lag`, smallest first; a case that saw no drop,
        or whose bytes went out after it, last, in the last outage)."""

        def down(suspect: tuple) -> float:
            return suspect[1].verdict.down

        def lag(suspect: tuple) -> float:
            value = suspect[1].verdict.lag
            return value if value is not None and value >= 0 else float("inf")

        dated = sorted((s for s in self.suspects if s[1].verdict.down is not None), key=down)
        groups: list[list] = []
        last = None
        for suspect in dated:
            if last is None or down(suspect) - last > OUTAGE_GAP_S:
                groups.append([])
            groups[-1].append(suspect)
            last = down(suspect)
        undated = [s for s in self.suspects if s[1].verdict.down is None]
        if undated:
            if not groups:
                groups.append([])
            groups[-1].extend(undated)
        return [sorted(group, key=lag) for group in groups]


class CrashTriage:
    """The crash triage of fuzz.campaign.Campaign (a base class of it)."""

    config: Any
    store: Any
    stats: Any
    gate: Any
    crash_sites: Any
    _lock: Any
    _stop: Any
    _draining: bool
    _gone: bool
    _outage: Outage | None
    _crashes: dict[str, int]
    _triaged: set[str]
    _waiting: set[str]
    _on_progress: Any

    def _init_crash_triage(self) -> None:
        self._outage = None  # the crash candidates of one outage, queued
        self._crashes = {}  # crash behaviour -> crashes confirmed of it
        self._alone_s = 0.0  # seconds of crash triage alone while the cases run
        self._late: list[Outage] = []  # outages past ALONE_SHARE: replayed after the budget
        self._polish: list[tuple[Case, Outcome, str]] = []  # crashes confirmed while the
        # cases ran, kept unminimised: (case, outcome, finding id)

    # the campaign's own (fuzz.campaign, fuzz.intake)
    def _triage_case(self, case: Case, outcome: Outcome, minimise: bool) -> Any: ...
    def _enqueue(self, case: Case, outcome: Outcome, sig: str) -> None: ...
    def _grace_over(self) -> bool: ...
    def _keep_finding(self, result: Any) -> None: ...
    def _write_candidate(self, case: Case, verdict: Any, sig: str, behaviour: str) -> None: ...

    def _crash_candidate(self, case: Case, outcome: Outcome, sig: str) -> None:
        """A case that saw the broker go down: a suspect of the outage queued for triage,
        if there is one (it may hold several outages of the broker: `Outage.clusters`);
        else the first of a new outage, queued. Never rejected one by one: most of an
        outage's cases were only in flight."""
        with self._lock:
            outage = self._outage
            if outage is not None:
                if len(outage.suspects) < OUTAGE_SUSPECTS:
                    outage.suspects.append((case, outcome, sig))
                self.stats.suspects += 1
                return
            self._outage = Outage([(case, outcome, sig)])
            self._waiting.add(sig)
            self.stats.candidates += 1
            self.stats.queued += 1
        self._enqueue(case, outcome, sig)

    def _known_crash(self, sig: str) -> bool:
        """A crash signature confirmed already (under the lock)."""
        return self.store.known(sig) or sig in self._triaged

    def _settled(self, group: list) -> str:
        """How one outage of the broker is settled without replaying it (under the lock):
        'known' when its likeliest culprit's signature is a confirmed crash, 'example'
        when its crash behaviour (fuzz.behaviour) has `per_behaviour` crashes confirmed
        already (it is then kept as a further example, as for other candidates), '' when
        it must be replayed."""
        case, outcome, sig = group[0]
        if self._known_crash(sig):
            return "known"
        cap = self.config.per_behaviour
        behaviour = case_behaviour(case, outcome.verdict)
        if cap > 0 and self._crashes.get(behaviour, 0) >= cap:
            return "example"
        return ""

    def _settle(self, group: list, how: str) -> None:
        """Count a settled outage (`_settled`); an example's likeliest culprit is written
        under DIR/candidates/ (replayable). A known crash's site counts one crash more."""
        case, outcome, sig = group[0]
        if how == "known":
            self._count_crashes(case, 1)
        with self._lock:
            self.stats.duplicates += len(group) - (how == "example")
            self.stats.examples += how == "example"
        if how == "example":
            behaviour = case_behaviour(case, outcome.verdict)
            self._write_candidate(case, outcome.verdict, sig, behaviour)

    def _explained(self, sig: str) -> bool:
        """The outage(s) `sig` leads are all settled without a replay (`_settled`): then
        they are counted (and kept as examples) and taken, and nothing pauses the
        workers."""
        with self._lock:
            outage = self._outage
            if outage is None or outage.suspects[0][2] != sig:
                return False
            groups = outage.clusters()
            settled = [self._settled(group) for group in groups]
            if not all(settled):
                return False
            self._outage = None
        for group, how in zip(groups, settled, strict=True):
            self._settle(group, how)
        return True

    def _take_outage(self, sig: str) -> Outage | None:
        """The outage `sig` leads, taken (a crash seen from now on is of a later outage)."""
        with self._lock:
            outage = self._outage
            if outage is None or outage.suspects[0][2] != sig:
                return None
            self._outage = None
            return outage

    def _count_crashes(self, case: Case, crashes: int) -> None:
        """`crashes` of the broker caused by `case`, counted for its mutation site."""
        newly = self.crash_sites.record(case, crashes)
        if newly:
            with self._lock:
                self.stats.exhausted.extend(newly)

    def _outage_waits(self, case: Case, outcome: Outcome, sig: str) -> bool:
        """The outage `sig` leads needs no triage alone now: settled without a replay
        (`_explained`: counted, the workers never paused) or past the share of time alone
        (`_defer_outage`: replayed after the budget)."""
        if self._explained(sig):
            with self._lock:
                self.stats.queued -= 1
                self._waiting.discard(sig)
            return True
        if self._alone_spent():
            self._defer_outage(case, outcome, sig)
            return True
        return False

    def _alone_spent(self) -> bool:
        """While the cases run, the crash triages alone have taken their ALONE_SHARE of
        the time so far: a further outage waits for the grace (`_defer_outage`)."""
        if self._stop.is_set():
            return False
        return self._alone_s > ALONE_SHARE * (time.monotonic() - self.stats.started)

    def _defer_outage(self, case: Case, outcome: Outcome, sig: str) -> None:
        """The outage `sig` leads, replayed after the budget (`_polish_crashes`)."""
        late = self._take_outage(sig) or Outage([(case, outcome, sig)])
        with self._lock:
            self._late.append(late)
            self.stats.queued -= 1
            self._waiting.discard(sig)

    def _triage_outage_alone(self, case: Case, outcome: Outcome, sig: str) -> None:
        """`_triage_outage`, the workers paused (the time counted while the cases run)."""
        began = time.monotonic()
        with self.gate.exclusive(tests=True):
            self._triage_outage(case, outcome, sig)
        if not self._stop.is_set():
            self._alone_s += time.monotonic() - began

    def _triage_outage(self, case: Case, outcome: Outcome, sig: str) -> None:
        """Alone (the workers paused, so every case of the outage is in): per outage of
        the broker among the suspects, none replayed if it is settled (`_settled`: the
        likeliest culprit's signature is a confirmed crash, or its behaviour has enough
        confirmed crashes); else its OUTAGE_REPLAYS likeliest suspects replayed one by one
        until one brings the broker down again and confirms; kept at once."""
        outage = self._take_outage(sig) or Outage([(case, outcome, sig)])
        self._replay_outage(outage, case)

    def _replay_outage(self, outage: Outage, queued: Case | None) -> None:
        for group in outage.clusters():
            with self._lock:
                how = self._settled(group)
            if how:  # the likeliest culprit: that crash again, or its behaviour's
                self._settle(group, how)
                continue
            self._replay_suspects(group, queued)

    def _replay_suspects(self, group: list, queued: Case | None) -> None:
        """The likeliest suspects of one outage replayed until one confirms; it is kept at
        once, its site counted (the case as found and each replay: fuzz.crash_sites) and,
        while the cases run, minimised after the budget (`_polish_crashes`)."""
        minimise = self._stop.is_set()  # the cases are done
        for index, (suspect, seen, suspect_sig) in enumerate(group[:OUTAGE_REPLAYS]):
            with self._lock:
                if self._known_crash(suspect_sig):
                    continue  # a confirmed crash, less likely the culprit: not replayed
            try:
                result = self._triage_case(suspect, seen, minimise)
            except TriageAbandonedError:
                for later, kept, later_sig in group[index:]:
                    if later is queued:
                        continue  # the one queued: kept by _keep
                    self._write_candidate(later, kept.verdict, later_sig, "")
                    with self._lock:
                        self.stats.kept += 1
                raise
            if result is None:
                continue
            self._count_crashes(suspect, 1 + self.config.confirm)
            behaviour = case_behaviour(suspect, seen.verdict)
            with self._lock:
                self._triaged.add(suspect_sig)
                self._crashes[behaviour] = self._crashes.get(behaviour, 0) + 1
            self._keep_finding(result)  # at once, before the next outage's replays
            if not minimise:
                with self._lock:
                    self._polish.append((suspect, seen, result[0].id))
            return

    def _polish_crashes(self) -> None:
        """After the budget, within the grace: each crash kept unminimised while the cases
        ran, minimised like any crash (alone) and written again under its id
        (`FindingStore.replace`); then the outages past ALONE_SHARE, replayed alone. What
        the grace leaves stays as it was: a confirmed crash larger (`minimal` false in
        findings.json), an outage's likeliest culprit under DIR/candidates/. Run as the
        budget ends, before the triage threads empty the queue (they wait meanwhile)."""
        if not self._draining and not self._gone:
            return  # interrupted: nothing more is sent to the broker
        try:
            while self._polish and not self._grace_over():
                case, outcome, kept_id = self._polish.pop(0)
                with self.gate.exclusive(tests=True):
                    result = self._triage_case(case, outcome, True)
                if result is not None:
                    finding, small, final = result
                    finding.id = kept_id
                    self.store.replace(finding, small, final.recording, final.exchange)
                    with self._lock:
                        self.stats.polished += 1
            while self._late and not self._grace_over():
                outage = self._late.pop(0)
                with self.gate.exclusive(tests=True):
                    self._replay_outage(outage, None)
        except TriageAbandonedError:
            pass
        for outage in self._late:  # past the grace: each outage's likeliest culprit kept
            for group in outage.clusters():
                suspect, seen, suspect_sig = group[0]
                self._write_candidate(suspect, seen.verdict, suspect_sig, "")
                with self._lock:
                    self.stats.kept += 1
        self._late.clear()
