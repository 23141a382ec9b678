"""The reference broker's link recovery (reference_broker/features/recovery.py, 2.6.13): a consumer
link from a source with expiry-policy never, suspended (detach closed=false) or cut off by a
dropped connection, attached again: the attach carries the kept unsettled deliveries, and
the receiver's unsettled map decides what is settled, resumed or sent again; the
link-detach timeout and connection-close policies (3.5.3); a publisher link's kept target.
Over a real socket (tests/broker_support.EngineClient); with the
forget-unsettled-on-reattach fault."""

from __future__ import annotations

from broker_support import EngineClient, body, connected_client, running_broker_with_queue

from amqpspec.amqp10.composites import Accepted, Source, Target
from amqpspec.amqp10.engine import DispositionReceived, RemoteAttach, TransferReceived
from amqpspec.amqp10.message import Message

NAME = "recovered"


def _fill(broker, count: int) -> None:
    def put() -> None:
        queue = broker.server.vhost.get_queue("q")
        for n in range(count):
            queue.publish(Message.of(f"m{n}".encode()).encode())

    broker.call(put)


def _attach(client: EngineClient, session, **fields):
    start = len(client.events)
    link = session.attach_receiver(
        NAME, source=Source(address="/queues/q", expiry_policy="never"), **fields
    )
    client.wait_event(RemoteAttach, where=lambda e: e.link is link, start=start)
    return link


def _take(client: EngineClient, link, count: int, start: int = 0) -> list[TransferReceived]:
    return client.wait_for(
        lambda: (
            (got := [e for e in client.of(TransferReceived, start) if e.link is link])[count - 1 :]
            and got
        ),
        f"{count} transfers",
    )


def _three_unsettled(broker, client: EngineClient):
    _fill(broker, 3)
    session = client.conn.begin()
    link = _attach(client, session)
    link.flow(link_credit=3)
    return session, link, _take(client, link, 3)


def test_suspended_link_resumes_settles_and_resends_as_the_receiver_map_says():
    with running_broker_with_queue() as broker, connected_client(broker) as client:
        session, link, sent = _three_unsettled(broker, client)
        tags = [bytes(t.delivery_tag) for t in sent]
        assert len(set(tags)) == 3
        link.detach(closed=False)
        client.settle(0.2)
        assert broker.call(lambda: broker.server.vhost.get_queue("q").messages_ready) == 0
        start = len(client.events)
        theirs = {tags[0]: Accepted(), tags[1]: None}  # tags[2]: unknown to the receiver
        again = _attach(client, session, unsettled=theirs)
        assert set(again.remote_attach.unsettled) == set(tags)  # 2.6.3 / 2.7.3
        again.flow(link_credit=5)
        got = _take(client, again, 3, start)
        settled, resent, anew = got
        assert (bytes(settled.delivery_tag), settled.resume, settled.settled) == (
            tags[0],
            True,
            True,
        )
        assert isinstance(settled.state, Accepted)
        assert (bytes(resent.delivery_tag), resent.resume) == (tags[1], True)
        assert body(resent) == b"m1"
        assert (anew.resume, body(anew)) == (False, b"m2")  # sent again as a new delivery
        client.settle(0.2)
        assert len([e for e in client.of(TransferReceived, start) if e.link is again]) == 3
        queue = broker.call(lambda: broker.server.vhost.get_queue("q"))
        assert broker.call(lambda: queue.messages) == 2  # m0 accepted, m1 and m2 held
        assert client.violations == []


def test_the_terminus_outlives_a_dropped_connection():
    with running_broker_with_queue() as broker:
        client = EngineClient(broker.port)
        client.open()
        _, _, sent = _three_unsettled(broker, client)
        tags = {bytes(t.delivery_tag) for t in sent}
        client.sock.close()  # no close frame: the transport is lost
        with connected_client(broker) as other:  # the same container-id
            link = _attach(other, other.conn.begin(), unsettled={})
            assert set(link.remote_attach.unsettled) == tags
            link.flow(link_credit=3)
            again = _take(other, link, 3)
            assert [e.resume for e in again] == [False] * 3  # none known to the receiver
            assert sorted(body(e) for e in again) == [b"m0", b"m1", b"m2"]


def test_an_incomplete_unsettled_map_stops_new_deliveries():
    with running_broker_with_queue() as broker, connected_client(broker) as client:
        _fill(broker, 1)
        link = _attach(client, client.conn.begin(), unsettled={}, incomplete_unsettled=True)
        link.flow(link_credit=2)
        client.settle(0.3)
        assert [e for e in client.of(TransferReceived) if e.link is link] == []  # 2.7.3


def test_the_default_expiry_policy_is_reported_and_applied_as_link_detach():
    with running_broker_with_queue() as broker, connected_client(broker) as client:
        _fill(broker, 1)
        session = client.conn.begin()
        link = session.attach_receiver(NAME, source="/queues/q")
        client.wait_event(RemoteAttach, where=lambda e: e.link is link)
        assert str(link.remote_attach.source.expiry_policy) == "link-detach"  # 2.6.3
        link.flow(link_credit=1)
        _take(client, link, 1)
        link.detach(closed=False)
        client.settle(0.2)
        assert broker.call(lambda: broker.server.vhost.get_queue("q").messages_ready) == 1


def test_fault_forget_unsettled_on_reattach():
    faults = ("forget-unsettled-on-reattach",)
    with running_broker_with_queue(faults=faults) as broker, connected_client(broker) as client:
        session, link, _ = _three_unsettled(broker, client)
        link.detach(closed=False)
        client.settle(0.2)
        again = _attach(client, session, unsettled={})
        assert again.remote_attach.unsettled is None


def _ready(broker) -> int:
    return broker.call(lambda: broker.server.vhost.get_queue("q").messages_ready)


def _suspend_one(broker, client: EngineClient, source: Source) -> None:
    _fill(broker, 1)
    link = client.conn.begin().attach_receiver(NAME, source=source)
    client.wait_event(RemoteAttach, where=lambda e: e.link is link)
    link.flow(link_credit=1)
    _take(client, link, 1)
    link.detach(closed=False)
    client.settle(0.2)


def test_a_link_detach_timeout_keeps_the_terminus_that_long():
    source = Source(address="/queues/q", expiry_policy="link-detach", timeout=1)
    with running_broker_with_queue() as broker, connected_client(broker) as client:
        _suspend_one(broker, client, source)
        assert _ready(broker) == 0  # kept: 3.5.3 timeout
        client.wait_for(lambda: _ready(broker) == 1, "the terminus expired", timeout=5.0)


def test_a_connection_close_terminus_goes_with_its_connection():
    source = Source(address="/queues/q", expiry_policy="connection-close")
    with running_broker_with_queue() as broker:
        with connected_client(broker) as client:
            _suspend_one(broker, client, source)
            assert _ready(broker) == 0  # suspended, its connection still open
        with connected_client(broker) as other:
            other.wait_for(lambda: _ready(broker) == 1, "requeued at connection close")


def test_a_publisher_link_resumed_gets_its_target_and_an_empty_map():
    target = Target(address="/queues/q", expiry_policy="never")
    with running_broker_with_queue() as broker, connected_client(broker) as client:
        session = client.conn.begin()
        link = session.attach_sender("pub", target=target)
        client.wait_for(lambda: link.link_credit > 0, "credit")
        sent = link.send(Message.of(b"once").encode(), b"tag-1", settled=False)
        client.wait_event(
            DispositionReceived, where=lambda e: e.first <= sent <= (e.last or e.first)
        )
        link.detach(closed=False)
        client.settle(0.2)
        again = session.attach_sender("pub", target=Target(), unsettled={b"tag-1": None})
        client.wait_event(RemoteAttach, where=lambda e: e.link is again)
        assert again.remote_attach.unsettled == {}  # 2.6.3: resumed, nothing unsettled
        assert again.remote_attach.target.address == "/queues/q"  # the kept target
        client.wait_for(lambda: again.link_credit > 0, "credit")
        again.send(Message.of(b"once").encode(), b"tag-1", settled=False, resume=True)
        client.settle(0.3)
        assert broker.call(lambda: broker.server.vhost.get_queue("q").messages) == 1  # 2.7.5


def test_a_map_too_large_for_the_frame_is_sent_incomplete_and_stops_new_deliveries():
    with running_broker_with_queue() as broker, connected_client(broker, max_frame_size=512) as c:
        _fill(broker, 200)
        session = c.conn.begin()
        link = _attach(c, session)
        link.flow(link_credit=200)
        _take(c, link, 200)
        link.detach(closed=False)
        c.settle(0.2)
        start = len(c.events)
        again = _attach(c, session, unsettled={})
        listed = again.remote_attach.unsettled
        assert again.remote_attach.incomplete_unsettled is True  # 2.7.3 SHOULD
        assert 0 < len(listed) < 200
        again.flow(link_credit=10)
        c.settle(0.3)
        assert [e for e in c.of(TransferReceived, start) if e.link is again] == []  # 2.6.13
        # the listed deliveries the receiver's complete map lacks went back to the queue
        assert _ready(broker) == len(listed)
        c.end_trace()
        assert c.violations == []  # no frame above the client's max-frame-size (2.7.1)
