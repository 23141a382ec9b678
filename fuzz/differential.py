"""Differential fuzzing: every case sent to two brokers; where they differ, a finding.

Owns: `Pair` and `run_pair` (one case on both brokers at once), `triage_divergence`
(minimise, confirm, label), `DifferentialCampaign` (fuzz.campaign's Campaign, each case on
both brokers) and `replay_divergence`. What one broker did with a case and how two such
reactions compare are fuzz.divergence's: `Reaction` / `reaction_of(outcome)` (coarse
enough to compare across brokers, the strongest of: a failed SASL outcome, a close with an
error, a TCP close without a close frame (dropped), an end, a detach with an error
(refused: its scope and condition); else accepted (no error: it answered the fuzzer's
close), silent (no close and no TCP close at all) or crashed (the oracle's crash
verdict)) and `compare(steps, a, b)` (the `Divergence` of two outcomes of one case, or
None).

Divergence kinds, first match: `answer-vs-silence` (one answers, the other is silent),
`crash` (one stops serving), `refuse-vs-accept` (one refuses or drops, the other accepts),
`refusal-scope` (both refuse, one the connection, the other the session or link, or one
with a close frame, the other by dropping the socket), `error-condition` (the same scope,
different conditions), `verdict` (the same reaction, but the single-broker oracle,
fuzz.oracle, holds a verdict against one side only, e.g. a checker rule its frames break).
A divergence's signature is its kind, the bad step's performative and field (the
mutation without its value: `begin/remote-channel`) and both reactions, never the bytes:
one bucket per thing the brokers do differently.

Which side breaks which rule is the single-broker oracle's verdict on each side (run
again with the close held where a quick run's verdict rests on silence): a MUST verdict
labels the finding `MUST`, a robustness one (crash, hang, error-missing, resource)
`robustness`; with no verdict on either side the finding is labelled
`spec allows both` (SPEC_ALLOWS_BOTH), which the CLI keeps out of the exit status
(docs/fuzz.md, "Differential campaigns").

The case's bytes are the first broker's (its profile's login and addresses); both brokers
get the same bytes, so the second must accept the first's login and addresses (the CLI
checks this at the start). Nothing here builds or parses AMQP bytes: the oracle and
fuzz.evidence read them through amqp10.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from amqpspec.fuzz.campaign import FIELD_TESTS_HELD, MINIMIZE_TESTS_HELD, Campaign, CampaignConfig
from amqpspec.fuzz.case import Case, Step, load_case
from amqpspec.fuzz.divergence import (
    DIVERGENCE,
    ROBUSTNESS,
    SIDE_B_PCAP,
    SIDE_B_TXT,
    SILENT,
    SPEC_ALLOWS_BOTH,
    VERDICT,
    Divergence,
    Reaction,
    compare,
)
from amqpspec.fuzz.findings import Finding, finding_id, write_pcap
from amqpspec.fuzz.intake import CANDIDATES_DIR
from amqpspec.fuzz.making import make_case
from amqpspec.fuzz.model import ServerModel
from amqpspec.fuzz.oracle import MUST, Outcome, Target, run_case
from amqpspec.fuzz.shrink import shrink_fields
from amqpspec.fuzz.stops import TriageAbandonedError
from amqpspec.traces.minimize import ddmin

PAIR_MINIMIZE_TESTS = 40  # each test runs the case on both brokers
PAIR_FIELD_TESTS = 16
EXAMPLES_PER_BEHAVIOUR = 3  # confirmed or queued divergences of one behaviour; then counted


# ----------------------------------------------------------------- both brokers


@dataclass(slots=True)
class Pair:
    """The two brokers of a differential campaign, each with its own name for reports."""

    a: Target
    b: Target
    names: tuple[str, str] = ("A", "B")
    _pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(16))

    def run(self, steps: list[Step], quick: bool = True) -> tuple[Outcome, Outcome]:
        """One case on both brokers at once (the second on a pool thread)."""
        other = self._pool.submit(run_case, self.b, steps, quick=quick)
        first = run_case(self.a, steps, quick=quick)
        return first, other.result()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass(slots=True)
class PairResult:
    finding: Finding
    case: Case
    a: Outcome
    b: Outcome


def _held(divergence: Divergence) -> bool:
    """A silence is proved only on runs that held the fuzzer's close (fuzz.oracle)."""
    return SILENT in (divergence.a.outcome, divergence.b.outcome)


def _settled(target: Target, steps: list[Step], outcome: Outcome) -> Outcome:
    """A quick run's verdict that rests on silence, run again with the close held."""
    if outcome.inconclusive:
        return run_case(target, steps)
    return outcome


def triage_divergence(
    pair: Pair,
    case: Case,
    divergence: Divergence,
    confirm: int = 3,
    abandon: Callable[[], bool] | None = None,
) -> PairResult | None:
    """Minimise (steps with ddmin, then fields), confirm on both brokers `confirm` times
    and label which side breaks which rule; None when it does not come back."""
    held = _held(divergence)
    last: dict[str, tuple[Outcome, Outcome]] = {}

    def attempt(steps: list[Step]) -> tuple[Divergence | None, tuple[Outcome, Outcome]]:
        if abandon is not None and abandon():
            raise TriageAbandonedError(case.seed)
        a, b = pair.run(steps, quick=not held)
        return compare(steps, a, b), (a, b)

    def same_behaviour(steps: list[Step]) -> bool:
        found, outcomes = attempt(steps)
        if found is not None and found.behaviour == divergence.behaviour:
            last["|".join(s.data.hex() for s in steps)] = outcomes
            return True
        return False

    budget = MINIMIZE_TESTS_HELD if held else PAIR_MINIMIZE_TESTS
    try:
        reduced = ddmin(case.steps, same_behaviour, keep=lambda s: s.is_header, max_tests=budget)
    except ValueError:
        return None  # the first replay did not diverge: not kept
    small = case.with_steps(reduced.items)
    candidates = [small]
    shrunk = shrink_fields(
        small.steps, same_behaviour, FIELD_TESTS_HELD if held else PAIR_FIELD_TESTS
    )
    if shrunk.steps != small.steps:
        candidates.insert(0, small.with_steps(shrunk.steps))
    if small.steps != case.steps:
        candidates.append(case.with_steps(case.steps))
    confirmed = _confirmed(candidates, attempt, divergence, confirm)
    if confirmed is None:
        return None
    small, final = confirmed
    reproduced = confirm
    a = _settled(pair.a, small.steps, final[0])
    b = _settled(pair.b, small.steps, final[1])
    found = compare(small.steps, a, b) or compare(small.steps, *final)
    assert found is not None
    # the bucket is the candidate's: the performative and field the fuzzer mutated (the
    # minimised steps may have lost the mutation's label), so one divergence, one finding
    found = dataclasses.replace(found, what=divergence.what)
    finding = describe(pair, case, small, found, a, b, f"{reproduced}/{confirm}", held)
    finding.minimal = reduced.minimal
    return PairResult(finding, small, a, b)


def _confirmed(
    candidates: list[Case],
    attempt: Callable[[list[Step]], tuple[Divergence | None, tuple[Outcome, Outcome]]],
    divergence: Divergence,
    confirm: int,
) -> tuple[Case, tuple[Outcome, Outcome]] | None:
    """The first candidate whose `confirm` replays all show the divergence's behaviour,
    with its last replay's outcomes; None when none does."""
    for chosen in candidates:
        reproduced, final = 0, None
        for _ in range(confirm):
            found, outcomes = attempt(chosen.steps)
            if found is None or found.behaviour != divergence.behaviour:
                break
            reproduced, final = reproduced + 1, outcomes
        if reproduced == confirm and final is not None:
            return chosen, final
    return None


def _side(name: str, target: Target, outcome: Outcome, reaction: Reaction) -> dict[str, Any]:
    verdict = outcome.verdict
    exchange = outcome.exchange
    return {
        "name": name,
        "broker": target.url,
        "profile": getattr(target.profile, "name", ""),
        "reaction": reaction.key,
        "reaction_text": reaction.text(),
        "verdict": None
        if verdict is None
        else {
            "kind": verdict.kind,
            "rule": verdict.rule,
            "section": verdict.section,
            "summary": verdict.summary,
            "level": verdict.level,
            "sentence": verdict.sentence,
            "expected": verdict.expected,
            "observed": verdict.observed,
        },
        "broker_did": exchange.broker_summary() if exchange is not None else "unreachable",
        "evidence": exchange.record() if exchange is not None else {},
    }


def labels(pair: Pair, a: Outcome, b: Outcome) -> tuple[str, list[str]]:
    """(level, one line per side the oracle holds a verdict against): MUST when a side
    breaks a MUST, robustness when a side has only a robustness verdict, else
    SPEC_ALLOWS_BOTH."""
    lines, level = [], SPEC_ALLOWS_BOTH
    for name, outcome in zip(pair.names, (a, b)):
        v = outcome.verdict
        if v is None:
            continue
        if v.level == MUST:
            level = MUST
            lines.append(f"{name} breaks {v.rule} ({v.section}, MUST): {v.expected}")
        else:
            level = ROBUSTNESS if level != MUST else level
            lines.append(f"{name}: {v.kind} ({v.rule}, {v.section}; robustness): {v.summary}")
    return level, lines


def describe(
    pair: Pair,
    original: Case,
    small: Case,
    found: Divergence,
    a: Outcome,
    b: Outcome,
    replays: str,
    held: bool,
) -> Finding:
    """The divergence as a finding record (kind `divergence`, both sides in `extra`)."""
    sig = found.signature
    level, lines = labels(pair, a, b)
    na, nb = pair.names
    summary = f"{na} {found.a.text()}; {nb} {found.b.text()}"
    if found.kind == VERDICT:
        summary = f"{na}: {found.verdicts[0]}; {nb}: {found.verdicts[1]} (the same reaction)"
    ruled = next(
        (o.verdict for o in (a, b) if o.verdict is not None and o.verdict.level == MUST), None
    )
    ruled = ruled or next((o.verdict for o in (a, b) if o.verdict is not None), None)
    expected = (
        "; ".join(lines)
        if lines
        else (f"{SPEC_ALLOWS_BOTH}: no rule the oracle checks is broken by either side")
    )
    observed = (
        f"{na} ({pair.a.url}): {a.exchange.broker_summary() if a.exchange else 'unreachable'}; "
        f"{nb} ({pair.b.url}): {b.exchange.broker_summary() if b.exchange else 'unreachable'}"
    )
    return Finding(
        id=finding_id(sig),
        kind=DIVERGENCE,
        signature=sig,
        rule=f"{DIVERGENCE}.{found.kind}",
        section=ruled.section if ruled is not None else "-",
        summary=summary,
        reproducer="",
        frames=small.labels,
        original_frames=original.labels,
        seed=original.seed,
        strategy=original.strategy,
        replays=replays,
        broker=f"{pair.a.url} vs {pair.b.url}",
        extra={
            "divergence": {
                "kind": found.kind,
                "what": found.what,
                "labels": lines,
                "a": _side(na, pair.a, a, found.a),
                "b": _side(nb, pair.b, b, found.b),
            }
        },
        expected=expected,
        observed=observed,
        level=level,
        sentence=ruled.sentence if ruled is not None else "",
        close_held=held,
        evidence=a.exchange.record() if a.exchange is not None else {},
    )


def side_b_files(directory: str, finding: Finding, outcome: Outcome) -> None:
    """The second broker's pcap and exchange, beside the finding's reproducer (written
    before the store adds the finding, so findings.md finds them)."""
    folder = os.path.join(directory, "findings", finding.id)
    os.makedirs(folder, exist_ok=True)
    if outcome.recording is not None and outcome.recording.chunks:
        dropped = outcome.exchange.dropped if outcome.exchange is not None else None
        write_pcap(os.path.join(folder, SIDE_B_PCAP), outcome.recording, dropped)
    lines = outcome.exchange.lines() if outcome.exchange is not None else ["(unreachable)"]
    with open(os.path.join(folder, SIDE_B_TXT), "w", encoding="utf-8") as file:
        file.write("\n".join(["the second broker's exchange, timed from the bad frame:", *lines]))
        file.write("\n")


# ----------------------------------------------------------------- the campaign


class DifferentialCampaign(Campaign):
    """Each case on both brokers of `pair`; divergences are the candidates."""

    def __init__(self, config: CampaignConfig, pair: Pair, on_progress=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, on_progress)
        self.pair = pair
        self._examples: Counter[str] = Counter()  # behaviour -> queued or confirmed
        self._parked: set[str] = set()  # signatures kept when the queue was full
        self.divergences = 0  # cases whose brokers diverged (before triage)

    def _work(self) -> None:
        while (index := self._take()) is not None:
            case = make_case(self.config, index)
            self.gate.enter()
            try:
                a, b = self.pair.run(case.steps, quick=True)
            finally:
                self.gate.leave()
            model = ServerModel()
            for s in case.steps[: a.sent or len(case.steps)]:
                model.feed(s)
            found = compare(case.steps, a, b)
            with self._lock:
                self.stats.cases += 1
                self.stats.covered |= model.covered
                self.divergences += found is not None
            if found is not None:
                self._divergent(case, found)
            if self._on_progress is not None:
                self._on_progress(self.stats)

    def _divergent(self, case: Case, found: Divergence) -> None:
        """Like Campaign._candidate, by the divergence's signature, but never waiting: a
        divergence whose behaviour (kind and both reactions) has EXAMPLES_PER_BEHAVIOUR
        confirmed or queued already is only counted, and one that finds the queue full is
        kept under DIR/candidates/ (replayable) and queued when it comes again: two
        brokers that differ in most cases (RabbitMQ 3.10 and the reference broker do in
        three of four) would otherwise hold every worker at a full queue."""
        sig = found.signature
        with self._lock:
            if (
                self.store.known(sig)
                or sig in self._triaged
                or sig in self._waiting
                or self._rejected.get(sig, 0) >= 2
                or self._examples[found.behaviour] >= EXAMPLES_PER_BEHAVIOUR
            ):
                self.stats.duplicates += 1
                return
            try:
                self._queue.put_nowait((case, found, sig))  # type: ignore[arg-type]
            except queue.Full:
                if sig in self._parked:
                    self.stats.duplicates += 1
                    return
                self._parked.add(sig)
                self.stats.kept += 1
            else:
                self._waiting.add(sig)
                self._examples[found.behaviour] += 1
                self.stats.candidates += 1
                self.stats.queued += 1
                return
        self._write_candidate(case, found, sig)

    def _write_candidate(self, case: Case, found: Divergence, sig: str) -> None:
        folder = os.path.join(self.config.out, CANDIDATES_DIR, finding_id(sig))
        os.makedirs(folder, exist_ok=True)
        record = case.to_json(
            kind=DIVERGENCE,
            signature=sig,
            rule=f"{DIVERGENCE}.{found.kind}",
            section="-",
            summary=f"A {found.a.text()}; B {found.b.text()}",
            triaged=False,
        )
        with open(os.path.join(folder, "reproducer.json"), "w", encoding="utf-8") as file:
            json.dump(record, file, indent=2)

    def _keep(self, case: Case, found: Any, sig: str) -> None:  # type: ignore[override]
        """A queued divergence the grace left untriaged, kept under DIR/candidates/<id>/."""
        self._write_candidate(case, found, sig)
        with self._lock:
            self.stats.queued -= 1
            self.stats.kept += 1
            self._waiting.discard(sig)

    def _triage_one(self, case: Case, found: Any, sig: str) -> None:  # type: ignore[override]
        """Minimise, confirm, label and keep one divergence, beside the cases."""
        run = partial(
            triage_divergence, self.pair, case, found, self.config.confirm, abandon=self._grace_over
        )
        with self.gate.entered():
            done, result = self._triaged_by(run, case, found, sig)
        if not done:
            return
        with self._lock:
            self._waiting.discard(sig)
            if result is None:
                self._rejected[sig] = self._rejected.get(sig, 0) + 1
                self._examples[found.behaviour] -= 1
                return
            self._triaged.add(sig)
        side_b_files(self.config.out, result.finding, result.b)
        if self.store.add(result.finding, result.case, result.a.recording, result.a.exchange):
            with self._lock:
                self.stats.findings += 1
        if self._on_progress is not None:
            self._on_progress(self.stats)


# ----------------------------------------------------------------- replay


@dataclass(slots=True)
class PairReplay:
    reproduced: int
    times: int
    wanted: str  # the reproducer's divergence behaviour ('' for a plain reproducer)
    seen: list[Divergence | None]
    outcomes: list[tuple[Outcome, Outcome]]


def replay_divergence(pair: Pair, path: str, times: int = 3) -> PairReplay:
    """Send a reproducer (a divergence's, or any) to both brokers `times` times; a run
    reproduces when the same divergence (kind and both reactions) comes back, or, for a
    reproducer that is no divergence, when the brokers diverge at all."""
    case, record = load_case(path)
    sig = str(record.get("signature", ""))
    wanted = ""
    if record.get("kind") == DIVERGENCE:
        wanted = sig.split("|", 3)[3] if sig.count("|") >= 3 else ""
    quick = record.get("close_held") is not True
    seen, outcomes = [], []
    for _ in range(times):
        a, b = pair.run(case.steps, quick=quick)
        seen.append(compare(case.steps, a, b))
        outcomes.append((a, b))
    reproduced = sum(1 for d in seen if d is not None and (not wanted or d.behaviour == wanted))
    return PairReplay(reproduced, times, wanted, seen, outcomes)
