"""Minimal reproducers: one connection's items -> the fewest that still show a signature.

Owns: `signatures_of(items)` (the oracle: the items' raw bytes decoded again as a fresh
connection by the core's connection monitor and checked by traces.check, as a
reader of the written pcap would), `minimize(items, signature)` (a window pre-pass, then
traces.minimize.ddmin until 1-minimal) and `write_reproducer(...)` (`<sig>.pcap` through
traces.pcap_writer, `<sig>.txt` through traces.render, then re-checked from the pcap
file). Offline and pure apart from the two files it writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from amqpspec.amqp10.monitor import KIND_RAW, ConnectionMonitor, TraceItem
from amqpspec.amqp10.origins import CLIENT
from amqpspec.spark_triage.check import check_flow, segments_of, signatures_of_items
from amqpspec.traces.minimize import ddmin
from amqpspec.traces.pcap_vector import read_segments
from amqpspec.traces.pcap_writer import PcapWriter
from amqpspec.traces.render import show_line

_SETUP = frozenset(
    ("protocol-header", "sasl-mechanisms", "sasl-init", "sasl-outcome", "open", "begin", "attach")
)


def redecode(items: Sequence[TraceItem]) -> list[TraceItem]:
    """The items a reader would see if only these items' bytes had crossed the wire."""
    monitor = ConnectionMonitor(1, check=False)
    out: list[TraceItem] = []
    for item in items:
        out += monitor.feed(item.direction, item.raw, item.time).items
    out += monitor.finish(items[-1].time if items else 0.0).items
    return out


def signatures_of(items: Sequence[TraceItem], liveness_bound: float | None = None) -> set[str]:
    """Signatures the checker reports for these items' bytes as one connection."""
    return signatures_of_items(redecode(items), liveness_bound)


def minimize(
    items: Sequence[TraceItem],
    sig: str,
    upto: int | None = None,
    max_tests: int = 5000,
    liveness_bound: float | None = None,
) -> list[TraceItem]:
    """A 1-minimal subsequence of `items` (decoded items, raw ones dropped) still showing
    `sig`. `upto`: the index of the violating item, when known. Tries the set-up frames
    plus a growing window before the violation first, so long connections do not pay
    ddmin's quadratic worst case."""
    candidates = [item for item in items if item.kind != KIND_RAW]

    def fires(kept: Sequence[TraceItem]) -> bool:
        return sig in signatures_of(kept, liveness_bound)

    ends_at_violation = False
    if upto is not None:
        prefix = [item for item in candidates if item.index <= upto]
        if fires(prefix):
            candidates, ends_at_violation = prefix, True
    if not ends_at_violation and not fires(candidates):
        raise ValueError(f"{sig} does not fire on the given items")
    start = _window(candidates, fires, ends_at_violation)
    return ddmin(start, fires, max_tests=max_tests).items


def _window(
    items: list[TraceItem], fires: Callable[[Sequence[TraceItem]], bool], ends_at_violation: bool
) -> list[TraceItem]:
    """The shortest prefix that fires, then set-up + the last k items of it, k doubling."""
    low, high = (len(items), len(items)) if ends_at_violation else (1, len(items))
    while low < high:  # the violation is found once its frame is in: binary search
        middle = (low + high) // 2
        if fires(items[:middle]):
            high = middle
        else:
            low = middle + 1
    prefix = items[:high]
    k = 1
    while k < len(prefix):
        tail = prefix[-k:]
        head = [item for item in prefix[:-k] if item.name in _SETUP]
        if fires(head + tail):
            return head + tail
        k *= 2
    return prefix


@dataclass(slots=True)
class Reproducer:
    signature: str
    frames: int
    pcap: str
    text: str
    rechecked: bool


def write_reproducer(
    items: Sequence[TraceItem],
    sig: str,
    directory: Path,
    client: str,
    server: str,
    liveness_bound: float | None = None,
) -> Reproducer:
    """`<sig>.pcap` + `<sig>.txt` of `items`; re-read from the pcap and re-checked."""
    directory.mkdir(parents=True, exist_ok=True)
    pcap = directory / f"{sig}.pcap"
    text = directory / f"{sig}.txt"
    start = items[0].time if items else 0.0
    with PcapWriter(str(pcap)) as writer:
        writer.open_connection(1, client, server, start)
        for item in items:
            writer.data(1, item.direction, item.raw, item.time)
        writer.close_connection(1, items[-1].time if items else start, CLIENT)
    shown = redecode(items)
    lines = [
        f"# reproducer for {sig}",
        f"# {len(shown)} items, client {client}, server {server}; '->' is client to server",
        *(show_line(item, with_time=True) for item in shown),
    ]
    text.write_text("\n".join(lines) + "\n")
    violations, _connections = check_flow(
        pcap.name, segments_of(read_segments(str(pcap))), liveness_bound=liveness_bound
    )
    rechecked = any(row.signature == sig for row in violations)
    return Reproducer(sig, len(shown), str(pcap), str(text), rechecked)
