"""The `/management` node (RabbitMQ 4's HTTP-over-AMQP): declare, inspect, delete and purge
queues, declare and delete exchanges, bind and unbind, with request and reply messages on a
link pair instead of an HTTP port.

Owns: the request format (properties: message-id, to = the HTTP path, subject = the HTTP
method, reply-to "$me"; body: one amqp-value, a map or null), the routes and their answers
(properties: correlation-id = the request's message-id, subject = the HTTP status code;
body: the resource as a map, or the error text), the mapping of model errors to statuses,
which permission each route needs (403 `amqp:unauthorized-access` when the caller's
`permit` refuses). May touch: the vhost through its public API. Messages are built and read
with amqp10.message, never by hand; no I/O, no engine objects (protocol/connection.py owns
the links).

Routes (names percent-encoded as one path segment each, as RabbitMQ's clients send them)::

    GET    /queues/:q             200 {name, durable, auto_delete, exclusive, type, arguments,
                                       message_count, consumer_count}
    PUT    /queues/:q             200 the same (created or an equivalent one exists); 409
                                  an inequivalent one (durable, auto_delete, x-queue-type);
                                  "exclusive": true -> only this connection may use it, 400
                                  (resource-locked) to others, deleted when it closes
    DELETE /queues/:q             200 {message_count}
    DELETE /queues/:q/messages    200 {message_count} (purge)
    PUT    /exchanges/:x          204
    DELETE /exchanges/:x          204
    POST   /bindings              204 {source, destination_queue, binding_key, arguments}
    DELETE /bindings/src=:x;dstq=:q;key=:k;args=   204
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from amqpspec.amqp10.composites import Properties
from amqpspec.amqp10.message import Message

from ..protocol.permissions import CONFIGURE, READ, WRITE
from ..queues.errors import BrokerError
from ..queues.vhost import VirtualHost

MANAGEMENT_ADDRESS = "/management"
REPLY_TO_ME = "$me"
# model errors (vhost.BrokerError.status, HTTP-like) -> the node's status; RabbitMQ 4
# answers a precondition failure with 409 on this node, an exclusive queue of another
# connection (resource_locked, 405) with 400
_STATUS_OF = {400: 409, 404: 404, 405: 400, 500: 500}


class RequestError(Exception):
    """A request the node answers with `status` and the reason as the body."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


# (vhost, path segments, body, owner: the asking connection, for exclusive queues) -> answer
Handler = Callable[[VirtualHost, list[str], Any, Any], tuple[int, Any]]
# permit(kind, what, name): raises permissions.UnauthorizedError (403) unless allowed
Permit = Callable[[str, str, str], None]
# what each route needs (RabbitMQ's access control): (kind, "queue"|"exchange", from)
_NEEDS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "_put_queue": ((CONFIGURE, "queue", "name"),),
    "_delete_queue": ((CONFIGURE, "queue", "name"),),
    "_purge_queue": ((READ, "queue", "name"),),
    "_put_exchange": ((CONFIGURE, "exchange", "name"),),
    "_delete_exchange": ((CONFIGURE, "exchange", "name"),),
    "_bind": ((WRITE, "queue", "destination_queue"), (READ, "exchange", "source")),
}


def _queue_info(vhost: VirtualHost, name: str) -> dict[str, Any]:
    queue = vhost.get_queue(name)
    return {
        "name": queue.name,
        "vhost": vhost.name,
        "durable": queue.durable,
        "auto_delete": queue.auto_delete,
        "exclusive": queue.exclusive_owner is not None,
        "type": queue.queue_type,
        "arguments": dict(queue.arguments),
        "message_count": queue.messages,
        "consumer_count": len(queue.consumers),
    }


def _body_map(body: Any) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a map")
    return {str(k): v for k, v in body.items()}


def _get_queue(vhost: VirtualHost, parts: list[str], body: Any, owner: Any) -> tuple[int, Any]:
    return 200, _queue_info(vhost, parts[1])


def _put_queue(vhost: VirtualHost, parts: list[str], body: Any, owner: Any) -> tuple[int, Any]:
    spec = _body_map(body)
    arguments = spec.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise RequestError(400, "arguments must be a map")
    name = parts[1]
    options = {
        "durable": bool(spec.get("durable", True)),
        "auto_delete": bool(spec.get("auto_delete", False)),
        "arguments": {str(k): v for k, v in arguments.items()},
    }
    if spec.get("exclusive"):  # the asking connection's only, deleted with it
        vhost.owners.declare_exclusive_queue(name, owner, **options)
    else:
        if vhost.has_queue(name):
            vhost.owners.check_exclusive(name, None, strict=True)
        vhost.declare_queue(name, **options)
    return 200, _queue_info(vhost, name)


def _delete_queue(vhost: VirtualHost, parts: list[str], body: Any, owner: Any) -> tuple[int, Any]:
    vhost.owners.check_exclusive(parts[1], owner)
    return 200, {"message_count": vhost.delete_queue(parts[1])}


def _purge_queue(vhost: VirtualHost, parts: list[str], body: Any, owner: Any) -> tuple[int, Any]:
    vhost.owners.check_exclusive(parts[1], owner)
    return 200, {"message_count": vhost.purge_queue(parts[1])}


def _put_exchange(vhost: VirtualHost, parts: list[str], body: Any, owner: Any) -> tuple[int, Any]:
    spec = _body_map(body)
    vhost.declare_exchange(
        parts[1],
        str(spec.get("type", "direct")),
        durable=bool(spec.get("durable", True)),
        auto_delete=bool(spec.get("auto_delete", False)),
        internal=bool(spec.get("internal", False)),
        arguments=spec.get("arguments") or {},
    )
    return 204, None


def _delete_exchange(
    vhost: VirtualHost, parts: list[str], body: Any, owner: Any
) -> tuple[int, Any]:
    vhost.delete_exchange(parts[1])
    return 204, None


def _bind(vhost: VirtualHost, parts: list[str], body: Any, owner: Any) -> tuple[int, Any]:
    spec = _body_map(body)
    if "destination_queue" not in spec:
        raise RequestError(400, "only queue destinations (destination_queue) are supported")
    vhost.bind(
        str(spec.get("source", "")),
        str(spec["destination_queue"]),
        str(spec.get("binding_key", "")),
        spec.get("arguments") or {},
    )
    return 204, None


def _unbind(vhost: VirtualHost, parts: list[str], body: Any, owner: Any) -> tuple[int, Any]:
    fields: dict[str, str] = {}
    for item in parts[1].split(";"):
        key, _, value = item.partition("=")
        fields[key] = unquote(value)
    if "dstq" not in fields or "src" not in fields:
        raise RequestError(400, "a binding path is src=:x;dstq=:q;key=:k;args=")
    key = fields.get("key", "")
    for binding in vhost.get_exchange(fields["src"]).bindings:
        if (
            binding.destination == fields["dstq"]
            and binding.routing_key == key
            and not binding.arguments
        ):
            vhost.unbind(fields["src"], fields["dstq"], binding.properties_key)
            return 204, None
    raise RequestError(404, f"no binding {fields['src']} -> {fields['dstq']} with key '{key}'")


# (method, first path segment, number of segments, last segment or None) -> handler
_ROUTES: dict[tuple[str, str, int, str | None], Handler] = {
    ("GET", "queues", 2, None): _get_queue,
    ("PUT", "queues", 2, None): _put_queue,
    ("DELETE", "queues", 2, None): _delete_queue,
    ("DELETE", "queues", 3, "messages"): _purge_queue,
    ("PUT", "exchanges", 2, None): _put_exchange,
    ("DELETE", "exchanges", 2, None): _delete_exchange,
    ("POST", "bindings", 1, None): _bind,
    ("DELETE", "bindings", 2, None): _unbind,
}


def _authorize(permit: Permit, handler: Handler, parts: list[str], body: Any) -> None:
    if handler is _unbind:
        fields = dict(item.partition("=")[::2] for item in parts[1].split(";"))
        permit(WRITE, "queue", unquote(fields.get("dstq", "")))
        permit(READ, "exchange", unquote(fields.get("src", "")))
        return
    for kind, what, source in _NEEDS.get(handler.__name__, ()):
        name = parts[1] if source == "name" else str(_body_map(body).get(source, ""))
        permit(kind, what, name)


def route(
    vhost: VirtualHost,
    method: str,
    path: str,
    body: Any,
    permit: Permit | None = None,
    owner: Any = None,
) -> tuple[int, Any]:
    """Answer one request: (status, body). Never raises for a bad request. With `permit`,
    the user's permissions are checked first (403 amqp:unauthorized-access). `owner` is the
    asking connection: it owns the exclusive queues it declares (400 resource-locked to
    any other, as RabbitMQ 4 answers)."""
    raw = path.split("?", 1)[0].strip("/").split("/")
    binding_path = raw[0] == "bindings" and len(raw) == 2  # its pairs are decoded one by one
    parts = raw if binding_path else [unquote(p) for p in raw]
    last = parts[-1] if len(parts) == 3 else None
    handler = _ROUTES.get((method.upper(), parts[0], len(parts), last))
    if handler is None:
        return 400, f"no route {method} {path}"
    try:
        if permit is not None:
            _authorize(permit, handler, parts, body)
        return handler(vhost, parts, body, owner)
    except RequestError as exc:
        return exc.status, exc.reason
    except BrokerError as exc:
        if exc.status == 403:
            return 403, f"{exc.condition}: {exc.reason}"
        return _STATUS_OF.get(exc.status, 500), exc.reason


def answer(
    vhost: VirtualHost, request: bytes, permit: Permit | None = None, owner: Any = None
) -> bytes | None:
    """The encoded reply to an encoded request message (from connection `owner`); None when
    it cannot be answered (undecodable, or no message-id to correlate with)."""
    try:
        message = Message.decode(request)
    except Exception:
        return None
    props = message.properties
    if props is None or props.message_id is None:
        return None
    if props.reply_to not in (None, REPLY_TO_ME):
        status, body = 400, f"reply-to must be '{REPLY_TO_ME}'"
    elif not props.to or not props.subject:
        status, body = 400, "a request names its path (to) and method (subject)"
    else:
        body_value = message.value if message.body else None
        status, body = route(vhost, str(props.subject), str(props.to), body_value, permit, owner)
    reply = Message.of(
        None if body is None else body,
        properties=Properties(correlation_id=props.message_id, subject=str(status)),
    )
    return reply.encode()
