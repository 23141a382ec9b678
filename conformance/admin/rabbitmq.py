"""The RabbitMQ admin adapters: `RabbitMqHttpAdmin` (the management HTTP API; the reference
broker serves the same subset) and `RabbitMqCtlAdmin` (rabbitmqctl, with the environment of
tools/brokers/rabbitmq.sh, through `RabbitMqCtl`). Exchanges (`declare_exchange` /
`delete_exchange`): PUT /api/exchanges/%2F/{x} (direct, not durable), POST
/api/bindings/%2F/e/{x}/q/{q}, DELETE /api/exchanges/%2F/{x}. Restricted users
(`restricted_user` / `delete_user`): PUT /api/users, PUT /api/permissions/%2F/{user}, DELETE
/api/users. Memory alarms: `PUT/DELETE /api/alarms/memory` on the reference broker;
`rabbitmqctl set_vm_memory_high_watermark 0.00001` / restore on RabbitMQ. A restart
(`restart`, profile `[admin] restart = "http"`): the reference broker's POST /api/restart,
then /api/overview polled until it answers with another boot_id (RESTART_WAIT_S at most);
RabbitMQ has no such route, and the suite never restarts a shared RabbitMQ. Touches nothing
else.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from amqpspec.conformance.admin.base import WS_LISTENER, WS_LISTENERS, Admin
from amqpspec.conformance.verdicts import HarnessError, Unsupported
from amqpspec.reference_broker.admin.client import ManagementClient, ManagementError

REPO_ROOT = Path(__file__).resolve().parents[2]
_RESTORED_WATERMARK = "0.4"
RESTART_WAIT_S = 10.0  # the reference broker is back in ~10 ms; a loaded machine's bound
_RESTART_POLL_S = 0.01


class RabbitMqCtl:
    """rabbitmqctl with the node environment of tools/brokers/rabbitmq.sh."""

    def __init__(self, command: str, env_script: str | None) -> None:
        self.command = command
        self.env = dict(os.environ)
        if env_script:
            script = Path(env_script)
            if not script.is_absolute():
                script = REPO_ROOT / script
            out = subprocess.run(
                ["bash", str(script), "env"], capture_output=True, text=True, timeout=30
            )
            for line in out.stdout.splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    self.env[key] = value

    def __call__(self, *args: str, timeout: float = 60.0) -> str:
        try:
            out = subprocess.run(
                [self.command, *args], capture_output=True, text=True, timeout=timeout, env=self.env
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HarnessError(f"rabbitmqctl {' '.join(args)}: {exc}") from exc
        if out.returncode != 0:
            raise HarnessError(f"rabbitmqctl {' '.join(args)}: {out.stderr.strip()[:300]}")
        return out.stdout


class RabbitMqHttpAdmin(Admin):
    name = "rabbitmq-http"

    def __init__(
        self, url: str, alarm: str = "http", ctl: RabbitMqCtl | None = None, restart: str = "none"
    ) -> None:
        parts = urlsplit(url)
        base = f"{parts.scheme or 'http'}://{parts.hostname or '127.0.0.1'}:{parts.port or 15672}"
        self.client = ManagementClient(
            base, unquote(parts.username or "guest"), unquote(parts.password or "guest")
        )
        self.alarm = alarm
        self.ctl = ctl
        self.restart_mode = restart

    def _call(self, what: str, func, *args):  # type: ignore[no-untyped-def]
        try:
            return func(*args)
        except (ManagementError, OSError, http.client.HTTPException) as exc:
            self.client.close()  # a half-done request leaves the connection unusable
            raise HarnessError(f"admin {what}: {exc}") from exc

    def declare_queue(self, queue: str, arguments: dict[str, Any] | None = None) -> None:
        def declare(name: str) -> bool:
            return self.client.declare_queue(name, arguments=arguments)

        self._call("declare queue", declare, queue)

    def delete_queue(self, queue: str) -> None:
        self._call("delete queue", lambda q: self.client.delete_queue(q, missing_ok=True), queue)

    def purge_queue(self, queue: str) -> None:
        self._call("purge queue", self.client.purge_queue, queue)

    def declare_exchange(self, exchange: str, queue: str, routing_key: str) -> None:
        def declare() -> None:
            self.client.declare_exchange(exchange, "direct", durable=False)
            self.client.bind(exchange, queue, routing_key)

        self._call("declare exchange", declare)

    def delete_exchange(self, exchange: str) -> None:
        def delete() -> None:
            self.client.delete_exchange(exchange, missing_ok=True)

        self._call("delete exchange", delete)

    def queue_depth(self, queue: str) -> int:
        info = self._call("queue", self.client.queue, queue)
        return int(info.get("messages", 0) or 0)

    def _connection_name(self, peer_port: int, timeout: float) -> str:
        """RabbitMQ lists a new connection after its stats interval: look for the one from
        `peer_port` until `timeout`."""
        end = time.monotonic() + timeout
        while True:
            listed = self._call("connections", self.client.connections)
            names = [c["name"] for c in listed if c.get("peer_port") == peer_port]
            if names:
                return str(names[0])
            if time.monotonic() > end:
                raise HarnessError(f"admin lists no connection from port {peer_port}")
            time.sleep(0.25)

    def close_connection(self, peer_port: int, timeout: float = 10.0) -> None:
        name = self._connection_name(peer_port, timeout)
        self._call("close connection", self.client.close_connection, name)

    def set_transaction_timeout(self, peer_port: int, seconds: float) -> None:
        """The reference broker's PUT /api/connections/{name}/transaction-timeout;
        Unsupported where the API has no such path (RabbitMQ)."""
        name = self._connection_name(peer_port, 10.0)
        call = self.client.set_transaction_timeout
        if not self._call("transaction timeout", call, name, seconds):
            raise Unsupported("the admin API sets no transaction timeout for a connection")

    def timeout_ms(self, key: str) -> int:
        """`key` of /api/overview (the reference broker's handshake_timeout and
        sasl_timeout; RabbitMQ's own overview has neither: UNSUPPORTED)."""
        overview = self._call("overview", self.client.overview)
        value = overview.get(key)
        if not isinstance(value, int):
            raise Unsupported(f"the broker's /api/overview reports no {key}")
        return value

    def websocket_url(self) -> str:
        """The `amqp/ws` (`amqp/wss`) listener of /api/overview (the reference broker's with
        --ws-port; `path` is its own field, "/" when absent)."""
        overview = self._call("overview", self.client.overview)
        for listener in overview.get("listeners") or ():
            scheme = WS_LISTENERS.get(str(listener.get("protocol")))
            if scheme is not None:
                host = str(listener.get("ip_address") or "")
                if host in ("", "0.0.0.0", "::"):
                    host = self.client.host
                host = f"[{host}]" if ":" in host else host
                return f"{scheme}://{host}:{listener['port']}{listener.get('path') or '/'}"
        raise Unsupported(
            f"the broker's admin API lists no {WS_LISTENER} listener (AMQP over WebSocket)"
        )

    def restart(self) -> None:
        """POST /api/restart, then wait (bounded) until /api/overview shows a new boot_id."""
        if self.restart_mode != "http":
            raise Unsupported(f"admin adapter {self.name!r} restarts no broker (profile's [admin])")
        try:
            before = self.client.restart()
        except ManagementError as exc:
            self.client.close()
            if exc.status in (400, 404):  # no data dir, or no such route
                raise Unsupported(f"the broker refuses a restart: {exc}") from exc
            raise HarnessError(f"admin restart: {exc}") from exc
        self.client.close()
        end = time.monotonic() + RESTART_WAIT_S
        while time.monotonic() < end:
            try:
                if self.client.overview().get("boot_id") != before:
                    return
            except (ManagementError, OSError, http.client.HTTPException):
                self.client.close()  # stopped, not listening yet
            time.sleep(_RESTART_POLL_S)
        raise HarnessError(f"the broker was not back within {RESTART_WAIT_S} s of its restart")

    def restricted_user(self, name: str) -> tuple[str, str]:
        password = f"{name}-pw"
        self._call("create user", self.client.create_user, name, password)
        self._call("set permissions", self.client.set_permissions, name, "^$", "^$", "^$")
        return name, password

    def delete_user(self, name: str) -> None:
        self._call("delete user", lambda n: self.client.delete_user(n, missing_ok=True), name)

    def raise_alarm(self, kind: str = "memory") -> None:
        if self.alarm == "rabbitmqctl" and self.ctl is not None:
            _ctl_alarm(self.ctl, kind, True)
        else:
            self._call("raise alarm", self.client.raise_alarm, kind)

    def clear_alarm(self, kind: str = "memory") -> None:
        if self.alarm == "rabbitmqctl" and self.ctl is not None:
            _ctl_alarm(self.ctl, kind, False)
        else:
            self._call("clear alarm", self.client.clear_alarm, kind)

    def close(self) -> None:
        self.client.close()


def _ctl_alarm(ctl: RabbitMqCtl, kind: str, on: bool) -> None:
    if kind == "memory":
        ctl("set_vm_memory_high_watermark", "0.00001" if on else _RESTORED_WATERMARK)
    elif kind == "disk":
        ctl("set_disk_free_limit", "1000GB" if on else "50MB")
    else:
        raise Unsupported(f"no {kind} alarm through rabbitmqctl")


class RabbitMqCtlAdmin(Admin):
    """rabbitmqctl only: purge/delete/depth and alarms; queues cannot be declared."""

    name = "rabbitmqctl"

    def __init__(self, ctl: RabbitMqCtl) -> None:
        self.ctl = ctl

    def delete_queue(self, queue: str) -> None:
        self.ctl("delete_queue", queue)

    def purge_queue(self, queue: str) -> None:
        self.ctl("purge_queue", queue)

    def queue_depth(self, queue: str) -> int:
        for line in self.ctl("list_queues", "-q", "name", "messages").splitlines():
            name, _, count = line.rpartition("\t")
            if name == queue:
                return int(count)
        raise HarnessError(f"no queue {queue!r}")

    def raise_alarm(self, kind: str = "memory") -> None:
        _ctl_alarm(self.ctl, kind, True)

    def clear_alarm(self, kind: str = "memory") -> None:
        _ctl_alarm(self.ctl, kind, False)
