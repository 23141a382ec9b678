"""The network campaign: generate, mutate, send, judge, minimise, confirm, keep.

Owns: `CampaignConfig`, `Campaign.run()` and `triage(...)`. Case N of a campaign with seed S
is drawn from `random.Random(f"{S}:{N}")` alone (a legal conversation from `fuzz.seeds`'
pool for seed S or the corpus, its open given the case's own container-id, then one
`fuzz.mutators` strategy), so any case can be made again from its seed whatever the number
of workers, and cases running at once never share a link (2.6.1). Workers are threads, each
on its own connections, spread over `processes` worker processes (fuzz.processes: cases run
and judged there, counted, triaged and kept here; `_run_index` is what a worker does,
`_account` what the campaign counts of it). A case whose verdict has a signature (kind +
rule + triggering performative + the state it arrived in) not yet confirmed, rejected twice
or waiting is a candidate: it goes to the triage queue (bounded: a full queue makes the
worker wait) and the workers go on; a candidate of a known signature is only counted. A
candidate whose broker behaviour (`fuzz.behaviour`: kind, rule and class of input, the
grouping of findings.md) already has `per_behaviour` signatures triaged or queued is not
triaged: it is kept at once under DIR/candidates/ as a further example (`amqpspec fuzz
replay` runs it), so a broker that breaks one rule from a hundred inputs costs two triages,
not a hundred. The triage thread minimises each on its own connections with
`traces.minimize.ddmin` to a 1-minimal sequence of steps (protocol headers kept), then field
by field within the frames left (`fuzz.shrink`, keeping the signature), replays it `confirm`
times (every replay must reproduce it) and, if its bucket is new, has the `FindingStore`
write it at once. Beside the cases for most kinds; alone (the workers pause at the `Gate`)
for the kinds whose proof other traffic would spoil: a crash (the broker restarts), a hang
or a missing error (the broker's silence within a bound), a resource reading (the broker's
memory). At the end of a campaign the queue is triaged before `run()` returns; an
interrupted one abandons what is still queued (no candidate is a finding until it is
confirmed). A broker not back within `--restart-wait` after a crash or a hang stops the
campaign at once (`_broker_gone`): what is queued is kept under DIR/candidates/. State
coverage: the (machine, state, input) pairs of the engine's tables the sent steps exercised
in the reference model (`fuzz.model.ServerModel`). With `kind` multi
(or both: every other case), case N is a multi-party case instead (`fuzz.multiparty`:
several peers on one queue of its own, judged per connection and across them by
`fuzz.cross_oracle`), triaged by `triage_multi` and kept by `keep_multi` through the same
queue, gate and store (its candidates are not grouped by behaviour: each multi-party
signature is triaged).

Beside this module, as parts of `Campaign`: a case's making (fuzz.making), its signature and
behaviour (fuzz.buckets), the candidate intake and what is kept untriaged (fuzz.intake:
`CandidateIntake`) and the memory watch (fuzz.memory_watch: `MemoryWatch`).
"""

from __future__ import annotations

import gc
import queue
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from contextlib import suppress as _suppressed
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from amqpspec.fuzz import multiparty, processes
from amqpspec.fuzz.behaviour import behaviour_key, input_class
from amqpspec.fuzz.buckets import case_behaviour as _behaviour_of
from amqpspec.fuzz.buckets import case_signature as _signature_of
from amqpspec.fuzz.case import Case, Step
from amqpspec.fuzz.crash_sites import ELEMENT_THRESHOLD, CrashSites
from amqpspec.fuzz.crash_triage import CrashTriage
from amqpspec.fuzz.findings import Finding, FindingStore, finding_of
from amqpspec.fuzz.intake import CANDIDATES_DIR as CANDIDATES_DIR
from amqpspec.fuzz.intake import CandidateIntake
from amqpspec.fuzz.making import make_case
from amqpspec.fuzz.memory_watch import MEMORY_SUSPECTS, MemoryWatch
from amqpspec.fuzz.model import COVERAGE_UNIVERSE, ServerModel
from amqpspec.fuzz.mutators import STRATEGIES
from amqpspec.fuzz.oracle import (
    CRASH,
    ERROR_MISSING,
    HANG,
    RESOURCE,
    Outcome,
    Target,
    Verdict,
    not_back,
    run_case,
)
from amqpspec.fuzz.shrink import FieldResult, shrink_fields
from amqpspec.fuzz.stops import BROKER_GONE, WORKER_FAILED, TriageAbandonedError
from amqpspec.traces.minimize import MinimizeResult, ddmin

MINIMIZE_TESTS = 150
MINIMIZE_TESTS_CRASH = 24  # each test of a crash waits for the broker to restart
MINIMIZE_TESTS_HELD = 24  # each test that holds the close waits up to the reply bound
FIELD_TESTS_HELD = 8
# verdicts that rest on the broker's silence: proved only on runs where the fuzzer held its
# close for the bound (fuzz.oracle), never on a run where its close raced the bad frame
SILENCE_KINDS = (HANG, ERROR_MISSING)
# then the fields of the frames left (fuzz.shrink): a crash waits for a restart, a hang
# for the reply bound, a resource reading for the broker's memory to settle
FIELD_TESTS = {CRASH: 8, HANG: 40, RESOURCE: 10}
FIELD_TESTS_OTHER = 100
TRIAGE_QUEUE = 32  # candidates waiting for triage; more wait in fuzz.intake's overflow
TRIAGE_GRACE_MIN_S = 30.0  # after a --duration budget, the queue is triaged this long at
TRIAGE_GRACE_SHARE = 0.25  # least, or this share of the budget; then what is left is kept
PER_BEHAVIOUR = 2  # signatures of one broker behaviour triaged; further ones kept as examples
TRIAGE_PARALLEL = 4  # tests of one ddmin round run at once (not for TRIAGED_ALONE kinds)
TRIAGERS_MAX = 8  # triage threads: one per four workers, at most this many
# kinds triaged alone, the workers paused: their proof rests on a restart or a memory
# reading, which concurrent cases would disturb (a silence is judged against a bound of
# seconds, which the cases beside it do not approach)
TRIAGED_ALONE = (CRASH, RESOURCE)
CRASH_LAG_S = 0.05  # a crash test is its own if the broker dropped it this soon after its
# last step (the Proton C example broker drops the culprit within a millisecond)
CRASH_REPLY_COLD = 0.25  # a crash's triage test waits this for an answer while this process
# has too few answers to learn a bound from (fuzz.answers): a crash shows in milliseconds


@dataclass(slots=True)
class CampaignConfig:
    target: Target
    out: str
    strategies: tuple[str, ...] = STRATEGIES
    seed: int = 0
    duration: float | None = None
    cases: int | None = None
    workers: int = 1
    corpus: list[list[Step]] = field(default_factory=list)
    confirm: int = 3
    triagers: int = 0  # triage threads (0: one per four workers, 1 to TRIAGERS_MAX)
    per_behaviour: int = PER_BEHAVIOUR  # signatures of one behaviour triaged (0: no limit)
    kind: str = "single"  # single, multi or both: multi-party cases (fuzz.multiparty)
    queues: Any = None  # multi-party: declares and deletes each run's queue (None: the broker
    # makes queues on attach)
    processes: int = 1  # worker processes the workers are spread over (fuzz.processes)
    crash_threshold: int = ELEMENT_THRESHOLD  # crashes of one mutation site before its cases
    # are skipped (fuzz.crash_sites; 0: never skipped)

    @property
    def triage_grace(self) -> float | None:
        """How long the queue is still triaged after the budget (None: until it is empty,
        for a campaign counted in cases)."""
        if self.duration is None:
            return None
        return max(TRIAGE_GRACE_MIN_S, TRIAGE_GRACE_SHARE * self.duration)


@dataclass(slots=True)
class Stats:
    cases: int = 0
    findings: int = 0
    candidates: int = 0
    started: float = field(default_factory=time.monotonic)
    covered: set = field(default_factory=set)
    stopped: str = ""
    duplicates: int = 0  # candidates of a signature already confirmed, rejected or queued
    queued: int = 0  # candidates waiting for triage now
    triaged: int = 0  # candidates triaged so far
    kept: int = 0  # candidates left untriaged after the grace, kept in DIR/candidates/
    examples: int = 0  # new signatures of a behaviour triaged enough, kept in DIR/candidates/
    suspects: int = 0  # crash candidates that joined the outage of an earlier one (Outage)
    polished: int = 0  # crashes kept unminimised while the cases ran, minimised in the grace
    skipped: int = 0  # cases not run: their mutation site crashed the broker enough
    # (fuzz.crash_sites)
    exhausted: list = field(default_factory=list)  # those sites, in the order exhausted
    memory_searches: int = 0  # searches for a case that made the broker's memory grow
    memory_search_s: float = 0.0  # the time they paused the cases
    memory_transient: int = 0  # growths freed once the cases paused: not searched
    memory_unsearched: int = 0  # growths past the searches' share of the time (MEMORY_SHARE)

    @property
    def rate(self) -> float:
        return self.cases / max(1e-9, time.monotonic() - self.started)

    @property
    def coverage(self) -> float:
        return len(self.covered) / len(COVERAGE_UNIVERSE)


class Gate:
    """Many cases at once, or one triage alone (a readers-writer lock). With a
    multiprocessing `context` its state is shared by the worker processes too
    (fuzz.processes): a triage alone then pauses the cases of every process. The tests of
    triages run beside the cases enter it too (`enter(test=True)`): none starts while a
    triage alone runs, but a triage alone does not wait for those in flight (a test that
    holds its close for the full reply bound would keep every worker waiting for seconds;
    what a crash replay does to it at worst is fail that one test), except a crash's
    (`exclusive(tests=True)`): a test that brings the broker down during a crash replay
    would confirm a crash that is not there (two such findings against the Proton C
    example broker, replayed 0/3 on a broker alone: reports/fuzz-brokers.md)."""

    def __init__(self, context: Any = None) -> None:
        if context is None:
            self._cond: Any = threading.Condition()
            self._state: Any = [0, 0, 0]  # cases in flight, a triage alone, tests in flight
        else:
            self._cond = context.Condition()
            self._state = context.Array("i", 3, lock=False)

    def enter(self, test: bool = False) -> None:
        with self._cond:
            while self._state[1]:
                self._cond.wait()
            self._state[2 if test else 0] += 1

    def leave(self, test: bool = False) -> None:
        with self._cond:
            self._state[2 if test else 0] -= 1
            if self._state[1]:  # only a triage alone waits for the cases to leave
                self._cond.notify_all()

    @contextmanager
    def entered(self, test: bool = False) -> Iterator[None]:
        """`enter`, then `leave` however the block ends."""
        self.enter(test)
        try:
            yield
        finally:
            self.leave(test)

    def exclusive(self, tests: bool = False) -> _Exclusive:
        """Alone: no case in flight, and with `tests` no triage test either."""
        return _Exclusive(self, tests)

    def wanted(self) -> bool:
        """A triage alone waits for the cases in flight to leave (read without the lock: a
        hint for a case to leave sooner)."""
        return bool(self._state[1])


class _Exclusive:
    def __init__(self, gate: Gate, tests: bool = False) -> None:
        self.gate = gate
        self.tests = tests

    def __enter__(self) -> None:
        cond, state = self.gate._cond, self.gate._state
        with cond:
            while state[1]:
                cond.wait()
            state[1] = 1
            while state[0] or (self.tests and state[2]):
                cond.wait()

    def __exit__(self, *exc: object) -> None:
        with self.gate._cond:
            self.gate._state[1] = 0
            self.gate._cond.notify_all()


def recheck_short(target: Target, case: Case, outcome: Outcome) -> Outcome:
    """A quick run the broker left silent for the quick bound only (`Outcome.short`,
    fuzz.answers) is no hang: it is run again with the full reply bound, whose outcome
    stands (a slow answer it gets is learnt, so the quick bound grows to cover it). Unless
    this process has already seen that silence (the hang's signature) last the full bound:
    this process has already seen a silence of the same broker behaviour (`fuzz.behaviour`:
    the hang and the class of the bad frame) last the full bound: then the broker is known
    to stay silent there, and the case is its candidate as it is (the triage still holds
    the close for the full bound before anything is a finding). Keyed by behaviour, not
    signature: the Proton C example broker leaves a few classes of bad frame unanswered,
    in dozens of states each, and each key costs one full bound."""
    verdict = outcome.verdict
    if not outcome.short or verdict is None or verdict.kind != HANG:
        return outcome
    if target.answers.known_silent(_silence_key(case, verdict)):
        return outcome
    again = run_case(target, case.steps, quick=True, reply=target.bounds.reply)
    if again.verdict is not None and again.verdict.kind == HANG:
        target.answers.silent(_silence_key(case, again.verdict))
    return again


def _silence_key(case: Case, verdict: Verdict) -> str:
    position = verdict.step if verdict.step is not None else len(case.steps) - 1
    return behaviour_key(verdict.kind, verdict.rule, input_class(case.steps, position))


def _matches(verdict: Verdict | None, wanted: Verdict) -> bool:
    return verdict is not None and (verdict.kind, verdict.rule) == (wanted.kind, wanted.rule)


def triage(
    target: Target,
    case: Case,
    outcome: Outcome,
    confirm: int = 3,
    broker: str = "",
    abandon: Callable[[], bool] | None = None,
    parallel: int = 1,
    gate: Gate | None = None,
    minimise: bool = True,
) -> tuple[Finding, Case, Outcome] | None:
    """Minimise, confirm and describe one candidate; None when it does not reproduce
    (`minimise` False: only confirmed, `_reduce`; a crash test judged by `_accepting`).
    A candidate whose verdict rests on the broker's silence, or that the quick run marked
    inconclusive, is run again with the close held for the bound, and every test holds
    it; other verdicts are proved whatever the fuzzer did after the bad frame and stay
    quick. `parallel`: tests of one ddmin round run at once (1 for TRIAGED_ALONE kinds);
    `gate`: each test enters it as a test (`Gate`)."""
    wanted = outcome.verdict
    assert wanted is not None
    attempt = _Tests(target, case.seed, _reply_bound(target, wanted), abandon, gate).run

    careful = wanted.kind == RESOURCE
    held = wanted.kind in SILENCE_KINDS or bool(outcome.inconclusive)
    if held:
        first = attempt(case.steps, careful)
        if first.verdict is None:
            return None  # it was the race: not kept
        wanted = first.verdict
    quick = not held
    last: dict[str, Outcome] = {}

    accepted = _accepting(wanted)

    def still_fails(steps: list[Step]) -> bool:
        result = attempt(steps, careful, quick)
        if accepted(result.verdict):
            last[_key(steps)] = result
            return True
        return False

    reducing = _reduce(case, still_fails, last, wanted.kind, held, parallel, minimise)
    if reducing is None:
        return None  # the first replay did not reproduce it: flaky, not kept
    reduced, candidates, field_counts = reducing
    confirmed = _confirm(
        candidates, lambda steps: attempt(steps, careful, quick), confirm, parallel, accepted
    )
    if confirmed is None:
        return None
    small, replays = confirmed
    final = replays[-1]
    record = {
        "replays": f"{confirm}/{confirm}",
        "broker": broker or target.url,
        "close_held": held,
        # the fields minimised count only when their candidate is the one that confirmed
        **_minimised(case, reduced, small, field_counts if small is candidates[0] else {}),
    }
    return _finding(case, small, final, final.verdict or wanted, record), small, final


def _minimised(
    case: Case, reduced: MinimizeResult, small: Case, field_counts: dict[str, int]
) -> dict[str, Any]:
    """What a finding records of the minimising of `case` to the confirmed `small`: whether
    it is minimal (ddmin's `reduced` said so, and `small` is smaller than the case or ddmin
    could drop no step), and `field_counts` (non-default fields before and after the field
    minimising, its tests), if any."""
    return {
        "minimal": reduced.minimal and (small.steps != case.steps or reduced.items == case.steps),
        "extra": {"non_default_fields": field_counts} if field_counts else {},
    }


def _reply_bound(target: Target, wanted: Verdict) -> float:
    """The reply bound of a triage's tests: the full one, but a crash's tests (alone) wait
    the bound learnt from the answers (fuzz.answers): a crash shows as a drop and a refused
    connection, at once."""
    reply = target.bounds.reply
    if wanted.kind == CRASH:
        return target.answers.bound(reply, cold=min(reply, CRASH_REPLY_COLD))
    return reply


class _Tests:
    """The tests of one triage: each a run of the broker, unless the campaign abandons
    the triage first; with a `gate`, each enters it as one case."""

    def __init__(
        self,
        target: Target,
        seed: str,
        reply: float,
        abandon: Callable[[], bool] | None,
        gate: Gate | None,
    ) -> None:
        self.target, self.seed, self.reply = target, seed, reply
        self.abandon, self.gate = abandon, gate

    def run(self, steps: list[Step], careful: bool, quick: bool = False) -> Outcome:
        """One test of the triage, unless the campaign abandons it first."""
        if self.abandon is not None and self.abandon():
            raise TriageAbandonedError(self.seed)
        with self.gate.entered(test=True) if self.gate is not None else nullcontext():
            return run_case(self.target, steps, careful, quick=quick, reply=self.reply)


def _finding(
    case: Case, small: Case, final: Outcome, verdict: Verdict, record: dict[str, Any]
) -> Finding:
    """The finding of a confirmed candidate, minimised to `small` (`final`: its last
    replay, the evidence kept; `record`: replays, minimal, broker, extra, close_held)."""
    exchange = final.exchange
    return finding_of(
        verdict,
        _signature_of(small, verdict),
        frames=small.labels,
        original_frames=[s.label for s in case.steps],
        seed=case.seed,
        strategy=case.strategy,
        evidence=exchange.record() if exchange is not None else {},
        **record,
    )


def _accepting(wanted: Verdict) -> Callable[[Verdict | None], bool]:
    """Whether a test's verdict reproduces `wanted`; a crash only if the broker dropped
    the test within CRASH_LAG_S of its last step (or before it)."""

    def accepted(verdict: Verdict | None) -> bool:
        if not _matches(verdict, wanted):
            return False
        if verdict is None or verdict.kind != CRASH:
            return True
        return verdict.lag is not None and verdict.lag <= CRASH_LAG_S

    return accepted


def _reduce(
    case: Case,
    still_fails: Callable[[list[Step]], bool],
    last: dict[str, Outcome],
    kind: str,
    held: bool,
    parallel: int,
    minimise: bool,
) -> tuple[MinimizeResult, list[Case], dict[str, int]] | None:
    """The case minimised (ddmin, then its fields: `_shrink`) unless not `minimise`: the
    result, the cases to confirm in order (fields minimised, steps minimised, as found) and
    the field counts; None when the case as found does not reproduce."""
    if not minimise:
        return MinimizeResult(list(case.steps), 0, False), [case], {}
    try:
        reduced = ddmin(
            case.steps,
            still_fails,
            keep=lambda s: s.is_header,
            max_tests=_minimise_budget(kind, held),
            parallel=parallel,
        )
    except ValueError:
        return None
    small = case.with_steps(reduced.items)
    found = last.get(_key(small.steps))
    candidates, field_counts = [small], {}
    if found is not None and found.verdict is not None:
        shrunk = _shrink(small, found.verdict, still_fails, last, kind, held, parallel)
        if shrunk.steps != small.steps:
            field_counts = {"before": shrunk.before, "after": shrunk.after, "tests": shrunk.tests}
            candidates.insert(0, small.with_steps(shrunk.steps))
    if small.steps != case.steps:
        candidates.append(case.with_steps(case.steps))  # the case as found, last
    return reduced, candidates, field_counts


def _confirm(
    candidates: list[Case],
    run: Callable[[list[Step]], Outcome],
    confirm: int,
    parallel: int,
    accepted: Callable[[Verdict | None], bool],
) -> tuple[Case, list[Outcome]] | None:
    """The first candidate every one of `confirm` replays reproduces, with its replays."""
    for small in candidates:  # the fields minimised, or if that does not confirm, not
        replays = _replays(lambda steps=small.steps: run(steps), confirm, parallel, accepted)
        if sum(accepted(r.verdict) for r in replays) == confirm:
            return small, replays
    return None


def _minimise_budget(kind: str, held: bool) -> int:
    """The ddmin tests a triage may spend: each test of a crash waits for a restart, and
    each one that holds the close waits up to the reply bound."""
    if kind == CRASH:
        return MINIMIZE_TESTS_CRASH
    return MINIMIZE_TESTS_HELD if held else MINIMIZE_TESTS


def _replays(
    run: Callable[[], Outcome],
    times: int,
    parallel: int,
    accepted: Callable[[Verdict | None], bool],
) -> list[Outcome]:
    """`times` replays: one after the other, stopping at the first that misses, or (with
    `parallel` > 1) all at once. When all match, the last is the evidence kept."""
    if parallel <= 1:
        replays: list[Outcome] = []
        for _ in range(times):
            replays.append(run())
            if not accepted(replays[-1].verdict):
                break
        return replays
    with ThreadPoolExecutor(min(parallel, times), thread_name_prefix="fuzz-confirm") as pool:
        return list(pool.map(lambda _: run(), range(times)))


def _shrink(
    small: Case,
    verdict: Verdict,
    still_fails: Callable[[list[Step]], bool],
    last: dict[str, Outcome],
    kind: str,
    held: bool = False,
    parallel: int = 1,
) -> FieldResult:
    """The fields of `small`'s frames minimised while its signature comes back."""
    sig = _signature_of(small, verdict)

    def same_bucket(steps: list[Step]) -> bool:
        if not still_fails(steps):
            return False
        found = last[_key(steps)].verdict
        return found is not None and _signature_of(small.with_steps(steps), found) == sig

    budget = FIELD_TESTS.get(kind, FIELD_TESTS_OTHER)
    if held:
        budget = min(budget, FIELD_TESTS_HELD)
    return shrink_fields(small.steps, same_bucket, budget, parallel)


def _key(steps: list[Step]) -> str:
    return "|".join(s.data.hex() for s in steps)


@dataclass(slots=True)
class CaseResult:
    """What the campaign counts of one case run: all a worker process sends back
    (fuzz.processes drops `case` and `outcome`, which the parent makes again from the
    index when the verdict is a new candidate)."""

    index: int
    covered: set
    multi: bool = False
    verdict: Verdict | None = None
    inconclusive: str = ""
    sent: int = 0
    signature: str = ""
    behaviour: str | None = None
    case: Any = None
    outcome: Any = None
    skipped: bool = False  # not run: its mutation site is exhausted (fuzz.crash_sites)

    def describe(self, case: Case | multiparty.MultiCase, outcome: Outcome) -> None:
        """The verdict's signature and behaviour, computed where the case ran."""
        assert outcome.verdict is not None
        self.verdict = outcome.verdict
        self.inconclusive = getattr(outcome, "inconclusive", "")
        self.sent = getattr(outcome, "sent", 0)
        self.signature = _signature_of(case, outcome.verdict)
        self.behaviour = _behaviour_of(case, outcome.verdict)


class Campaign(CandidateIntake, MemoryWatch, CrashTriage):
    def __init__(
        self, config: CampaignConfig, on_progress: Callable[[Stats], None] | None = None
    ) -> None:
        self.config = config
        self.store = FindingStore(config.out)
        self.stats = Stats()
        self._shares = self._process_shares()
        ctx = processes.context() if len(self._shares) > 1 else None
        self.gate = Gate(ctx)
        self.crash_sites = CrashSites(ctx, config.crash_threshold)
        self._counter = processes.Counter(ctx)
        self._lock = threading.Lock()
        self._stop: Any = ctx.Event() if ctx is not None else threading.Event()
        self._on_progress = on_progress
        self._rejected: dict[str, int] = {}
        self._triaged: set[str] = set()  # signatures (as first seen) already triaged
        self._recent: deque[int] = deque(maxlen=MEMORY_SUSPECTS)  # case indices since the last
        # memory sample
        self._sampled: tuple[float, int | None] = (0.0, None)
        self._deadline = time.monotonic() + config.duration if config.duration is not None else None
        self._queue: queue.Queue[tuple[Case, Outcome, str] | None] = queue.Queue(TRIAGE_QUEUE)
        self._overflow: deque[tuple[Case, Outcome, str]] = deque()  # beyond the full queue
        self._waiting: set[str] = set()  # signatures queued or in triage
        self._examples: set[str] = set()  # signatures kept untriaged as further examples
        self._kept: set[str] = set()  # signatures the grace left untriaged, written once
        self._behaviour_of: dict[str, str] = {}  # a queued signature's behaviour key
        self._behaviour_triages: dict[str, int] = {}  # behaviour -> signatures queued/triaged
        self._draining = False  # the cases are done: the triage threads empty the queue
        self._init_crash_triage()
        self._grace_end: float | None = None  # then, until when (None: no bound)
        self._interrupted = False  # a Ctrl-C came (`_catch_ctrl_c`)
        self._gone = False  # a case found the broker down for good (`_broker_gone`)

    def _process_shares(self) -> list[int]:
        """The workers of each worker process (fuzz.processes): [workers] for threads in
        this process alone (one process asked for, a subclass with its own `_work`, or
        multi-party runs that declare queues through one shared admin connection)."""
        config = self.config
        wanted = config.processes
        if type(self)._work is not Campaign._work or config.queues is not None:
            wanted = 1
        return processes.split(max(1, config.workers), max(1, wanted))

    def _take(self) -> int | None:
        if self._stop.is_set():
            return None
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return None
        return self._counter.take(self.config.cases)

    def stop(self, reason: str = "stopped") -> None:
        self.stats.stopped = self.stats.stopped or reason
        self._draining = False  # a stop abandons what is queued
        self._stop.set()

    def _worker(self) -> None:
        try:
            self._work()
        except Exception as exc:  # a bug of ours: stop the campaign and say so (CLI exit 3)
            traceback.print_exc()
            self.stop(f"{WORKER_FAILED}: {exc!r}")

    def _work(self) -> None:
        while (index := self._take()) is not None:
            self._account(self._run_index(index))

    def _run_index(self, index: int) -> CaseResult:
        """Make case `index`, run it, and what the campaign counts of it: its state
        coverage and, for a verdict, its signature and broker behaviour (no campaign state
        is read or changed here: a worker process runs this, fuzz.processes)."""
        if multiparty.chosen(self.config.kind, index):
            return self._run_multi(index)
        case = make_case(self.config, index)
        if self.crash_sites.exhausted(case):
            return CaseResult(index, set(), skipped=True)
        self.gate.enter()
        try:
            outcome = run_case(self.config.target, case.steps, quick=True)
            if not self.gate.wanted():  # else the triage holds the close for the bound
                outcome = recheck_short(self.config.target, case, outcome)
        finally:
            self.gate.leave()
        model = ServerModel()
        for s in case.steps[: outcome.sent or len(case.steps)]:
            model.feed(s)
        result = CaseResult(index, model.covered, case=case, outcome=outcome)
        if outcome.verdict is not None:
            result.describe(case, outcome)
        return result

    def _run_multi(self, index: int) -> CaseResult:
        """Case `index` as a multi-party case (fuzz.multiparty): no state coverage."""
        case = multiparty.make_multi_case(self.config.seed, index)
        self.gate.enter()
        try:
            outcome = multiparty.run_multi(self.config.target, case, self.config.queues)
        finally:
            self.gate.leave()
        result = CaseResult(index, set(), multi=True, case=case, outcome=outcome)
        if outcome.verdict is not None:
            result.describe(case, outcome)  # type: ignore[arg-type]
        return result

    def _account(self, result: CaseResult) -> None:
        """Count one case run (here or in a worker process), queue its candidate, sample
        the broker's memory, report progress. A skipped case is counted apart."""
        if result.skipped:
            with self._lock:
                self.stats.skipped += 1
            return
        with self._lock:
            self.stats.cases += 1
            self.stats.covered |= result.covered
            if not result.multi:
                self._recent.append(result.index)
        if not_back(result.verdict):
            self._broker_gone()
        if result.verdict is not None:
            self._candidate(*self._case_outcome(result), result.signature, result.behaviour)
        if not result.multi:
            self._sample_memory()
        if self._on_progress is not None:
            self._on_progress(self.stats)

    def _case_outcome(self, result: CaseResult) -> tuple[Any, Outcome]:
        """The case and outcome of a result, made again from its index when a worker
        process sent only the verdict (a case is a function of (seed, index))."""
        if result.case is not None and result.outcome is not None:
            return result.case, result.outcome
        if result.multi:
            case: Any = multiparty.make_multi_case(self.config.seed, result.index)
        else:
            case = make_case(self.config, result.index)
        outcome = Outcome(result.verdict, None, result.sent, result.inconclusive)
        return case, outcome

    def _triager(self) -> None:
        try:
            while (item := self._queue.get()) is not None:
                self._refill()
                if self._stop.is_set() and not self._draining and not self._gone:
                    continue  # interrupted: what is queued is abandoned (no finding yet)
                if self._grace_over():
                    self._keep(*item)  # past the grace: kept for a later replay
                    continue
                self._triage_one(*item)
        except Exception as exc:  # a bug of ours: stop the campaign and say so (CLI exit 3)
            traceback.print_exc()
            self.stop(f"{WORKER_FAILED}: {exc!r}")

    def _triage_one(self, case: Case, outcome: Outcome, sig: str) -> None:
        """Minimise, confirm and keep one candidate (alone for the TRIAGED_ALONE kinds)."""
        assert outcome.verdict is not None
        outage = outcome.verdict.kind == CRASH and not isinstance(case, multiparty.MultiCase)
        if outage and self._outage_waits(case, outcome, sig):
            return
        found: list[tuple[Any, str]] = []
        done, result = self._triaged_by(
            partial(self._triage_as_kind, case, outcome, sig, outage), case, outcome, sig
        )
        if not done:
            return
        with self._lock:
            self._waiting.discard(sig)
            if outage:  # kept as confirmed; none rejected for an outage none reproduced
                found = []
            elif result is None:
                self._rejected[sig] = self._rejected.get(sig, 0) + 1
                behaviour = self._behaviour_of.get(sig)
                if behaviour:  # not confirmed: another example may be tried
                    self._behaviour_triages[behaviour] -= 1
                return
            else:
                self._triaged.add(sig)
                found = [(result, sig)]
        for item, _ in found:
            self._keep_finding(item)
        if not_back(outcome.verdict):
            self._broker_gone()

    def _triage_as_kind(self, case: Case, outcome: Outcome, sig: str, outage: bool) -> Any:
        """The triage of one candidate, run as its kind wants: an outage's alone, its
        findings kept at once (fuzz.crash_triage: None here); a TRIAGED_ALONE kind's alone;
        a multi-party schedule's beside the cases, as a test; any other beside the cases,
        each of its tests as one of them for a triage alone."""
        assert outcome.verdict is not None
        args = (self.config.target, case, outcome, self.config.confirm)
        if outage:
            self._triage_outage_alone(case, outcome, sig)
            return None
        triage_one: Any = triage
        if isinstance(case, multiparty.MultiCase):
            triage_one = partial(multiparty.triage_multi, queues=self.config.queues)
        if outcome.verdict.kind in TRIAGED_ALONE:
            with self.gate.exclusive():
                return triage_one(*args, abandon=self._grace_over)
        if isinstance(case, multiparty.MultiCase):
            with self.gate.entered(test=True):
                return triage_one(*args, abandon=self._grace_over)
        return triage(*args, abandon=self._grace_over, parallel=TRIAGE_PARALLEL, gate=self.gate)

    def _triage_case(self, case: Case, outcome: Outcome, minimise: bool) -> Any:
        """`triage` of one crash suspect, alone (fuzz.crash_triage)."""
        config = self.config
        return triage(
            config.target,
            case,
            outcome,
            config.confirm,
            abandon=self._grace_over,
            minimise=minimise,
        )

    def _keep_finding(self, result: Any) -> None:
        """A confirmed finding, written at once (FindingStore)."""
        finding, small, final = result
        if isinstance(small, multiparty.MultiCase):
            added = multiparty.keep_multi(self.store, finding, small, final)
        else:
            added = self.store.add(finding, small, final.recording, final.exchange)
        if added:
            with self._lock:
                self.stats.findings += 1
        if self._on_progress is not None:
            self._on_progress(self.stats)

    def run(self) -> Stats:
        workers = max(1, self.config.workers)
        count = self.config.triagers or max(1, min(TRIAGERS_MAX, workers // 4))
        pool = None
        restore_ctrl_c = self._catch_ctrl_c()
        self.config.target.reset_waits()  # an earlier campaign's end is not this one's
        _freeze_heap()
        if len(self._shares) > 1:  # forked (in `_run`) before this process starts a thread
            pool = processes.WorkerProcesses(self, self._shares)
            threads = [threading.Thread(target=pool.serve, name="fuzz-workers", daemon=True)]
        else:
            threads = [
                threading.Thread(target=self._worker, name=f"fuzz-worker-{n}", daemon=True)
                for n in range(workers)
            ]
        triagers = [
            threading.Thread(target=self._triager, name=f"fuzz-triage-{n}", daemon=True)
            for n in range(count)
        ]
        try:
            return self._run(threads, triagers, pool)
        finally:
            if pool is not None:
                pool.end()
            gc.unfreeze()  # what lived before the campaign is collected as before again
            restore_ctrl_c()

    def _catch_ctrl_c(self) -> Callable[[], None]:
        """While `run` runs in the main thread with Python's default SIGINT handler: the
        first Ctrl-C stops the campaign as `interrupted` (`_interrupt`), the next one raises
        KeyboardInterrupt as usual. A handler rather than the exception: a KeyboardInterrupt
        raised inside a finaliser (a `__del__` run by the collector or a dropped pipe) is
        printed and dropped by Python, and the campaign would run on to its budget. Returns
        what puts the handler back."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return lambda: None  # ignored (a background job) or the embedder's own

        def interrupt(signum: int, frame: Any) -> None:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self._interrupt()

        signal.signal(signal.SIGINT, interrupt)
        return lambda: signal.signal(signal.SIGINT, signal.default_int_handler)

    def _interrupt(self) -> None:
        """Ctrl-C: no new case, a triage under way abandoned (its candidate kept under
        DIR/candidates/), the rest as a stop."""
        self._interrupted = True  # `_grace_over` from now on
        self._stop_now("interrupted")

    def _broker_gone(self) -> None:
        """A case (or a triage test) found the broker down and not back within
        `--restart-wait`: it stopped serving for good (crashed with nothing to restart it,
        or hung: a deadlocked broker still holds its port). Nothing more can be learnt from
        it: no new case, no wait for its return, no triage (`_grace_over`); what is
        queued is kept under DIR/candidates/ and every confirmed finding is already kept
        (docs/fuzz.md, "A broker that does not come back")."""
        with self._lock:
            if self._gone:
                return
            self._gone = True
        self._stop_now(BROKER_GONE.format(seconds=self.config.target.bounds.restart_wait))

    def _stop_now(self, reason: str) -> None:
        """A stop before the budget's end: no wait for a restart either (the worker
        processes cut theirs when they see the stop, fuzz.processes)."""
        self.config.target.waits_end = time.monotonic()
        self.stop(reason)

    def _run(
        self,
        threads: list[threading.Thread],
        triagers: list[threading.Thread],
        pool: processes.WorkerProcesses | None,
    ) -> Stats:
        """The campaign from its first fork or thread to its end. A Ctrl-C at any point of
        it (even before the last thread started) stops it as `interrupted`: what was
        confirmed is kept, what runs is joined, bounded."""
        try:
            if pool is not None:
                pool.start()
            for thread in triagers + threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
            if self._interrupted:  # the cases ended after a Ctrl-C
                self._end_interrupted(threads, triagers)
                return self.stats
            # the budget is spent (not stopped): what is queued is still triaged, within
            # the grace; what is left then is kept under DIR/candidates/
            self._draining = not self._stop.is_set()
            grace = self.config.triage_grace
            self._grace_end = None if grace is None else time.monotonic() + grace
            if self._grace_end is not None:  # a test's wait for a restart ends with it too
                target = self.config.target
                target.waits_end = min(target.waits_end, self._grace_end)
            self._stop.set()
            self._polish_crashes()  # first: the crashes confirmed, then what is queued
            while self._overflow and not self._grace_over() and _any_alive(triagers):
                time.sleep(0.2)  # the triage threads take it through the queue
            for _ in triagers:
                self._queue.put(None)
            for thread in triagers:
                while thread.is_alive():
                    thread.join(0.2)
            self._keep_left()
        except KeyboardInterrupt:  # a second Ctrl-C, or the handler not ours
            self._interrupt()
            self._end_interrupted(threads, triagers)
        return self.stats

    def _end_interrupted(
        self, threads: list[threading.Thread], triagers: list[threading.Thread]
    ) -> None:
        """After a Ctrl-C: the workers and triage threads joined, each wait bounded."""
        for thread in threads:
            if thread.is_alive():  # False for one not started yet
                thread.join(10)
        for _ in triagers:
            with _suppressed(queue.Full):
                self._queue.put_nowait(None)
        for thread in triagers:
            if thread.is_alive():
                thread.join(10)


def _freeze_heap() -> None:
    """What lives when the campaign starts (modules, tables, the target, the corpus) lives
    to its end: moved out of the cyclic collector's reach (gc.freeze), its full
    collections no longer walk it, and a forked worker process does not touch those pages
    (CPython's advice for a pre-fork server). Garbage is collected first, so none is
    frozen."""
    gc.collect()
    gc.freeze()


def _any_alive(threads: list[threading.Thread]) -> bool:
    return any(thread.is_alive() for thread in threads)
