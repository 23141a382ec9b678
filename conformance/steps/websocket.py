"""Steps of the WebSocket binding's cases (conformance/cases/s2_1_websocket.py).

Owns: `websocket_url(ctx)` (the run's ws:// URL, or the ws listener the admin API lists in
a run over TCP, or UNSUPPORTED),
`bridged_probe(ctx, split=..., pipelined=...)` (a probe through a WebSocket bridge of the
case's own, conformance/run/ws_bridge.py, that cuts the stream into messages as the case asks;
stopped when the case ends), and the two exchanges that carry no AMQP: `upgrade(url,
protocols)` (the opening handshake alone: the HTTP status and the subprotocol the broker
chose) and `text_message(url, text)` (a text message after an `amqp` upgrade: how the
broker answered). Every wait is bounded by `timeout`. Builds no AMQP bytes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp

from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.run.ws_bridge import SUBPROTOCOL, WebSocketBridge
from amqpspec.conformance.run.ws_bridge import websocket_url as bare_url
from amqpspec.conformance.verdicts import Unsupported


def websocket_url(ctx: CaseContext) -> str:
    """The broker's ws:// (wss://) URL without credentials: the run's own (--broker
    ws://...), or in a run over TCP the AMQP-over-WebSocket listener the broker's admin API
    lists (the reference broker's with --ws-port); UNSUPPORTED when the profile does not
    claim the binding or neither names a WebSocket listener."""
    ctx.require("websocket")
    if ctx.target.websocket:
        return bare_url(ctx.target.websocket)
    try:
        return ctx.admin.websocket_url()
    except Unsupported as exc:
        raise Unsupported(
            f"the run reaches the broker over TCP ({ctx.target}) and {exc}: the WebSocket "
            "binding's cases need --broker ws://HOST:PORT/PATH or a listed ws listener"
        ) from exc


def bridged_probe(
    ctx: CaseContext, *, split: int | None = None, pipelined: bool = False
) -> tuple[Probe, WebSocketBridge]:
    """A probe (recorded in the case's trace) through a bridge of its own that sends each
    write as WebSocket messages of at most `split` bytes (None: a write, one message)."""
    bridge = WebSocketBridge(websocket_url(ctx), split=split).start()
    ctx.on_close(bridge.stop)
    target = ctx.target.bridged(bridge.port)
    probe = Probe(
        target.host,
        target.port,
        username=target.username or ctx.profile.username,
        password=target.password or ctx.profile.password,
        sasl_mechanism=None if ctx.profile.sasl == "none" else ctx.profile.sasl,
        hostname=ctx.profile.hostname or ctx.target.open_hostname,
        wait=ctx.profile.wait,
        deadline=ctx.deadline,
        pipelined=pipelined,
    )
    ctx.probes.append(probe)
    return probe, bridge


@dataclass(frozen=True, slots=True)
class Upgrade:
    """The broker's answer to a WebSocket opening handshake."""

    status: int  # 101 when it switched protocols
    protocol: str | None  # the subprotocol its answer named
    detail: str

    @property
    def accepted(self) -> bool:
        return self.status == 101


def upgrade(url: str, protocols: tuple[str, ...], timeout: float) -> Upgrade:
    """The opening handshake offering `protocols` (closed again at once when accepted)."""

    async def run() -> Upgrade:
        limits = aiohttp.ClientTimeout(total=timeout)
        async with aiohttp.ClientSession(timeout=limits) as session:
            try:
                ws = await session.ws_connect(url, protocols=protocols)
            except aiohttp.WSServerHandshakeError as exc:
                return Upgrade(exc.status, None, f"HTTP {exc.status} {exc.message}")
            protocol = ws.protocol
            await ws.close()
            return Upgrade(101, protocol, f"HTTP 101, subprotocol {protocol!r}")

    return asyncio.run(run())


@dataclass(frozen=True, slots=True)
class Answer:
    """What followed a text message: the WebSocket closed (with its close code), binary
    data came, or nothing within the bound."""

    closed: bool
    code: int | None
    detail: str


def text_message(url: str, text: str, timeout: float) -> Answer:
    """After an `amqp` upgrade, a text message carrying `text`; how the broker answers
    within `timeout` seconds."""

    async def run() -> Answer:
        limits = aiohttp.ClientTimeout(total=timeout + 5)
        async with (
            aiohttp.ClientSession(timeout=limits) as session,
            session.ws_connect(url, protocols=(SUBPROTOCOL,)) as ws,
        ):
            await ws.send_str(text)
            try:
                message = await ws.receive(timeout=timeout)
            except TimeoutError:
                return Answer(False, None, "no message and no close: the WebSocket kept open")
            if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                code = ws.close_code
                return Answer(True, code, f"the WebSocket closed (code {code})")
            if message.type == aiohttp.WSMsgType.BINARY:
                return Answer(False, None, f"a binary message {bytes(message.data)[:16]!r}")
            return Answer(False, None, f"a {message.type.name} message")

    return asyncio.run(run())
