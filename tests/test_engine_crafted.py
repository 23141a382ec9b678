"""Public engine hooks for crafted traffic (docs/engine.md "Crafted traffic"): a session begun with
a chosen first transfer-id, `Session.send_begin()` for a session made directly, and event observers
that see (or consume) every event as the engine raises it.

An in-memory ConnectionPair: what one engine sends, the other decodes and checks.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpspec.amqp10.builder import build_frame, mutate
from amqpspec.amqp10.composites import (
    Attach,
    Begin,
    Close,
    Detach,
    End,
    Flow,
    Open,
    SaslInit,
    Source,
    Target,
    Transfer,
)
from amqpspec.amqp10.engine import (
    ClientSasl,
    Connection,
    ConnState,
    DispositionReceived,
    FlowReceived,
    LinkState,
    ProtocolErrorRaised,
    RemoteAttach,
    RemoteBegin,
    SaslState,
    Session,
    SessState,
    TransferReceived,
    UsageError,
)
from amqpspec.amqp10.engine.testing import ConnectionPair
from amqpspec.amqp10.frames import AMQP_HEADER, FrameDecoder, FrameType, decode_frame
from amqpspec.amqp10.message import transfer_frames
from amqpspec.amqp10.spec import Cond, Role
from amqpspec.amqp10.types import symbol


def _pair() -> ConnectionPair:
    pair = ConnectionPair()
    pair.open()
    pair.take("client")
    pair.take("server")
    return pair


def test_begin_with_initial_outgoing_id_near_the_wrap():
    """2.5.6: transfer-ids are serial numbers; our begin's next-outgoing-id starts them."""
    pair = _pair()
    session = pair.client.begin(initial_outgoing_id=0xFFFFFFFE)
    pair.pump()
    remote = next(e for e in pair.take("server") if isinstance(e, RemoteBegin))
    assert remote.begin.next_outgoing_id == 0xFFFFFFFE
    assert remote.session.next_incoming_id == 0xFFFFFFFE
    assert session.initial_outgoing_id == session.next_outgoing_id == 0xFFFFFFFE


def test_send_begin_for_a_session_made_directly():
    pair = _pair()
    session = Session(pair.client, incoming_window=7, initial_outgoing_id=5)
    assert session.state is SessState.UNMAPPED
    session.send_begin()
    assert session.state is SessState.BEGIN_SENT
    pair.pump()
    remote = next(e for e in pair.take("server") if isinstance(e, RemoteBegin))
    assert (remote.begin.next_outgoing_id, remote.begin.incoming_window) == (5, 7)
    remote.session.accept()
    pair.pump()
    assert session.state is SessState.MAPPED
    with pytest.raises(UsageError):
        session.send_begin()  # a second begin is not the application's to ask for


def test_observer_sees_every_event_and_may_consume_it():
    pair = _pair()
    seen, dropped = [], []

    def observe(event):
        seen.append(event)
        if isinstance(event, DispositionReceived):
            dropped.append(event)
            return True  # consumed: never queued
        return None

    pair.client.add_observer(observe)
    session = pair.client.begin()
    pair.pump()
    server_session = next(e for e in pair.take("server") if isinstance(e, RemoteBegin)).session
    server_session.accept()
    pair.pump()
    server_session.disposition(Role.RECEIVER, 0, 3, True)
    pair.pump()
    queued = pair.take("client")
    assert any(isinstance(e, RemoteBegin) and e.session is session for e in queued)
    assert not any(isinstance(e, DispositionReceived) for e in queued)
    assert [(d.first, d.last, d.settled) for d in dropped] == [(0, 3, True)]
    assert [type(e) for e in seen] == [RemoteBegin, DispositionReceived]
    pair.client.remove_observer(observe)
    server_session.disposition(Role.RECEIVER, 4, None, True)
    pair.pump()
    assert any(isinstance(e, DispositionReceived) for e in pair.take("client"))
    assert len(seen) == 2


# ---------------------------------------------------------------- send_performative


def _frames(data: bytes) -> list:
    decoder = FrameDecoder(expect_header=False)
    decoder.feed(data)
    return list(decoder)


def _accept_begins(pair: ConnectionPair) -> list[Session]:
    pair.pump()
    sessions = [e.session for e in pair.take("server") if isinstance(e, RemoteBegin)]
    for session in sessions:
        session.accept()
    pair.pump()
    return sessions


def test_crafted_begin_is_a_session_of_the_engine():
    pair = _pair()
    begin = Begin(next_outgoing_id=0xFFFFFFF0, incoming_window=5, outgoing_window=9)
    session = pair.client.send_performative(begin, 3)
    assert isinstance(session, Session) and session.state is SessState.BEGIN_SENT
    assert pair.client.sessions_by_channel[3] is session
    assert (session.next_outgoing_id, session.incoming_window) == (0xFFFFFFF0, 5)
    (server_session,) = _accept_begins(pair)
    assert session.state is SessState.MAPPED and server_session.next_incoming_id == 0xFFFFFFF0
    assert server_session.remote_channel == 3
    # the engine's own begin() takes the next free channel, not 3
    assert pair.client.begin().channel == 0


def test_crafted_bytes_of_a_begin_are_recorded_too():
    pair = _pair()
    begin = Begin(next_outgoing_id=7, incoming_window=5, outgoing_window=9)
    symbolic = mutate(begin).descriptor("amqp:begin:list").frame(0)
    session = pair.client.send_performative(begin, 0, raw=symbolic)
    assert session.state is SessState.BEGIN_SENT
    data = pair.client.data_to_send(0.0)
    assert data == symbolic
    pair.server.receive_data(data, 0.0)
    remote = next(e for e in pair.server.events() if isinstance(e, RemoteBegin))
    assert remote.begin == begin


def test_second_begin_refused_when_strict_and_sent_as_a_violation_otherwise():
    pair = _pair()
    session = pair.client.begin()
    _accept_begins(pair)
    second = Begin(next_outgoing_id=0, incoming_window=5, outgoing_window=5)
    with pytest.raises(UsageError):
        pair.client.send_performative(second, session.channel)
    assert pair.client.data_to_send(0.0) == b""
    sent_before = pair.client.frames_sent
    assert pair.client.send_performative(second, session.channel, strict=False) is None
    assert session.state is SessState.MAPPED and pair.client.frames_sent == sent_before + 1
    pair.pump()
    # 2.5.1: a begin on a channel in use is a connection error at the peer
    errors = [e for e in pair.take("server") if isinstance(e, ProtocolErrorRaised)]
    assert errors and errors[0].condition == Cond.ILLEGAL_STATE
    assert pair.server.state in (ConnState.DISCARDING, ConnState.CLOSE_SENT, ConnState.END)


def _sender(pair: ConnectionPair, credit: int):
    session = pair.client.begin()
    _accept_begins(pair)
    attach = Attach(
        name="crafted",
        handle=4,
        role=Role.SENDER,
        source=Source(address="s"),
        target=Target(address="q"),
        initial_delivery_count=0xFFFFFFFE,
    )
    link = pair.client.send_performative(attach, session.channel)
    assert link.handle == 4 and link.state is LinkState.ATTACH_SENT
    assert link.delivery_count == 0xFFFFFFFE
    pair.pump()
    remote = next(e for e in pair.take("server") if isinstance(e, RemoteAttach))
    remote.link.accept()
    remote.link.flow(link_credit=credit)
    pair.pump()
    assert link.state is LinkState.ATTACHED
    assert link.link_credit == credit
    return session, link, remote.link


def test_crafted_transfers_keep_ids_and_credit_true():
    """2.5.6 / 2.6.7: each transfer frame takes a transfer-id, each delivery a
    delivery-id, one credit and one delivery-count; the engine's own send() afterwards
    continues from there, and the receiving engine sees nothing wrong."""
    pair = _pair()
    session, link, receiver = _sender(pair, credit=5)
    first = Transfer(handle=4, delivery_id=0, delivery_tag=b"a", settled=True, more=True)
    rest = Transfer(handle=4, more=False)
    second = Transfer(handle=4, delivery_id=1, delivery_tag=b"b", settled=True)
    frames = [
        (first, b"he"),
        (rest, b"llo"),
        (second, b"x"),
    ]
    for transfer, payload in frames:
        assert pair.client.send_performative(transfer, session.channel, payload) is link
    assert session.next_outgoing_id == 3 and session.next_delivery_id == 2
    assert link.delivery_count == 0  # 0xFFFFFFFE + 2, wrapped (RFC 1982)
    assert link.link_credit == 3
    assert link.send(b"engine", b"c", settled=True) == 2
    pair.pump()
    events = pair.take("server")
    assert not [e for e in events if isinstance(e, ProtocolErrorRaised)]
    got = [(e.delivery_id, e.payload) for e in events if isinstance(e, TransferReceived)]
    assert got == [(0, b"hello"), (1, b"x"), (2, b"engine")]
    assert receiver.delivery_count == link.delivery_count == 1


def test_crafted_flow_grants_window_and_credit():
    pair = _pair()
    session = pair.client.begin(incoming_window=100)
    (server_session,) = _accept_begins(pair)
    flow = Flow(
        next_incoming_id=session.next_incoming_id,
        incoming_window=3,
        next_outgoing_id=session.next_outgoing_id,
        outgoing_window=7,
        echo=True,
    )
    assert pair.client.send_performative(flow, session.channel) is session
    assert (session.incoming_window, session.outgoing_window) == (3, 7)
    pair.pump()
    flows = [e.flow for e in pair.take("client") if isinstance(e, FlowReceived)]
    assert flows and flows[-1].next_incoming_id == session.next_outgoing_id  # echo answered
    assert server_session.remote_incoming_window == 3


def test_crafted_end_detach_and_close():
    pair = _pair()
    session, link, _ = _sender(pair, credit=1)
    assert pair.client.send_performative(Detach(handle=4, closed=True), session.channel) is link
    assert link.state is LinkState.DETACH_SENT
    pair.pump()
    assert link.state is LinkState.DETACHED and 4 not in session.links
    assert pair.client.send_performative(End(), session.channel) is session
    assert session.state is SessState.END_SENT
    pair.pump()
    assert session.state is SessState.UNMAPPED
    with pytest.raises(UsageError):
        pair.client.send_performative(End(), session.channel)  # no session there now
    assert pair.client.send_performative(Close()) is None
    assert pair.client.state is ConnState.CLOSE_SENT
    pair.pump()
    assert pair.client.state is ConnState.END and pair.server.state is ConnState.END


def test_crafted_open_writes_the_header_first_and_records_the_limits():
    pair = ConnectionPair()
    open_ = Open(container_id="crafted", max_frame_size=1024, channel_max=3)
    assert pair.client.send_performative(open_) is None
    assert pair.client.state is ConnState.OPEN_PIPE
    assert (pair.client.max_frame_size, pair.client.channel_max) == (1024, 3)
    data = pair.client.data_to_send(0.0)
    assert data[:8] == AMQP_HEADER.encode()
    (frame,) = _frames(data[8:])
    assert frame.performative == open_
    pair.server.receive_data(data, 0.0)
    pair.server.open()
    pair.pump()
    assert pair.client.state is ConnState.OPENED
    assert pair.server.remote_max_frame_size == 1024
    with pytest.raises(UsageError):
        pair.client.send_performative(open_)  # a second open


def test_sasl_bodies_only_in_a_sasl_exchange():
    pair = _pair()
    init = SaslInit(mechanism=symbol("ANONYMOUS"))
    with pytest.raises(UsageError):
        pair.client.send_performative(init)
    pair.client.send_performative(init, strict=False)
    (frame,) = _frames(pair.client.data_to_send(0.0))
    assert frame.type == FrameType.SASL and frame.performative == init


def test_crafted_sasl_init_is_refused_before_the_mechanisms():
    client = Connection("client", "c", sasl=ClientSasl("ANONYMOUS"))
    with pytest.raises(UsageError):
        client.send_performative(SaslInit(mechanism=symbol("ANONYMOUS")))
    assert client.data_to_send(0.0) == b""
    assert client.sasl_state is SaslState.START


def test_send_raw_keeps_order_and_state():
    pair = _pair()
    session = pair.client.begin()
    pair.client.send_raw(b"\x00\x00\x00\x08\x02\x00\x00\x00")  # a heartbeat, by hand
    flow_bytes = build_frame(session_flow_of(session), session.channel)
    pair.client.send_raw(flow_bytes)
    data = pair.client.data_to_send(0.0)
    names = [f.name for f in _frames(data)]
    assert names == ["begin", "empty", "flow"]
    assert session.state is SessState.BEGIN_SENT


def session_flow_of(session: Session) -> Flow:
    return Flow(
        next_incoming_id=session.next_incoming_id,
        incoming_window=session.incoming_window,
        next_outgoing_id=session.next_outgoing_id,
        outgoing_window=session.outgoing_window,
    )


def _sending_pair() -> tuple[ConnectionPair, Session, Any]:
    pair = ConnectionPair(max_frame_size=512)
    pair.open()
    session = pair.client.begin(incoming_window=10000, outgoing_window=10000)
    _accept_begins(pair)
    link = session.attach_sender("s", "q", "q", initial_delivery_count=0xFFFFFFF0)
    pair.pump()
    remote = next(e for e in pair.take("server") if isinstance(e, RemoteAttach))
    remote.link.accept()
    remote.link.flow(link_credit=100)
    pair.pump()
    pair.take("client")
    return pair, session, link


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 1500), min_size=1, max_size=12))
def test_crafted_transfers_leave_the_state_the_engine_s_own_send_leaves(sizes):
    """The same deliveries sent by link.send() on one pair and as crafted frames
    (transfer_frames, recorded by send_performative) on a twin: the same session and link
    state (2.5.6, 2.6.7) and the same deliveries at the receiver, with no error."""
    own, own_session, own_link = _sending_pair()
    crafted, session, link = _sending_pair()
    for index, size in enumerate(sizes):
        payload, tag = bytes([index]) * size, b"t%d" % index
        own_link.send(payload, tag, settled=True)
        next_id = session.next_delivery_id
        transfer = Transfer(handle=link.handle, delivery_id=next_id, delivery_tag=tag, settled=True)
        for raw in transfer_frames(transfer, payload, 512, session.channel):
            frame = decode_frame(raw)
            recorded = crafted.client.send_performative(
                frame.performative, session.channel, frame.payload, raw=raw
            )
            assert recorded is link
    own.pump()
    crafted.pump()

    def state(s: Session, lnk: Any) -> tuple:
        return (s.next_outgoing_id, s.next_delivery_id, lnk.delivery_count, lnk.link_credit)

    assert state(session, link) == state(own_session, own_link)
    own_events, crafted_events = own.take("server"), crafted.take("server")
    assert not [e for e in crafted_events if isinstance(e, ProtocolErrorRaised)]

    def deliveries(events: list) -> list:
        got = [e for e in events if isinstance(e, TransferReceived)]
        return [(e.delivery_id, e.delivery_tag, e.payload, e.frame_count) for e in got]

    assert deliveries(crafted_events) == deliveries(own_events)
    assert len(deliveries(crafted_events)) == len(sizes)
