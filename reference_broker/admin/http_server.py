"""The admin API's HTTP server: aiohttp's low-level server, in the broker's event loop.

Owns: the HTTP side of the admin API. aiohttp parses requests and keeps connections (HTTP/1.1
keep-alive, pipelining, `Expect: 100-continue`, Content-Length and chunked bodies); this
module sets its bounds, turns an aiohttp request into an `admin.Request` and an
`admin.Response` into an aiohttp one, and answers whatever HTTP itself refuses with the
API's JSON error. Routes, authentication and bodies are `admin.AdminApi`'s (the low-level
server, not `web.Application`, because the API authenticates before it routes, names carry
`%2F`, and RabbitMQ's 404/405 bodies are JSON). May touch: `AdminApi.handle`; nothing else.

Bounds (each refusal is a JSON `{"error": "bad_request", "reason": ...}`, then a close):
- request line <= 64 KiB, each header field <= 8 KiB (431), at most 100 header fields (400);
- body <= `[limits] admin_max_body` (1 MiB; 413, from Content-Length before any body byte,
  or once a chunked body passes it);
- `[limits] admin_timeout` (30 s): a connection idle that long, or whose request head is not
  complete by then, is closed; a body not complete within it gets 408; after an early reply
  the rest of a body is read and dropped for at most 2 s;
- HTTP/1.0 and HTTP/1.1 only (400); replies are HTTP/1.1 (RFC 9110 6.2: the highest minor
  version the server supports), with `Connection: close` unless the request kept it alive.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import HttpVersion10, HttpVersion11, web
from aiohttp.http_exceptions import HttpProcessingError, InvalidURLError, LineTooLong

from ..config import BrokerConfig
from ..features.alarms import ResourceAlarms
from ..queues.vhost import VirtualHost
from .api import AdminApi, HttpError, Request, Response, parse_target

log = logging.getLogger("reference_broker.admin")

SERVER = "amqpspec-admin"
MAX_LINE_BYTES = 64 * 1024  # the request line (aiohttp max_line_size)
MAX_FIELD_BYTES = 8 * 1024  # one header field, name and value (aiohttp max_field_size)
MAX_HEADERS = 100  # header fields per request (aiohttp max_headers; RabbitMQ's cowboy: 100)
LINGER_S = 2.0  # reading and dropping the rest of a body after an early reply
SUPPORTED = (HttpVersion10, HttpVersion11)
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"  # the interim reply (RFC 9110 15.2.1)


class _Http11Request(web.BaseRequest):
    """An aiohttp request answered in HTTP/1.1 whatever version it asked in; `asked` is that
    version (the parser already decided keep-alive from it)."""

    ATTRS = web.BaseRequest.ATTRS | frozenset(["asked"])

    def __init__(self, message: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(message._replace(version=HttpVersion11), *args, **kwargs)
        self.asked = message.version


class _JsonErrors(web.RequestHandler):
    """aiohttp's connection handler; a request its parser refuses, or a handler failure, is
    answered with the API's JSON error instead of aiohttp's text."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:
            raise ConnectionError("the reply has started: no room for an error")
        if status >= 500:
            log.error("admin API: %s", message or "handler failed", exc_info=exc)
            reply = Response(status, {"error": "internal_error", "reason": "see the broker log"})
        elif isinstance(exc, LineTooLong):
            reply = HttpError(431, "bad_request", "request line or header too large").response
        elif isinstance(exc, InvalidURLError):
            reply = HttpError(status, "bad_request", "invalid request target").response
        else:
            text = exc.message if isinstance(exc, HttpProcessingError) else message
            reason = (text or "bad request").partition("\n")[0].rstrip(": ")
            reply = HttpError(status, "bad_request", reason).response
        log.debug("admin API refused a request from %s: %s", request.remote, exc)
        return _to_aiohttp(reply, keep_alive=False)


def _to_aiohttp(reply: Response, *, keep_alive: bool) -> web.Response:
    payload = None if reply.body is None else json.dumps(reply.body).encode("utf-8")
    response = web.Response(status=reply.status, body=payload, headers=reply.headers)
    if payload is not None:
        response.content_type = "application/json"
    response.headers["Server"] = SERVER
    response.headers["Connection"] = "keep-alive" if keep_alive else "close"
    if not keep_alive:
        response.force_close()
    return response


class AdminServer:
    """`AdminApi` over HTTP: aiohttp's low-level server on one listening socket."""

    def __init__(self, api: AdminApi, *, max_body: int = 1 << 20, timeout: float = 30.0):
        self.api = api
        self.max_body = max_body
        self.timeout = timeout
        self._http: web.Server | None = None
        self._server: asyncio.base_events.Server | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 15672) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        loop = asyncio.get_running_loop()
        http = self._http = web.Server(self._respond, request_factory=self._request)
        settings: dict[str, Any] = {
            "keepalive_timeout": self.timeout,
            "max_line_size": MAX_LINE_BYTES,
            "max_field_size": MAX_FIELD_BYTES,
            "max_headers": MAX_HEADERS,
            "lingering_time": LINGER_S,
            "access_log": None,
        }
        self._server = await loop.create_server(
            lambda: _JsonErrors(http, loop=loop, **settings), host, port, reuse_address=True
        )
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is None or self._http is None:
            return
        self._server.close()
        self._http.pre_shutdown()
        await self._http.shutdown(2.0)
        await self._server.wait_closed()
        self._server = self._http = None

    def _request(self, message: Any, payload: Any, protocol: Any, writer: Any, task: Any):
        return _Http11Request(
            message,
            payload,
            protocol,
            writer,
            task,
            asyncio.get_running_loop(),
            client_max_size=self.max_body,
        )

    async def _respond(self, http: web.BaseRequest) -> web.StreamResponse:
        assert isinstance(http, _Http11Request)
        if http.asked not in SUPPORTED:
            return self._refuse(400, "unsupported HTTP version")
        if (http.content_length or 0) > self.max_body:
            return self._refuse(413, "body too large")
        if http.asked == HttpVersion11 and http.headers.get("Expect", "").lower() == "100-continue":
            await http.writer.write(CONTINUE)
        try:
            async with asyncio.timeout(self.timeout):
                body = await http.read()
        except TimeoutError:
            return self._refuse(408, "body not received in time")
        except web.HTTPRequestEntityTooLarge:
            return self._refuse(413, "body too large")
        path, segments, query = parse_target(http.raw_path)
        headers = {name.lower(): value for name, value in http.headers.items()}
        request = Request(http.method, path, segments, query, headers, body, http.remote or "")
        return _to_aiohttp(self.api.handle(request), keep_alive=http.keep_alive)

    @staticmethod
    def _refuse(status: int, reason: str) -> web.Response:
        return _to_aiohttp(HttpError(status, "bad_request", reason).response, keep_alive=False)


async def start_admin(
    vhost: VirtualHost,
    alarms: ResourceAlarms | None,
    config: BrokerConfig,
    *,
    host: str | None = None,
    port: int | None = None,
    listeners: list[dict[str, Any]] | None = None,
    restart: Callable[[], None] | None = None,
) -> tuple[AdminServer, int]:
    """Build and start the admin server from the config; returns (server, bound port).
    `restart`: what POST /api/restart calls (the server's restart in place)."""
    api = AdminApi(vhost, alarms, config, listeners=listeners, restart=restart)
    limits = config.limits
    server = AdminServer(api, max_body=limits.admin_max_body, timeout=limits.admin_timeout)
    bound = await server.start(
        host if host is not None else config.admin_host,
        port if port is not None else config.admin_port,
    )
    return server, bound
