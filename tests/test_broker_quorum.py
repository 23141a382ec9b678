"""Quorum-queue semantics (reference_broker.queues.quorum): the delivery limit counted by the
header delivery-count, dead-lettering at the limit and on rejected, at-most-once and
at-least-once, durable; then over the protocol on an in-memory broker.
"""

from __future__ import annotations

import pytest
from broker_support import memory_session

from amqpspec.amqp10.composites import Modified, Rejected
from amqpspec.amqp10.engine import TransferReceived
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol
from amqpspec.reference_broker.queues.classic import MODIFIED, REJECTED, RELEASED, Delivery
from amqpspec.reference_broker.queues.quorum import DEFAULT_DELIVERY_LIMIT, QuorumQueue
from amqpspec.reference_broker.queues.vhost import PreconditionFailedError, VirtualHost
from amqpspec.reference_broker.runtime.memory import MemoryBroker

QUORUM = {"x-queue-type": "quorum"}
DLQ_ARGS = {**QUORUM, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}


def take(queue, tag="c", credit=1) -> Delivery:
    queue.flow(tag, delivery_count=queue.consumer(tag).delivery_count, link_credit=credit)
    events = [e for e in queue.dispatch() if isinstance(e, Delivery)]
    assert events, "nothing delivered"
    return events[0]


def fail(queue, delivery, tag="c") -> None:
    queue.settle(tag, [delivery.message.msg_id], MODIFIED, delivery_failed=True)


def vhost_with_dlq(**arguments):
    vhost = VirtualHost()
    vhost.declare_queue("dlq", durable=False)
    queue, _ = vhost.declare_queue("q", arguments={**DLQ_ARGS, **arguments})
    queue.add_consumer("c")
    return vhost, queue, vhost.get_queue("dlq")


def test_delivery_limit_dead_letters_after_limit_plus_one_failures():
    _, queue, dlq = vhost_with_dlq(**{"x-delivery-limit": 2})
    queue.publish(b"m")
    counts = []
    for _ in range(3):  # delivery-count 0, 1, 2: each delivery fails
        delivery = take(queue)
        counts.append(delivery.message.delivery_count)
        fail(queue, delivery)
    assert counts == [0, 1, 2]
    assert queue.messages == 0 and queue.dead_lettered_total == 1
    (copy,) = dlq.ready_messages()
    assert copy.payload == b"m"
    assert copy.annotations[symbol("x-first-death-reason")] == "delivery_limit"
    assert copy.annotations[symbol("x-first-death-queue")] == "q"


def test_released_does_not_count_toward_the_limit():
    _, queue, dlq = vhost_with_dlq(**{"x-delivery-limit": 0})
    queue.publish(b"m")
    for _ in range(5):
        delivery = take(queue)
        queue.settle("c", [delivery.message.msg_id], RELEASED)
    assert queue.messages_ready == 1 and dlq.messages == 0


def test_rejected_is_dead_lettered():
    _, queue, dlq = vhost_with_dlq()
    queue.publish(b"bad")
    queue.settle("c", [take(queue).message.msg_id], REJECTED)
    assert [m.annotations[symbol("x-first-death-reason")] for m in dlq] == ["rejected"]


def test_no_dead_letter_exchange_drops():
    vhost = VirtualHost()
    queue, _ = vhost.declare_queue("q", arguments={**QUORUM, "x-delivery-limit": 0})
    assert isinstance(queue, QuorumQueue) and queue.queue_type == "quorum"
    queue.add_consumer("c")
    queue.publish(b"m")
    fail(queue, take(queue))
    assert queue.messages == 0 and queue.acked_total == 1


def test_at_least_once_holds_what_routes_nowhere_at_most_once_drops_it():
    vhost = VirtualHost()
    args = {**QUORUM, "x-delivery-limit": 0, "x-dead-letter-exchange": "amq.direct"}
    least, _ = vhost.declare_queue(
        "l", arguments={**args, "x-dead-letter-strategy": "at-least-once"}
    )
    most, _ = vhost.declare_queue("m", arguments=args)
    for queue in (least, most):
        queue.add_consumer("c")
        queue.publish(b"x")
        fail(queue, take(queue))
    assert (least.messages, len(least.held), least.messages_ready) == (1, 1, 0)
    assert most.messages == 0


def test_default_limit_and_declare_checks():
    vhost = VirtualHost()
    queue, _ = vhost.declare_queue("q", arguments=QUORUM)
    assert queue.delivery_limit == DEFAULT_DELIVERY_LIMIT
    for bad in (
        {"x-delivery-limit": -1},
        {"x-delivery-limit": "many"},
        {"x-dead-letter-strategy": "exactly-once"},
    ):
        with pytest.raises(PreconditionFailedError):
            vhost.declare_queue("bad", arguments={**QUORUM, **bad})
    with pytest.raises(PreconditionFailedError):
        vhost.declare_queue("t", durable=False, arguments=QUORUM)


@pytest.mark.parametrize("strategy", ["at-most-once", "at-least-once"])
def test_dead_lettered_copy_is_durable(tmp_path, strategy):
    vhost = VirtualHost(data_dir=tmp_path, fsync=False)
    vhost.declare_queue("dlq", durable=True)
    args = {**DLQ_ARGS, "x-delivery-limit": 0, "x-dead-letter-strategy": strategy}
    queue, _ = vhost.declare_queue("q", arguments=args)
    queue.add_consumer("c")
    queue.publish(b"keep")
    queue.publish(b"other")
    fail(queue, take(queue))
    assert vhost.store is not None
    vhost.store.flush()
    vhost.close()
    again = VirtualHost(data_dir=tmp_path, fsync=False)
    assert [m.payload for m in again.get_queue("dlq")] == [b"keep"]
    assert [m.payload for m in again.get_queue("q")] == [b"other"]
    assert again.get_queue("q").queue_type == "quorum"
    again.close()


# --- over the protocol, in memory -----------------------------------------------------------


def test_modified_delivery_failed_until_dead_lettered_over_the_protocol():
    with MemoryBroker() as broker:
        broker.vhost.declare_queue("dlq", durable=False)
        queue, _ = broker.vhost.declare_queue("q", arguments={**DLQ_ARGS, "x-delivery-limit": 1})
        queue.publish(Message.of(b"m").encode())
        with memory_session(broker, "quorum-test") as (conn, session):
            dead_lettered_over_the_protocol(broker, conn, session)


def dead_lettered_over_the_protocol(broker, conn, session) -> None:
    """x-delivery-limit 1: two deliveries settled modified(delivery-failed), header
    delivery-count 0 then 1, then the copy in the dead-letter queue."""
    link = session.attach_receiver("r", source="/queues/q")
    broker.pump()
    link.flow(link_credit=10)
    broker.pump()
    seen = []
    for _ in range(2):
        transfer = [e for e in conn.of(TransferReceived) if e.link is link][-1]
        header = Message.decode(transfer.payload).header
        seen.append(header.delivery_count if header is not None else 0)
        link.disposition(transfer.delivery_id, settled=True, state=Modified(delivery_failed=True))
        broker.pump()
    assert seen == [0, 1]  # 3.2.1: the header says how often it failed
    assert len([e for e in conn.of(TransferReceived) if e.link is link]) == 2
    dead = session.attach_receiver("d", source="/queues/dlq")
    broker.pump()
    dead.flow(link_credit=10)
    broker.pump()
    (copy,) = [e for e in conn.of(TransferReceived) if e.link is dead]
    message = Message.decode(copy.payload)
    assert message.value == b"m"
    assert message.message_annotations[symbol("x-first-death-reason")] == "delivery_limit"
    link.disposition(copy.delivery_id, settled=True, state=Rejected())  # harmless
