"""Admin HTTP API: a subset of RabbitMQ's management API, as plain functions of a `Request`.

Owns: Basic authentication against the configured users (loopback-only users such as guest,
like RabbitMQ), the management tags and permissions, and the routes below, which read and
change the shared `VirtualHost` and `ResourceAlarms`. No sockets and no HTTP wire format:
`http_server.py` serves this over aiohttp in the broker's loop. No AMQP.

Routes (vhost is always "/", written %2F; names are percent-decoded per path segment):
  GET    /api/overview | /api/whoami | /api/nodes | /api/connections | /api/health/checks/alarms
  GET|DELETE /api/connections/{name}        (DELETE: close with amqp:connection:forced)
  PUT    /api/connections/{name}/transaction-timeout  {"seconds": S}: the connection's
         transactions declared from now on are rolled back S seconds after their declare
         (amqp:transaction:timeout; 0 = none; not RabbitMQ's: the suite's short timeouts)
  GET    /api/queues[/%2F]                  GET|PUT|DELETE /api/queues/%2F/{name}
  DELETE /api/queues/%2F/{name}/contents    GET /api/queues/%2F/{name}/bindings
  GET    /api/exchanges[/%2F]               GET|PUT|DELETE /api/exchanges/%2F/{name}
  GET    /api/bindings[/%2F]                GET|POST /api/bindings/%2F/e/{exchange}/q/{queue}
  GET|DELETE /api/bindings/%2F/e/{exchange}/q/{queue}/{props}
  GET    /api/alarms                        PUT|DELETE /api/alarms/{memory|disk}
  GET    /api/users                         GET|PUT|DELETE /api/users/{name}
  GET|PUT|DELETE /api/permissions/%2F/{name}  (users and permissions: administrator only)
  POST   /api/restart                       (administrator only; the broker's own, not
         RabbitMQ's: 202, then the broker stops and starts again in place from its data dir
         on the same ports, runtime/server.py; 400 without --data-dir, where a restart would
         lose every durable message. /api/overview's `boot_id` changes with each start)
The users and permissions routes are users.py's (runtime users, in memory); requests,
responses and HTTP errors are http_types.py's values.
Errors are JSON `{"error": ..., "reason": ...}` with RabbitMQ's wording where it has one.
A connection's recv_cnt / send_cnt count AMQP and SASL frames (heartbeats included; RabbitMQ
counts socket packets), recv_oct / send_oct every byte read / written.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ..config import BrokerConfig, User
from ..features.alarms import ResourceAlarms
from ..protocol.permissions import (
    CONFIGURE,
    FULL,
    READ,
    UNAUTHORIZED_ACCESS,
    WRITE,
)
from ..protocol.sasl import is_loopback
from ..queues.errors import NOT_ALLOWED, BrokerError, NotFoundError
from ..queues.exchanges import quote_binding_key
from ..queues.vhost import QUEUE_TYPES, VirtualHost
from .http_types import (
    HttpError,
    Request,
    Response,
    check_vhost,
    not_found,
    only,
)
from .users import UserRoutes
from .views import JsonViews

log = logging.getLogger("reference_broker.admin")

PRODUCT_NAME = "amqpspec reference broker"
PRODUCT_VERSION = "0.1.0"
MANAGEMENT_TAGS = {"management", "policymaker", "monitoring", "administrator"}


def authenticate(config: BrokerConfig, authorization: str | None, peer_ip: str) -> User:
    """Basic auth (RFC 7617) against the configured users; loopback-only users (guest by
    default, as RabbitMQ's loopback_users) are refused from any non-loopback address."""
    challenge = {"www-authenticate": 'Basic realm="RabbitMQ Management"'}
    if not authorization or not authorization.lower().startswith("basic "):
        raise HttpError(401, "not_authorized", "Login failed", challenge)
    try:
        decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise HttpError(401, "not_authorized", "Login failed", challenge) from None
    name, _, password = decoded.partition(":")
    user = config.user(name)
    if user is None or user.password != password:
        raise HttpError(401, "not_authorized", "Login failed", challenge)
    if name in config.loopback_users and not is_loopback(peer_ip):
        raise HttpError(401, "not_authorized", "User can only log in via localhost", challenge)
    return user


Handler = Callable[[Request], Response]


class AdminApi:
    """The routes as plain functions of a Request (no sockets: unit-testable)."""

    def __init__(
        self,
        vhost: VirtualHost,
        alarms: ResourceAlarms | None,
        config: BrokerConfig,
        *,
        node_name: str = "reference@localhost",
        listeners: list[dict[str, Any]] | None = None,
        restart: Callable[[], None] | None = None,
    ) -> None:
        self.vhost = vhost
        self.alarms = alarms
        self.config = config
        self.node_name = node_name
        self.views = JsonViews(vhost.name, node_name)  # the objects' JSON (views.py)
        self.users = UserRoutes(config)  # /api/users, /api/permissions (users.py)
        self.listeners = listeners if listeners is not None else []
        self.started_at = time.time()
        self.restart = restart
        self.boot_id = os.urandom(8).hex()  # a new one with each start (a restart's end)

    # ------------------------------------------------------------------ entry point
    def handle(self, request: Request) -> Response:
        try:
            request.user = authenticate(
                self.config, request.headers.get("authorization"), request.peer_ip
            )
            self._authorize(request)
            return self._route(request)
        except HttpError as exc:
            return exc.response
        except BrokerError as exc:
            if isinstance(exc, NotFoundError):
                return not_found().response
            status = 403 if exc.condition in (NOT_ALLOWED, UNAUTHORIZED_ACCESS) else 400
            error = "not_authorised" if status == 403 else "bad_request"
            return Response(status, {"error": error, "reason": exc.reason})
        except Exception:  # pragma: no cover - a bug; keep the server up and say so
            log.exception("admin API error on %s %s", request.method, request.path)
            return Response(500, {"error": "internal_error", "reason": "see the broker log"})

    def _authorize(self, request: Request) -> None:
        """RabbitMQ's management access: a user needs a management tag to use the API at
        all, administrator to raise or clear alarms or close another user's connection, and
        the same configure / write / read permissions as over AMQP (protocol/permissions.py) to
        change queues, exchanges, bindings."""
        user = request.user
        assert user is not None
        if not MANAGEMENT_TAGS & set(user.tags):
            raise HttpError(401, "not_authorized", "Not management user")
        head, rest = (request.segments or [""])[0], request.segments[1:]
        if head in ("users", "permissions") and "administrator" not in user.tags:
            raise HttpError(403, "not_authorised", "Access refused (administrator only)")
        if request.method in ("GET", "HEAD"):
            return
        if head in ("alarms", "restart") and "administrator" not in user.tags:
            raise HttpError(403, "not_authorised", "Access refused (administrator only)")
        if head == "connections" and "administrator" not in user.tags:
            summary = self.vhost.connections.get(rest[0]) if rest else None
            if summary is not None and summary.user != user.name:  # one's own, as RabbitMQ
                raise HttpError(403, "not_authorised", "Access refused (not your connection)")
        permissions = self.config.permissions_of(user.name)
        if permissions is FULL:
            return
        if head == "queues" and len(rest) >= 2:
            kind = READ if rest[2:] == ["contents"] else CONFIGURE
            permissions.check(user.name, kind, "queue", rest[1])
        elif head == "exchanges" and len(rest) == 2:
            permissions.check(user.name, CONFIGURE, "exchange", rest[1])
        elif head == "bindings" and len(rest) >= 5:
            permissions.check(user.name, WRITE, "queue", rest[4])
            permissions.check(user.name, READ, "exchange", rest[2])

    def _route(self, request: Request) -> Response:
        seg = request.segments
        if not seg:
            raise not_found()
        head, rest = seg[0], seg[1:]
        table: dict[str, Callable[[Request, list[str]], Response]] = {
            "overview": self._overview,
            "whoami": self._whoami,
            "nodes": self._nodes,
            "connections": self._connections,
            "health": self._health,
            "queues": self._queues,
            "exchanges": self._exchanges,
            "bindings": self._bindings,
            "alarms": self._alarms,
            "users": self.users.users,  # users.py
            "permissions": self.users.permissions,
            "restart": self._restart,
        }
        handler = table.get(head)
        if handler is None:
            raise not_found()
        return handler(request, rest)

    _vhost = staticmethod(check_vhost)
    _only = staticmethod(only)

    # ------------------------------------------------------------------ overview & co
    def _overview(self, request: Request, rest: list[str]) -> Response:
        self._only(request, "GET")
        if rest:
            raise not_found()
        totals = self.views.totals(self.vhost)
        published = sum(q.published_total for q in self.vhost.queues.values())
        delivered = sum(q.delivered_total for q in self.vhost.queues.values())
        return Response(
            200,
            {
                "management_version": PRODUCT_VERSION,
                "product_name": PRODUCT_NAME,
                "product_version": PRODUCT_VERSION,
                "rabbitmq_version": PRODUCT_VERSION,
                "cluster_name": self.node_name,
                "node": self.node_name,
                "object_totals": {
                    "connections": totals["connections"],
                    "channels": sum(c.channels for c in self.vhost.connections.values()),
                    "exchanges": totals["exchanges"],
                    "queues": totals["queues"],
                    "consumers": totals["consumers"],
                },
                "queue_totals": {
                    "messages": totals["messages"],
                    "messages_ready": totals["messages_ready"],
                    "messages_unacknowledged": totals["messages_unacknowledged"],
                },
                "message_stats": {"publish": published, "deliver_get": delivered},
                "listeners": [{"node": self.node_name, **lst} for lst in self.listeners],
                "alarms": self.alarms.active_kinds() if self.alarms else [],
                "faults": sorted(self.config.faults.enabled),
                # RabbitMQ's handshake_timeout key, in its unit (ms; 0 = none): the time from
                # the TCP accept to the client's open; sasl_timeout likewise from the SASL
                # header to the outcome (conformance/cases/s5_3_sasl_timeout.py)
                "handshake_timeout": round(self.config.limits.handshake_timeout * 1000),
                "sasl_timeout": round(self.config.limits.sasl_timeout * 1000),
                "boot_id": self.boot_id,
            },
        )

    def _restart(self, request: Request, rest: list[str]) -> Response:
        """POST /api/restart: stop and start again in place (runtime/server.py)."""
        self._only(request, "POST")
        if rest or self.restart is None:
            raise not_found()
        if self.config.data_dir is None:
            raise HttpError(
                400,
                "bad_request",
                "the broker keeps no data (no --data-dir): a restart would lose every "
                "durable message",
            )
        self.restart()
        return Response(202, {"restarting": True, "boot_id": self.boot_id})

    def _whoami(self, request: Request, rest: list[str]) -> Response:
        self._only(request, "GET")
        assert request.user is not None
        return Response(200, {"name": request.user.name, "tags": list(request.user.tags)})

    def _nodes(self, request: Request, rest: list[str]) -> Response:
        self._only(request, "GET")
        node: dict[str, Any] = {"name": self.node_name, "running": True, "type": "disc"}
        if self.alarms is not None:
            mem, disk = self.alarms.states["memory"], self.alarms.states["disk"]
            node.update(
                mem_alarm=mem.active,
                disk_free_alarm=disk.active,
                mem_limit=mem.limit,
                mem_used=mem.reading,
                disk_free_limit=disk.limit,
                disk_free=disk.reading,
            )
        if rest:
            if rest[0] != self.node_name:
                raise not_found()
            return Response(200, node)
        return Response(200, [node])

    def _health(self, request: Request, rest: list[str]) -> Response:
        self._only(request, "GET")
        if rest != ["checks", "alarms"]:
            raise not_found()
        active = self.alarms.active_kinds() if self.alarms else []
        if not active:
            return Response(200, {"status": "ok"})
        return Response(
            503,
            {
                "status": "failed",
                "reason": "There are alarms in effect in the cluster",
                "alarms": [{"node": self.node_name, "resource": kind} for kind in active],
            },
        )

    def _connections(self, request: Request, rest: list[str]) -> Response:
        if rest[1:] == ["transaction-timeout"]:
            return self._transaction_timeout(request, rest[0])
        self._only(request, "GET", "DELETE")
        conns = self.vhost.connections
        if rest:
            summary = conns.get(rest[0])
            if summary is None or len(rest) > 1:
                raise not_found()
            if request.method == "DELETE":
                if summary.close_forced is not None:
                    summary.close_forced("Closed via management plugin")
                return Response(204)
            return Response(200, self.views.connection(summary))
        self._only(request, "GET")
        return Response(200, [self.views.connection(c) for c in conns.values()])

    def _transaction_timeout(self, request: Request, name: str) -> Response:
        """PUT {"seconds": S}: the connection's transaction timeout (features/transactions)."""
        self._only(request, "PUT")
        summary = self.vhost.connections.get(name)
        if summary is None or summary.set_transaction_timeout is None:
            raise not_found()
        seconds = request.json().get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise HttpError(400, "bad_request", "seconds must be a number >= 0")
        summary.set_transaction_timeout(float(seconds))
        return Response(204)

    # ------------------------------------------------------------------ queues
    def _queues(self, request: Request, rest: list[str]) -> Response:
        if not rest:
            self._only(request, "GET")
            return Response(200, [self.views.queue(q) for q in self.vhost.queues.values()])
        self._vhost(rest)
        if len(rest) == 1:
            self._only(request, "GET")
            return Response(200, [self.views.queue(q) for q in self.vhost.queues.values()])
        name = rest[1]
        if len(rest) == 3 and rest[2] == "contents":
            self._only(request, "DELETE")
            self.vhost.purge_queue(name)
            return Response(204)
        if len(rest) == 3 and rest[2] == "bindings":
            self._only(request, "GET")
            self.vhost.get_queue(name)
            found = [b for b in self.vhost.bindings() if b.destination == name]
            return Response(200, [self.views.binding(b) for b in found])
        if len(rest) != 2:
            raise not_found()
        self._only(request, "GET", "PUT", "DELETE")
        if request.method == "GET":
            return Response(200, self.views.queue(self.vhost.get_queue(name)))
        if request.method == "DELETE":
            self.vhost.delete_queue(
                name,
                if_unused=request.query.get("if-unused") == "true",
                if_empty=request.query.get("if-empty") == "true",
            )
            return Response(204)
        body = request.json()
        arguments = body.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise HttpError(400, "bad_request", "arguments must be an object")
        queue_type = arguments.get("x-queue-type", "classic")
        if queue_type not in QUEUE_TYPES:
            raise HttpError(
                400,
                "bad_request",
                f"invalid arg 'x-queue-type' for queue '{name}' in vhost '/': "
                f"\"unsupported queue type '{queue_type}'\"",
            )
        _, created = self.vhost.declare_queue(
            name,
            durable=_flag(body, "durable", False),
            auto_delete=_flag(body, "auto_delete", False),
            arguments=arguments,
        )
        return Response(201 if created else 204)

    def _listing(
        self, request: Request, rest: list[str], items: Callable[[], list[dict[str, Any]]]
    ) -> Response:
        """GET /api/<kind> or /api/<kind>/<vhost>: all of them, as views.py shows them."""
        self._only(request, "GET")
        if rest:
            self._vhost(rest)
        return Response(200, items())

    # ------------------------------------------------------------------ exchanges
    def _exchanges(self, request: Request, rest: list[str]) -> Response:
        if len(rest) <= 1:
            exchanges = self.vhost.exchanges
            return self._listing(
                request, rest, lambda: [self.views.exchange(e) for e in exchanges.values()]
            )
        self._vhost(rest)
        if len(rest) != 2:
            raise not_found()
        name = rest[1]
        self._only(request, "GET", "PUT", "DELETE")
        if request.method == "GET":
            return Response(200, self.views.exchange(self.vhost.get_exchange(name)))
        if request.method == "DELETE":
            self.vhost.delete_exchange(name, if_unused=request.query.get("if-unused") == "true")
            return Response(204)
        body = request.json()
        ex_type = body.get("type")
        if not isinstance(ex_type, str):
            raise HttpError(400, "bad_request", "exchange type is required")
        if ex_type not in ("direct", "fanout", "topic", "headers"):
            raise HttpError(400, "bad_request", f"unknown exchange type '{ex_type}'")
        _, created = self.vhost.declare_exchange(
            name,
            ex_type,
            durable=_flag(body, "durable", False),
            auto_delete=_flag(body, "auto_delete", False),
            internal=_flag(body, "internal", False),
            arguments=body.get("arguments") or {},
        )
        return Response(201 if created else 204)

    # ------------------------------------------------------------------ bindings
    def _bindings(self, request: Request, rest: list[str]) -> Response:
        if len(rest) <= 1:
            return self._listing(
                request, rest, lambda: [self.views.binding(b) for b in self.vhost.bindings()]
            )
        self._vhost(rest)
        if len(rest) < 5 or rest[1] != "e" or rest[3] != "q" or len(rest) > 6:
            raise not_found()
        exchange, queue = rest[2], rest[4]
        self.vhost.get_exchange(exchange)
        self.vhost.get_queue(queue)
        between = [
            b for b in self.vhost.bindings() if b.source == exchange and b.destination == queue
        ]
        if len(rest) == 5:
            self._only(request, "GET", "POST")
            if request.method == "GET":
                return Response(200, [self.views.binding(b) for b in between])
            body = request.json()
            key = body.get("routing_key", "")
            arguments = body.get("arguments") or {}
            if not isinstance(key, str) or not isinstance(arguments, dict):
                raise HttpError(400, "bad_request", "routing_key must be a string")
            binding = self.vhost.bind(exchange, queue, key, arguments)
            location = quote_binding_key(binding.properties_key)
            return Response(201, None, {"location": f"{quote_binding_key(queue)}/{location}"})
        props = rest[5]
        self._only(request, "GET", "DELETE")
        for binding in between:
            if binding.properties_key == props:
                if request.method == "GET":
                    return Response(200, self.views.binding(binding))
                self.vhost.unbind(exchange, queue, binding.properties_key)
                return Response(204)
        raise not_found()

    # ------------------------------------------------------------------ alarms
    def _alarms(self, request: Request, rest: list[str]) -> Response:
        if self.alarms is None:
            raise not_found()
        if not rest:
            self._only(request, "GET")
            return Response(200, self.alarms.as_json())
        if len(rest) != 1 or rest[0] not in self.alarms.states:
            raise not_found()
        self._only(request, "GET", "PUT", "DELETE")
        if request.method == "GET":
            return Response(200, self.alarms.states[rest[0]].as_json())
        if request.method == "PUT":
            self.alarms.raise_alarm(rest[0])
        else:
            self.alarms.clear_alarm(rest[0])
        return Response(204)


def _flag(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)


# ---------------------------------------------------------------------- request targets
def parse_target(target: str) -> tuple[str, list[str], dict[str, str]]:
    """Split a request target into (raw path, decoded segments after /api, query).

    Each segment is percent-decoded on its own, so `%2F` (the vhost "/", or a "/" inside a
    name) stays inside its segment."""
    url = urlsplit(target)
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    parts = url.path.split("/")
    if len(parts) < 2 or parts[0] != "" or parts[1] != "api":
        return url.path, [], query
    segments = [unquote(p) for p in parts[2:]]
    while segments and segments[-1] == "":
        segments.pop()
    return url.path, segments, query
