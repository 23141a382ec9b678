"""One TCP flow's segments -> checked AMQP connections: violation rows and connection rows.

Owns: `check_flow(source, segments)`, the one place triage turns packets into verdicts.
It splits a 4-tuple's segments into connections (a new SYN after data or a finish, see
traces/reassembly.py; a silence longer than `gap_seconds`), reassembles them with
`traces.reassembly.PcapTraceReader`, judges each item as it streams by with the core's
`amqp10.monitor.ConnectionMonitor` (memory per connection is bounded: nothing keeps the
connection's items), names violations with `amqp10.checker.signature`, and counts capture
defects (out-of-order, retransmits, overlaps, conflicting retransmits, sequence wrap,
snap-length cuts, gaps, a start the capture missed) without dropping any of them. Also
`items_of(source, segments)`: the decoded items of every connection, for reproducers.
Pure apart from the iterators it is given; no Spark here (spark_triage/job.py calls it
inside a grouped UDF), so it is tested and reused without a cluster.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.checker.signature import CLOSE_SENT, OPENED, endpoint_state, signature
from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.monitor import KIND_RAW, ConnectionMonitor, TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.traces.pcap_reader import TcpSegment
from amqpspec.traces.reassembly import PcapTraceReader, format_endpoint

DEFAULT_GAP_SECONDS = 600.0
_RECENT_ITEMS = 65536  # items remembered per connection to name a violation's frame
_BATCH_ITEMS = 256  # items reassembled before they are judged, at most (and _BATCH_BYTES)
_BATCH_BYTES = 1 << 20
_YOUNG_GC_THRESHOLD = 10_000  # allocations between young-generation collections in a check


@contextlib.contextmanager
def _young_collections_spaced() -> Iterator[None]:
    """A check allocates frames, items and events that die young and hold no cycles;
    CPython collects its young generation every 700 allocations by default, which cost
    about 8 % of a check (bench/triage_bench.py check). Space those collections out while
    a flow is checked and restore the caller's thresholds after (older generations and
    cyclic garbage are still collected, only less often)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _YOUNG_GC_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


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
    """The capture defects of one 4-tuple: what its connections' sequence trackers counted
    (traces/tcp_stream.py: out-of-order, retransmits, overlaps, conflicting retransmits,
    sequence wrap, gaps), plus the snap-length cuts seen here and the connections whose
    start the capture missed."""

    __slots__ = ("counts", "cuts")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.cuts: list[float] = []  # capture times of the snap-length-cut segments

    def add(self, name: str, count: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + count

    def cut(self, segment: TcpSegment) -> None:
        self.add("snaplen-truncated")
        self.cuts.append(segment.time)

    def merge(self, counts: dict[str, int]) -> None:
        for name, count in counts.items():
            self.add(name, count)


class _Tracker:
    """Per connection: the sending endpoint's state and what the most recent items were
    (a bounded ring, so a connection of any length needs constant memory here)."""

    __slots__ = (
        "closed",
        "frames",
        "last_decoded",
        "opened",
        "product",
        "recent",
        "state",
        "version",
    )

    def __init__(self) -> None:
        # item index % _RECENT_ITEMS -> (index, performative, state, channel, handle, time)
        self.recent: list[tuple | None] = [None] * _RECENT_ITEMS
        self.opened = {CLIENT: False, SERVER: False}
        self.closed = {CLIENT: False, SERVER: False}
        self.state = {CLIENT: endpoint_state(False, False), SERVER: endpoint_state(False, False)}
        self.last_decoded: dict[str, float] = {}  # direction -> time of its last decoded item
        self.product: str | None = None
        self.version: str | None = None
        self.frames = 0

    def see(self, item: TraceItem) -> None:
        direction = item.direction
        decoded = item.item
        state = self.state[direction]
        channel = handle = None
        if decoded is None:
            name = KIND_RAW
        else:
            self.last_decoded[direction] = item.time
            if isinstance(decoded, Frame):
                self.frames += 1
                name = decoded.name
                channel = decoded.channel
                performative = decoded.performative
                handle = getattr(performative, "handle", None)
                if name == "open":
                    self._open(direction, performative)
                elif name == "close":
                    self.closed[direction] = True
                    self.state[direction] = endpoint_state(self.opened[direction], True)
            else:
                name = item.kind
        index = item.index
        self.recent[index % _RECENT_ITEMS] = (index, name, state, channel, handle, item.time)

    def _open(self, direction: str, performative: Any) -> None:
        self.opened[direction] = True
        self.state[direction] = endpoint_state(True, self.closed[direction])
        if direction != CLIENT:
            properties = getattr(performative, "properties", None) or {}
            self.product = _text(properties.get("product"))
            self.version = _text(properties.get("version"))

    def at(self, index: int | None) -> tuple[str, str, int | None, int | None, float] | None:
        """(performative, sender state, channel, handle, time) of one of the last
        `_RECENT_ITEMS` items, else None."""
        if index is None:
            return None
        found = self.recent[index % _RECENT_ITEMS]
        return found[1:] if found is not None and found[0] == index else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _runs(
    segments: Iterable[tuple[TcpSegment, bool]], gap_seconds: float, defects: _Defects
) -> Iterator[tuple[list[tuple], Iterator[TcpSegment]]]:
    """Runs of segments separated by a silence longer than `gap_seconds`, lazily: (the
    run's ends, filled at its first segment; its segments, each snap-length cut counted
    by `defects` as it passes). Each run must be consumed before the next is asked for."""
    entries = iter(segments)
    state = [next(entries, None)]  # the first segment of the next run

    def run(ends: list[tuple]) -> Iterator[TcpSegment]:
        segment, truncated = state[0]
        ends.extend((segment.src, segment.dst))
        cut = defects.cut
        while True:
            if truncated:
                cut(segment)
            yield segment
            last = segment.time
            entry = next(entries, None)
            if entry is None or entry[0].time - last > gap_seconds:
                state[0] = entry
                return
            segment, truncated = entry

    while state[0] is not None:
        ends: list[tuple] = []
        yield ends, run(ends)


def _stream(
    source: str,
    segments: Iterable[tuple[TcpSegment, bool]],
    gap_seconds: float,
    defects: _Defects,
) -> Iterator[tuple[str, Any, list[TraceItem] | None]]:
    """(connection key, ConnectionInfo, items) for the items of one 4-tuple's connections
    as reassembly produces them, a segment's worth at a time (one connection at a time: a
    4-tuple carries one live connection), then (key, info, None) when a connection is
    complete (its sequence defects then merged into `defects`)."""
    epoch = 0
    for ends, run in _runs(segments, gap_seconds, defects):
        reader = PcapTraceReader("")
        current: int | None = None
        done: set[int] = set()

        def complete(upto: int | None, reader=reader, ends=ends, done=done, epoch=epoch):
            for connection_id, info in list(reader.connections.items()):
                if connection_id not in done and (upto is None or connection_id < upto):
                    done.add(connection_id)
                    defects.merge(info.defects)
                    yield _key(source, ends, epoch, connection_id), info, None

        key = info = None
        for batch in _coalesced(reader.batches(run)):
            first = batch[0].connection_id
            if first == batch[-1].connection_id:
                groups: Iterable[tuple[int, list[TraceItem]]] = ((first, batch),)
            else:
                groups = [(i, list(g)) for i, g in itertools.groupby(batch, _connection_id)]
            for connection_id, items in groups:
                if connection_id != current:
                    yield from complete(connection_id)
                    current = connection_id
                    key, info = _key(source, ends, epoch, current), reader.connections[current]
                yield key, info, items
        yield from complete(None)
        epoch += len(reader.connections)


def _coalesced(batches: Iterable[list[TraceItem]]) -> Iterator[list[TraceItem]]:
    """Consecutive batches joined up to `_BATCH_ITEMS` items or `_BATCH_BYTES` bytes: the
    checker then judges a run of items after reassembly decoded them, not one segment's
    worth between two decodes (each stage's code and data stay in the CPU caches)."""
    pending: list[TraceItem] = []
    size = 0
    for batch in batches:
        pending += batch
        for item in batch:
            size += len(item.raw)
        if len(pending) >= _BATCH_ITEMS or size >= _BATCH_BYTES:
            yield pending
            pending = []
            size = 0
    if pending:
        yield pending


def _connection_id(item: TraceItem) -> int:
    return item.connection_id


def _key(source: str, ends: list[tuple], epoch: int, connection_id: int) -> str:
    return connection_key(source, ends[0], ends[1], epoch + connection_id - 1)


def items_of(
    source: str,
    segments: Iterable[tuple[TcpSegment, bool]],
    gap_seconds: float = DEFAULT_GAP_SECONDS,
) -> dict[str, list[TraceItem]]:
    """Connection key -> its decoded items (headers, frames, raw runs) in trace order."""
    found: dict[str, list[TraceItem]] = {}
    for key, _info, batch in _stream(source, segments, gap_seconds, _Defects()):
        items = found.setdefault(key, [])
        if batch is not None:
            items.extend(batch)
    return found


class _Judge:
    """One connection judged as its items stream by: the core's monitor (which owns the
    checker) plus the tracker's bounded ring; memory does not grow with the connection.

    A direction that lost bytes or could not be decoded stalls there, while the other
    went on: the other's frames after the loss would look like violations (answers to
    frames the checker never saw, transfers before the credit that allowed them). So
    violations are held (they are few) and only those found up to the earliest stall are
    kept, none of the end-of-trace ones (what is missing may be the answer a liveness rule
    waits for). A stall is seen two ways: a raw item (a gap never filled, undecodable
    bytes; reassembly emits it only once the connection ends), which stalls its direction
    at that direction's last decoded item, the earliest over every raw item, not the first
    one met; and a snap-length-cut segment (`cut(time)`), which stalls at its capture time
    even when a retransmission later supplies the missing bytes: those bytes are then
    delivered at the retransmission's time, after frames of the other direction that
    followed them on the wire, so the order between the directions is lost from the cut
    on."""

    def __init__(
        self, row: ConnectionRow, broker_label: str | None, liveness_bound: float | None
    ) -> None:
        self.row = row
        self.broker_label = broker_label
        self.monitor = ConnectionMonitor(0, liveness_bound=liveness_bound)
        self.tracker = _Tracker()
        self.held: list[tuple[float, Any, tuple]] = []  # (time found, violation, its frame)
        self.cutoff: float | None = None
        self.last_time = row.start_time

    def add_all(self, items: list[TraceItem]) -> None:
        """Judge a run of items in trace order in one call: the tracker sees them all
        first (its ring keeps `_RECENT_ITEMS`: longer runs go in parts), then the monitor."""
        if len(items) > _RECENT_ITEMS:
            for start in range(0, len(items), _RECENT_ITEMS):
                self.add_all(items[start : start + _RECENT_ITEMS])
            return
        if not items:
            return
        tracker = self.tracker
        see = tracker.see
        for item in items:
            see(item)
            if item.item is None:  # a raw item: its direction stalled at its last decoded
                self.cut(tracker.last_decoded.get(item.direction, float("-inf")))
        for position, out in self.monitor.judge_run(items):
            self._take(out, items[position].time)
        self.last_time = items[-1].time

    def cut(self, time: float) -> None:
        """A direction stalled at `time`: nothing found after it is judged (see above)."""
        self.cutoff = time if self.cutoff is None else min(self.cutoff, time)

    def _take(self, out: Any, time: float | None) -> None:
        for note in out.notes:
            self.row.notes.append(note.text)
            if "mid-connection" in note.text:
                self.row.verdict = "UNCHECKED"
        for violation in out.violations:
            self.held.append((time, violation, self._frame(violation)))

    def _frame(self, violation: Any) -> tuple:
        """(performative, sender state, channel, handle, time) of the violating item."""
        found = self.tracker.at(violation.frame_index)
        if found is not None:
            return found
        closed = self.tracker.closed.get(violation.origin, False)
        return ("end", CLOSE_SENT if closed else OPENED, None, None, self.row.end_time)

    def finish(self) -> list[ViolationRow]:
        row, tracker = self.row, self.tracker
        self._take(self.monitor.finish(self.last_time), None)
        row.frames = tracker.frames
        row.broker_product = tracker.product or self.broker_label
        row.broker_version = tracker.version
        rows: list[ViolationRow] = []
        for time, violation, frame in self.held:
            if self.cutoff is not None and (time is None or time > self.cutoff):
                continue
            name, state, channel, handle, at = frame
            rows.append(
                ViolationRow(
                    row.source,
                    row.connection_key,
                    violation.frame_index,
                    at,
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
            )
            if violation.level == "MUST":
                row.must_violations += 1
            else:
                row.should_violations += 1
        if row.must_violations:
            row.verdict = "MUST"
        elif row.should_violations:
            row.verdict = "SHOULD"
        return rows


def check_connection(
    items: Iterable[TraceItem],
    row: ConnectionRow,
    broker_label: str | None = None,
    liveness_bound: float | None = None,
) -> list[ViolationRow]:
    """Check one connection's items (streamed); fills `row` (frames, verdict, broker,
    notes) and returns its violations with their signatures."""
    judge = _Judge(row, broker_label, liveness_bound)
    stream = iter(items)
    while run := list(itertools.islice(stream, _BATCH_ITEMS)):
        judge.add_all(run)
    return judge.finish()


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
    judge: _Judge | None = None
    with _young_collections_spaced():
        for key, info, batch in _stream(source, segments, gap_seconds, defects):
            if judge is None:
                row = ConnectionRow(source, key, info.client, info.server, info.start_time, 0.0)
                judge = _Judge(row, broker_label, liveness_bound)
            if batch is not None:
                judge.add_all(batch)
                continue
            row = judge.row
            row.end_time = info.end_time if info.end_time is not None else judge.last_time
            for time in defects.cuts:  # this connection's snap-length cuts
                if row.start_time <= time <= row.end_time:
                    judge.cut(time)
            row.bytes_client = info.byte_counts.get(CLIENT, 0)
            row.bytes_server = info.byte_counts.get(SERVER, 0)
            violations.extend(judge.finish())
            if row.verdict == "UNCHECKED":
                defects.add("start-not-captured")
            connections.append(row)
            judge = None
    if connections:  # segment-level defects belong to the 4-tuple: put them on its first row
        for name, count in defects.counts.items():
            connections[0].defects[name] = connections[0].defects.get(name, 0) + count
    return violations, connections


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
