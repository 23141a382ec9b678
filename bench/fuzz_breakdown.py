"""Where a whole fuzz campaign's time goes, per kind of case: the profile behind the
"Whole campaigns against real brokers" figures of bench/README.md.

    python -m amqpspec.bench.fuzz_breakdown --broker URL [--profile NAME] [--admin URL]
                                            [--seconds 30] [--seed 3] [--workers auto|N]

Owns: `Breakdown` and `measure(target, seconds, seed, workers)`. It runs one campaign exactly
as `bench.fuzz_campaigns.run_campaign` does, with timers wrapped around the oracle's waits
(`fuzz.oracle`: the connect, the reply waits, the liveness checks, the waits for a restart)
and the campaign's gate (workers paused while a triage runs alone), and classifies every
case a worker ran: answered (the broker closed or dropped), silent (a reply wait ran out:
no close within the bound), refused (the connection could not be made: the broker was
restarting), crash (the verdict). Times are summed over threads (thread-seconds), split by
who spent them: the workers' cases, the triage. A profile only: the wrappers cost a few
microseconds per call, never a verdict. The workers run as threads of one process (the
timers count there), not spread over `--processes auto`'s processes as `amqpspec fuzz` does.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from amqpspec.fuzz import campaign as campaign_module
from amqpspec.fuzz import oracle, pace

_local = threading.local()


@dataclass(slots=True)
class Breakdown:
    wall: float = 0.0
    workers: int = 0
    cases: Counter = field(default_factory=Counter)  # worker cases by class
    case_time: Counter = field(default_factory=Counter)  # thread-s of worker cases by class
    spent: dict = field(default_factory=lambda: defaultdict(float))  # (role, what) -> thread-s
    calls: Counter = field(default_factory=Counter)  # (role, what) -> calls
    exclusive: float = 0.0  # wall seconds a triage ran alone (the workers paused)
    exclusive_count: int = 0
    findings: int = 0
    triaged: int = 0
    quick_bound: float = 0.0  # the quick reply bound at the end (fuzz.answers)
    answers: int = 0  # answers it was learnt from

    def rows(self) -> list[str]:
        out = [
            f"wall {self.wall:.1f} s, {self.workers} workers, "
            f"{sum(self.cases.values())} cases, {self.findings} findings, "
            f"{self.triaged} triaged; quick reply bound at the end {self.quick_bound:.2f} s "
            f"(from {self.answers} answers)"
        ]
        for kind, count in self.cases.most_common():
            mean = self.case_time[kind] / max(1, count)
            out.append(
                f"  cases {kind:<10} {count:>7}  {self.case_time[kind]:>9.1f} thread-s"
                f"  ({mean:.3f} s each)"
            )
        out.append(
            f"  triage alone (workers paused): {self.exclusive:.1f} s wall in "
            f"{self.exclusive_count} triages"
        )
        for (role, what), seconds in sorted(self.spent.items()):
            out.append(
                f"  {role:<7} {what:<22} {seconds:>9.1f} thread-s in "
                f"{self.calls[(role, what)]} calls"
            )
        return out


def _role() -> str:
    name = threading.current_thread().name
    if name.startswith("fuzz-worker"):
        return "worker"
    return "triage" if getattr(_local, "triage", False) or "triage" in name else "other"


@contextmanager
def _patched(module: Any, name: str, make: Callable[[Callable], Callable]) -> Iterator[None]:
    original = getattr(module, name)
    setattr(module, name, make(original))
    try:
        yield
    finally:
        setattr(module, name, original)


class _Timers:
    """The wrappers `measure` patches into the fuzz campaign: each adds the time spent in
    what it wraps (per role: main or worker) to one Breakdown, under one lock."""

    def __init__(self) -> None:
        self.result = Breakdown()
        self.lock = threading.Lock()

    def add(self, what: str, seconds: float) -> None:
        key = (_role(), what)
        with self.lock:
            self.result.spent[key] += seconds
            self.result.calls[key] += 1

    def timed(self, what: str) -> Callable[[Callable], Callable]:
        def make(original: Callable) -> Callable:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                nested = getattr(_local, "in_" + what, False)
                setattr(_local, "in_" + what, True)
                started = time.monotonic()
                try:
                    return original(*args, **kwargs)
                finally:
                    setattr(_local, "in_" + what, nested)
                    if not nested:
                        self.add(what, time.monotonic() - started)

            return wrapper

        return make

    def connect(self, original: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            except Exception:
                _local.refused = True
                raise
            finally:
                self.add("connect", time.monotonic() - started)

        return wrapper

    def wait_broker(self, original: Callable) -> Callable:
        def wrapper(probe: Any, stream: Any, seconds: float, done: Callable) -> Any:
            started = time.monotonic()
            try:
                return original(probe, stream, seconds, done)
            finally:
                spent = time.monotonic() - started
                self.add("reply wait", spent)
                if spent >= seconds - 0.01 and seconds >= 0.5:
                    _local.silent = True

        return wrapper

    def run_case(self, original: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _role() != "worker" or getattr(_local, "in_case", False):
                return original(*args, **kwargs)
            _local.in_case, _local.refused, _local.silent = True, False, False
            started = time.monotonic()
            try:
                outcome = original(*args, **kwargs)
            finally:
                _local.in_case = False
            spent = time.monotonic() - started
            verdict = outcome.verdict
            if verdict is not None and verdict.kind == oracle.CRASH:
                kind = "crash"
            elif _local.refused:
                kind = "refused"
            elif _local.silent:
                kind = "silent"
            else:
                kind = "answered"
            if verdict is not None and kind != "crash":
                kind += f"+{verdict.kind}"
            with self.lock:
                self.result.cases[kind] += 1
                self.result.case_time[kind] += spent
            return outcome

        return wrapper

    def triage_one(self, original: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _local.triage = True
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                _local.triage = False
                self.add("triage (whole)", time.monotonic() - started)

        return wrapper

    def gate_enter(self, original: Callable) -> Callable:
        def wrapper(gate: Any) -> Any:
            started = time.monotonic()
            try:
                return original(gate)
            finally:
                self.add("gate wait", time.monotonic() - started)

        return wrapper

    def exclusive_enter(self, original: Callable) -> Callable:
        def wrapper(exclusive: Any) -> Any:
            original(exclusive)
            exclusive._breakdown_started = time.monotonic()

        return wrapper

    def exclusive_exit(self, original: Callable) -> Callable:
        def wrapper(exclusive: Any, *exc: Any) -> Any:
            with self.lock:
                self.result.exclusive += time.monotonic() - exclusive._breakdown_started
                self.result.exclusive_count += 1
            return original(exclusive, *exc)

        return wrapper


def measure(target: Any, seconds: float, seed: int, workers: str) -> Breakdown:
    """One campaign (as bench.fuzz_campaigns.run_campaign) with its time broken down."""
    from contextlib import ExitStack

    from amqpspec.bench.fuzz_campaigns import run_campaign

    timers = _Timers()
    result = timers.result
    with ExitStack() as stack:
        # one process: the timers count in this one (fuzz.processes forks the workers)
        stack.enter_context(_patched(pace, "choose_processes", lambda _: lambda workers: 1))
        stack.enter_context(_patched(oracle, "_connect", timers.connect))
        stack.enter_context(_patched(oracle, "_wait_broker", timers.wait_broker))
        stack.enter_context(_patched(oracle, "alive", timers.timed("liveness")))
        stack.enter_context(_patched(oracle, "wait_back", timers.timed("wait for restart")))
        stack.enter_context(_patched(campaign_module, "run_case", timers.run_case))
        stack.enter_context(_patched(campaign_module.Campaign, "_triage_one", timers.triage_one))
        stack.enter_context(_patched(campaign_module.Gate, "enter", timers.gate_enter))
        if hasattr(campaign_module.Campaign, "_enqueue"):  # a full triage queue holds a worker
            put = timers.timed("triage queue put")
            stack.enter_context(_patched(campaign_module.Campaign, "_enqueue", put))
        exclusive = campaign_module._Exclusive
        stack.enter_context(_patched(exclusive, "__enter__", timers.exclusive_enter))
        stack.enter_context(_patched(exclusive, "__exit__", timers.exclusive_exit))
        figures = run_campaign(target, seconds, seed, workers)
    result.wall = figures.wall
    result.workers = figures.workers
    result.findings = figures.findings
    result.triaged = figures.triaged
    answers = getattr(target, "answers", None)
    if answers is not None:
        result.quick_bound = answers.bound(target.bounds.reply)
        result.answers = answers.count
    return result


def main(argv: list[str] | None = None) -> int:
    from amqpspec.bench.fuzz_campaigns import target_for

    parser = argparse.ArgumentParser(prog="python -m amqpspec.bench.fuzz_breakdown")
    parser.add_argument("--broker", required=True)
    parser.add_argument("--profile", default="generic")
    parser.add_argument("--admin")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--workers", default="auto")
    args = parser.parse_args(argv)
    target = target_for(args.broker, args.profile, args.admin)
    for line in measure(target, args.seconds, args.seed, args.workers).rows():
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
