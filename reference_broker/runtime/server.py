"""The reference broker's asyncio server: listeners, admin API, start and stop.

Owns: building the broker from a `BrokerConfig` on the running loop (the shared
`BrokerContext` with a pump.LoopScheduler, whose housekeeping it starts), the AMQP
listener (and the amqps one when a TLS cert/key is configured, the WebSocket one, websocket.py,
when a ws port is), the admin HTTP API, the
"ready" log line, a clean stop, and a restart in place (`restart()`, the admin API's
POST /api/restart: everything stopped and built again from the config and the data dir,
on the ports bound before). `BrokerThread` runs one broker in a background
thread for tests and tools. May touch: everything it builds, through their APIs;
nothing of the protocol (protocol/connection.py does that).

    server = BrokerServer(config)
    await server.start()          # server.port / server.admin_port are the bound ports
    await server.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
import threading
from typing import Any

from ..admin.http_server import AdminServer, start_admin
from ..config import BrokerConfig
from ..features.alarms import ResourceAlarms
from ..protocol.context import BrokerContext
from ..queues.vhost import VirtualHost
from .loop_thread import Started, run_loop
from .pump import AmqpProtocol, LoopScheduler
from .websocket import start_websocket

log = logging.getLogger("reference_broker")
RESTART_DELAY_S = 0.02  # after POST /api/restart: its answer is written before the restart


def install_uvloop() -> bool:
    """Use uvloop's event loop policy when it is installed."""
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


class BrokerServer:
    def __init__(self, config: BrokerConfig, *, alarms: ResourceAlarms | None = None) -> None:
        self.config = config
        self.vhost: VirtualHost | None = None
        self.alarms = alarms
        self._given_alarms = alarms  # a restart starts from these again (None: the config's)
        self.restarts = 0
        self.context: BrokerContext | None = None
        self.admin: AdminServer | None = None
        self.port: int | None = None
        self.tls_port: int | None = None
        self.admin_port: int | None = None
        self.ws_port: int | None = None
        self._ws_runner: Any = None
        self._servers: list[asyncio.base_events.Server] = []
        self._stopped = asyncio.Event()
        self._restarting: asyncio.Task[None] | None = None

    async def start(self) -> None:
        config = self.config
        loop = asyncio.get_running_loop()
        scheduler = LoopScheduler(loop)
        self.context = BrokerContext.from_config(config, scheduler, self.alarms)
        self.vhost, self.alarms = self.context.vhost, self.context.alarms
        self.alarms.check(scheduler.now())
        server = await loop.create_server(
            lambda: AmqpProtocol(self.context), config.host, config.port, reuse_address=True
        )
        self._servers.append(server)
        self.port = server.sockets[0].getsockname()[1]
        listeners: list[dict[str, Any]] = [
            {"protocol": "amqp", "ip_address": config.host, "port": self.port}
        ]
        if config.tls:
            await self._start_tls(loop, listeners)
        if config.ws_port >= 0:
            await self._start_websocket(listeners)
        if config.admin_port >= 0:
            self.admin, self.admin_port = await start_admin(
                self.vhost, self.alarms, config, listeners=listeners, restart=self.request_restart
            )
        self.context.start_housekeeping()
        admin = f"admin {config.admin_host}:{self.admin_port}" if self.admin else "no admin"
        tls_text = f", amqps {config.host}:{self.tls_port}" if self.tls_port else ""
        if self.ws_port is not None:
            scheme = "wss" if config.ws_tls else "ws"
            tls_text += f", {scheme}://{config.host}:{self.ws_port}{config.ws_path}"
        log.info(
            "amqpspec reference broker ready on %s:%s (%s%s)",
            config.host,
            self.port,
            admin,
            tls_text,
        )

    async def _start_tls(
        self, loop: asyncio.AbstractEventLoop, listeners: list[dict[str, Any]]
    ) -> None:
        """The amqps listener (client certificates for SASL EXTERNAL with --tls-ca)."""
        config = self.config
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(config.tls_cert, config.tls_key)
        if config.tls_ca is not None:  # client certificates for SASL EXTERNAL
            tls.load_verify_locations(config.tls_ca)
            tls.verify_mode = ssl.CERT_OPTIONAL
        tls_server = await loop.create_server(
            lambda: AmqpProtocol(self.context), config.host, config.tls_port, ssl=tls
        )
        self._servers.append(tls_server)
        self.tls_port = tls_server.sockets[0].getsockname()[1]
        listeners.append({"protocol": "amqp/ssl", "ip_address": config.host, "port": self.tls_port})

    async def _start_websocket(self, listeners: list[dict[str, Any]]) -> None:
        """The AMQP over WebSocket listener (runtime/websocket.py; wss:// with --ws-tls)."""
        config = self.config
        ws_tls = None
        if config.ws_tls:  # wss://: the amqps listener's certificate and key
            ws_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ws_tls.load_cert_chain(config.tls_cert, config.tls_key)
        self._ws_runner, self.ws_port = await start_websocket(
            self.context, config.host, config.ws_port, config.ws_path, ws_tls
        )
        listeners.append(
            {
                "protocol": "amqp/wss" if config.ws_tls else "amqp/ws",
                "ip_address": config.host,
                "port": self.ws_port,
                "path": config.ws_path,
            }
        )

    def request_restart(self) -> None:
        """Restart soon, in the broker's loop (the admin API's answer goes out first)."""
        loop = asyncio.get_running_loop()

        def begin() -> None:
            self._restarting = loop.create_task(self.restart())  # kept: tasks are weak refs

        loop.call_later(RESTART_DELAY_S, begin)

    async def restart(self) -> None:
        """Stop everything (listeners, connections, queues in memory, the store closed) and
        start again from the config on the same ports: what the data dir holds comes back
        (durable queues, exchanges, bindings and their messages), nothing else does."""
        log.info("restarting")
        pinned = {"port": self.port, "admin_port": self.admin_port}
        pinned.update({"tls_port": self.tls_port} if self.tls_port else {})
        pinned.update({"ws_port": self.ws_port} if self.ws_port is not None else {})
        await self._shutdown()
        self.config = dataclasses.replace(self.config, **pinned)
        self.alarms, self.admin, self._ws_runner = self._given_alarms, None, None
        self.restarts += 1
        await self.start()

    async def stop(self) -> None:
        await self._shutdown()
        self._stopped.set()

    async def _shutdown(self) -> None:
        for server in self._servers:
            server.close()
        if self.context is not None:
            self.context.stop_housekeeping()
            now = self.context.scheduler.now()
            for connection in list(self.context.connections):
                connection.close_forced(now)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        self._servers.clear()
        if self._ws_runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws_runner.cleanup(), 2)
        if self.admin is not None:
            await self.admin.close()
        if self.vhost is not None:
            self.vhost.close()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()


class BrokerThread:
    """A broker on its own event loop in a daemon thread (tests, tools).

    with BrokerThread(config) as broker:
        broker.port, broker.admin_port, broker.call(fn)   # fn runs in the loop
    """

    def __init__(self, config: BrokerConfig, *, start_timeout: float = 10.0) -> None:
        self.config = config
        self.start_timeout = start_timeout
        self.server: BrokerServer | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._started = Started()
        self._thread = threading.Thread(target=self._run, name="reference-broker", daemon=True)

    def _run(self) -> None:
        try:
            import uvloop  # type: ignore[import-not-found]

            loop = self.loop = uvloop.new_event_loop()
        except ImportError:
            loop = self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        run_loop(loop, self._start_server, self._serve, self._started)

    async def _start_server(self) -> None:
        self.server = BrokerServer(self.config)
        await self.server.start()

    def _serve(self) -> None:
        assert self.loop is not None and self.server is not None
        self.loop.run_until_complete(self.server.wait_stopped())

    def start(self) -> BrokerThread:
        self._thread.start()
        if not self._started.wait(self.start_timeout):
            raise TimeoutError("reference broker did not start")
        if self._started.error is not None:
            raise self._started.error
        return self

    @property
    def port(self) -> int:
        assert self.server is not None and self.server.port is not None
        return self.server.port

    @property
    def admin_port(self) -> int | None:
        return self.server.admin_port if self.server else None

    @property
    def ws_port(self) -> int | None:
        return self.server.ws_port if self.server else None

    def call(self, fn: Any, *args: Any, timeout: float = 10.0) -> Any:
        """Run fn(*args) in the broker's loop and return its result."""

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self.loop is None or self.server is None or not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop)
        with contextlib.suppress(Exception):
            future.result(timeout)
        self._thread.join(timeout)

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
