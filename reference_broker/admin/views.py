"""The admin API's JSON views of the model: what GET /api/connections, /api/queues,
/api/exchanges and /api/bindings show of one object and /api/overview's totals, in the
field names of RabbitMQ's management API (the tests and the conformance admin adapters read
these names).

Owns: the mapping of a model object to its JSON object. May touch: nothing (reads the
objects it is handed).
"""

from __future__ import annotations

from typing import Any

from ..queues.classic import ClassicQueue
from ..queues.exchanges import Binding, Exchange
from ..queues.vhost import ConnectionSummary, VirtualHost


class JsonViews:
    """The JSON objects of one vhost's connections, queues, exchanges and bindings."""

    __slots__ = ("node", "vhost")

    def __init__(self, vhost: str, node: str) -> None:
        self.vhost = vhost
        self.node = node

    def connection(self, c: ConnectionSummary) -> dict[str, Any]:
        """GET /api/connections: one connection."""
        return {
            "name": c.name,
            "vhost": self.vhost,
            "node": self.node,
            "user": c.user,
            "protocol": c.protocol,
            "peer_host": c.peer_host,
            "peer_port": c.peer_port,
            "host": c.host,
            "port": c.port,
            "channels": c.channels,
            "container_id": c.container_id,
            "state": "running",
            "connected_at": int(c.connected_at * 1000),
            "recv_oct": c.bytes_in,
            "recv_cnt": c.frames_in,
            "send_oct": c.bytes_out,
            "send_cnt": c.frames_out,
            "client_properties": c.client_properties,
        }

    def queue(self, q: ClassicQueue) -> dict[str, Any]:
        """GET /api/queues: one queue (classic, quorum or stream) with its consumers."""
        return {
            "name": q.name,
            "vhost": self.vhost,
            "node": self.node,
            "type": q.queue_type,
            "state": "running",
            "durable": q.durable,
            "auto_delete": q.auto_delete,
            "exclusive": q.exclusive_owner is not None,
            "arguments": q.arguments,
            "messages": q.messages,
            "messages_ready": q.messages_ready,
            "messages_unacknowledged": q.messages_unacknowledged,
            "consumers": len(q.consumers),
            "consumer_details": [
                {
                    "consumer_tag": c.tag,
                    "ack_required": not c.settled,
                    "prefetch_count": c.credit,
                    "queue": {"name": q.name, "vhost": self.vhost},
                }
                for c in q.consumers
            ],
            "message_stats": {
                "publish": q.published_total,
                "deliver_get": q.delivered_total,
                "ack": q.acked_total,
            },
        }

    def exchange(self, e: Exchange) -> dict[str, Any]:
        """GET /api/exchanges: one exchange."""
        return {
            "name": e.name,
            "vhost": self.vhost,
            "type": e.type,
            "durable": e.durable,
            "auto_delete": e.auto_delete,
            "internal": e.internal,
            "arguments": e.arguments,
            "message_stats": {"publish_in": e.routed_total + e.unroutable_total},
        }

    def binding(self, b: Binding) -> dict[str, Any]:
        """GET /api/bindings: one binding."""
        return {
            "source": b.source,
            "vhost": self.vhost,
            "destination": b.destination,
            "destination_type": b.destination_type,
            "routing_key": b.routing_key,
            "arguments": b.arguments_dict,
            "properties_key": b.properties_key,
        }

    def totals(self, vhost: VirtualHost) -> dict[str, int]:
        """GET /api/overview: the vhost's object and message totals."""
        ready = unacked = consumers = 0
        for q in vhost.queues.values():
            ready += q.messages_ready
            unacked += q.messages_unacknowledged
            consumers += len(q.consumers)
        return {
            "messages": ready + unacked,
            "messages_ready": ready,
            "messages_unacknowledged": unacked,
            "consumers": consumers,
            "queues": len(vhost.queues),
            "exchanges": len(vhost.exchanges),
            "connections": len(vhost.connections),
        }
