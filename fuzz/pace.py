"""How many cases a network campaign keeps in flight: measured from the broker's answers.

Owns: `measure_case_latency(config)` (the median wall time of the campaign's first cases,
run at once, each on its own connection) and `choose_workers(latency)` (`--workers auto`,
the default of `amqpspec fuzz`).

A worker is a thread with one case in flight; a case costs the fuzzer a few milliseconds of
CPU and the broker's answer time of wall time. The reference broker answers in
milliseconds: two workers keep both cores busy. RabbitMQ 3.10 answers many bad frames
seconds later, on purpose (its reader sleeps before it closes a connection that failed the
handshake): there each case must cost concurrency, not time, so the workers are the
answer time times the rate a core can drive (`CASES_PER_S`), within [MIN_WORKERS,
MAX_WORKERS]. bench/README.md ("Fuzzer speed") holds the figures this rests on.
"""

from __future__ import annotations

import math
import statistics
import threading
import time

from amqpspec.fuzz.oracle import run_case

CASES_PER_S = 200.0  # cases/s one campaign can drive when answers are instant (bench/README.md)
MIN_WORKERS = 2  # the campaign's own CPU: one per core of this 2-core reference machine
MAX_WORKERS = 128  # threads and sockets at once; beyond, the broker's accept queue is the limit
PROBE_CASES = 6  # the campaign's first cases, run at once to time the broker's answers
MULTI_PARTY_CONNECTIONS = 5  # a multi-party case's parties (fuzz.multiparty: S1, R1-R3, M1)


def choose_workers(latency: float, connections: int = 1) -> int:
    """Workers for cases that each take `latency` seconds of wall time and hold
    `connections` connections at once (a multi-party case: up to MULTI_PARTY_CONNECTIONS):
    at most MAX_WORKERS connections in flight."""
    wanted = math.ceil(max(0.0, latency) * CASES_PER_S)
    most = max(MIN_WORKERS, MAX_WORKERS // max(1, connections))
    return max(MIN_WORKERS, min(most, wanted))


def measure_case_latency(config) -> float:  # type: ignore[no-untyped-def]
    """The median wall time, in seconds, of the campaign's first PROBE_CASES cases run at
    once (each bounded by the reply bound: `fuzz.oracle.run_case`). The campaign runs them
    again as its own: nothing they find is lost."""
    from amqpspec.fuzz.campaign import make_case

    times: list[float] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        case = make_case(config, index)
        started = time.monotonic()
        run_case(config.target, case.steps, quick=True)
        with lock:
            times.append(time.monotonic() - started)

    threads = [
        threading.Thread(target=one, args=(i,), name=f"fuzz-pace-{i}", daemon=True)
        for i in range(PROBE_CASES)
    ]
    for thread in threads:
        thread.start()
    bound = config.target.bounds
    started = time.monotonic()
    deadline = started + bound.connect + bound.liveness + 4 * bound.reply
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:  # a case still running at the deadline took at least that long
        unfinished = len(threads) - len(times)
        times += [time.monotonic() - started] * unfinished
    return statistics.median(times)
