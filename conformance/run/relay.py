"""A recording TCP relay, so cases can judge a real client library's traffic (python-qpid-proton).

Owns: `Relay` — listens on 127.0.0.1 (ephemeral port), accepts one client connection,
connects it to the broker and copies bytes both ways in a background thread, recording
every chunk like a `Probe` does (through the broker-judging connection monitor) into a
`Recording` the runner renders, checks and writes as pcap. Never parses or
builds AMQP itself. Stops (closing both sockets) on `disconnect()`, at the deadline, or
when either side closes.
"""

from __future__ import annotations

import itertools
import select
import socket
import threading
import time

from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.conformance.probe import Chunk, Recording, broker_monitor

_relay_ids = itertools.count(10001)


class Relay:
    """One recorded client connection through to the broker (the Probe-like interface the
    runner needs: recording, violations, closed, conn=None, disconnect())."""

    conn = None

    def __init__(self, host: str, port: int, deadline: float) -> None:
        self.upstream = (host, port)
        self.deadline = deadline
        self.recording = Recording(next(_relay_ids))
        self.monitor = broker_monitor(self.recording)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.closed = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name="amqpspec-relay", daemon=True)
        self._thread.start()

    @property
    def violations(self) -> list[Violation]:
        return self.recording.violations

    def _record(self, direction: str, data: bytes) -> None:
        now = time.time()
        with self._lock:
            self.recording.chunks.append(Chunk(direction, data, now))
            self.recording.add(self.monitor.feed(direction, data, now))

    def _run(self) -> None:
        self.listener.settimeout(0.2)
        client = None
        while client is None and not self._stop.is_set() and time.monotonic() < self.deadline:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
        if client is None:
            return
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        local, remote = server.getsockname(), server.getpeername()
        self.recording.client = f"{local[0]}:{local[1]}"
        self.recording.server = f"{remote[0]}:{remote[1]}"
        self.recording.start = time.time()
        self._pump(client, server)

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peers = {client: (server, CLIENT), server: (client, SERVER)}
        try:
            while not self._stop.is_set() and time.monotonic() < self.deadline:
                readable, _, _ = select.select(list(peers), [], [], 0.2)
                for sock in readable:
                    data = sock.recv(262144)
                    if not data:
                        return
                    other, direction = peers[sock]
                    self._record(direction, data)
                    other.sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                self.recording.end = time.time()
                self.recording.add(self.monitor.finish())
            self.closed = True
            client.close()
            server.close()

    def disconnect(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()
        self.closed = True
