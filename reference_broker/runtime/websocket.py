"""AMQP over WebSocket: the reference broker's WebSocket listener (`--ws-port`, `--ws-path`).

The OASIS "AMQP WebSocket Binding (WSB) Version 1.0" (Committee Specification 01, 16 August
2016, https://docs.oasis-open.org/amqp-bindmap/amqp-wsb/v1.0/amqp-wsb-v1.0.html; not in the
core specification the suite grades against, docs/websocket.md): the client asks for the
WebSocket subprotocol `amqp` in its opening handshake (Sec-WebSocket-Protocol) and the
server's answer names it; the AMQP byte stream, protocol headers included, travels as the
payload of binary WebSocket messages, with no alignment between AMQP frames and WebSocket
messages (one message may carry part of a frame, or many frames); the connection ends with
the WebSocket close handshake.

Owns: `start_websocket(context, host, port, path)` (an aiohttp server on the broker's loop)
and `_serve` (one WebSocket connection -> one BrokerConnection, the same sans-IO connection
the TCP listener, pump.AmqpProtocol, feeds). An upgrade that does not offer the `amqp`
subprotocol is refused (HTTP 400: no AMQP without it); a text message is answered with the
close code 1003 (RFC 6455 7.4.1: a type of data the endpoint cannot accept). When the
connection ends the WebSocket close handshake is started (close code 1000). The faults
ws-drop-short-messages and ws-close-without-handshake (faults/catalog.py) live here. May touch:
protocol/connection.py through BrokerConnection's entry points; nothing of the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from amqpspec.amqp10.frames import FRAME_HEADER_SIZE

from ..protocol.connection import BrokerConnection
from ..protocol.context import BrokerContext

log = logging.getLogger("reference_broker.websocket")

SUBPROTOCOL = "amqp"  # WSB 2.1: the subprotocol name of the binding
DEFAULT_PATH = "/"
# ws-drop-short-messages: a message shorter than this is dropped (a broker that takes each
# WebSocket message for the start of a frame: no frame header, no frame); the protocol
# header and a frame header are both 8 bytes long
MAX_MESSAGE = 4 * 1024 * 1024  # one WebSocket message at most (aiohttp's max_msg_size)


async def start_websocket(
    context: BrokerContext,
    host: str,
    port: int,
    path: str = DEFAULT_PATH,
    tls: ssl.SSLContext | None = None,
) -> tuple[web.AppRunner, int]:
    """Serve AMQP over WebSocket on host:port at `path` (wss:// with `tls`); (the runner to
    clean up, the bound port)."""
    app = web.Application()
    app.router.add_get(path, lambda request: _serve(context, request))
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=tls)
    await site.start()
    server = site._server  # aiohttp keeps the asyncio server here; its socket has the port
    bound = server.sockets[0].getsockname()[1] if server is not None else port
    return runner, bound


async def _serve(context: BrokerContext, request: web.Request) -> web.StreamResponse:
    ws = web.WebSocketResponse(protocols=(SUBPROTOCOL,), max_msg_size=MAX_MESSAGE)
    ready = ws.can_prepare(request)
    if not ready.ok:
        return web.Response(status=400, text="a WebSocket upgrade is needed (subprotocol amqp)")
    if ready.protocol != SUBPROTOCOL:
        # WSB 2.1: AMQP is spoken only under the subprotocol `amqp`; an upgrade without it
        # is refused rather than accepted with no subprotocol
        return web.Response(status=400, text="the WebSocket subprotocol amqp is required")
    await ws.prepare(request)
    outgoing: asyncio.Queue[bytes | None] = asyncio.Queue()
    peer = request.transport.get_extra_info("peername") if request.transport else None
    local = request.transport.get_extra_info("sockname") if request.transport else None
    connection = BrokerConnection(
        context,
        outgoing.put_nowait,  # written in order by the writer task, one message per write
        lambda: outgoing.put_nowait(None),
        tuple((peer or ("?", 0))[:2]),  # type: ignore[arg-type]
        tuple((local or ("?", 0))[:2]),  # type: ignore[arg-type]
        connected_at=time.time(),
    )
    drop = None
    if context.faults.ws_close_without_handshake and request.transport is not None:
        drop = request.transport.close  # the TCP connection closed, no WebSocket close frame
    writer = asyncio.create_task(_write(ws, outgoing, drop))
    faults = context.faults
    try:
        while True:
            message = await _next_message(ws, writer)
            if message is None:  # the broker's side is done: the close handshake, from here
                if drop is None:
                    with contextlib.suppress(Exception):
                        await ws.close()
                break
            if message.type == WSMsgType.BINARY:
                data: bytes = message.data
                if faults.ws_drop_short_messages and len(data) < FRAME_HEADER_SIZE:
                    continue
                now = context.scheduler.now()
                if context.alarms is not None:
                    context.alarms.bytes_received(len(data), now)
                connection.receive_data(data, now)
            elif message.type == WSMsgType.TEXT:
                # WSB: AMQP travels in binary messages only; RFC 6455 7.4.1 code 1003
                await ws.close(code=WSCloseCode.UNSUPPORTED_DATA, message=b"binary only")
                break
            else:  # the peer's close (answered by aiohttp), or an error
                break
    finally:
        connection.transport_lost(context.scheduler.now())
        outgoing.put_nowait(None)
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(writer, 2)
        writer.cancel()
    return ws


async def _next_message(ws: web.WebSocketResponse, writer: asyncio.Task[None]) -> Any:
    """The peer's next message, or None once the writer is done (the broker closed the
    connection). The close handshake is then started by this, the reading task, with no
    receive() pending: aiohttp's close() from another task while one is would close the
    TCP connection right after its close frame, before the peer's answer, and the peer's
    answer arriving at a closed socket can reset the connection, its close frame unread."""
    receiving = asyncio.ensure_future(ws.receive())
    done, _ = await asyncio.wait({receiving, writer}, return_when=asyncio.FIRST_COMPLETED)
    if receiving in done:
        return receiving.result()
    receiving.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await receiving
    return None


async def _write(
    ws: web.WebSocketResponse,
    outgoing: asyncio.Queue[bytes | None],
    drop: Callable[[], object] | None = None,
) -> None:
    """The broker's bytes as binary messages, in order, until None (the connection is
    over: the reading task then starts the WebSocket close handshake, WSB: the connection
    ends with it), or `drop()` instead under the fault ws-close-without-handshake."""
    while True:
        data = await outgoing.get()
        if data is None:
            break
        chunks = [data]
        while not outgoing.empty():  # what the broker wrote meanwhile goes in one message
            more = outgoing.get_nowait()
            if more is None:
                outgoing.put_nowait(None)
                break
            chunks.append(more)
        try:
            await ws.send_bytes(b"".join(chunks))
        except (ConnectionError, RuntimeError):
            return
    if drop is not None:
        drop()
