"""An in-memory client/server pair (h11's ConnectionPair idea) for tests and fuzzers.

Owns: moving bytes between two Connections, in any chunk size, and collecting their
events. No sockets, no clock: `now` is whatever the caller says.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.engine.connection import Connection
from amqpspec.amqp10.engine.events import Event


class ConnectionPair:
    """`pump()` carries bytes both ways until neither side has anything to send."""

    def __init__(
        self,
        client: Connection | None = None,
        server: Connection | None = None,
        *,
        chunk_size: int | None = None,
        **common: Any,
    ) -> None:
        self.client = client or Connection("client", "client", **common)
        self.server = server or Connection("server", "server", **common)
        self.chunk_size = chunk_size
        self.now = 0.0
        self.client_events: list[Event] = []
        self.server_events: list[Event] = []
        self.wire: list[tuple[str, bytes]] = []  # ("c>s" | "s>c", bytes) in order

    def pump(self, now: float | None = None, max_rounds: int = 1000) -> None:
        if now is not None:
            self.now = now
        for _ in range(max_rounds):
            moved = self._move(self.client, self.server, "c>s")
            moved |= self._move(self.server, self.client, "s>c")
            self._collect()
            if not moved:
                return
        raise RuntimeError("the pair kept talking for max_rounds")

    def _move(self, source: Connection, sink: Connection, direction: str) -> bool:
        data = source.data_to_send(self.now)
        if not data:
            return False
        self.wire.append((direction, data))
        step = self.chunk_size or len(data)
        for start in range(0, len(data), step):
            sink.receive_data(data[start : start + step], self.now)
        return True

    def _collect(self) -> None:
        self.client_events.extend(self.client.events())
        self.server_events.extend(self.server.events())

    def take(self, side: str) -> list[Event]:
        """The events collected on 'client' or 'server' since the last take()."""
        self._collect()
        events = self.client_events if side == "client" else self.server_events
        taken = list(events)
        events.clear()
        return taken

    def open(self) -> None:
        """Both sides open (the server answers the client's open)."""
        self.client.open()
        self.pump()
        if not self.server.open_requested:
            self.server.open()
        self.pump()
