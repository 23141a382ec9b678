"""One arrows run's figures, from the receiver's records and the arrows' JSON lines.

Owns: `summarise` (throughput, per-second send and receive rates, end-to-end latency
percentiles) and `RESULT_KEYS` (the keys every run has in the JSON report, held by
tests/test_bench_arrows.py). Pure: no I/O.
"""

from __future__ import annotations

import math
from array import array

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
RESULT_KEYS = (
    "broker",
    "label",
    "sent",
    "accepted",
    "received",
    "seconds",
    "throughput",
    "latency_ms",
    "send_rates",
    "receive_rates",
    "receive_rate_series",
    "latency_cdf",
    "sender",
    "receiver",
    "broker_process",
)


def percentile(ordered: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def per_second(times_ns: array | list[int], start_ns: int) -> list[int]:
    """How many of `times_ns` fall in each whole second after start_ns."""
    counts: list[int] = []
    for t in times_ns:
        second = max(0, (t - start_ns) // 1_000_000_000)
        while len(counts) <= second:
            counts.append(0)
        counts[second] += 1
    return counts


def rate_series(counts: list[int], seconds: float) -> list[tuple[float, float]]:
    """(middle of the second, msg/s) per second of the run; the last, partial second is
    divided by its true length, so a run shorter than a second shows its real rate."""
    series = []
    for index, count in enumerate(counts):
        length = min(1.0, seconds - index) if seconds == seconds else 1.0
        length = max(length, 1e-3)
        series.append((round(index + length / 2, 3), round(count / length, 1)))
    return series


def cdf_points(ordered: list[float], points: int = 200) -> list[tuple[float, float]]:
    """(latency ms, fraction at or below): every percent, then `points` fractions
    log-spaced towards the tail (p99, p99.9, ...), then the maximum."""
    n = len(ordered)
    if n == 0:
        return []
    fractions = [k / 100 for k in range(1, 100)]
    fractions += [1 - 10 ** (-(k + 1) * 5 / points) for k in range(points)]
    out = [(ordered[min(n - 1, int(f * n))], f) for f in sorted(set(fractions))]
    out.append((ordered[-1], 1.0))
    return out


def summarise(sent_ns: array, received_ns: array, sender: dict, receiver: dict) -> dict:
    """The figures of one run (times in ns of CLOCK_MONOTONIC; latencies in ms)."""
    latencies = sorted((r - s) / 1e6 for s, r in zip(sent_ns, received_ns))
    start = min(sent_ns) if sent_ns else 0
    end = max(received_ns) if received_ns else 0
    seconds = (end - start) / 1e9 if end > start else math.nan
    latency = {f"p{p:g}": percentile(latencies, p) for p in PERCENTILES}
    latency["max"] = latencies[-1] if latencies else math.nan
    latency["mean"] = sum(latencies) / len(latencies) if latencies else math.nan
    return {
        "sent": sender.get("sent"),
        "accepted": sender.get("accepted"),
        "received": len(received_ns),
        "seconds": round(seconds, 6),
        "throughput": round(len(received_ns) / seconds, 1) if seconds == seconds else 0.0,
        "latency_ms": {k: round(v, 4) for k, v in latency.items()},
        "send_rates": per_second(sent_ns, start),
        "receive_rates": per_second(received_ns, start),
        "receive_rate_series": rate_series(per_second(received_ns, start), seconds),
        "latency_cdf": [(round(ms, 4), f) for ms, f in cdf_points(latencies)],
        "sender": sender,
        "receiver": receiver,
    }
