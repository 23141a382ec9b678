"""The connection's handshake at the broker: the peer's open answered (2.4.1), or its
absence within the handshake time-out.

Owns `OpenHandler` (one per connection, beside session_handler.py and link_handler.py):
the open the broker sends with its properties and offered capabilities (features/relay.py
anonterm, features/sole_connection.py soleconn), the configured limits' refusal
(limits.py) and the sole-connection admission (refuse this connection, or close the
container's others), each refusal an open followed at once by close; and the handshake
time-out (RabbitMQ's handshake_timeout). protocol/connection.py routes the RemoteOpen event
and the handshake deadline here.
"""

from __future__ import annotations

import logging
from typing import Any

from amqpspec.amqp10.engine import Connection, ConnState
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.spec import Cond

from ..features import relay
from ..features.sole_connection import SoleConnections
from ..features.topic_subscriptions import TopicSubscriptions
from .limits import connection_refusal, handshake_timeout_reason
from .parts import ConnectionPart

log = logging.getLogger("reference_broker.connection")


class OpenHandler(ConnectionPart):
    """The peer's open and the handshake time-out of one connection."""

    __slots__ = ()

    def on_open(self, event: ev.RemoteOpen) -> None:
        """The peer's open (2.4.1): ours with the configured limits and sole-connection
        admission; a refusal follows it at once with close."""
        conn = self.connection
        conn.deadlines.handshake_due = None
        conn.summary.container_id = event.open.container_id
        props = event.open.properties
        if isinstance(props, dict):
            conn.summary.client_properties = {str(k): str(v) for k, v in props.items()}
        engine = conn.engine
        users = (summary.user for summary in conn.vhost.connections.values())
        refusal = connection_refusal(conn.config.limits, users, conn.summary.user)
        # features/sole_connection.py (soleconn): refuse this one, or close the container's others
        admission = conn.context.sole.admit(conn, event.open) if refusal is None else None
        properties: dict[Any, Any] = {"product": "amqpspec reference broker"}
        properties.update(admission.properties if admission is not None else {})
        engine.open(
            properties=properties,
            offered_capabilities=relay.offered_capabilities()  # features/relay.py (anonterm)
            + SoleConnections.offered_capabilities()
            + TopicSubscriptions.offered_capabilities(),  # features/topic_subscriptions.py
        )
        if refusal is not None:  # open, then close at once with the reason (2.4.1)
            log.info("%s: %s", conn.name, refusal)
            engine.close(Cond.RESOURCE_LIMIT_EXCEEDED, refusal)
            conn.deadlines.schedule_hard_close()
            return
        assert admission is not None
        if admission.refuse:  # open, then close at once with the reason (2.4.1)
            log.info("%s: %s", conn.name, admission.error)
            engine.close(admission.error)
            conn.deadlines.schedule_hard_close()
            return
        for other in admission.close:
            other.close_with(admission.error)
        conn.vhost.register_connection(conn.summary)

    def timed_out(self, engine: Connection | None) -> None:
        """RabbitMQ's handshake_timeout: no open within the bound of the TCP accept. Once
        the AMQP protocol headers were exchanged (after SASL, if any) a frame can say why:
        our open, then close with amqp:resource-limit-exceeded (2.4.1: open comes first;
        2.7.9), and the peer gets CLOSE_GRACE_S to answer; before that, a TCP close."""
        conn = self.connection
        reason = handshake_timeout_reason(conn.config.limits)
        log.info("%s: %s", conn.name, reason)
        if engine is None or engine.state is not ConnState.HDR_EXCH:
            conn.shutdown()
            return
        engine.close(Cond.RESOURCE_LIMIT_EXCEEDED, reason)
        conn.deadlines.schedule_hard_close()
        conn.mark_dirty()  # flushed at the turn's end; the timer re-arms for the grace
