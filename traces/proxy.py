"""Recording proxy: relay AMQP connections byte for byte and record them.

Owns: `RecordingProxy` (asyncio, uvloop when installed). Each accepted connection gets
an upstream connection; every chunk read from one side is written to the other side in
the same callback, before anything else happens (no added buffering, no reframing),
then handed to the recording queue. The queue is bounded (16 MiB): above it the
proxy pauses reading from the sockets that feed it until the recorder catches up, so
memory stays bounded and a slow disk slows the pair instead of dropping bytes.
Half-closes are passed on (write_eof), unless `close_on_eof` (either side's EOF closes
the pair); `max_connections` stops listening after that many clients. Stop with `stop()`
(or SIGINT/SIGTERM from the CLI): connections are closed, the queue drained and every
file closed. Its users: `amqpspec capture` (traces/capture_cli.py, a `Recorder`) and the
conformance run's relay for real client libraries (conformance/run/relay.py, one
connection recorded into a probe `Recording`); anything with the `RecordSink` methods
can record.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from dataclasses import KW_ONLY, dataclass
from typing import Protocol

from amqpspec.amqp10.origins import CLIENT, SERVER

READ_CHUNK = 256 * 1024
QUEUE_HIGH_WATER = 16 * 1024 * 1024  # queued bytes before reading is paused
QUEUE_LOW_WATER = 4 * 1024 * 1024
FLUSH_INTERVAL = 1.0
RECORD_INTERVAL = 0.005  # record in batches: no extra loop wake-up per relayed chunk
RECORD_BATCH = 256  # ... unless this many chunks are waiting
RECORD_BATCH_BYTES = 1024 * 1024  # ... or this many bytes


class RecordSink(Protocol):
    """What the proxy records into (traces.recorder.Recorder is one), called from the
    proxy's event loop only, in the order the events happened."""

    def open_connection(self, connection_id: int, client: str, server: str, time: float) -> None:
        """Upstream is connected: `client` and `server` are the real `host:port`s."""

    def data(self, connection_id: int, direction: str, chunk: bytes, time: float) -> None:
        """One chunk, already relayed, sent by `direction` (CLIENT or SERVER)."""

    def close_connection(self, connection_id: int, time: float, closer: str = CLIENT) -> None:
        """The pair is closed; `closer` closed first."""

    def flush(self) -> None:
        """About once a second while the proxy runs."""

    def close(self, time: float) -> None:
        """The proxy stopped: every connection was closed and recorded."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when installed, else asyncio's."""
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _endpoint(address: tuple) -> str:
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Side(asyncio.Protocol):
    """One socket of a relayed pair."""

    def __init__(self, pair: _Pair, direction: str) -> None:
        self.pair = pair
        self.direction = direction  # who sends what this socket reads
        self.transport: asyncio.Transport | None = None
        self.eof = False
        self.paused_for: set[str] = set()  # "peer" (its write buffer), "queue", "upstream"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.direction == CLIENT:
            self.pause_reading("upstream")  # until the upstream connection is up
            asyncio.get_running_loop().create_task(self.pair.proxy.connect_upstream(self.pair))
        else:
            self.pair.opened()

    def data_received(self, data: bytes) -> None:
        self.pair.relay(self, data)

    def eof_received(self) -> bool:
        self.eof = True
        if self.pair.proxy.close_on_eof:
            self.pair.lost(self)
            return False
        self.pair.half_close(self)
        return True  # keep our write side open until the peer is done

    def connection_lost(self, exc: Exception | None) -> None:
        self.pair.lost(self)

    # flow control from the peer socket's write buffer
    def pause_writing(self) -> None:
        self.pair.peer_of(self).pause_reading("peer")

    def resume_writing(self) -> None:
        self.pair.peer_of(self).resume_reading("peer")

    def pause_reading(self, reason: str) -> None:
        """Stop reading until every reason given is withdrawn (bounded memory)."""
        self.paused_for.add(reason)
        if self.transport is not None and not self.transport.is_closing():
            with contextlib.suppress(RuntimeError):
                self.transport.pause_reading()

    def resume_reading(self, reason: str) -> None:
        if reason not in self.paused_for:
            return
        self.paused_for.discard(reason)
        if not self.paused_for and self.transport is not None and not self.transport.is_closing():
            with contextlib.suppress(RuntimeError):
                self.transport.resume_reading()


class _Pair:
    def __init__(self, proxy: RecordingProxy, connection_id: int) -> None:
        self.proxy = proxy
        self.connection_id = connection_id
        self.client = _Side(self, CLIENT)
        self.upstream = _Side(self, SERVER)
        self.closed = False
        self.closer: str | None = None
        self.upstream_ready = False
        # client bytes that arrived before the upstream connection was up (some event
        # loops deliver data before a pause_reading() made in connection_made applies)
        self.early: list[bytes] = []
        self.early_eof = False

    def opened(self) -> None:
        """Upstream is connected: record the connection before any byte of it."""
        client = self.client.transport.get_extra_info("peername")  # type: ignore[union-attr]
        server = self.upstream.transport.get_extra_info("peername")  # type: ignore[union-attr]
        now = time.time()
        self.proxy.enqueue(("open", self.connection_id, _endpoint(client), _endpoint(server), now))
        self.upstream_ready = True
        early, self.early = self.early, []
        for data in early:  # stamped when relayed, now: never before the connection's start
            self.upstream.transport.write(data)  # type: ignore[union-attr]
            self.proxy.enqueue(("data", self.connection_id, CLIENT, data, now))
        if self.early_eof:
            self.half_close(self.client)

    def peer_of(self, side: _Side) -> _Side:
        return self.upstream if side is self.client else self.client

    def relay(self, side: _Side, data: bytes) -> None:
        if not self.upstream_ready:
            self.early.append(data)
            side.pause_reading("upstream")
            return
        peer = self.peer_of(side)
        if peer.transport is not None and not peer.transport.is_closing():
            peer.transport.write(data)  # first: the peer gets the bytes now
        self.proxy.enqueue(("data", self.connection_id, side.direction, data, time.time()), side)

    def half_close(self, side: _Side) -> None:
        if not self.upstream_ready:
            self.early_eof = True  # passed on once the early bytes are written
            return
        if self.closer is None:
            self.closer = side.direction
        peer = self.peer_of(side)
        if peer.transport is not None and not peer.transport.is_closing():
            if peer.transport.can_write_eof():
                peer.transport.write_eof()
            else:
                peer.transport.close()
        if peer.eof:
            self.close()

    def lost(self, side: _Side) -> None:
        if self.closer is None:
            self.closer = side.direction
        self.close()

    def close(self) -> None:
        for side in (self.client, self.upstream):
            if side.transport is not None and not side.transport.is_closing():
                side.transport.close()
        if not self.closed:
            self.closed = True
            self.proxy.pairs.pop(self.connection_id, None)
            self.proxy.enqueue(("close", self.connection_id, self.closer or CLIENT, time.time()))


@dataclass(eq=False)
class RecordingProxy:
    """Listens on (listen_host, listen_port) and relays each client to (upstream_host,
    upstream_port), recording both directions into `recorder`."""

    listen_host: str
    listen_port: int
    upstream_host: str
    upstream_port: int
    recorder: RecordSink
    _: KW_ONLY
    max_connections: int | None = None
    close_on_eof: bool = False

    def __post_init__(self) -> None:
        self.pairs: dict[int, _Pair] = {}
        self._next_id = 1
        self._queue: deque[tuple] = deque()
        self.queued_bytes = 0
        self._paused: set[_Side] = set()
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None
        self.bound: tuple[str, int] | None = None

    # -- queue ------------------------------------------------------------------------
    def enqueue(self, event: tuple, source: _Side | None = None) -> None:
        self._queue.append(event)
        if event[0] == "data":
            self.queued_bytes += len(event[3])
        if (
            len(self._queue) >= RECORD_BATCH
            or self.queued_bytes >= RECORD_BATCH_BYTES
            or event[0] != "data"
        ):
            self._wakeup.set()
        if source is not None and self.queued_bytes >= QUEUE_HIGH_WATER:
            source.pause_reading("queue")
            self._paused.add(source)

    def _drain_queue(self, limit: int | None = None) -> None:
        recorder = self.recorder
        queue = self._queue
        done = 0
        while queue and (limit is None or done < limit):
            event = queue.popleft()
            done += 1
            kind = event[0]
            if kind == "data":
                self.queued_bytes -= len(event[3])
                recorder.data(event[1], event[2], event[3], event[4])
            elif kind == "open":
                recorder.open_connection(event[1], event[2], event[3], event[4])
            elif kind == "close":
                recorder.close_connection(event[1], event[3], event[2])
        if self._paused and self.queued_bytes <= QUEUE_LOW_WATER:
            paused, self._paused = self._paused, set()
            for side in paused:
                side.resume_reading("queue")

    async def _record_loop(self) -> None:
        last_flush = time.monotonic()
        while True:
            if not self._queue:
                try:
                    await asyncio.wait_for(self._wakeup.wait(), FLUSH_INTERVAL)
                except TimeoutError:
                    pass
            elif not self._wakeup.is_set():
                # chunks are waiting: give the relays a few ms to add more, then record
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), RECORD_INTERVAL)
            self._wakeup.clear()
            while self._queue:
                self._drain_queue(limit=RECORD_BATCH)
                await asyncio.sleep(0)  # let the relays run between batches
            if time.monotonic() - last_flush >= FLUSH_INTERVAL:
                self.recorder.flush()
                last_flush = time.monotonic()
            if self._stopping.is_set() and not self._queue:
                return

    # -- connections ------------------------------------------------------------------
    def _accept(self) -> asyncio.Protocol:
        connection_id = self._next_id
        self._next_id += 1
        if self.max_connections is not None and connection_id >= self.max_connections:
            asyncio.get_running_loop().call_soon(self._server.close)  # type: ignore[union-attr]
        pair = _Pair(self, connection_id)
        self.pairs[connection_id] = pair
        return pair.client

    async def connect_upstream(self, pair: _Pair) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(
                lambda: pair.upstream, self.upstream_host, self.upstream_port
            )
        except OSError:
            if pair.client.transport is not None:
                pair.client.transport.close()
            self.pairs.pop(pair.connection_id, None)
            pair.closed = True
            return
        if pair.client.transport is not None and not pair.client.transport.is_closing():
            pair.client.resume_reading("upstream")
        else:
            pair.close()

    async def run(self, ready: asyncio.Future | None = None) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._accept, self.listen_host, self.listen_port, reuse_address=True
        )
        sockname = self._server.sockets[0].getsockname()
        self.bound = (sockname[0], sockname[1])
        if ready is not None and not ready.done():
            ready.set_result(self.bound)
        recording = asyncio.create_task(self._record_loop())
        await self._stopping.wait()
        self._server.close()
        for pair in list(self.pairs.values()):
            pair.close()
        await asyncio.sleep(0)
        self._wakeup.set()
        await recording
        self._drain_queue()
        self.recorder.close(time.time())

    def stop(self) -> None:
        self._stopping.set()
        self._wakeup.set()
