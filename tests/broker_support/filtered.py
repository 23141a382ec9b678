"""A receiver with source filters against a broker a test started (tests/test_broker_filters.py,
tests/test_sql_filters.py).

Owns: `drained(client, filters, address)`: a session, a receiver from `address` whose source
carries `filters`, drained with 10 credit: (the filter its attach reports, the bodies).
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Source
from amqpspec.amqp10.engine import FlowReceived, RemoteAttach, TransferReceived
from amqpspec.amqp10.message import Message


def drained(c: Any, filters: dict, address: str) -> tuple[dict, list[bytes]]:
    session = c.conn.begin()
    c.wait_for(lambda: session.remote_channel is not None, "begin")
    link = session.attach_receiver(address, source=Source(address=address, filter=filters))
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    flows = len(c.of(FlowReceived))
    link.flow(link_credit=10, drain=True)
    c.wait_for(lambda: link.link_credit == 0 and len(c.of(FlowReceived)) > flows, "drain")
    got = [Message.decode(t.payload).value for t in c.of(TransferReceived) if t.link is link]
    return dict(link.remote_attach.source.filter or {}), got
