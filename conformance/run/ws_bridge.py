"""A loopback TCP <-> WebSocket bridge: `amqpspec run --broker ws://HOST:PORT/PATH`.

Owns: `WebSocketBridge`, a TCP listener on 127.0.0.1 (its own event loop in a daemon thread)
that opens, for each TCP connection it accepts, one WebSocket connection to the broker's URL
asking for the subprotocol `amqp` (OASIS AMQP WebSocket Binding v1.0, docs/websocket.md) and
carries the bytes both ways unchanged: what the TCP client writes goes out as binary
WebSocket messages, what the broker's binary messages carry is written to the TCP client.
The probe and every case connect to the bridge as to any TCP broker, so the whole suite
runs over WebSocket unchanged; the bridge knows nothing of AMQP (it never parses a byte).

For the binding's own cases (conformance/cases/wsb_websocket.py) a bridge can `split` each
TCP write into WebSocket messages of at most N bytes, or ask for another `subprotocol`.
A WebSocket handshake the broker refuses, or answers without the `amqp` subprotocol, closes
the TCP connection at once (`refusals` counts them, with the reason in `last_refusal`).
`broker_side_port(port)`: the port the broker sees for the TCP client on `port` (a case
that closes its connection through the admin API names it by that port).
A text message from the broker closes both (the binding carries AMQP in binary messages).
`broker_closes`: how the broker ended each WebSocket it ended first (its close code).

    with WebSocketBridge("ws://127.0.0.1:15673/") as bridge:
        Probe("127.0.0.1", bridge.port, ...)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from amqpspec.reference_broker.runtime.loop_thread import Started, run_loop

# the TCP client's port -> the port of the WebSocket connection the broker sees (an admin API
# lists that one), for every bridge of this process
_UPSTREAM_PORTS: dict[int, int] = {}
_PORTS_LOCK = threading.Lock()

SUBPROTOCOL = "amqp"
SCHEMES = ("ws", "wss")
CONNECT_TIMEOUT_S = 5.0
READ_SIZE = 65536


def broker_side_port(client_port: int) -> int:
    """The local port of the WebSocket connection a bridge opened for the TCP client on
    `client_port` (what the broker's admin lists as the peer's port), or `client_port` when
    no bridge carries it."""
    with _PORTS_LOCK:
        return _UPSTREAM_PORTS.get(client_port, client_port)


def websocket_url(url: str) -> str:
    """The URL the bridge connects to: a ws:// or wss:// broker URL without its user
    information (the credentials are SASL's, not HTTP's), with its path ('/' if none)."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError(f"not a WebSocket URL: {url!r}")
    netloc = parts.hostname or "127.0.0.1"
    if ":" in netloc:  # an IPv6 address
        netloc = f"[{netloc}]"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))


class WebSocketBridge:
    def __init__(
        self,
        url: str,
        *,
        split: int | None = None,
        subprotocol: str = SUBPROTOCOL,
        connect_timeout: float = CONNECT_TIMEOUT_S,
    ) -> None:
        if split is not None and split < 1:
            raise ValueError("split must be 1 or more bytes")
        self.url = websocket_url(url)
        self.split = split
        self.subprotocol = subprotocol
        self.connect_timeout = connect_timeout
        self.port = 0
        self.refusals = 0
        self.last_refusal = ""
        self.messages_sent = 0  # binary WebSocket messages written to the broker
        # the close code of each WebSocket the broker ended (before the TCP client did):
        # 1000 after a close handshake, 1006 (abnormal closure) when it dropped the TCP
        self.broker_closes: list[int | None] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._started = Started()
        self._thread = threading.Thread(target=self._run, name="amqpspec-ws-bridge", daemon=True)
        self._tasks: set[asyncio.Task[None]] = set()

    # --- life cycle ---------------------------------------------------------------------
    def start(self) -> WebSocketBridge:
        self._thread.start()
        if not self._started.wait(self.connect_timeout) or self._started.error is not None:
            raise RuntimeError(f"the WebSocket bridge did not start: {self._started.error}")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or not self._thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(5)
        self._thread.join(5)

    def __enter__(self) -> WebSocketBridge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        run_loop(loop, self._listen, loop.run_forever, self._started)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._bridge, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2)
        asyncio.get_running_loop().call_soon(asyncio.get_running_loop().stop)

    # --- one TCP connection <-> one WebSocket connection --------------------------------
    async def _bridge(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                try:
                    ws = await session.ws_connect(
                        self.url,
                        protocols=(self.subprotocol,),
                        autoping=True,
                        max_msg_size=0,
                        timeout=aiohttp.ClientWSTimeout(ws_close=2.0),
                    )
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    self._refused(f"the WebSocket handshake failed: {exc}")
                    return
                async with ws:
                    if ws.protocol != self.subprotocol:
                        self._refused(
                            f"the broker answered the upgrade with subprotocol {ws.protocol!r}"
                        )
                        return
                    client = writer.get_extra_info("peername") or ("", 0)
                    local = ws.get_extra_info("sockname") or ("", 0)
                    with _PORTS_LOCK:
                        _UPSTREAM_PORTS[client[1]] = local[1]
                    upstream = asyncio.create_task(self._upstream(reader, ws))
                    try:
                        await self._downstream(ws, writer)
                        if not upstream.done():  # the broker ended the WebSocket first
                            self.broker_closes.append(ws.close_code)
                    finally:
                        with _PORTS_LOCK:
                            _UPSTREAM_PORTS.pop(client[1], None)
                        upstream.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await upstream
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)
            self._tasks.discard(task)

    def _refused(self, reason: str) -> None:
        self.refusals += 1
        self.last_refusal = reason

    async def _upstream(
        self, reader: asyncio.StreamReader, ws: aiohttp.ClientWebSocketResponse
    ) -> None:
        """TCP client -> broker: each read as one binary message (or `split` pieces); the
        client's EOF starts the WebSocket close handshake."""
        while True:
            data = await reader.read(READ_SIZE)
            if not data:
                await ws.close()
                return
            step = self.split or len(data)
            for start in range(0, len(data), step):
                await ws.send_bytes(data[start : start + step])
                self.messages_sent += 1

    async def _downstream(
        self, ws: aiohttp.ClientWebSocketResponse, writer: asyncio.StreamWriter
    ) -> None:
        """Broker -> TCP client: the payload of each binary message, until the broker
        closes (or sends a text message, which the binding does not use)."""
        async for message in ws:
            if message.type != aiohttp.WSMsgType.BINARY:
                return
            writer.write(message.data)
            await writer.drain()
