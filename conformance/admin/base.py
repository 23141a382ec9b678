"""The admin interface: how the suite manages a broker out of band (queues, exchanges, alarms,
closing a client connection or setting its transaction timeout, restricted users, listeners, a
restart).

Owns: `Admin` (every operation raises Unsupported unless an adapter implements it) and
`NoAdmin`; the adapters are `rabbitmq.py` (HTTP API, rabbitmqctl) and `management_node.py`
(RabbitMQ 4's /management node over AMQP). Touches nothing.
"""

from __future__ import annotations

from typing import Any

from amqpspec.conformance.verdicts import Unsupported

WS_LISTENER = "amqp/ws"  # the reference broker's AMQP-over-WebSocket listener (websocket.py)
WS_LISTENERS = {WS_LISTENER: "ws", "amqp/wss": "wss"}  # listener protocol -> URL scheme


class Admin:
    """Out-of-band broker management; every method may raise Unsupported."""

    name = "none"

    def declare_queue(self, queue: str, arguments: dict[str, Any] | None = None) -> None:
        """Declare `queue` (durable) with RabbitMQ's queue `arguments` (x-queue-type...)."""
        raise Unsupported(f"admin adapter {self.name!r} cannot declare queues")

    def delete_queue(self, queue: str) -> None:
        raise Unsupported(f"admin adapter {self.name!r} cannot delete queues")

    def purge_queue(self, queue: str) -> None:
        raise Unsupported(f"admin adapter {self.name!r} cannot purge queues")

    def declare_exchange(self, exchange: str, queue: str, routing_key: str) -> None:
        """Declare a direct `exchange` (not durable) bound to `queue` by `routing_key`."""
        raise Unsupported(f"admin adapter {self.name!r} cannot declare exchanges")

    def delete_exchange(self, exchange: str) -> None:
        """Delete `exchange` (nothing when it is gone already)."""
        raise Unsupported(f"admin adapter {self.name!r} cannot delete exchanges")

    def queue_depth(self, queue: str) -> int:
        raise Unsupported(f"admin adapter {self.name!r} cannot report queue depth")

    def raise_alarm(self, kind: str = "memory") -> None:
        raise Unsupported(f"admin adapter {self.name!r} cannot raise alarms")

    def clear_alarm(self, kind: str = "memory") -> None:
        raise Unsupported(f"admin adapter {self.name!r} cannot clear alarms")

    def close_connection(self, peer_port: int) -> None:
        """Close the client connection from local port `peer_port` as an operator does."""
        raise Unsupported(f"admin adapter {self.name!r} cannot close connections")

    def set_transaction_timeout(self, peer_port: int, seconds: float) -> None:
        """Give the client connection from local port `peer_port` a transaction timeout of
        `seconds` (for the transactions it declares from then on: the reference broker's
        admin API; a broker with one configured timeout says it in its profile)."""
        raise Unsupported(f"admin adapter {self.name!r} cannot set a transaction timeout")

    def restricted_user(self, name: str) -> tuple[str, str]:
        """Create user `name` with no rights on the vhost "/" (configure, write and read all
        "^$"); returns (username, password) for a SASL PLAIN login. Undo with delete_user."""
        raise Unsupported(f"admin adapter {self.name!r} cannot create users")

    def delete_user(self, name: str) -> None:
        raise Unsupported(f"admin adapter {self.name!r} cannot delete users")

    def restart(self) -> None:
        """Stop the broker and start it again (the same ports and data), returning once it
        listens again (a bounded wait); every connection to it is gone."""
        raise Unsupported(f"admin adapter {self.name!r} cannot restart the broker")

    def websocket_url(self) -> str:
        """The ws:// URL of the broker's AMQP-over-WebSocket listener, as its admin API lists
        it (the WebSocket binding's cases in a run over TCP: steps/websocket.py)."""
        raise Unsupported(f"admin adapter {self.name!r} cannot list the broker's listeners")

    def timeout_ms(self, key: str) -> int:
        """The broker's time-out `key` in ms (0 = none) as its admin API reports it:
        "handshake_timeout" (TCP accept to the client's open), "sasl_timeout" (SASL header
        to the outcome)."""
        raise Unsupported(f"admin adapter {self.name!r} does not report a {key}")

    def close(self) -> None:
        pass


class NoAdmin(Admin):
    name = "none"
