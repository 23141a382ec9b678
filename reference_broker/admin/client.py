"""A small client for the RabbitMQ management HTTP API subset that `api.py` serves.

Owns: HTTP calls only (stdlib http.client, one keep-alive connection, Basic auth). The same
client drives the reference broker and a real RabbitMQ (3.10+ with rabbitmq_management), so
conformance adapters and tests can declare/purge queues and raise/clear alarms on either.
Alarms (`raise_alarm`/`clear_alarm`) exist on the reference broker only; on RabbitMQ use
`rabbitmqctl set_vm_memory_high_watermark` (see docs/real-brokers.md).
"""

from __future__ import annotations

import base64
import http.client
import json
from typing import Any
from urllib.parse import quote, urlsplit

VHOST = "%2F"


class ManagementError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        self.error = body.get("error") if isinstance(body, dict) else None
        self.reason = body.get("reason") if isinstance(body, dict) else None
        super().__init__(f"{method} {path}: HTTP {status} {self.error}: {self.reason}")


def _name(name: str) -> str:
    return quote(name, safe="")


class ManagementClient:
    def __init__(
        self,
        base_url: str = "http://127.0.0.1:15672",
        user: str = "guest",
        password: str = "guest",
        *,
        timeout: float = 10.0,
    ) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 15672
        self.timeout = timeout
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._auth = f"Basic {token}"
        self._conn: http.client.HTTPConnection | None = None

    # ------------------------------------------------------------------ transport
    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request; returns (status, decoded JSON or None). Retries once on a
        connection the server closed while idle."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": self._auth}  # no Accept: RabbitMQ 406s some 204s
        if payload is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, path, body=payload, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
                continue
            if response.getheader("connection", "").lower() == "close":
                self.close()
            data = json.loads(raw) if raw else None
            return response.status, data
        raise AssertionError("unreachable")

    def call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = ()) -> Any:
        status, data = self.request(method, path, body)
        if status >= 300 and status not in ok:
            raise ManagementError(method, path, status, data)
        return data

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> ManagementClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ API
    def overview(self) -> dict[str, Any]:
        return self.call("GET", "/api/overview")

    def queues(self) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/queues/{VHOST}")

    def declare_queue(
        self,
        name: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> bool:
        """PUT; True if the queue was created (201), False if it existed (204)."""
        body = {
            "durable": durable,
            "auto_delete": auto_delete,
            "arguments": arguments if arguments is not None else {"x-queue-type": "classic"},
        }
        status, data = self.request("PUT", f"/api/queues/{VHOST}/{_name(name)}", body)
        if status not in (201, 204):
            raise ManagementError("PUT", f"/api/queues/{VHOST}/{name}", status, data)
        return status == 201

    def queue(self, name: str) -> dict[str, Any]:
        return self.call("GET", f"/api/queues/{VHOST}/{_name(name)}")

    def delete_queue(self, name: str, *, missing_ok: bool = False) -> None:
        self.call("DELETE", f"/api/queues/{VHOST}/{_name(name)}", ok=(404,) if missing_ok else ())

    def purge_queue(self, name: str) -> None:
        self.call("DELETE", f"/api/queues/{VHOST}/{_name(name)}/contents")

    def declare_exchange(self, name: str, type: str, *, durable: bool = True) -> bool:
        path = f"/api/exchanges/{VHOST}/{_name(name)}"
        status, data = self.request("PUT", path, {"type": type, "durable": durable})
        if status not in (201, 204):
            raise ManagementError("PUT", path, status, data)
        return status == 201

    def exchange(self, name: str) -> dict[str, Any]:
        return self.call("GET", f"/api/exchanges/{VHOST}/{_name(name)}")

    def delete_exchange(self, name: str, *, missing_ok: bool = False) -> None:
        path = f"/api/exchanges/{VHOST}/{_name(name)}"
        self.call("DELETE", path, ok=(404,) if missing_ok else ())

    def bind(
        self, exchange: str, queue: str, routing_key: str = "", arguments: dict | None = None
    ) -> None:
        path = f"/api/bindings/{VHOST}/e/{_name(exchange)}/q/{_name(queue)}"
        self.call("POST", path, {"routing_key": routing_key, "arguments": arguments or {}})

    def bindings(self, exchange: str | None = None, queue: str | None = None) -> list[dict]:
        if exchange is not None and queue is not None:
            return self.call("GET", f"/api/bindings/{VHOST}/e/{_name(exchange)}/q/{_name(queue)}")
        return self.call("GET", f"/api/bindings/{VHOST}")

    def unbind(self, exchange: str, queue: str, properties_key: str) -> None:
        path = f"/api/bindings/{VHOST}/e/{_name(exchange)}/q/{_name(queue)}/"
        self.call("DELETE", path + _name(properties_key))

    def connections(self) -> list[dict[str, Any]]:
        return self.call("GET", "/api/connections")

    def close_connection(self, name: str) -> None:
        """Close one AMQP connection (the broker sends amqp:connection:forced)."""
        self.call("DELETE", f"/api/connections/{_name(name)}")

    def set_transaction_timeout(self, name: str, seconds: float) -> bool:
        """The reference broker's PUT /api/connections/{name}/transaction-timeout (not
        RabbitMQ's): True when set, False when the API has no such path (404, 405)."""
        path = f"/api/connections/{_name(name)}/transaction-timeout"
        status, data = self.request("PUT", path, {"seconds": seconds})
        if status in (404, 405):
            return False
        if status >= 300:
            raise ManagementError("PUT", path, status, data)
        return True

    def alarms_in_effect(self) -> list[str]:
        """Resources in alarm, through /api/health/checks/alarms (both brokers)."""
        status, data = self.request("GET", "/api/health/checks/alarms")
        if status == 200:
            return []
        if status == 503 and isinstance(data, dict):
            return [a.get("resource") for a in data.get("alarms", [])]
        raise ManagementError("GET", "/api/health/checks/alarms", status, data)

    def raise_alarm(self, kind: str) -> None:
        self.call("PUT", f"/api/alarms/{_name(kind)}")

    def clear_alarm(self, kind: str) -> None:
        self.call("DELETE", f"/api/alarms/{_name(kind)}")

    def restart(self) -> str:
        """POST /api/restart (the reference broker's own route): the broker stops and starts
        again in place; returns the boot_id it had (/api/overview shows a new one once it
        is back)."""
        data = self.call("POST", "/api/restart")
        return str((data or {}).get("boot_id", ""))

    def create_user(self, name: str, password: str, tags: str = "") -> None:
        """PUT /api/users/{name} (creates or updates; the caller needs administrator)."""
        self.call("PUT", f"/api/users/{_name(name)}", {"password": password, "tags": tags})

    def set_permissions(self, user: str, configure: str, write: str, read: str) -> None:
        """PUT /api/permissions/%2F/{user}: the three regexes on the vhost "/"."""
        body = {"configure": configure, "write": write, "read": read}
        self.call("PUT", f"/api/permissions/{VHOST}/{_name(user)}", body)

    def delete_user(self, name: str, *, missing_ok: bool = False) -> None:
        self.call("DELETE", f"/api/users/{_name(name)}", ok=(404,) if missing_ok else ())
