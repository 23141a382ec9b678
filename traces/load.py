"""Open any trace file: pcap, pcapng or Parquet frame log -> TraceItems + connections.

Owns: `open_trace(path)` (format detection by magic bytes) and `TraceError` (the one
error a CLI reports as "unreadable input").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from amqpspec.amqp10.monitor import TraceItem
from amqpspec.traces.framelog import read_connections, read_frame_log
from amqpspec.traces.model import ConnectionInfo
from amqpspec.traces.pcap_format import CaptureFormatError
from amqpspec.traces.pcap_reader import capture_kind
from amqpspec.traces.reassembly import AMQP_PORTS, PcapTraceReader


class TraceError(Exception):
    """A trace file that cannot be read."""


class Trace:
    """The items of one trace file; `connections` is complete once iterated."""

    def __init__(self, path: str, ports: Iterable[int] = AMQP_PORTS) -> None:
        self.path = path
        try:
            with open(path, "rb") as file:
                head = file.read(4)
        except OSError as exc:
            raise TraceError(f"{path}: {exc.strerror or exc}") from None
        if head == b"PAR1":
            self.format = "parquet"
            try:
                self.connections: dict[int, ConnectionInfo] = read_connections(path)
            except Exception as exc:
                raise TraceError(f"{path}: not a readable Parquet frame log ({exc})") from None
            self._reader = None
        elif capture_kind(head) is not None:
            self.format = capture_kind(head) or "pcap"
            self._reader = PcapTraceReader(path, ports)
            self.connections = self._reader.connections
        else:
            raise TraceError(f"{path}: not a pcap, pcapng or Parquet frame log")

    def __iter__(self) -> Iterator[TraceItem]:
        try:
            if self._reader is not None:
                yield from self._reader
            else:
                yield from read_frame_log(self.path)
        except (CaptureFormatError, ValueError, OSError) as exc:
            raise TraceError(str(exc)) from None


def open_trace(path: str, ports: Iterable[int] = AMQP_PORTS) -> Trace:
    return Trace(path, ports)
