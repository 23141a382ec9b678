"""One TCP flow's segments -> checked AMQP connections: violation rows and connection rows.

Owns: `check_flow(source, segments)`, the one place triage turns packets into verdicts.
It splits a 4-tuple's segments into connections (a new SYN after data or a finish, see
traces/reassembly.py; a silence longer than `gap_seconds`), reassembles them with
`traces.reassembly.PcapTraceReader`, checks them with `traces.check.check_trace`, and
counts capture defects (retransmits, overlaps, conflicting retransmits, sequence wrap,
snap-length cuts, gaps, a start the capture missed) without dropping any of them. Also
`items_of(source, segments)`: the decoded items of every connection, for reproducers.
Pure apart from the iterators it is given; no Spark here (spark_triage/job.py calls it
inside a grouped UDF), so it is tested and reused without a cluster.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from amqp10.checker.signature import endpoint_state, signature
from amqp10.frames import Frame
from amqp10.monitor import KIND_RAW, TraceItem
from amqp10.origins import CLIENT, SERVER
from traces.check import check_trace
from traces.pcap_format import TCP_SYN
from traces.pcap_reader import TcpSegment
from traces.reassembly import PcapTraceReader, format_endpoint

DEFAULT_GAP_SECONDS = 600.0
_CONFLICT_MEMORY = 4096  # recent segments per direction kept to spot conflicting resends
_MAX_HOLES = 64  # unfilled holes remembered per direction; older ones count as gaps


@dataclass(slots=True)
class ViolationRow:
    source: str
    connection_key: str
    frame_index: int | None
    time: float | None
    rule: str
    section: str
    level: str
    origin: str
    performative: str
    channel: int | None
    handle: int | None
    reason: str
    signature: str
    broker_product: str | None = None
    broker_version: str | None = None


@dataclass(slots=True)
class ConnectionRow:
    source: str
    connection_key: str
    client: str
    server: str
    start_time: float
    end_time: float
    frames: int = 0
    bytes_client: int = 0
    bytes_server: int = 0
    verdict: str = "OK"  # OK, SHOULD (SHOULD violations only), MUST, UNCHECKED
    must_violations: int = 0
    should_violations: int = 0
    broker_product: str | None = None
    broker_version: str | None = None
    defects: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def connection_key(source: str, a: tuple[bytes, int], b: tuple[bytes, int], epoch: int) -> str:
    """Symmetric: the same for both directions; `epoch` counts connections on the 4-tuple."""
    low, high = sorted((a, b))
    return f"{source}|{format_endpoint(low)}<>{format_endpoint(high)}|{epoch}"


class _Defects:
    """Segment-level capture defects of one 4-tuple (per direction, 32-bit serial seq):
    a segment below the highest byte seen fills a hole (out-of-order, not a defect), or
    repeats bytes (retransmit; conflicting when the bytes differ) or partly does (overlap);
    a hole never filled is a gap."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._high: dict[tuple, int] = {}  # direction -> unwrapped end of the highest byte
        self._last: dict[tuple, int] = {}  # direction -> last raw seq
        self._holes: dict[tuple, list[list[int]]] = {}  # direction -> [start, end) not seen
        self._recent: dict[tuple, OrderedDict[int, tuple[int, int]]] = {}

    def add(self, name: str, count: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + count

    def segment(self, segment: TcpSegment, truncated: bool) -> None:
        if truncated:
            self.add("snaplen-truncated")
        direction = (segment.src, segment.dst)
        if segment.flags & TCP_SYN:
            self._high[direction] = segment.seq + 1
            self._last[direction] = segment.seq
            self._recent.pop(direction, None)
            self._holes.pop(direction, None)
            return
        payload = segment.payload
        if not payload:
            return
        last = self._last.get(direction)
        if last is not None and segment.seq < last and last - segment.seq > 0x80000000:
            self.add("sequence-wrap")
        self._last[direction] = segment.seq
        high = self._high.get(direction)
        start = segment.seq if high is None else high + _diff(segment.seq, high & 0xFFFFFFFF)
        end = start + len(payload)
        holes = self._holes.setdefault(direction, [])
        recent = self._recent.setdefault(direction, OrderedDict())
        if high is not None and start > high:
            holes.append([high, start])
            if len(holes) > _MAX_HOLES:
                holes.pop(0)
                self.add("gap")
        if high is not None and start < high:
            if self._fill(holes, start, end):
                self.add("out-of-order")
            else:
                seen = recent.get(start)
                self.add("retransmit" if end <= high else "overlap")
                if seen and seen[0] == len(payload) and seen[1] != zlib.crc32(payload):
                    self.add("conflicting-retransmit")
        if start not in recent:
            recent[start] = (len(payload), zlib.crc32(payload))
            if len(recent) > _CONFLICT_MEMORY:
                recent.popitem(last=False)
        self._high[direction] = max(end, high or end)

    @staticmethod
    def _fill(holes: list[list[int]], start: int, end: int) -> bool:
        """Take [start, end) out of the holes; True if it filled any of one."""
        filled = False
        for hole in list(holes):
            if start < hole[1] and end > hole[0]:
                filled = True
                holes.remove(hole)
                if hole[0] < start:
                    holes.append([hole[0], start])
                if end < hole[1]:
                    holes.append([end, hole[1]])
        return filled

    def finish(self) -> None:
        gaps = sum(len(holes) for holes in self._holes.values())
        if gaps:
            self.add("gap", gaps)
        self._holes.clear()


def _diff(a: int, b: int) -> int:
    return ((a - b + 0x80000000) & 0xFFFFFFFF) - 0x80000000


class _Tracker:
    """Per connection: what each checked item was, for the rows (kept as small tuples)."""

    __slots__ = ("closed", "frames", "info", "opened", "product", "version")

    def __init__(self) -> None:
        self.info: list[tuple[str, str, int | None, int | None, float]] = []
        self.opened = {CLIENT: False, SERVER: False}
        self.closed = {CLIENT: False, SERVER: False}
        self.product: str | None = None
        self.version: str | None = None
        self.frames = 0

    def see(self, item: TraceItem) -> None:
        name = item.name
        state = endpoint_state(self.opened[item.direction], self.closed[item.direction])
        channel = handle = None
        if isinstance(item.item, Frame):
            self.frames += 1
            channel = item.item.channel
            handle = getattr(item.item.performative, "handle", None)
            if name == "open":
                self.opened[item.direction] = True
                if item.direction != CLIENT:
                    properties = getattr(item.item.performative, "properties", None) or {}
                    self.product = _text(properties.get("product"))
                    self.version = _text(properties.get("version"))
            elif name == "close":
                self.closed[item.direction] = True
        self.info.append((name, state, channel, handle, item.time))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _epochs(
    segments: Iterable[tuple[TcpSegment, bool]], gap_seconds: float
) -> Iterator[list[tuple[TcpSegment, bool]]]:
    """Runs of segments separated by a silence longer than `gap_seconds`."""
    run: list[tuple[TcpSegment, bool]] = []
    last: float | None = None
    for entry in segments:
        if last is not None and entry[0].time - last > gap_seconds and run:
            yield run
            run = []
        last = entry[0].time
        run.append(entry)
    if run:
        yield run


def _items(
    source: str,
    segments: Iterable[tuple[TcpSegment, bool]],
    gap_seconds: float,
    defects: _Defects,
) -> Iterator[tuple[str, Any, list[TraceItem]]]:
    """(connection key, ConnectionInfo, items) per connection of one 4-tuple."""
    epoch = 0
    for run in _epochs(segments, gap_seconds):
        reader = PcapTraceReader("")

        def counted(run=run):
            for segment, truncated in run:
                defects.segment(segment, truncated)
                yield segment

        by_connection: dict[int, list[TraceItem]] = {}
        for item in reader.items(counted()):
            by_connection.setdefault(item.connection_id, []).append(item)
        for connection_id, info in reader.connections.items():
            first = run[0][0]
            yield (
                connection_key(source, first.src, first.dst, epoch + connection_id - 1),
                info,
                by_connection.get(connection_id, []),
            )
        epoch += len(reader.connections)


def items_of(
    source: str,
    segments: Iterable[tuple[TcpSegment, bool]],
    gap_seconds: float = DEFAULT_GAP_SECONDS,
) -> dict[str, list[TraceItem]]:
    """Connection key -> its decoded items (headers, frames, raw runs) in trace order."""
    return {key: items for key, _info, items in _items(source, segments, gap_seconds, _Defects())}


def check_connection(
    items: Iterable[TraceItem],
    row: ConnectionRow,
    broker_label: str | None = None,
    liveness_bound: float | None = None,
) -> list[ViolationRow]:
    """Check one connection's items; fills `row` (frames, verdict, broker, notes) and
    returns its violations with their signatures."""
    items = list(items)
    tracker = _Tracker()
    for item in items:
        tracker.see(item)
    row.frames = tracker.frames
    row.broker_product = tracker.product or broker_label
    row.broker_version = tracker.version
    raw = next((n for n, item in enumerate(items) if item.kind == KIND_RAW), None)
    if raw is not None:
        items = _before_loss(items, raw)
        liveness_bound = None
    violations: list[ViolationRow] = []
    for finding in check_trace(items, liveness_bound):
        if finding.violation is None:
            row.notes.append(finding.note)
            if "mid-connection" in finding.note:
                row.verdict = "UNCHECKED"
            continue
        violations.append(_violation_row(row.source, row.connection_key, finding, tracker, row))
        if finding.violation.level == "MUST":
            row.must_violations += 1
        else:
            row.should_violations += 1
    if row.must_violations:
        row.verdict = "MUST"
    elif row.should_violations:
        row.verdict = "SHOULD"
    return violations


def _before_loss(items: list[TraceItem], raw: int) -> list[TraceItem]:
    """The items that can still be judged when a direction lost bytes (a capture gap, a
    snap-length cut) or could not be decoded from item `raw` on: nothing of either
    direction after the last item decoded in the stalled one (reassembly holds a stalled
    direction back while the other goes on, so the other's later frames would look like
    violations), and no liveness (what is missing may be the awaited answer)."""
    stalled = items[raw].direction
    decoded = [n for n in range(raw) if items[n].direction == stalled]
    cutoff = items[decoded[-1]].time if decoded else float("-inf")
    return [item for item in items[:raw] if item.time <= cutoff] + [items[raw]]


def signatures_of_items(
    items: Iterable[TraceItem], liveness_bound: float | None = None
) -> set[str]:
    """The signatures the checker reports on one connection's items."""
    row = ConnectionRow("", "", "", "", 0.0, 0.0)
    return {v.signature for v in check_connection(items, row, None, liveness_bound)}


def check_flow(
    source: str,
    segments: Iterable[tuple[TcpSegment, bool]],
    gap_seconds: float = DEFAULT_GAP_SECONDS,
    broker_label: str | None = None,
    liveness_bound: float | None = None,
) -> tuple[list[ViolationRow], list[ConnectionRow]]:
    """Check every connection among one 4-tuple's (segment, snaplen-cut) pairs in capture
    order. Violations carry the core's signature; defects stay on the connection row."""
    violations: list[ViolationRow] = []
    connections: list[ConnectionRow] = []
    defects = _Defects()
    for key, info, items in _items(source, segments, gap_seconds, defects):
        row = ConnectionRow(
            source,
            key,
            info.client,
            info.server,
            info.start_time,
            info.end_time if info.end_time is not None else info.start_time,
            bytes_client=info.byte_counts.get(CLIENT, 0),
            bytes_server=info.byte_counts.get(SERVER, 0),
        )
        violations.extend(check_connection(items, row, broker_label, liveness_bound))
        if row.verdict == "UNCHECKED":
            defects.add("start-not-captured")
        connections.append(row)
    defects.finish()
    if connections:  # segment-level defects belong to the 4-tuple: put them on its first row
        for name, count in defects.counts.items():
            connections[0].defects[name] = connections[0].defects.get(name, 0) + count
    return violations, connections


def _violation_row(
    source: str, key: str, finding: Any, tracker: _Tracker, row: ConnectionRow
) -> ViolationRow:
    violation = finding.violation
    index = finding.frame_index
    if index is not None and 0 <= index < len(tracker.info):
        name, state, channel, handle, time = tracker.info[index]
    else:  # found at the end of the trace (liveness, unanswered close)
        name, state, channel, handle, time = "end", "opened", None, None, row.end_time
        if tracker.closed[violation.origin]:
            state = "close-sent"
    return ViolationRow(
        source,
        key,
        index,
        time,
        violation.rule_id,
        violation.section,
        violation.level,
        violation.origin,
        name,
        channel,
        handle,
        violation.reason,
        signature(violation.rule_id, violation.section, name, state),
        row.broker_product,
        row.broker_version,
    )


def segments_of(batches: Iterable[Any]) -> Iterator[tuple[TcpSegment, bool]]:
    """(TcpSegment, snaplen-cut) pairs from Arrow batches of traces.pcap_vector's schema."""
    for batch in batches:
        columns = batch.to_pydict()
        for time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, payload, cut in zip(
            columns["time_ns"],
            columns["src_ip"],
            columns["src_port"],
            columns["dst_ip"],
            columns["dst_port"],
            columns["seq"],
            columns["ack"],
            columns["flags"],
            columns["payload"],
            columns["truncated"],
        ):
            yield (
                TcpSegment(
                    time_ns / 1e9, (src_ip, src_port), (dst_ip, dst_port), seq, ack, flags, payload
                ),
                cut,
            )


__all__ = [
    "ConnectionRow",
    "ViolationRow",
    "check_connection",
    "check_flow",
    "connection_key",
    "items_of",
    "segments_of",
    "signatures_of_items",
]
