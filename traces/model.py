"""Trace records shared by every reader and writer in `traces/`.

Owns: `TraceItem` (one protocol header, frame, or run of undecodable raw bytes seen on one
connection in one direction, with its time and per-connection index) and
`ConnectionInfo` (who the two ends were). Directions are named after the checker's
origins: "client" is the connection initiator, "server" the peer it connected to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amqp10.frames import Frame, ProtocolHeader

CLIENT = "client"
SERVER = "server"
DIRECTIONS = (CLIENT, SERVER)

# TraceItem.kind values
KIND_HEADER = "protocol-header"
KIND_FRAME = "frame"
KIND_RAW = "raw"


def other(direction: str) -> str:
    return SERVER if direction == CLIENT else CLIENT


@dataclass(slots=True)
class TraceItem:
    """One thing that crossed a connection: a header, a frame, or raw undecodable bytes.

    `item` is the decoded ProtocolHeader or Frame, or None for raw bytes; `raw` always holds
    the exact bytes as they were relayed; `time` is POSIX seconds (float) of the segment or
    chunk that completed it; `index` counts items per connection, both directions, from 0.
    """

    connection_id: int
    direction: str
    index: int
    time: float
    item: ProtocolHeader | Frame | None
    raw: bytes

    @property
    def kind(self) -> str:
        if self.item is None:
            return KIND_RAW
        if isinstance(self.item, ProtocolHeader):
            return KIND_HEADER
        return KIND_FRAME

    @property
    def name(self) -> str:
        """'flow', 'empty', 'sasl-init', 'protocol-header' or 'raw'."""
        if isinstance(self.item, Frame):
            return self.item.name
        return self.kind


@dataclass(slots=True)
class ConnectionInfo:
    """The two ends of one recorded connection ('host:port' strings)."""

    connection_id: int
    client: str
    server: str
    start_time: float = 0.0
    end_time: float | None = None
    byte_counts: dict[str, int] = field(default_factory=lambda: {CLIENT: 0, SERVER: 0})
