"""Cases run concurrently: `amqpspec run --jobs N` (docs/conformance.md "Concurrent cases").

Owns `CaseScheduler`: given a session's cases in pytest's item order, it runs them ahead of
pytest's item loop on N threads (a case is mostly bounded waiting on its own connections,
so threads suffice), never more than N at once, in item order; a `serial` case (broker-
global state, `registry.BROKER_GLOBAL`) waits until every earlier case has finished and
runs alone, and no later case starts before it is done, except that earlier cases marked
`beside_serial` (a profile's `[jobs] beside_serial`: nothing a serial case changes on that
broker reaches them) go on running beside it, each in a slot of the N; an `alone` serial
case (a restart: `registry.ALONE`) waits for those too. pytest's loop takes
each case's result with `result(case)` in item order, so everything that records
(index.json, traces, JUnit, allure, the progress display) stays in the main thread and in
order. The scheduler
knows nothing about verdicts: it calls the `execute` it is given (the plugin's: health
probe, the case, --expect-retries) and hands back what it returned or raised. Touches
nothing else.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

from amqpspec.conformance.run.registry import Case

T = TypeVar("T")
DEFAULT_JOBS = 8  # measured: docs/conformance.md "Concurrent cases"
_POLL_S = 0.2  # how often a dispatcher waiting for a free slot looks for stop()


class CaseScheduler(Generic[T]):
    """Runs `execute(case)` for every case on up to `jobs` threads (serial cases alone);
    `result(case)` waits for one case's outcome; `stop()` cancels what has not started."""

    def __init__(self, execute: Callable[[Case], T], jobs: int) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be 1 or more, got {jobs}")
        self.execute = execute
        self.jobs = jobs
        self._futures: dict[str, Future[T]] = {}
        self._pool = ThreadPoolExecutor(jobs, thread_name_prefix="amqpspec-case")
        self._slots = threading.Semaphore(jobs)
        self._stopping = threading.Event()
        self._dispatcher: threading.Thread | None = None

    def start(self, cases: list[Case]) -> None:
        """Begin running `cases` (ids unique) in this order, in the background."""
        work: list[tuple[Case, Future[T]]] = [(case, Future()) for case in cases]
        self._futures = {case.case_id: future for case, future in work}
        self._dispatcher = threading.Thread(
            target=self._dispatch, args=(work,), name="amqpspec-dispatch", daemon=True
        )
        self._dispatcher.start()

    def scheduled(self, case: Case) -> bool:
        return case.case_id in self._futures

    def result(self, case: Case) -> T:
        """What `execute(case)` returned (or raises what it raised); waits for it. Every wait
        of a case is bounded by its budget, so this wait is bounded too."""
        return self._futures.pop(case.case_id).result()

    def stop(self) -> None:
        """Start nothing more; wait for the cases already running (each bounded)."""
        self._stopping.set()
        for future in self._futures.values():
            future.cancel()
        if self._dispatcher is not None:
            self._dispatcher.join()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _dispatch(self, work: list[tuple[Case, Future[T]]]) -> None:
        try:
            self._dispatch_all(work)
        except BaseException as exc:  # a bug here must not leave the main thread waiting
            for _, future in work:
                with contextlib.suppress(InvalidStateError, RuntimeError):  # running or done
                    if future.set_running_or_notify_cancel():
                        future.set_exception(exc)
            raise

    def _dispatch_all(self, work: list[tuple[Case, Future[T]]]) -> None:
        running: set[Future[None]] = set()  # what a serial case waits for
        beside: set[Future[None]] = set()  # what it may run with
        for case, future in work:
            if case.serial:
                if case.alone:  # nothing beside it at all (a restart drops every connection)
                    running |= beside
                    beside.clear()
                wait(running)
                running.clear()
                if not self._slot():
                    break
                try:
                    self._run(case, future)
                finally:
                    self._slots.release()
                continue
            if not self._slot():
                break
            task = self._pool.submit(self._run, case, future)
            task.add_done_callback(lambda _: self._slots.release())
            (beside if case.beside_serial else running).add(task)
            running = {task for task in running if not task.done()}
        wait(running | beside)

    def _slot(self) -> bool:
        """Take one of the N slots (waiting for one to free); False once stop() was called."""
        while not self._slots.acquire(timeout=_POLL_S):
            if self._stopping.is_set():
                return False
        if self._stopping.is_set():
            self._slots.release()
            return False
        return True

    def _run(self, case: Case, future: Future[T]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(self.execute(case))
        except BaseException as exc:  # handed to the main thread, which raises it
            future.set_exception(exc)
