"""The reference broker's link recovery for publisher links
(reference_broker/features/publisher_recovery.py, 2.6.13): rcv-settle-mode second held until
the sender settles, a suspended link's held publishes and partly received delivery listed in
the resuming attach (incomplete when the frame is too small), a resumed delivery completed
from the broker's received state, a new transfer after an incomplete map detached; the
settle_second switch and the accept-new-after-incomplete-map fault. Over a real socket
(tests/broker_support.EngineClient)."""

from __future__ import annotations

from broker_support import EngineClient, body, connected_client, running_broker_with_queue

from amqpspec.amqp10.composites import Accepted, Properties, Received, Source, Target, Transfer
from amqpspec.amqp10.engine import (
    DispositionReceived,
    RemoteAttach,
    RemoteDetach,
    TransferReceived,
)
from amqpspec.amqp10.message import Message, received_point, resume_offset
from amqpspec.amqp10.spec import RcvSettleMode, Role

NAME = "resumed-publisher"
TARGET = Target(address="/queues/q", expiry_policy="never")


def _sender(client: EngineClient, session, *, second: bool = True, **fields):
    start = len(client.events)
    link = session.attach_sender(
        NAME,
        Source(),
        TARGET,
        rcv_settle_mode=RcvSettleMode.SECOND if second else RcvSettleMode.FIRST,
        **fields,
    )
    client.wait_event(RemoteAttach, where=lambda e: e.link is link, start=start)
    client.wait_for(lambda: link.link_credit > 0, "credit")
    return link


def _outcomes(client: EngineClient, ids: set[int]) -> dict[int, DispositionReceived]:
    def found():
        got = {
            i: e
            for e in client.of(DispositionReceived)
            if e.role == Role.RECEIVER
            for i in range(e.first, e.last + 1)
            if i in ids
        }
        return got if set(got) == ids else None

    return client.wait_for(found, f"dispositions for {sorted(ids)}")


def _held(client: EngineClient, link, count: int, tag_octets: int = 1) -> dict[int, bytes]:
    """`count` publishes held unsettled by the broker (rcv-settle-mode second): id -> tag."""
    tags = {}
    for n in range(count):
        tag = f"{n:0{tag_octets}d}".encode()
        tags[link.send(Message.of(f"m{n}".encode()).encode(), tag, settled=False)] = tag
    outcomes = _outcomes(client, set(tags))
    assert all(not e.settled and isinstance(e.state, Accepted) for e in outcomes.values())
    return tags


def _suspend(client: EngineClient, link) -> None:
    start = len(client.events)
    link.detach(closed=False)
    client.wait_event(RemoteDetach, where=lambda e: e.link is link, start=start)


def _ready(broker) -> int:
    return broker.call(lambda: broker.server.vhost.get_queue("q").messages_ready)


def test_second_is_held_until_the_sender_settles_and_resumed_from_the_map():
    with running_broker_with_queue() as broker, connected_client(broker) as client:
        session = client.conn.begin()
        link = _sender(client, session)
        assert link.remote_attach.rcv_settle_mode == RcvSettleMode.SECOND  # 2.8.3
        (first_id, settled_tag), (_, held_tag) = _held(client, link, 2).items()
        link.disposition(first_id, settled=True, state=Accepted())  # the sender settles it
        client.settle(0.2)
        assert _ready(broker) == 2  # routed on arrival
        _suspend(client, link)
        again = _sender(client, session, unsettled={held_tag: None})
        ours = again.remote_attach.unsettled
        assert set(ours) == {held_tag} and isinstance(ours[held_tag], Accepted)
        assert not again.remote_attach.incomplete_unsettled
        start = len(client.events)
        again.send(b"", held_tag, settled=True, resume=True)  # 2.6.13: no data needed
        again.send(b"", b"unknown", settled=True, resume=True)  # not in its map: ignored
        again.send(Message.of(b"new").encode(), b"new", settled=False)
        client.wait_for(lambda: client.of(DispositionReceived, start), "the new one's outcome")
        client.settle(0.2)
        assert _ready(broker) == 3 and settled_tag != held_tag
        assert client.violations == []


def test_settle_second_off_answers_first():
    with (
        running_broker_with_queue(settle_second=False) as broker,
        connected_client(broker) as client,
    ):
        link = _sender(client, client.conn.begin())
        assert link.remote_attach.rcv_settle_mode == RcvSettleMode.FIRST
        sent = link.send(Message.of(b"x").encode(), b"t", settled=False)
        assert _outcomes(client, {sent})[sent].settled


def _incomplete(broker, client: EngineClient):
    session = client.conn.begin()
    link = _sender(client, session)
    tags = list(_held(client, link, 24, tag_octets=40).values())
    _suspend(client, link)
    again = _sender(client, session, unsettled={tags[0]: None}, incomplete_unsettled=True)
    return again, set(tags)


def test_an_incomplete_map_when_the_frame_is_too_small_and_a_new_transfer_detached():
    with (
        running_broker_with_queue() as broker,
        connected_client(broker, max_frame_size=512) as client,
    ):
        again, tags = _incomplete(broker, client)
        attach = again.remote_attach
        assert attach.incomplete_unsettled is True  # 2.7.3 SHOULD
        assert 0 < len(attach.unsettled) < len(tags) and set(attach.unsettled) <= tags
        start = len(client.events)
        again.send(Message.of(b"new").encode(), b"new", settled=False)
        detach = client.wait_event(RemoteDetach, where=lambda e: e.link is again, start=start)
        assert detach.error.condition == "amqp:illegal-state"  # 2.7.3 MUST
        assert _ready(broker) == 24


def test_fault_accept_new_after_incomplete_map():
    faults = ("accept-new-after-incomplete-map",)
    with (
        running_broker_with_queue(faults=faults) as broker,
        connected_client(broker, max_frame_size=512) as client,
    ):
        again, _ = _incomplete(broker, client)
        again.send(Message.of(b"new").encode(), b"new", settled=False)
        client.settle(0.3)
        assert not [e for e in client.of(RemoteDetach) if e.link is again]
        assert _ready(broker) == 25


def test_a_partial_delivery_is_resumed_from_the_received_state():
    message = Message.of(b"partial-" + b"p" * 600)
    message.properties = Properties(message_id="partial")
    payload = message.encode()
    cut = len(payload) // 2
    with running_broker_with_queue() as broker, connected_client(broker) as client:
        session = client.conn.begin()
        link = _sender(client, session, second=False)
        first = Transfer(
            handle=link.handle,
            delivery_id=session.next_delivery_id,
            delivery_tag=b"part",
            message_format=0,
            settled=False,
            more=True,
        )
        client.conn.send_performative(first, session.channel, payload[:cut])
        _suspend(client, link)
        again = _sender(client, session, second=False, unsettled={b"part": None})
        state = again.remote_attach.unsettled[b"part"]
        number, offset = received_point(payload[:cut])
        assert state == Received(section_number=number, section_offset=offset)  # 3.4.1
        start = resume_offset(payload[:cut], number, offset)
        assert start == cut
        again.send(payload[start:], b"part", settled=False, state=state, resume=True)
        client.wait_for(lambda: _ready(broker) == 1, "the resumed message queued")
        receiver = session.attach_receiver("check", source="/queues/q")
        receiver.flow(link_credit=1)
        got = client.wait_for(
            lambda: [e for e in client.of(TransferReceived) if e.link is receiver], "delivery"
        )
        assert got[0].payload == payload and body(got[0]).startswith(b"partial-")
