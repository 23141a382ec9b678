"""The reference broker's anonymous terminus (a sender with a null target, each message
routed by its `to`), in memory: routing errors as RabbitMQ 4 answers them (the anonymous
terminus spec's routing errors): an unsettled message without `to`, with a `to` that is not
a v2 address, or to a queue that does not exist is rejected with amqp:precondition-failed /
amqp:not-found; a settled one cannot be rejected, so the link is detached with the condition
and the delivery-tag in the error's info."""

from __future__ import annotations

from broker_support import memory_session

from amqpspec.amqp10.composites import Properties, Target
from amqpspec.amqp10.engine import DispositionReceived, RemoteDetach
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol
from amqpspec.reference_broker.runtime.memory import MemoryBroker


def _message(to: str | None) -> bytes:
    return Message.of(b"x", properties=Properties(to=to)).encode()


def test_unsettled_unroutable_messages_are_rejected_and_the_link_stays():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q")
        link = session.attach_sender("anon", target=Target(address=None))
        broker.pump()
        sent = [
            link.send(_message(to), settled=False)
            for to in (None, "q", "/queues/missing", "/queues/q")
        ]
        broker.pump()
        states = {
            d: e.state for e in conn.of(DispositionReceived) for d in range(e.first, e.last + 1)
        }
        conditions = [str(states[d].error.condition) for d in sent[:3]]
        assert conditions == ["amqp:precondition-failed"] * 2 + ["amqp:not-found"]
        assert type(states[sent[3]]).__name__ == "Accepted"
        assert broker.vhost.get_queue("q").messages == 1
        assert conn.of(RemoteDetach) == []


def test_a_settled_message_without_to_detaches_the_link():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        link = session.attach_sender("anon", target=Target(address=None))
        broker.pump()
        link.send(_message(None), b"tag-1", settled=True)
        broker.pump()
        (detach,) = conn.of(RemoteDetach)
        assert detach.link is link and str(detach.error.condition) == "amqp:precondition-failed"
        assert detach.error.info == {symbol("delivery-tag"): b"tag-1"}
