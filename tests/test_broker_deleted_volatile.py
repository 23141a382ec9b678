"""The reference broker's publishers of a deleted node (reference_broker/features/
deleted_targets.py: detached with amqp:resource-deleted, 2.6.5 / 2.8.15) and its volatile
queues (reference_broker/features/volatile_nodes.py: a durable message refused with
amqp:precondition-failed, rejected or the link detached as the source allows, 3.2.1), in
memory, with the two faults of those areas."""

from __future__ import annotations

from broker_support import memory_session

from amqpspec.amqp10.composites import Header, Rejected, Source, Target
from amqpspec.amqp10.engine import DispositionReceived, RemoteDetach
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol
from amqpspec.reference_broker.config import BrokerConfig
from amqpspec.reference_broker.faults.catalog import Faults
from amqpspec.reference_broker.features.volatile_nodes import VOLATILE_ARGUMENT
from amqpspec.reference_broker.runtime.memory import MemoryBroker

ACCEPTED_ONLY = Source(outcomes=[symbol("amqp:accepted:list")])


def _broker(*faults: str) -> MemoryBroker:
    return MemoryBroker(
        BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, faults=Faults(faults))
    )


def _detaches(conn, link) -> list:
    return [e for e in conn.of(RemoteDetach) if e.link is link]


def _sender(broker, session, address: str, source: Source | None = None):
    link = session.attach_sender(f"s-{address}", source=source, target=Target(address=address))
    broker.pump()
    return link


def test_a_deleted_queue_detaches_its_publishers_with_resource_deleted():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q")
        broker.vhost.declare_queue("other")
        gone, kept = (
            _sender(broker, session, "/queues/q"),
            _sender(broker, session, "/queues/other"),
        )
        broker.vhost.delete_queue("q")
        broker.pump()
        (detach,) = _detaches(conn, gone)
        assert detach.closed and str(detach.error.condition) == "amqp:resource-deleted"
        assert _detaches(conn, kept) == []


def test_a_deleted_exchange_detaches_its_publishers_with_resource_deleted():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_exchange("x", "direct")
        link = _sender(broker, session, "/exchanges/x/key")
        direct = _sender(broker, session, "/exchanges/amq.direct/key")
        broker.vhost.delete_exchange("x")
        broker.pump()
        (detach,) = _detaches(conn, link)
        assert str(detach.error.condition) == "amqp:resource-deleted"
        assert _detaches(conn, direct) == []


def test_the_fault_keeps_the_publishers_of_a_deleted_node():
    broker = _broker("keep-publishers-of-deleted-nodes")
    with broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q")
        link = _sender(broker, session, "/queues/q")
        broker.vhost.delete_queue("q")
        broker.pump()
        assert _detaches(conn, link) == []


def _volatile(broker, session, source: Source | None = None):
    broker.vhost.declare_queue("v", durable=False, arguments={VOLATILE_ARGUMENT: True})
    return _sender(broker, session, "/queues/v", source)


def _message(durable: bool) -> bytes:
    return Message.of(b"m", header=Header(durable=durable)).encode()


def _state(conn, delivery_id: int):
    (state,) = [e.state for e in conn.of(DispositionReceived) if e.first <= delivery_id <= e.last]
    return state


def test_a_volatile_queue_rejects_a_durable_message_and_takes_a_transient_one():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        link = _volatile(broker, session)
        transient = link.send(_message(False), b"t-1", settled=False)
        durable = link.send(_message(True), b"t-2", settled=False)
        broker.pump()
        assert type(_state(conn, transient)).__name__ == "Accepted"
        refused = _state(conn, durable)
        assert isinstance(refused, Rejected)
        assert str(refused.error.condition) == "amqp:precondition-failed"
        assert broker.vhost.get_queue("v").messages == 1
        assert _detaches(conn, link) == []


def test_a_source_without_rejected_or_a_settled_durable_message_gets_the_link_detached():
    for source, settled in ((ACCEPTED_ONLY, False), (None, True)):
        with MemoryBroker() as broker, memory_session(broker) as (conn, session):
            link = _volatile(broker, session, source)
            link.send(_message(True), b"t-1", settled=settled)
            broker.pump()
            (detach,) = _detaches(conn, link)
            assert str(detach.error.condition) == "amqp:precondition-failed"
            assert broker.vhost.get_queue("v").messages == 0


def test_the_fault_accepts_a_durable_message_on_a_volatile_queue():
    broker = _broker("accept-durable-on-volatile")
    with broker, memory_session(broker) as (conn, session):
        link = _volatile(broker, session)
        sent = link.send(_message(True), b"t-1", settled=False)
        broker.pump()
        assert type(_state(conn, sent)).__name__ == "Accepted"
