"""Reference broker, frame level: link credit (2.6.7), drain, echo, available, session
windows and alarms (2.5.6), detach requeue (2.6.6), outcomes (3.4), confirms, limits.

An amqp10 engine client on a real socket (tests/broker_support.EngineClient) drives the
broker and every assertion is on the frames it got. The engine client is a strict
receiver: a transfer beyond its grant is `amqp:link:transfer-limit-exceeded`, so the
credit tests fail on any over-delivery. Some faults of reference_broker/faults/catalog.py are
switched on to prove the same assertions catch them.
"""

from __future__ import annotations

import pytest
from broker_support import (
    EngineClient,
    assert_redelivered,
    body,
    connected_client,
    management,
    running_broker,
    running_broker_with_queue,
)

from amqpspec.amqp10.composites import (
    Accepted,
    Flow,
    Modified,
    Properties,
    Rejected,
    Released,
    Source,
)
from amqpspec.amqp10.engine import (
    ClientSasl,
    DispositionReceived,
    EndpointPolicy,
    FlowReceived,
    IdleTimeout,
    ProtocolErrorRaised,
    RemoteAttach,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    SaslOutcomeReceived,
    TransferReceived,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Cond, Role, SaslCode
from amqpspec.amqp10.types import Described, symbol

QUEUE = "/queues/q"


@pytest.fixture
def broker():
    with running_broker_with_queue() as b:
        yield b


@pytest.fixture
def client(broker):
    with connected_client(broker) as c:
        yield c
    # the whole conversation, both ways, through the project's checker
    assert not c.wire_errors, c.wire_errors
    assert [str(v) for v in c.violations] == []


def publish(broker, count: int, prefix: str = "m") -> None:
    """Fill the queue through the broker's own model (not under test here)."""

    def fill() -> None:
        queue = broker.server.vhost.get_queue("q")
        for i in range(count):
            queue.publish(Message.of(f"{prefix}{i}".encode()).encode())

    broker.call(fill)


def begin(client: EngineClient):
    session = client.conn.begin()
    client.wait_for(lambda: session.remote_channel is not None, "begin")
    return session


def receiver(client: EngineClient, session, address: str = QUEUE, name: str = "r", **kw):
    link = session.attach_receiver(name, source=address, **kw)
    client.wait_event(RemoteAttach, where=lambda e: e.link is link)
    return link


def sender(client: EngineClient, session, address: str = QUEUE, name: str = "s", **kw):
    link = session.attach_sender(name, target=address, **kw)
    client.wait_event(RemoteAttach, where=lambda e: e.link is link)
    client.wait_for(lambda: link.link_credit > 0, "publisher credit")
    return link


def transfers(client: EngineClient, link, start: int = 0) -> list[TransferReceived]:
    return [e for e in client.of(TransferReceived, start) if e.link is link]


def holding(broker, client: EngineClient, count: int, name: str = "r"):
    """`count` messages published, then received unsettled on a new session's link `name`
    granted just that much credit: (the session, the link)."""
    publish(broker, count)
    session = begin(client)
    link = receiver(client, session, name=name)
    link.flow(link_credit=count)
    client.wait_for(lambda: len(transfers(client, link)) == count, f"{count} transfers")
    return session, link


def link_flows(client: EngineClient, link, start: int = 0) -> list:
    return [e.flow for e in client.of(FlowReceived, start) if e.link is link]


def drain(client: EngineClient, link, credit: int) -> tuple[Flow, list[TransferReceived]]:
    """Grant `credit` with drain set and wait for the broker's flow that answers it
    (2.6.7); returns that flow and the transfers that came since the grant."""
    start = len(client.events)
    link.flow(link_credit=credit, drain=True)
    reply = client.wait_for(lambda: link_flows(client, link, start), "drain reply")[0]
    return reply, transfers(client, link, start)


def first_flow_index(client: EngineClient, link) -> int:
    """Where in client.events the first flow the broker sent on `link` is."""
    return next(
        i for i, e in enumerate(client.events) if isinstance(e, FlowReceived) and e.link is link
    )


def no_link_errors(client: EngineClient) -> None:
    errors = client.of(ProtocolErrorRaised)
    assert not errors, errors


# --- link credit (2.6.7) ----------------------------------------------------------------


@pytest.mark.parametrize("credit", [1, 2, 200])
def test_credit_is_never_exceeded(broker, client, credit):
    publish(broker, 600)
    link = receiver(client, begin(client))
    link.flow(link_credit=credit)
    client.wait_for(lambda: len(transfers(client, link)) >= credit, "first grant")
    client.settle(0.2)
    assert len(transfers(client, link)) == credit  # exactly the grant, no more
    while len(transfers(client, link)) < 600:
        seen = len(transfers(client, link))
        link.flow(link_credit=credit)  # a fresh grant only once the old one is used
        client.wait_for(lambda s=seen: len(transfers(client, link)) >= min(600, s + credit), "more")
    assert [body(t) for t in transfers(client, link)] == [f"m{i}".encode() for i in range(600)]
    no_link_errors(client)


def _regrant_after_every_delivery(broker, client, count: int) -> list[bytes]:
    """The MessagingHandler(prefetch=2) pattern of RabbitMQ #2597: a new grant of 2 after
    every delivery, while earlier deliveries may still be in flight."""
    publish(broker, count)
    link = receiver(client, begin(client))
    link.flow(link_credit=2)
    handled = 0
    while handled < count and not client.of(ProtocolErrorRaised) and not client.closed:
        arrived = transfers(client, link)
        for event in arrived[handled:]:
            link.disposition(event.delivery_id, settled=True, state=Accepted())
            link.flow(link_credit=2)
        handled = len(arrived)
        client.pump(0.05)
    return [body(t) for t in transfers(client, link)]


def test_prefetch_two_regrant_never_overdelivers(broker, client):
    bodies = _regrant_after_every_delivery(broker, client, 1000)
    no_link_errors(client)
    assert bodies == [f"m{i}".encode() for i in range(1000)]


def test_fault_overdeliver_on_regrant_is_caught():
    with (
        running_broker_with_queue(faults=("overdeliver-on-regrant",)) as b,
        connected_client(b) as c,
    ):
        _regrant_after_every_delivery(b, c, 200)
        errors = c.of(ProtocolErrorRaised)
        assert errors and errors[0].condition == Cond.TRANSFER_LIMIT_EXCEEDED


def test_available_and_echo(broker, client):
    publish(broker, 5)
    link = receiver(client, begin(client))
    start = len(client.events)
    link.flow(link_credit=2, echo=True)
    client.wait_for(lambda: len(transfers(client, link, start)) == 2, "two transfers")
    client.wait_for(lambda: link_flows(client, link, start), "echo reply")
    client.settle(0.2)
    flows = link_flows(client, link, start)
    assert flows[0].delivery_count is not None and flows[0].link_credit is not None
    assert flows[0].link_credit + flows[0].delivery_count == 2  # the grant, as applied
    assert flows[0].available is not None


# --- drain -------------------------------------------------------------------------------


def test_drain_on_empty_queue_answers_promptly(broker, client):
    link = receiver(client, begin(client))
    reply, _ = drain(client, link, 10)
    assert (reply.drain, reply.link_credit, reply.delivery_count) == (True, 0, 10)
    assert transfers(client, link) == []


def test_drain_sends_what_is_available_then_the_flow(broker, client):
    publish(broker, 3)
    link = receiver(client, begin(client))
    reply, got = drain(client, link, 10)
    assert len(got) == 3
    # the flow came after every transfer (2.6.7: send what is available, then advance)
    flow_index = first_flow_index(client, link)
    assert all(client.events.index(t) < flow_index for t in got)
    assert (reply.link_credit, reply.delivery_count, reply.available) == (0, 10, 0)
    # drained: no credit left, so a later publish stays in the queue
    publish(broker, 1, "late")
    client.settle(0.3)
    assert len(transfers(client, link)) == 3


def test_fault_no_drain_reply_is_caught():
    with running_broker_with_queue(faults=("no-drain-reply",)) as b, connected_client(b) as c:
        link = receiver(c, begin(c))
        link.flow(link_credit=5, drain=True)
        c.settle(0.5)
        assert link_flows(c, link) == []


# --- settlement and requeue ----------------------------------------------------------------


def test_detach_requeues_unsettled_with_first_acquirer_false(broker, client):
    session, first = holding(broker, client, 4, name="first")
    settled = transfers(client, first)[0]
    first.disposition(settled.delivery_id, settled=True, state=Accepted())
    first.detach(closed=True)
    client.wait_event(RemoteDetach, where=lambda e: e.link is first)
    second = receiver(client, session, name="second")
    second.flow(link_credit=10)
    client.wait_for(lambda: len(transfers(client, second)) == 3, "requeued")
    client.settle(0.2)
    assert_redelivered(transfers(client, second), [b"m1", b"m2", b"m3"])


def test_outcomes_released_modified_rejected(broker, client):
    _, link = holding(broker, client, 3, name="one")
    t0, t1, t2 = transfers(client, link)
    link.disposition(t0.delivery_id, settled=True, state=Released())
    link.disposition(t1.delivery_id, settled=True, state=Modified(delivery_failed=True))
    link.disposition(t2.delivery_id, settled=True, state=Rejected())
    start = len(client.events)
    link.flow(link_credit=10)
    client.wait_for(lambda: len(transfers(client, link, start)) == 2, "redeliveries")
    client.settle(0.2)
    again = transfers(client, link, start)
    assert [body(t) for t in again] == [b"m0", b"m1"]  # rejected m2 is gone
    headers = [Message.decode(t.payload).header for t in again]
    assert headers[0].delivery_count == 0 and headers[0].first_acquirer is False
    assert headers[1].delivery_count == 1  # modified delivery-failed raises it (3.4.5)


# --- publishers: credit, confirms, routing outcomes -------------------------------------------


def test_publisher_credit_and_batched_confirms(broker, client):
    session = begin(client)
    link = sender(client, session)
    assert link.link_credit == 170  # RabbitMQ 4's max_link_credit
    ids = [link.send(Message.of(f"p{i}".encode()).encode(), settled=False) for i in range(150)]
    client.wait_for(
        lambda: sum(e.last - e.first + 1 for e in client.of(DispositionReceived)) >= 150,
        "confirms",
    )
    dispositions = client.of(DispositionReceived)
    assert all(d.settled and isinstance(d.state, Accepted) for d in dispositions)
    assert all(d.role == Role.RECEIVER for d in dispositions)
    covered = sorted(i for d in dispositions for i in range(d.first, d.last + 1))
    assert covered == ids
    assert len(dispositions) < 150 / 4  # contiguous confirms are batched into ranges
    client.wait_for(lambda: link.link_credit >= 170 // 2, "re-grant below half")


def test_unroutable_publish_is_released(broker, client):
    session = begin(client)
    link = sender(client, session, address="/exchanges/amq.direct/nobody")
    delivery_id = link.send(Message.of(b"lost").encode(), settled=False)
    disposition = client.wait_event(DispositionReceived)
    assert (disposition.first, disposition.settled) == (delivery_id, True)
    assert isinstance(disposition.state, Released)


def test_max_message_size_exceeded_detaches():
    with (
        running_broker_with_queue(limits={"max_message_size": 1000}) as b,
        connected_client(b) as c,
    ):
        session = begin(c)
        link = sender(c, session)
        assert link.remote_attach.max_message_size == 1000
        # make the client ignore the broker's limit, as a misbehaving peer would
        link.remote_attach = link.remote_attach.replace(max_message_size=None)
        link.send(Message.of(b"x" * 2000).encode(), settled=False)
        detach = c.wait_event(RemoteDetach, where=lambda e: e.link is link)
        assert detach.error.condition == Cond.MESSAGE_SIZE_EXCEEDED


def test_multi_frame_transfers_both_ways():
    with (
        running_broker_with_queue(limits={"max_frame_size": 512}) as b,
        connected_client(b, max_frame_size=512) as c,
    ):
        session = begin(c)
        out = sender(c, session)
        payload = Message.of(bytes(range(256)) * 20).encode()  # ~5 KB: 11+ frames
        out.send(payload, settled=False)
        c.wait_event(DispositionReceived)
        link = receiver(c, session)
        link.flow(link_credit=1)
        got = c.wait_for(lambda: transfers(c, link), "big transfer")[0]
        assert got.payload == payload and got.frame_count > 1
        no_link_errors(c)


# --- resource alarms (2.5.6 session window) -----------------------------------------------------


def _alarm_round(broker, client, session, link) -> tuple[list, list]:
    admin = management(broker)
    start = len(client.events)
    admin.raise_alarm("memory")
    client.wait_for(
        lambda: any(e.flow.incoming_window == 0 for e in client.of(FlowReceived, start)),
        "window 0",
        timeout=2,
    )
    blocked_at = len(client.events)
    link.send(Message.of(b"during-alarm").encode(), settled=False)
    client.settle(0.3)
    during = client.of(DispositionReceived, blocked_at)
    admin.clear_alarm("memory")
    client.wait_for(lambda: client.of(DispositionReceived, blocked_at), "confirm after clear")
    return during, client.of(FlowReceived, start)


def test_alarm_closes_the_session_window_and_clear_reopens_it(broker, client):
    session = begin(client)
    link = sender(client, session)
    during, flows = _alarm_round(broker, client, session, link)
    assert during == []  # nothing was accepted while the window was 0
    windows = [f.flow.incoming_window for f in flows if f.link is None]
    assert 0 in windows and windows[-1] == 400
    # consuming goes on during an alarm
    management(broker).raise_alarm("disk")
    consumer = receiver(client, session)
    consumer.flow(link_credit=5)
    client.wait_for(lambda: len(transfers(client, consumer)) == 1, "consume during alarm")
    management(broker).clear_alarm("disk")


def test_fault_ignore_alarm_is_caught():
    with running_broker_with_queue(faults=("ignore-alarm",)) as b, connected_client(b) as c:
        session = begin(c)
        sender(c, session)
        start = len(c.events)
        management(b).raise_alarm("memory")
        c.settle(0.5)
        assert not any(e.flow.incoming_window == 0 for e in c.of(FlowReceived, start))


def test_end_requeues_and_session_end_is_answered(broker, client):
    session, _ = holding(broker, client, 2)
    session.end()
    client.wait_event(RemoteEnd)
    assert broker.call(lambda: broker.server.vhost.get_queue("q").messages_ready) == 2


# --- connection and queue lifecycle -------------------------------------------------------


def test_heartbeats_keep_a_short_idle_timeout_alive(broker):
    with connected_client(broker, idle_timeout_ms=400) as c:
        c.settle(1.5)  # > 3 idle periods: the broker must have sent empty frames
        assert not c.closed and not c.of(IdleTimeout) and not c.of(RemoteClose)


def test_silent_client_is_closed_after_the_broker_idle_timeout():
    # timers=False: the client never sends heartbeats
    with (
        running_broker(limits={"idle_time_out_ms": 300}) as b,
        connected_client(b, timers=False) as c,
    ):
        close = c.wait_event(RemoteClose, timeout=5)
        assert close.error.condition == Cond.RESOURCE_LIMIT_EXCEEDED


def test_deleting_a_queue_detaches_its_consumers(broker, client):
    link = receiver(client, begin(client))
    management(broker).delete_queue("q")
    detach = client.wait_event(RemoteDetach, where=lambda e: e.link is link)
    assert detach.error.condition == Cond.RESOURCE_DELETED


def test_dynamic_queue_for_replies(broker, client):
    session = begin(client)
    link = session.attach_receiver("dyn", source=Source(dynamic=True))
    attach = client.wait_event(RemoteAttach, where=lambda e: e.link is link).attach
    address = attach.source.address
    assert address.startswith("/queues/amq.gen-")
    out = sender(client, session, address=None, name="anon")
    out.send(Message.of(b"reply", properties=Properties(to=address)).encode(), settled=False)
    link.flow(link_credit=1)
    got = client.wait_for(lambda: transfers(client, link), "reply")[0]
    assert body(got) == b"reply"
    name = address.rsplit("/", 1)[1]
    link.detach(closed=True)
    client.wait_event(RemoteDetach, where=lambda e: e.link is link)
    assert not broker.call(lambda: broker.server.vhost.has_queue(name))  # deleted with it


def test_a_slow_durable_target_does_not_block_another_link(tmp_path):
    import threading

    with running_broker(data_dir=str(tmp_path / "d"), limits={"max_unconfirmed": 20}) as b:
        admin = management(b)
        admin.declare_queue("slow", durable=True)
        admin.declare_queue("fast", durable=False)
        store = b.server.vhost.store
        release = threading.Event()
        real_flush = store.flush

        def stuck_flush() -> int:  # the disk is slow: no fsync completes for now
            release.wait(10)
            return real_flush()

        store.flush = stuck_flush
        c = EngineClient(b.port)
        try:
            c.open()
            session = begin(c)
            slow = sender(c, session, address="/queues/slow", name="slow")
            fast = sender(c, session, address="/queues/fast", name="fast")
            slow_ids = {slow.send(Message.of(b"s").encode(), settled=False) for _ in range(100)}
            c.settle(0.3)
            assert slow.link_credit < 100  # no re-grant while 20+ are unconfirmed
            fast_ids: set[int] = set()
            for _ in range(5):  # 5 x 100 on the same session: credit keeps coming
                c.wait_for(lambda: fast.link_credit >= 100, "fast link credit")
                fast_ids |= {
                    fast.send(Message.of(b"f").encode(), settled=False) for _ in range(100)
                }
            confirmed = lambda: {  # noqa: E731
                i for d in c.of(DispositionReceived) for i in range(d.first, d.last + 1)
            }
            c.wait_for(lambda: fast_ids <= confirmed(), "fast confirms")
            assert not (slow_ids & confirmed())  # the slow ones wait for their fsync
            release.set()
            c.wait_for(lambda: slow_ids <= confirmed(), "slow confirms after fsync")
        finally:
            release.set()
            c.close()


def test_sasl_plain_bad_password_gets_auth_outcome_and_nothing_else(broker):
    c = EngineClient(broker.port, sasl=ClientSasl("PLAIN", "guest", "wrong"))
    try:
        c.conn.open()
        outcome = c.wait_event(SaslOutcomeReceived)
        assert outcome.code == SaslCode.AUTH  # 5.3.3.6
        c.wait_for(lambda: c.closed, "the broker drops the connection")
        assert c.conn.remote_open is None  # no AMQP open after a failed SASL exchange
    finally:
        c.close()


def test_sasl_plain_good_password(broker):
    with connected_client(broker, sasl=ClientSasl("PLAIN", "guest", "guest")) as c:
        assert c.wait_event(SaslOutcomeReceived).code == SaslCode.OK


def test_drain_across_dispatch_batches_replies_after_the_last_transfer(broker, client):
    publish(broker, 600)  # more than one dispatch batch (256 per turn)
    link = receiver(client, begin(client))
    reply, got = drain(client, link, 1000)
    assert len(got) == 600
    assert client.events.index(got[-1]) < first_flow_index(client, link)
    assert (reply.link_credit, reply.delivery_count, reply.available) == (0, 1000, 0)


def test_message_above_the_consumers_max_message_size_detaches_it(broker, client):
    publish(broker, 3, "x" * 3000)  # several in one dispatch batch
    link = receiver(client, begin(client), max_message_size=1000)
    link.flow(link_credit=5)
    detach = client.wait_event(RemoteDetach, where=lambda e: e.link is link)
    assert detach.error.condition == Cond.MESSAGE_SIZE_EXCEEDED
    assert transfers(client, link) == []
    assert broker.call(lambda: broker.server.vhost.get_queue("q").messages_ready) == 3


def test_echo_in_the_same_packet_as_the_attach_is_answered(broker, client):
    publish(broker, 1)
    session = begin(client)
    link = session.attach_receiver("pipelined", source=QUEUE)
    link.flow(link_credit=3, echo=True)  # goes out with the attach, before the broker's
    client.wait_event(RemoteAttach, where=lambda e: e.link is link)
    flow = client.wait_for(lambda: link_flows(client, link), "echo reply")[0]
    assert flow.delivery_count is not None and flow.link_credit is not None
    assert flow.delivery_count + flow.link_credit == 3


def test_broker_stop_closes_connections_with_connection_forced():
    b = running_broker()
    broker = b.__enter__()
    c = EngineClient(broker.port)
    try:
        c.open()
        broker.stop()
        close = c.wait_event(RemoteClose)
        assert close.error.condition == Cond.CONNECTION_FORCED
    finally:
        b.__exit__(None, None, None)
        c.close()


def test_echo_with_no_credit_reports_available(broker, client):
    session = begin(client)
    link = receiver(client, session)
    out = sender(client, session)  # publish after the attach: available must follow
    for i in range(5):
        out.send(Message.of(f"a{i}".encode()).encode(), settled=False)
    client.wait_for(
        lambda: sum(d.last - d.first + 1 for d in client.of(DispositionReceived)) == 5, "confirms"
    )
    start = len(client.events)
    link.flow(link_credit=0, echo=True)
    flow = client.wait_for(lambda: link_flows(client, link, start), "echo reply")[0]
    assert flow.available == 5 and flow.link_credit == 0


def test_big_multi_frame_message_beyond_one_window():
    """A delivery of more transfer frames than the incoming window (400): the window is
    re-opened as frames arrive, although no delivery completes in between."""
    with running_broker_with_queue(limits={"max_frame_size": 512}) as b:
        with connected_client(b, max_frame_size=512) as c:
            session = begin(c)
            out = sender(c, session)
            payload = Message.of(b"z" * 300_000).encode()  # ~650 frames of 512 bytes
            delivery_id = out.send(payload, settled=False)
            disposition = c.wait_event(DispositionReceived, timeout=20)
            assert disposition.first == delivery_id and isinstance(disposition.state, Accepted)
        assert [str(v) for v in c.violations] == []


def _broker_links(broker) -> list[int]:
    """How many links each broker session holds (read on the broker's loop)."""
    return broker.call(
        lambda: [
            len(session.links)
            for connection in broker.server.context.connections
            for session in connection.sessions.values()
        ]
    )


def test_attach_with_a_terminus_that_is_not_a_source_is_refused_and_serving_goes_on(broker):
    """3.5.3: the engine refuses a source of the wrong archetype itself (attach with a
    null terminus, then detach with amqp:invalid-field); the session goes on."""
    publish(broker, 1)
    with connected_client(broker) as c:
        session = begin(c)
        bad = session.attach_receiver("bad", source=Described(symbol("x:not-a-source"), "q"))
        detach = c.wait_event(RemoteDetach, where=lambda e: e.link is bad)
        assert detach.closed and detach.error.condition == Cond.INVALID_FIELD
        attach = c.wait_event(RemoteAttach, where=lambda e: e.link is bad).attach
        assert attach.source is None
        assert _broker_links(broker) == [0]
        good = receiver(c, session, name="good")
        good.flow(link_credit=1)
        got = c.wait_for(lambda: transfers(c, good), "a delivery after the refusal")
        assert body(got[0]) == b"m0"


def test_a_publisher_beyond_its_credit_is_detached_and_released():
    """2.6.7: the engine detaches a link whose sender ignores its credit with
    transfer-limit-exceeded; ProtocolErrorRaised names the link, so the broker releases
    exactly that one and the session's other link goes on. (Credit 4, five transfers in
    one packet: no re-grant can have been seen in between.)"""
    lax = EndpointPolicy(check_credit=False)  # the client ignores its credit on purpose
    with (
        running_broker_with_queue(limits={"max_link_credit": 4}) as b,
        connected_client(b, policy=lax) as c,
    ):
        session = begin(c)
        keep = receiver(c, session)
        out = sender(c, session)
        assert out.link_credit == 4 and _broker_links(b) == [2]
        for i in range(5):
            out.send(Message.of(b"x%d" % i).encode(), settled=True)
        detach = c.wait_event(RemoteDetach, where=lambda e: e.link is out)
        assert detach.error.condition == Cond.TRANSFER_LIMIT_EXCEEDED
        c.wait_for(lambda: _broker_links(b) == [1], "the publisher released")
        keep.flow(link_credit=4)
        c.wait_for(lambda: len(transfers(c, keep)) == 4, "the consumer still served")
        assert [body(t) for t in transfers(c, keep)] == [b"x0", b"x1", b"x2", b"x3"]


def test_echo_on_a_publisher_link_and_on_the_session_is_answered(broker, client):
    session = begin(client)
    out = sender(client, session)
    start = len(client.events)
    out.send_flow_state(echo=True)
    session.flow(echo=True)
    client.wait_for(
        lambda: {e.link for e in client.of(FlowReceived, start)} >= {out, None}, "echo replies"
    )
    reply = link_flows(client, out, start)[0]
    assert reply.link_credit == out.link_credit and not reply.echo
