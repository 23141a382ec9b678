"""Worker processes: a campaign's workers spread over processes, each with its own GIL.

Owns: `Counter` (the next case index, shared by the processes), `context()` (fork), and
`WorkerProcesses`: fork `processes` children before the campaign starts any thread, each
running its share of the workers as threads, and read what they send back.

Why: a case costs the fuzzer a few milliseconds of CPU (the monitor's decode and check of
both directions, case generation, state coverage), and threads under one GIL cap a campaign
at one core of the fuzzer's: against a broker that answers in milliseconds, the fuzzer's
core was the limit (bench/README.md, "Whole campaigns against real brokers"). Processes
use every core.

What runs where: a child takes case indices from the shared `Counter` (stopping at the
budget, the shared stop event, or when its parent is gone), runs each case
(`Campaign._run_index`: make, send, judge, state coverage, the verdict's signature and
behaviour) and sends `CaseResult`s in batches every SEND_EVERY_S, the case and outcome
dropped and the coverage cut to the pairs this child had not sent yet. The parent counts
them (`Campaign._account`: stats, candidates, the triage queue, memory samples, progress):
everything that decides what a finding is, and every write to DIR, stays in the parent
(a candidate's case is made again there from its index: a case is a function of (seed,
index)). Cases and triage tests meet at the campaign's `Gate`, shared by the processes, so a
triage alone (crash, resource) still pauses every case. A child that fails prints its
traceback and stops the campaign (`WORKER_FAILED`, CLI exit 3); one that dies without a
word does too. Children ignore SIGINT: the parent's stop (Ctrl-C, the broker gone for
good) ends them after their case, and cuts the case's wait for a restart
(`Target.waits_end`). Each child numbers its liveness checks apart
(`fuzz.oracle.number_liveness_checks`), so their container-ids stay unique (2.6.1). What
a process learns of the broker's answer times (`fuzz.answers`, on the target) it learns
from its own cases, from the fork on.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from amqpspec.fuzz.stops import WORKER_FAILED

SEND_EVERY_S = 0.05  # a child sends what its workers ran this often (and at its end)
POLL_S = 0.2  # the parent's bounded wait for the children's messages
JOIN_S = 10.0  # after the children said they are done (or were stopped), at most this


def context() -> Any:
    """fork: a child starts with the campaign as it is (target, pool of scenarios,
    corpus), in milliseconds, with nothing to pickle."""
    return multiprocessing.get_context("fork")


class Counter:
    """The next case index: a plain number for threads, shared memory for processes."""

    def __init__(self, ctx: Any = None) -> None:
        self._value: Any = ctx.Value("q", 0) if ctx is not None else None
        self._lock = self._value.get_lock() if self._value is not None else threading.Lock()
        self._next = 0

    def take(self, limit: int | None) -> int | None:
        """The next index, or None once `limit` indices were taken."""
        with self._lock:
            value = self._value.value if self._value is not None else self._next
            if limit is not None and value >= limit:
                return None
            if self._value is not None:
                self._value.value = value + 1
            else:
                self._next = value + 1
            return value


def split(workers: int, processes: int) -> list[int]:
    """The workers (threads) of each process: as even as can be, none empty."""
    processes = max(1, min(processes, workers))
    return [workers // processes + (n < workers % processes) for n in range(processes)]


class WorkerProcesses:
    """The children of one campaign and the parent's reader of what they send."""

    def __init__(self, campaign: Any, shares: list[int]) -> None:
        self.campaign = campaign
        self._shares = shares
        self._procs: list[Any] = []
        self._conns: dict[Any, Any] = {}

    def start(self) -> None:
        """Fork the children. SIGINT stays blocked until each child ignores it: a Ctrl-C
        during the forks reaches the parent alone (its campaign stops as `interrupted`),
        never a child that has not set SIG_IGN yet (which would die as a failed worker).
        Each child is recorded as soon as it exists, so `end` ends it whatever happens."""
        ctx = context()
        parent = os.getpid()
        shares = self._shares
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for number, threads in enumerate(shares):
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_child,
                    args=(self.campaign, number, len(shares), threads, writer, parent),
                    name=f"fuzz-worker-process-{number}",
                    daemon=True,
                )
                proc.start()
                self._procs.append(proc)
                self._conns[reader] = proc
                writer.close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def serve(self) -> None:
        """Count what the children send until every one has ended (each wait bounded)."""
        campaign = self.campaign
        done: set[Any] = set()
        while self._conns:
            for conn in multiprocessing.connection.wait(list(self._conns), timeout=POLL_S):
                try:
                    kind, payload = conn.recv()
                except (EOFError, OSError):
                    proc = self._conns.pop(conn)
                    conn.close()
                    proc.join(JOIN_S)
                    if conn not in done:
                        campaign.stop(
                            f"{_failed()}: worker process {proc.pid} ended without a word "
                            f"(exit code {proc.exitcode})"
                        )
                    continue
                if kind == "cases":
                    for result in payload:
                        campaign._account(result)
                elif kind == "failed":
                    campaign.stop(f"{_failed()}: {payload}")
                elif kind == "done":
                    done.add(conn)

    def end(self) -> None:
        """After `serve` (or an interrupt): every child joined, stopped if it lingers."""
        for proc in self._procs:
            proc.join(JOIN_S)
            if proc.is_alive():
                proc.kill()
                proc.join(JOIN_S)


def _failed() -> str:
    return WORKER_FAILED


def _child(
    campaign: Any, number: int, processes: int, threads: int, conn: Any, parent: int
) -> None:
    """One worker process: `threads` workers taking cases until the budget, a stop, or
    the parent's end; results sent in batches."""
    from amqpspec.fuzz.oracle import number_liveness_checks

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C pending since the fork is dropped
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked by `start`
    number_liveness_checks(number + 1, processes)
    pending: list[Any] = []
    lock = threading.Lock()
    seen: set = set()

    def send(message: tuple[str, Any]) -> None:
        try:
            conn.send(message)
        except OSError:  # the parent is gone: nothing to report to
            os._exit(0)

    def work() -> None:
        try:
            while os.getppid() == parent and (index := campaign._take()) is not None:
                result = campaign._run_index(index)
                result.case = result.outcome = None
                with lock:
                    pending.append(result)
        except Exception as exc:  # a bug of ours: stop the campaign and say so
            traceback.print_exc()
            campaign._stop.set()
            with lock:
                pending.append(("failed", repr(exc)))

    def flush() -> None:
        _flush(pending, lock, seen, send)

    workers = [
        threading.Thread(target=work, name=f"fuzz-worker-{number}-{n}", daemon=True)
        for n in range(threads)
    ]
    for worker in workers:
        worker.start()
    target = campaign.config.target
    for worker in workers:
        while worker.is_alive():
            worker.join(SEND_EVERY_S)
            flush()
            if campaign._stop.is_set():  # a Ctrl-C, the broker gone: no wait for a restart
                target.waits_end = min(target.waits_end, time.monotonic())
    flush()
    send(("done", None))
    conn.close()


def _flush(
    pending: list[Any], lock: threading.Lock, seen: set, send: Callable[[tuple[str, Any]], None]
) -> None:
    """Send what the workers left since the last flush: a failure as it is, the cases as
    one batch, each carrying only the coverage this process has not sent before."""
    with lock:
        batch = pending[:]
        pending.clear()
    results = []
    for item in batch:
        if isinstance(item, tuple):
            send(item)
            continue
        new = item.covered - seen
        seen.update(new)
        item.covered = new
        results.append(item)
    if results:
        send(("cases", results))
