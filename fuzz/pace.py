"""How many cases a network campaign keeps in flight: measured from the broker's answers.

Owns: `measure_case_latency(config)` (the mean wall time of the campaign's first cases,
run one by one, each on its own connection), `choose_workers(latency)` (`--workers auto`,
the default of `amqpspec fuzz`) and `choose_processes(workers)` (`--processes auto`: the
workers spread over one process per CPU core, fuzz.processes).

A worker is a thread with one case in flight; a case costs the fuzzer a few milliseconds of
CPU and the broker's answer time of wall time. The reference broker answers in
milliseconds, but a worker waiting for that answer leaves its core idle: a few cases in
flight per core keep both busy (against the reference broker on this 2-core machine, 2
workers in 2 processes ran 369 cases/s, 4 ran 506/s and 8 ran 560/s; on a slower day, 8
ran 341-348/s, 12 ran 370-410/s and 16 and 24 ran 389/s and 357/s: bench/README.md,
"Fuzzer speed"; a case that waits for a case beside it to show the broker still serves,
fuzz.served, holds its worker meanwhile).
RabbitMQ 3.10 answers many bad frames seconds later, on purpose (its reader sleeps before
it closes a connection that failed the handshake): there each case must cost concurrency,
not time, so the workers are the answer time times the rate a core can drive
(`CASES_PER_S`), within [MIN_WORKERS, MAX_WORKERS]. bench/README.md ("Fuzzer speed")
holds the figures this rests on.
"""

from __future__ import annotations

import math
import os
import statistics
import time

from amqpspec.fuzz.oracle import run_case

CASES_PER_S = 200.0  # cases/s the campaign drives when answers cost no CPU here (bench/README.md)
MIN_WORKERS = 12  # six cases in flight per core of this 2-core machine (module doc)
MAX_WORKERS = 128  # threads and sockets at once; beyond, the broker's accept queue is the limit
PROBE_CASES = 40  # the campaign's first cases, run one by one to time the broker's answers
PROBE_BUDGET_S = 5.0  # ... or fewer, once this is spent
PROBE_REPLY_S = 2.0  # a probe case's wait for the answer (RabbitMQ 3.10's late ones: 1.6 s)
MULTI_PARTY_CONNECTIONS = 5  # a multi-party case's parties (fuzz.multiparty: S1, R1-R3, M1)


def choose_workers(latency: float, connections: int = 1) -> int:
    """Workers for cases that each take `latency` seconds of wall time and hold
    `connections` connections at once (a multi-party case: up to MULTI_PARTY_CONNECTIONS):
    at most MAX_WORKERS connections in flight."""
    wanted = math.ceil(max(0.0, latency) * CASES_PER_S)
    most = max(MIN_WORKERS, MAX_WORKERS // max(1, connections))
    return max(MIN_WORKERS, min(most, wanted))


def choose_processes(workers: int) -> int:
    """One worker process per CPU core this process may run on, at most one per worker:
    a case costs the fuzzer milliseconds of CPU, and threads under one interpreter lock
    use one core (bench/README.md)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, workers))


def measure_case_latency(config) -> float:  # type: ignore[no-untyped-def]
    """The mean wall time, in seconds, of the campaign's first cases run one after the
    other (PROBE_CASES, or fewer once PROBE_BUDGET_S is spent), each quick and waiting at
    most PROBE_REPLY_S for the broker's answer. One at a time: a broker on this machine
    answers in milliseconds alone and slower only under the fuzzer's own load, which more
    workers would not relieve. The mean, not the median: a broker that answers most cases
    at once and leaves some unanswered (the Proton C example broker leaves a few classes
    of malformed frame unanswered; the campaign waits its quick bound for those,
    `fuzz.answers`) or answers them seconds later (RabbitMQ 3.10: its quick bound then
    stays the full one) needs the workers its slow cases hold, and the probe cannot tell
    a hang from a late answer without waiting the full bound: a silent case counts as
    PROBE_REPLY_S. The campaign runs these cases again as its own: nothing they find is
    lost."""
    from amqpspec.fuzz.making import make_case

    reply = min(config.target.bounds.reply, PROBE_REPLY_S)
    times: list[float] = []
    deadline = time.monotonic() + PROBE_BUDGET_S
    for index in range(PROBE_CASES):
        case = make_case(config, index)
        started = time.monotonic()
        run_case(config.target, case.steps, quick=True, reply=reply)
        times.append(time.monotonic() - started)
        if time.monotonic() >= deadline:
            break
    return statistics.fmean(times)
