"""The admin API's users and permissions routes (administrator only: api.py authorizes).

Owns: GET /api/users, GET|PUT|DELETE /api/users/{name}, GET|PUT|DELETE
/api/permissions/%2F/{name}. Users created here live in memory (`BrokerConfig.runtime_users`)
until the broker stops; those of the configuration cannot be changed or deleted here (400).
A new user has no permissions (RabbitMQ: no access to the vhost) until PUT /api/permissions.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import BrokerConfig, User
from ..protocol.permissions import CONFIGURE, NOTHING, READ, WRITE, Permissions
from .http_types import HttpError, Request, Response, check_vhost, not_found, only


class UserRoutes:
    """The routes on the configuration's users (`config.runtime_users` they change)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    def _runtime_user(self, name: str) -> User:
        """The runtime user `name` (404 if none; 400 for one of the configuration)."""
        user = self.config.user(name)
        if user is None:
            raise not_found()
        if name not in self.config.runtime_users:
            raise HttpError(400, "bad_request", f"user '{name}' is defined in the configuration")
        return user

    def users(self, request: Request, rest: list[str]) -> Response:
        if not rest:
            only(request, "GET")
            known = {u.name: u for u in self.config.users} | self.config.runtime_users
            return Response(200, [_user_json(u) for u in known.values()])
        if len(rest) != 1:
            raise not_found()
        name = rest[0]
        only(request, "GET", "PUT", "DELETE")
        if request.method == "GET":
            user = self.config.user(name)
            if user is None:
                raise not_found()
            return Response(200, _user_json(user))
        if request.method == "DELETE":
            self._runtime_user(name)
            del self.config.runtime_users[name]
            return Response(204)
        body = request.json()
        password, tags = body.get("password"), body.get("tags", "")
        if not isinstance(password, str):
            raise HttpError(400, "bad_request", "password is required")
        if isinstance(tags, str):
            tags = [t.strip() for t in tags.split(",") if t.strip()]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise HttpError(400, "bad_request", "tags must be a string or a list of strings")
        existing = self.config.runtime_users.get(name)
        if existing is None and self.config.user(name) is not None:
            raise HttpError(400, "bad_request", f"user '{name}' is defined in the configuration")
        permissions = existing.permissions if existing is not None else NOTHING
        self.config.runtime_users[name] = User(name, password, tuple(tags), permissions)
        return Response(201 if existing is None else 204)

    def permissions(self, request: Request, rest: list[str]) -> Response:
        check_vhost(rest)
        if len(rest) != 2:
            raise not_found()
        only(request, "GET", "PUT", "DELETE")
        user = self._runtime_user(rest[1])
        if request.method == "GET":
            p = user.permissions
            body = {"user": user.name, "vhost": "/", "configure": p.configure}
            return Response(200, body | {"write": p.write, "read": p.read})
        if request.method == "DELETE":
            permissions = NOTHING
        else:
            body = request.json()
            patterns = [body.get(kind, "") for kind in (CONFIGURE, WRITE, READ)]
            if not all(isinstance(p, str) for p in patterns):
                raise HttpError(400, "bad_request", "configure, write, read must be strings")
            try:
                permissions = Permissions(*patterns)
            except ValueError as exc:
                raise HttpError(400, "bad_request", str(exc)) from None
        self.config.runtime_users[user.name] = dataclasses.replace(user, permissions=permissions)
        return Response(201 if request.method == "PUT" else 204)


def _user_json(user: User) -> dict[str, Any]:
    return {"name": user.name, "tags": list(user.tags)}
