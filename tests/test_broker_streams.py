"""Stream queues (reference_broker.queues.streams): the log model alone, then consumers of an
in-memory broker attaching with the `rabbitmq:stream-offset-spec` filter, then recovery of a
durable stream after `kill -9` over a real socket.
"""

from __future__ import annotations

import pytest
from broker_support import EngineClient, memory_session, proton_send

from amqpspec.amqp10.composites import Accepted, Source
from amqpspec.amqp10.engine import FlowReceived, RemoteAttach, TransferReceived
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import Described, symbol, timestamp
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.queues.classic import ACCEPTED, RELEASED, CreditReply, Delivery
from amqpspec.reference_broker.queues.streams import (
    OFFSET_ANNOTATION,
    OFFSET_SPEC_FILTER,
    OffsetSpec,
    OffsetSpecError,
    StreamQueue,
    offset_spec_from_filter,
    parse_max_age,
)
from amqpspec.reference_broker.queues.vhost import PreconditionFailedError, VirtualHost
from amqpspec.reference_broker.runtime.memory import MemoryBroker
from amqpspec.reference_broker.runtime.process import BrokerProcess

STREAM = {"x-queue-type": "stream"}


def deliveries(events) -> list[int]:
    """The offsets delivered (msg_id - 1), in order."""
    return [e.message.msg_id - 1 for e in events if isinstance(e, Delivery)]


def filled(count: int, **arguments) -> StreamQueue:
    queue = StreamQueue("s", arguments={**STREAM, **arguments})
    for i in range(count):
        queue.publish(b"m%d" % i)
    return queue


# --- the log model ------------------------------------------------------------------------


def test_reads_do_not_remove_and_each_consumer_has_its_offset():
    queue = filled(5)
    queue.add_consumer("a", offset=OffsetSpec("first"))
    queue.add_consumer("b", offset=OffsetSpec("offset", 3))
    queue.flow("a", delivery_count=None, link_credit=10)
    queue.flow("b", delivery_count=None, link_credit=10)
    events = queue.dispatch()
    assert [deliveries([e for e in events if e.consumer.tag == t]) for t in "ab"] == [
        [0, 1, 2, 3, 4],
        [3, 4],
    ]
    queue.settle("a", [1, 2], ACCEPTED)
    queue.settle("b", [4], RELEASED)  # no requeue: the log is the log
    assert queue.messages == 5 and queue.dispatch() == []


@pytest.mark.parametrize(
    ("spec", "first"),
    [
        (OffsetSpec("first"), 0),
        (OffsetSpec("last"), 4),
        (OffsetSpec("next"), 5),
        (OffsetSpec("offset", 2), 2),
        (OffsetSpec("offset", 99), 5),  # beyond the end: the next publish
    ],
)
def test_offset_specs(spec, first):
    queue = filled(5)
    assert queue.start_offset(spec) == first


def test_timestamp_offset_starts_at_the_first_entry_at_or_after_it():
    now = [100.0]
    queue = StreamQueue("s", arguments=STREAM, clock=lambda: now[0])
    for i in range(4):
        queue.publish(b"m%d" % i)
        now[0] += 10.0
    assert queue.start_offset(OffsetSpec("timestamp", 115_000)) == 2  # stamped 120 s
    assert queue.start_offset(OffsetSpec("timestamp", 500_000)) == 4


def test_credit_is_never_exceeded_and_drain_uses_up_the_rest():
    queue = filled(3)
    queue.add_consumer("a", offset=OffsetSpec("first"))
    queue.flow("a", delivery_count=None, link_credit=2)
    assert deliveries(queue.dispatch()) == [0, 1]
    queue.flow("a", delivery_count=2, link_credit=5, drain=True)
    events = queue.dispatch()
    assert deliveries(events) == [2]
    reply = events[-1]
    assert isinstance(reply, CreditReply)  # 2.6.7: after the deliveries
    assert (reply.drain, reply.link_credit, reply.delivery_count, reply.available) == (
        True,
        0,
        7,
        0,
    )
    queue.publish(b"late")
    assert queue.dispatch() == []  # drained: no credit left


def test_available_is_per_consumer():
    queue = filled(4)
    queue.add_consumer("a", offset=OffsetSpec("first"))
    queue.add_consumer("b", offset=OffsetSpec("last"))
    queue.flow("a", delivery_count=None, link_credit=0, echo=True)
    queue.flow("b", delivery_count=None, link_credit=0, echo=True)
    replies = {e.consumer.tag: e.available for e in queue.dispatch()}
    assert replies == {"a": 4, "b": 1}


def test_retention_by_size_and_age_moves_consumers_forward():
    queue = filled(10, **{"x-max-length-bytes": 6})  # each payload is 2 bytes
    assert (queue.first_offset, queue.next_offset, queue.messages) == (7, 10, 3)
    now = [0.0]
    aged = StreamQueue("t", arguments={**STREAM, "x-max-age": "10s"}, clock=lambda: now[0])
    aged.publish(b"old")
    aged.add_consumer("a", offset=OffsetSpec("first"))
    now[0] = 20.0
    aged.publish(b"new")  # the old entry is now 20 s old: dropped
    aged.flow("a", delivery_count=None, link_credit=5)
    assert deliveries(aged.dispatch()) == [1]


def test_max_age_spelling():
    assert parse_max_age("7D") == 7 * 86400 and parse_max_age("30s") == 30
    assert parse_max_age(None) is None
    with pytest.raises(ValueError):
        parse_max_age("7 days")


def test_offset_spec_filter_values():
    key = symbol(OFFSET_SPEC_FILTER)
    assert offset_spec_from_filter(None) == OffsetSpec("next")
    assert offset_spec_from_filter({key: Described(key, "first")}) == OffsetSpec("first")
    assert offset_spec_from_filter({key: 7}) == OffsetSpec("offset", 7)
    assert offset_spec_from_filter({key: timestamp(5000)}) == OffsetSpec("timestamp", 5000)
    with pytest.raises(OffsetSpecError):
        offset_spec_from_filter({key: "middle"})


def test_vhost_declares_streams_durable_only():
    vhost = VirtualHost()
    queue, created = vhost.declare_queue("s", arguments=STREAM)
    assert created and isinstance(queue, StreamQueue) and queue.queue_type == "stream"
    with pytest.raises(PreconditionFailedError):
        vhost.declare_queue("s", arguments={"x-queue-type": "classic"})
    with pytest.raises(PreconditionFailedError):
        vhost.declare_queue("t", durable=False, arguments=STREAM)
    with pytest.raises(PreconditionFailedError):
        vhost.declare_queue("u", arguments={**STREAM, "x-max-age": "soon"})


# --- consumers over the protocol, in memory -------------------------------------------------


def offset_source(spec) -> Source:
    key = symbol(OFFSET_SPEC_FILTER)
    return Source(address="/queues/s", filter={key: Described(key, spec)})


@pytest.fixture
def streamed():
    with MemoryBroker() as broker:
        queue, _ = broker.vhost.declare_queue("s", arguments=STREAM)
        for i in range(6):
            queue.publish(Message.of(b"m%d" % i).encode())
        with memory_session(broker, "stream-test") as (conn, session):
            yield broker, conn, session


def attach(broker, conn, session, name, spec):
    link = session.attach_receiver(name, source=offset_source(spec))
    broker.pump()
    reply = next(e for e in conn.of(RemoteAttach) if e.link is link)
    assert reply.attach.source is not None and reply.attach.source.filter  # the filter applied
    return link


def received(conn, link) -> list[tuple[bytes, int]]:
    out = []
    for event in conn.of(TransferReceived):
        if event.link is link:
            message = Message.decode(event.payload)
            out.append((message.value, message.message_annotations[OFFSET_ANNOTATION]))
    return out


def test_two_consumers_at_different_offsets(streamed):
    broker, conn, session = streamed
    first = attach(broker, conn, session, "first", "first")
    later = attach(broker, conn, session, "later", 4)
    first.flow(link_credit=3)
    later.flow(link_credit=10)
    broker.pump()
    assert received(conn, first) == [(b"m0", 0), (b"m1", 1), (b"m2", 2)]  # credit: 3
    assert received(conn, later) == [(b"m4", 4), (b"m5", 5)]
    for event in conn.of(TransferReceived):
        event.link.disposition(event.delivery_id, settled=True, state=Accepted())
    broker.pump()
    assert broker.vhost.get_queue("s").messages == 6  # nothing consumed away


def test_drain_over_the_protocol(streamed):
    broker, conn, session = streamed
    link = attach(broker, conn, session, "d", "last")
    link.flow(link_credit=10, drain=True)
    broker.pump()
    assert received(conn, link) == [(b"m5", 5)]
    flow = [e.flow for e in conn.of(FlowReceived) if e.link is link][-1]
    assert (flow.drain, flow.link_credit, flow.delivery_count) == (True, 0, 10)


def test_a_bad_offset_spec_refuses_the_attach(streamed):
    broker, conn, session = streamed
    link = session.attach_receiver("bad", source=offset_source("middle"))
    broker.pump()
    reply = next(e for e in conn.of(RemoteAttach) if e.link is link)
    assert reply.attach.source is None  # refused: a detach with invalid-field follows
    assert link.remote_detach is not None
    assert link.remote_detach.error.condition == "amqp:invalid-field"


# --- durable: kill -9 and back, over a real socket ------------------------------------------


@pytest.mark.proton
def test_stream_survives_sigkill(tmp_path):
    data_dir = str(tmp_path / "data")
    broker = BrokerProcess("--data-dir", data_dir, admin=True)
    try:
        with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as admin:
            admin.declare_queue("s", arguments=STREAM)
        run = proton_send(broker.url, "/queues/s", [f"b{i}" for i in range(40)])
        assert run.accepted == 40  # confirmed: on disk
    finally:
        broker.kill()
    broker = BrokerProcess("--data-dir", data_dir, admin=True)
    client = EngineClient(broker.port)
    try:
        client.open()
        session = client.conn.begin()
        link = session.attach_receiver("r", source=offset_source("first"))
        link.flow(link_credit=100)
        client.wait_for(lambda: len(client.of(TransferReceived)) >= 40, "40 transfers")
        client.settle(0.2)
        got = [Message.decode(e.payload) for e in client.of(TransferReceived)]
        assert [m.value for m in got] == [f"b{i}" for i in range(40)]
        assert [m.message_annotations[OFFSET_ANNOTATION] for m in got] == list(range(40))
    finally:
        client.close()
        broker.kill()
