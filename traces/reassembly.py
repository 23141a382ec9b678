"""TCP reassembly: capture segments -> per-connection, in-order byte streams -> TraceItems.

Owns: `PcapTraceReader`, which follows every TCP connection of a capture, orders each
direction's bytes with `traces.tcp_stream.HalfStream` (retransmissions and overlaps
trimmed, keeping the bytes seen first; out-of-order segments held until the gap fills,
within a bound; the capture defects met counted on the connection's
`ConnectionInfo.defects`), and feeds them to an `amqp10.monitor.ConnectionMonitor` that
only decodes (`check=False`): one that saw the SYN expects protocol headers, any other
sniffs where its streams start. The client is the side that sent the first SYN; for
a connection whose start was not captured, the side talking to a known AMQP port, else
the first to send. A gap that never fills turns the rest of that direction into raw
items. A SYN on a finished 4-tuple starts a new connection.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator

from amqpspec.amqp10.monitor import DEFAULT_MAX_FRAME_SIZE, ConnectionMonitor, TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.traces.model import ConnectionInfo
from amqpspec.traces.pcap_format import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN
from amqpspec.traces.pcap_reader import TcpSegment, iter_tcp_segments
from amqpspec.traces.tcp_stream import LOST, HalfStream

AMQP_PORTS = frozenset((5672, 5671))


def format_endpoint(endpoint: tuple[bytes, int]) -> str:
    address = ipaddress.ip_address(endpoint[0])
    host = str(address) if address.version == 4 else f"[{address}]"
    return f"{host}:{endpoint[1]}"


class _Connection:
    __slots__ = ("client", "finished", "halves", "info", "monitor", "saw_syn", "started")

    def __init__(self, info: ConnectionInfo, client: tuple[bytes, int]) -> None:
        self.info = info
        self.client = client
        self.monitor: ConnectionMonitor | None = None  # made at the first payload
        self.halves = {CLIENT: HalfStream(info.defects), SERVER: HalfStream(info.defects)}
        self.finished = False
        self.started = False
        self.saw_syn = False


class PcapTraceReader:
    """Iterate a capture's AMQP items, connection by connection, in capture order.

    `ports`: server ports to treat as AMQP even without a protocol header at the start
    (captures that begin mid-connection); `only_ports=True` ignores every other flow.
    `connections` fills in as connections are met.
    """

    def __init__(
        self,
        path: str,
        ports: Iterable[int] = AMQP_PORTS,
        only_ports: bool = False,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.path = path
        self.ports = frozenset(ports)
        self.only_ports = only_ports
        self.max_frame_size = max_frame_size
        self.connections: dict[int, ConnectionInfo] = {}
        self._by_key: dict[tuple, _Connection] = {}
        self._last_time = 0.0

    def __iter__(self) -> Iterator[TraceItem]:
        return self.items(iter_tcp_segments(self.path))

    def items(self, segments: Iterable[TcpSegment]) -> Iterator[TraceItem]:
        for batch in self.batches(segments):
            yield from batch

    def batches(self, segments: Iterable[TcpSegment]) -> Iterator[list[TraceItem]]:
        """The items of `items()`, as the non-empty list each segment completed (then each
        connection's end): one step per segment instead of per item, for callers that
        judge a segment's frames in one call."""
        segment_items = self._segment
        for segment in segments:
            self._last_time = segment.time
            found = segment_items(segment)
            if found:
                yield found
        for connection in self._by_key.values():
            found = self._finish(connection, self._last_time)
            if found:
                yield found
        self._by_key.clear()

    # -- per segment ------------------------------------------------------------------
    def _segment(self, segment: TcpSegment) -> list[TraceItem]:
        src, dst = segment.src, segment.dst
        key = (src, dst) if src < dst else (dst, src)
        connection = self._by_key.get(key)
        flags = segment.flags
        is_syn = flags & TCP_SYN and not flags & TCP_ACK
        items: list[TraceItem] = []
        if connection is not None and is_syn and (connection.finished or connection.started):
            items.extend(self._finish(connection, segment.time))
            connection = None
        if connection is None:
            if self.only_ports and src[1] not in self.ports and dst[1] not in self.ports:
                return items
            if is_syn or dst[1] in self.ports or (src[1] not in self.ports and segment.payload):
                client, server = src, dst
            elif src[1] in self.ports:
                client, server = dst, src
            else:
                return items  # a bare ACK of a connection we did not see start
            info = ConnectionInfo(
                len(self.connections) + 1,
                format_endpoint(client),
                format_endpoint(server),
                segment.time,
            )
            connection = _Connection(info, client)
            self._by_key[key] = connection
            self.connections[info.connection_id] = info
        direction = CLIENT if src == connection.client else SERVER
        half = connection.halves[direction]
        if flags & TCP_SYN:
            connection.saw_syn = True
            half.syn(segment.seq)
            return items
        payload = segment.payload
        if payload:
            chunks = half.accept(segment.seq, payload, segment.time)
            if chunks:
                items.extend(self._deliver(connection, direction, chunks))
        if flags & (TCP_FIN | TCP_RST):
            half.fin = True
            if flags & TCP_RST or connection.halves[CLIENT if direction == SERVER else SERVER].fin:
                connection.finished = True
                connection.info.end_time = segment.time
        return items

    def _monitor(self, connection: _Connection) -> ConnectionMonitor:
        if connection.monitor is None:
            connection.monitor = ConnectionMonitor(
                connection.info.connection_id,
                expect_header=True if connection.saw_syn else None,
                max_frame_size=self.max_frame_size,
                check=False,
            )
        return connection.monitor

    def _deliver(
        self, connection: _Connection, direction: str, chunks: list[tuple[bytes | None, float]]
    ) -> list[TraceItem]:
        """Feed in-order chunks to the connection's monitor; a LOST chunk (a capture gap)
        makes the rest of that direction raw."""
        monitor = self._monitor(connection)
        counts = connection.info.byte_counts
        items: list[TraceItem] = []
        for payload, time in chunks:
            if payload is LOST:
                items.extend(monitor.lose(direction, time).items)
                continue
            connection.started = True
            counts[direction] += len(payload)
            items.extend(monitor.feed(direction, payload, time).items)
        return items

    def _finish(self, connection: _Connection, time: float) -> list[TraceItem]:
        items: list[TraceItem] = []
        for direction, half in connection.halves.items():
            if half.held:
                items.extend(self._deliver(connection, direction, half.finish(time)))
        if connection.monitor is not None:
            items.extend(connection.monitor.finish(time).items)
        if connection.info.end_time is None:
            connection.info.end_time = time
        return items
