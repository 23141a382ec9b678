"""The asyncio side of the reference broker: sockets and the event loop, nothing else.

Owns: `LoopScheduler` (scheduler.Scheduler on an asyncio loop: the clock is
time.monotonic(), timers are loop timers, blocking work goes to the loop's default
executor) and `AmqpProtocol` (asyncio.Protocol: bytes read -> BrokerConnection.receive_data,
the transport's write/close as its output, connection loss, the TLS client certificate's
CN as the connection's identity for SASL EXTERNAL). May touch: protocol/connection.py
through BrokerConnection's entry points.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from ..protocol.connection import BrokerConnection
from ..protocol.context import BrokerContext
from .scheduler import Callback, Done

log = logging.getLogger("reference_broker.pump")


class LoopScheduler:
    """scheduler.Scheduler on an asyncio event loop (uvloop's too)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callback) -> asyncio.TimerHandle:
        return self.loop.call_later(max(0.0, when - time.monotonic()), self._run, callback)

    def call_soon(self, callback: Callback) -> asyncio.Handle:
        return self.loop.call_soon(self._run, callback)

    def run_blocking(self, work: Callable[[], Any], done: Done) -> None:
        future = self.loop.run_in_executor(None, work)

        def finished(future: asyncio.Future[Any]) -> None:
            if future.cancelled():  # the loop is shutting down
                return
            result = future.exception() or future.result()
            self._run(lambda now: done(now, result))

        future.add_done_callback(finished)

    @staticmethod
    def _run(callback: Callback) -> None:
        try:
            callback(time.monotonic())
        except Exception:
            log.exception("scheduled callback failed")


class AmqpProtocol(asyncio.Protocol):
    """asyncio transport <-> BrokerConnection, nothing else."""

    def __init__(self, context: BrokerContext) -> None:
        self.context = context
        self.connection: BrokerConnection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # flows and dispositions are small: never let Nagle hold them back
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername") or ("?", 0)
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.connection = BrokerConnection(
            self.context,
            transport.write,  # type: ignore[attr-defined]
            transport.close,
            peer[:2],
            local[:2],
            connected_at=time.time(),
            tls_identity=certificate_cn(transport.get_extra_info("peercert")),
        )

    def data_received(self, data: bytes) -> None:
        now = self.context.scheduler.now()
        alarms = self.context.alarms
        if alarms is not None:
            alarms.bytes_received(len(data), now)
        self.connection.receive_data(data, now)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connection is not None:
            self.connection.transport_lost(self.context.scheduler.now())


def certificate_cn(peercert: dict[str, Any] | None) -> str | None:
    """The subject CN of a verified TLS client certificate (ssl's getpeercert() form), the
    identity SASL EXTERNAL logs in as; None without a certificate or CN."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
