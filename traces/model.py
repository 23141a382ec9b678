"""Connection records shared by every reader and writer in `traces/`.

Owns: `ConnectionInfo` (who the two ends of one recorded connection were, when, and how
many bytes each sent). The items themselves are `amqp10.monitor.TraceItem`s and the
directions are the core's origins, `amqp10.origins.CLIENT` (the connection initiator)
and `SERVER` (the peer it connected to).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amqpspec.amqp10.origins import CLIENT, SERVER


@dataclass(slots=True)
class ConnectionInfo:
    """The two ends of one recorded connection ('host:port' strings)."""

    connection_id: int
    client: str
    server: str
    start_time: float = 0.0
    end_time: float | None = None
    byte_counts: dict[str, int] = field(default_factory=lambda: {CLIENT: 0, SERVER: 0})
    # capture defects met reassembling it, by name (traces/tcp_stream.py): pcaps only
    defects: dict[str, int] = field(default_factory=dict)
