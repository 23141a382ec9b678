"""The admin API's requests, responses and HTTP errors, as plain values (no sockets, no
HTTP wire format: http_server.py maps them to aiohttp).

Owns: `Request`, `Response`, `HttpError` (an error answer, RabbitMQ's JSON shape
`{"error": ..., "reason": ...}`), the common refusals (`not_found`, `method_not_allowed`)
and the route guards every route module uses (`only`, `check_vhost`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..config import User


@dataclass(slots=True)
class Request:
    method: str
    path: str  # raw path, without the query
    segments: list[str]  # percent-decoded path segments after "/api"
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes
    peer_ip: str = "127.0.0.1"
    user: User | None = None

    def json(self) -> Any:
        if not self.body.strip():
            return {}
        try:
            data = json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            raise HttpError(400, "bad_request", "not_json") from None
        if not isinstance(data, dict):
            raise HttpError(400, "bad_request", "not_json")
        return data


@dataclass(slots=True)
class Response:
    status: int
    body: Any = None  # JSON-serialisable, or None for no body
    headers: dict[str, str] = field(default_factory=dict)


class HttpError(Exception):
    def __init__(
        self, status: int, error: str, reason: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(reason)
        self.response = Response(status, {"error": error, "reason": reason}, headers or {})


def not_found() -> HttpError:
    return HttpError(404, "Object Not Found", "Not Found")


def method_not_allowed(allowed: str) -> HttpError:
    return HttpError(405, "Method Not Allowed", "Method Not Allowed", {"allow": allowed})


def check_vhost(rest: list[str]) -> None:
    """The path names the one vhost "/" (%2F), else 404."""
    if not rest or rest[0] != "/":
        raise not_found()


def only(request: Request, *methods: str) -> None:
    """405 with an Allow header unless the request uses one of `methods`."""
    if request.method not in methods:
        raise method_not_allowed(", ".join(methods))
