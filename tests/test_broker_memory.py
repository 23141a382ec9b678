"""The reference broker in memory (reference_broker.runtime.memory): the same flows the socket tests
check (test_broker_flow.py), with no socket and a clock that moves only when told.

Each test runs an amqp10 engine client against a MemoryBroker; the whole conversation of
the flow tests goes through the connection monitor and its checker, as the socket fixture
does.
"""

from __future__ import annotations

import pytest
from broker_support import assert_redelivered, body

from amqpspec.amqp10.composites import Accepted
from amqpspec.amqp10.engine import (
    Connection,
    DispositionReceived,
    FlowReceived,
    RemoteAttach,
    RemoteClose,
    RemoteDetach,
    TransferReceived,
    TransportClosed,
)
from amqpspec.amqp10.frames import FrameDecoder
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.spec import Cond
from amqpspec.reference_broker.config import BrokerConfig, Limits
from amqpspec.reference_broker.faults.catalog import Faults
from amqpspec.reference_broker.protocol.deadlines import CLOSE_GRACE_S
from amqpspec.reference_broker.queues.store import MessageStore
from amqpspec.reference_broker.runtime.memory import MemoryBroker, MemoryConnection
from amqpspec.reference_broker.runtime.scheduler import ManualScheduler

QUEUE = "/queues/q"


def make_broker(*, faults: tuple[str, ...] = (), **limits) -> MemoryBroker:
    config = BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, faults=Faults(faults))
    if limits:
        config = config.replace(limits=Limits(**limits))
    broker = MemoryBroker(config)
    broker.vhost.declare_queue("q", durable=False)
    return broker


@pytest.fixture
def broker():
    with make_broker() as b:
        yield b


@pytest.fixture
def client(broker):
    conn = broker.connect(Connection("client", "memory-test-client"), monitor=True)
    conn.client.open()
    broker.pump()
    assert conn.client.remote_open is not None
    yield conn
    conn.client.close()
    broker.pump()
    assert {item.direction for item in conn.items} == {CLIENT, SERVER}  # both ways, decoded
    assert [str(v) for v in conn.finish()] == []


def publish(broker: MemoryBroker, count: int, prefix: str = "m") -> None:
    queue = broker.vhost.get_queue("q")
    for i in range(count):
        queue.publish(Message.of(f"{prefix}{i}".encode()).encode())


def begin(broker: MemoryBroker, conn: MemoryConnection):
    session = conn.client.begin()
    broker.pump()
    assert session.remote_channel is not None
    return session


def receiver(broker, conn, session, name: str = "r"):
    link = session.attach_receiver(name, source=QUEUE)
    broker.pump()
    assert any(e.link is link for e in conn.of(RemoteAttach))
    return link


def sender(broker, conn, session, name: str = "s"):
    link = session.attach_sender(name, target=QUEUE)
    broker.pump()
    assert link.link_credit > 0  # the broker's initial grant
    return link


def transfers(conn: MemoryConnection, link, start: int = 0) -> list[TransferReceived]:
    return [e for e in conn.of(TransferReceived, start) if e.link is link]


def link_flows(conn: MemoryConnection, link, start: int = 0) -> list:
    return [e.flow for e in conn.of(FlowReceived, start) if e.link is link]


# --- the flows of test_broker_flow.py, in memory --------------------------------------------


def test_publish_is_confirmed_and_queued(broker, client):
    link = sender(broker, client, begin(broker, client))
    ids = [link.send(Message.of(b"p%d" % i).encode(), settled=False) for i in range(3)]
    broker.pump()
    dispositions = client.of(DispositionReceived)
    assert dispositions and all(isinstance(d.state, Accepted) for d in dispositions)
    confirmed = {i for d in dispositions for i in range(d.first, d.last + 1)}
    assert confirmed == set(ids)
    assert broker.vhost.get_queue("q").messages_ready == 3


@pytest.mark.parametrize("credit", [1, 2, 200])
def test_credit_is_never_exceeded(broker, client, credit):
    publish(broker, 250)
    link = receiver(broker, client, begin(broker, client))
    link.flow(link_credit=credit)
    broker.pump()
    assert len(transfers(client, link)) == credit


def test_available_and_echo(broker, client):
    publish(broker, 5)
    link = receiver(broker, client, begin(broker, client))
    start = len(client.events)
    link.flow(link_credit=2, echo=True)
    broker.pump()
    assert len(transfers(client, link, start)) == 2
    flows = link_flows(client, link, start)
    assert flows[0].delivery_count is not None and flows[0].link_credit is not None
    assert flows[0].link_credit + flows[0].delivery_count == 2  # the grant, as applied
    assert flows[0].available is not None


def test_drain_on_empty_queue_answers_at_once(broker, client):
    link = receiver(broker, client, begin(broker, client))
    link.flow(link_credit=10, drain=True)
    broker.pump()
    reply = link_flows(client, link)[0]
    assert (reply.drain, reply.link_credit, reply.delivery_count) == (True, 0, 10)
    assert transfers(client, link) == []


def test_drain_sends_what_is_available_then_the_flow(broker, client):
    publish(broker, 3)
    link = receiver(broker, client, begin(broker, client))
    link.flow(link_credit=10, drain=True)
    broker.pump()
    got = transfers(client, link)
    assert len(got) == 3
    flow_index = next(
        i for i, e in enumerate(client.events) if isinstance(e, FlowReceived) and e.link is link
    )
    assert all(client.events.index(t) < flow_index for t in got)  # 2.6.7: then the flow
    reply = link_flows(client, link)[0]
    assert (reply.link_credit, reply.delivery_count, reply.available) == (0, 10, 0)
    publish(broker, 1, "late")
    broker.pump()
    assert len(transfers(client, link)) == 3  # drained: no credit left


def test_detach_requeues_unsettled_with_first_acquirer_false(broker, client):
    publish(broker, 4)
    session = begin(broker, client)
    first = receiver(broker, client, session, name="first")
    first.flow(link_credit=4)
    broker.pump()
    assert len(transfers(client, first)) == 4
    settled = transfers(client, first)[0]
    first.disposition(settled.delivery_id, settled=True, state=Accepted())
    first.detach(closed=True)
    broker.pump()
    assert any(e.link is first for e in client.of(RemoteDetach))
    second = receiver(broker, client, session, name="second")
    second.flow(link_credit=10)
    broker.pump()
    assert_redelivered(transfers(client, second), [b"m1", b"m2", b"m3"])


def test_alarm_closes_the_session_window_and_clear_reopens_it(broker, client):
    session = begin(broker, client)
    link = sender(broker, client, session)
    start = len(client.events)
    broker.alarms.raise_alarm("memory")
    broker.pump()
    assert any(e.flow.incoming_window == 0 for e in client.of(FlowReceived, start))
    blocked_at = len(client.events)
    link.send(Message.of(b"during-alarm").encode(), settled=False)
    broker.pump()
    assert client.of(DispositionReceived, blocked_at) == []  # nothing accepted at window 0
    broker.alarms.clear_alarm("memory")
    broker.pump()
    assert client.of(DispositionReceived, blocked_at)  # confirmed after the clear
    windows = [f.flow.incoming_window for f in client.of(FlowReceived, start) if f.link is None]
    assert 0 in windows and windows[-1] == 400


def test_a_publish_wakes_a_consumer_on_another_connection(broker, client):
    other = broker.connect(Connection("client", "publisher"))
    other.client.open()
    broker.pump()
    consumer = receiver(broker, client, begin(broker, client))
    consumer.flow(link_credit=5)
    broker.pump()
    publisher = sender(broker, other, begin(broker, other))
    publisher.send(Message.of(b"across").encode(), settled=True)
    broker.pump()
    assert [body(t) for t in transfers(client, consumer)] == [b"across"]


def test_deleting_a_queue_detaches_its_consumers(broker, client):
    link = receiver(broker, client, begin(broker, client))
    broker.vhost.delete_queue("q")
    broker.pump()
    detach = next(e for e in client.of(RemoteDetach) if e.link is link)
    assert detach.error.condition == Cond.RESOURCE_DELETED


# --- time: heartbeats and the idle time-out, on the manual clock -----------------------------


def test_heartbeats_keep_a_short_idle_timeout_alive():
    with make_broker() as broker:
        conn = broker.connect(idle_timeout_ms=400)
        conn.client.open()
        broker.advance(10.0)  # 25 idle periods
        assert conn.alive and not conn.of(RemoteClose)


def test_silent_client_is_closed_after_the_broker_idle_timeout():
    with make_broker(idle_time_out_ms=300) as broker:
        conn = broker.connect(raw=True)
        quiet = Connection("client", "silent")
        quiet.open()
        conn.send(quiet.data_to_send(0.0))  # header and open, then silence
        broker.pump()
        assert conn.alive
        broker.advance(0.5)
        assert conn.alive  # under 2T
        broker.advance(0.2)  # past 2T = 600 ms
        quiet.receive_data(conn.take_output(), broker.now)
        close = next(e for e in quiet.events() if isinstance(e, RemoteClose))
        assert close.error.condition == Cond.RESOURCE_LIMIT_EXCEEDED
        broker.advance(10.0)  # no close from the peer within the grace: dropped
        assert not conn.alive and conn.broker_closed


def test_no_open_within_the_handshake_time_is_closed_then_dropped():
    """10 s (the default handshake_timeout) after the accept with headers exchanged but no
    open: open + close with amqp:resource-limit-exceeded, dropped after the close grace."""
    with make_broker() as broker:
        conn = broker.connect(raw=True)
        conn.send(b"AMQP\x00\x01\x00\x00")
        broker.pump()
        assert conn.take_output() == b"AMQP\x00\x01\x00\x00"
        broker.advance(9.0)
        assert conn.alive and conn.take_output() == b""
        broker.advance(2.0)
        decoder = FrameDecoder(expect_header=False)
        decoder.feed(conn.take_output())
        frames = list(iter(decoder.next_item, None))
        assert [f.name for f in frames] == ["open", "close"]
        assert frames[1].performative.error.condition == Cond.RESOURCE_LIMIT_EXCEEDED
        broker.advance(CLOSE_GRACE_S + 1.0)
        assert not conn.alive and conn.failure is None


# --- what an in-process fuzzer needs ------------------------------------------------------------


def test_malformed_bytes_close_the_connection_without_an_internal_error(broker):
    conn = broker.connect(raw=True)
    conn.send(b"AMQP\x00\x01\x00\x00" + b"\x00\x00\x00\x04\x02\x00\x00\x00")  # size < 8
    broker.pump()
    broker.advance(6.0)  # the close grace
    assert conn.take_output().startswith(b"AMQP\x00\x01\x00\x00")
    assert not conn.alive and conn.failure is None and broker.failures == []


def test_an_internal_error_is_reported_and_closes_only_that_connection(broker, client):
    victim = broker.connect()
    victim.client.open()
    broker.pump()

    def explode(event):
        raise RuntimeError("boom")

    victim.broker._handlers[FlowReceived] = explode
    session = begin(broker, victim)
    session.flow(echo=True)
    broker.pump()
    assert isinstance(victim.failure, RuntimeError) and not victim.alive
    close = next(e for e in victim.of(RemoteClose))
    assert close.error.condition == Cond.INTERNAL_ERROR
    assert any(isinstance(e, TransportClosed) for e in victim.events)
    assert broker.failures == [victim.failure]
    assert client.alive  # the others go on


def test_many_connections_open_and_close_and_leave_nothing_behind(broker):
    for i in range(50):
        conn = broker.connect(container_id=f"c{i}")
        conn.client.open()
        broker.pump()
        session = begin(broker, conn)
        link = sender(broker, conn, session)
        link.send(Message.of(b"x").encode(), settled=True)
        conn.client.close()
        broker.pump()
        assert conn.finished
    assert broker.context.connections == set() and broker.connections == []
    assert broker.vhost.get_queue("q").messages_ready == 50
    assert broker.scheduler.pending == 1  # the housekeeping tick only


def test_manual_scheduler_runs_in_time_order_and_forgets_cancelled():
    scheduler = ManualScheduler(10.0)
    ran: list[tuple[str, float]] = []
    scheduler.call_at(12.0, lambda now: ran.append(("b", now)))
    scheduler.call_at(11.0, lambda now: ran.append(("a", now)))
    scheduler.call_at(11.5, lambda now: ran.append(("x", now))).cancel()
    scheduler.call_soon(lambda now: ran.append(("soon", now)))
    assert scheduler.pending == 3 and scheduler.next_due() == 10.0
    assert scheduler.advance(5.0) == 3
    assert ran == [("soon", 10.0), ("a", 11.0), ("b", 12.0)] and scheduler.now() == 15.0
    for _ in range(3000):
        scheduler.call_at(100.0, lambda now: None).cancel()
    assert scheduler.pending == 0 and len(scheduler._heap) < 2000


def test_durable_publishes_are_confirmed_after_the_group_commit(tmp_path):
    config = BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, data_dir=str(tmp_path))
    with MemoryBroker(config) as broker:
        broker.vhost.declare_queue("dq", durable=True)
        conn = broker.connect()
        conn.client.open()
        broker.pump()
        link = conn.client.begin().attach_sender("s", target="/queues/dq")
        broker.pump()
        fsyncs = broker.vhost.store.fsync_count
        ids = [link.send(Message.of(b"d%d" % i).encode(), settled=False) for i in range(5)]
        broker.pump()  # the flush runs as the scheduler's blocking work, then the confirms
        confirmed = {i for d in conn.of(DispositionReceived) for i in range(d.first, d.last + 1)}
        assert confirmed == set(ids)
        assert 1 <= broker.vhost.store.fsync_count - fsyncs <= 2  # one batch, not five
    store = MessageStore.open(tmp_path)
    assert len(store.recovered.messages["dq"]) == 5
    store.close()


def test_the_monitor_names_a_broker_fault_in_memory():
    with make_broker(faults=("transfer-before-credit",)) as broker:
        publish(broker, 3)
        conn = broker.connect(monitor=True)
        conn.client.open()
        broker.pump()
        conn.client.begin().attach_receiver("r", source=QUEUE)  # no credit granted
        broker.pump()
        rules = {v.rule_id for v in conn.finish()}
        assert "link.credit.transfer-without-credit" in rules
