"""Engine end to end in memory: a client and a server Connection joined by a
ConnectionPair run open/begin/attach/transfer/flow/disposition/detach/end/close."""

from __future__ import annotations

import pytest

from amqpspec.amqp10.composites import Accepted, Error, Source, Target
from amqpspec.amqp10.engine import (
    ClientSasl,
    Connection,
    ConnState,
    DeliveryAborted,
    DispositionReceived,
    FlowReceived,
    IdleTimeout,
    LinkState,
    ProtocolErrorRaised,
    RemoteAttach,
    RemoteBegin,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    SaslAuthenticated,
    SaslOutcomeReceived,
    ServerSasl,
    SessState,
    TransferReceived,
    TransportClosed,
    UsageError,
)
from amqpspec.amqp10.engine.testing import ConnectionPair
from amqpspec.amqp10.frames import FrameDecoder
from amqpspec.amqp10.spec import Cond, RcvSettleMode, Role, SaslCode, SndSettleMode


def of(kind, events):
    return [e for e in events if isinstance(e, kind)]


def one(kind, events):
    found = of(kind, events)
    assert len(found) == 1, events
    return found[0]


def opened_pair(**kwargs) -> ConnectionPair:
    pair = ConnectionPair(**kwargs)
    pair.open()
    assert pair.client.state is ConnState.OPENED
    assert pair.server.state is ConnState.OPENED
    return pair


def session_pair(pair: ConnectionPair, **begin):
    client_session = pair.client.begin(**begin)
    pair.pump()
    server_session = one(RemoteBegin, pair.take("server")).session
    assert server_session.state is SessState.BEGIN_RCVD
    server_session.accept(**begin)
    pair.pump()
    assert one(RemoteBegin, pair.take("client")).session is client_session
    assert client_session.state is SessState.MAPPED
    return client_session, server_session


def granted_link(credit: int, drain: bool = False, begin: dict | None = None, **pair_args):
    """An opened pair (`pair_args`) with a session (`begin`: its begin fields) and a client
    sender link whose server receiver granted `credit` (with `drain`), all pumped: (the pair,
    the client's session, the sender, the receiver)."""
    pair = opened_pair(**pair_args)
    client_session, _ = session_pair(pair, **(begin or {}))
    sender, receiver = sender_link(pair, client_session)
    receiver.flow(link_credit=credit, drain=drain)
    pair.pump()
    return pair, client_session, sender, receiver


def client_attaching(name: str, sending: bool, **termini):
    """An opened pair with a session; the client attaches `name` as sender (`sending`) or
    receiver: (the pair, the client's link, the server's link, not yet answered)."""
    pair = opened_pair()
    client_session, _ = session_pair(pair)
    attach = client_session.attach_sender if sending else client_session.attach_receiver
    link = attach(name, **termini)
    pair.pump()
    return pair, link, one(RemoteAttach, pair.take("server")).link


def sender_link(pair, client_session, name="l", **attach):
    sender = client_session.attach_sender(
        name, source=Source(address="src"), target=Target(address="q"), **attach
    )
    pair.pump()
    receiver = one(RemoteAttach, pair.take("server")).link
    assert receiver.state is LinkState.ATTACH_RCVD and receiver.role is Role.RECEIVER
    receiver.accept()
    pair.pump()
    assert one(RemoteAttach, pair.take("client")).link is sender
    assert sender.state is receiver.state is LinkState.ATTACHED
    return sender, receiver


@pytest.mark.parametrize("chunk_size", [None, 1, 7])
def test_full_lifecycle(chunk_size):
    pair = opened_pair(chunk_size=chunk_size)
    assert pair.client.remote_open.container_id == "server"
    cs, ss = session_pair(pair)
    sender, receiver = sender_link(pair, cs)
    assert receiver.remote_attach.target == Target(address="q")

    receiver.flow(link_credit=5)
    pair.pump()
    flow = one(FlowReceived, pair.take("client"))
    assert flow.link is sender and sender.link_credit == 5

    ids = [sender.send(f"m{i}".encode()) for i in range(3)]
    assert ids == [0, 1, 2]
    assert sender.delivery_count == 3 and sender.link_credit == 2
    pair.pump()
    got = of(TransferReceived, pair.take("server"))
    assert [t.payload for t in got] == [b"m0", b"m1", b"m2"]
    assert [t.delivery_id for t in got] == ids
    assert all(not t.settled and t.link is receiver for t in got)
    assert receiver.delivery_count == 3 and receiver.link_credit == 2

    receiver.disposition(0, 2, settled=True, state=Accepted())
    pair.pump()
    d = one(DispositionReceived, pair.take("client"))
    assert (d.role, d.first, d.last, d.settled, d.state) == (Role.RECEIVER, 0, 2, True, Accepted())

    sender.detach()
    pair.pump()
    assert one(RemoteDetach, pair.take("server")).closed is True
    assert one(RemoteDetach, pair.take("client")).link is sender
    assert sender.state is receiver.state is LinkState.DETACHED
    assert not cs.links and not ss.links

    cs.end()
    pair.pump()
    assert one(RemoteEnd, pair.take("server")).session is ss
    assert cs.state is ss.state is SessState.UNMAPPED
    assert not pair.client.sessions_by_channel

    pair.client.close()
    pair.pump()
    assert one(RemoteClose, pair.take("server")).error is None
    assert one(RemoteClose, pair.take("client")).error is None
    assert pair.client.state is pair.server.state is ConnState.END
    assert pair.client.finished and pair.server.finished


def test_server_side_sender_and_settled_mode():
    pair = opened_pair()
    cs, _ = session_pair(pair)
    receiver = cs.attach_receiver(
        "r", source=Source(address="q"), snd_settle_mode=SndSettleMode.SETTLED
    )
    receiver.flow(link_credit=2)  # credit before the sender's attach: 2.6.7
    pair.pump()
    server_sender = one(RemoteAttach, pair.take("server")).link
    assert server_sender.role is Role.SENDER
    server_sender.accept(initial_delivery_count=100)
    pair.pump()
    assert server_sender.link_credit == 2 and server_sender.delivery_count == 100
    assert receiver.delivery_count == 100
    server_sender.send(b"a")
    server_sender.send(b"b")
    with pytest.raises(UsageError):
        server_sender.send(b"c")  # 2.6.7: no credit left
    with pytest.raises(UsageError):
        server_sender.send(b"c", settled=False)
    pair.pump()
    got = of(TransferReceived, pair.take("client"))
    assert [t.payload for t in got] == [b"a", b"b"] and all(t.settled for t in got)
    assert receiver.link_credit == 0 and receiver.delivery_count == 102


def test_rcv_settle_mode_second_and_mixed_sender():
    """2.6.12 / 3.4: with rcv-settle-mode second the receiver states the outcome
    unsettled, the sender settles, then the receiver settles; a mixed sender chooses
    per delivery."""
    pair = opened_pair()
    cs, _ = session_pair(pair)
    sender, receiver = sender_link(
        pair, cs, snd_settle_mode=SndSettleMode.MIXED, rcv_settle_mode=RcvSettleMode.SECOND
    )
    assert receiver.rcv_settle_mode == RcvSettleMode.SECOND
    receiver.flow(link_credit=2)
    pair.pump()
    first = sender.send(b"unsettled", settled=False)
    second = sender.send(b"pre-settled", settled=True)
    pair.pump()
    got = of(TransferReceived, pair.take("server"))
    assert [(t.delivery_id, t.settled) for t in got] == [(first, False), (second, True)]
    receiver.disposition(first, settled=False, state=Accepted())
    pair.pump()
    d = one(DispositionReceived, pair.take("client"))
    assert (d.role, d.first, d.last, d.settled) == (Role.RECEIVER, first, first, False)
    sender.disposition(first, settled=True, state=Accepted())
    pair.pump()
    d = one(DispositionReceived, pair.take("server"))
    assert (d.role, d.settled, d.state) == (Role.SENDER, True, Accepted())
    receiver.disposition(first, settled=True)
    pair.pump()
    assert one(DispositionReceived, pair.take("client")).settled is True


def test_refused_link_gets_null_terminus_and_error():
    pair, sender, incoming = client_attaching("x", sending=True, target=Target(address="nowhere"))
    incoming.reject(Cond.NOT_FOUND, "no such node")
    pair.pump()
    events = pair.take("client")
    assert one(RemoteAttach, events).attach.target is None
    detach = one(RemoteDetach, events)
    assert detach.error.condition == Cond.NOT_FOUND
    assert sender.state is LinkState.DETACHED and incoming.state is LinkState.DETACHED


def test_refused_session():
    pair = opened_pair()
    cs = pair.client.begin()
    pair.pump()
    ss = one(RemoteBegin, pair.take("server")).session
    ss.end(Cond.RESOURCE_LIMIT_EXCEEDED)
    pair.pump()
    events = pair.take("client")
    assert one(RemoteEnd, events).error.condition == Cond.RESOURCE_LIMIT_EXCEEDED
    assert cs.state is SessState.UNMAPPED and ss.state is SessState.UNMAPPED


# --- SASL (5.3) ---------------------------------------------------------------------


def _sasl_pair(client_sasl, server_sasl):
    client = Connection("client", "c", sasl=client_sasl)
    server = Connection("server", "s", sasl=server_sasl)
    return ConnectionPair(client, server)


def _check_password(authzid, username, password):
    return (username, password) == ("guest", "secret")


def test_sasl_anonymous():
    pair = _sasl_pair(ClientSasl(), ServerSasl())
    pair.open()
    assert one(SaslOutcomeReceived, pair.take("client")).code == SaslCode.OK
    assert one(SaslAuthenticated, pair.take("server")).mechanism == "ANONYMOUS"
    assert pair.client.state is pair.server.state is ConnState.OPENED


def test_sasl_plain_good_password():
    pair = _sasl_pair(
        ClientSasl("PLAIN", "guest", "secret"),
        ServerSasl(("PLAIN",), verify_plain=_check_password),
    )
    pair.open()
    auth = one(SaslAuthenticated, pair.take("server"))
    assert (auth.mechanism, auth.username, auth.code) == ("PLAIN", "guest", SaslCode.OK)
    assert pair.client.state is ConnState.OPENED


def test_sasl_plain_bad_password_is_auth_failure():
    pair = _sasl_pair(
        ClientSasl("PLAIN", "guest", "wrong"),
        ServerSasl(("PLAIN",), verify_plain=_check_password),
    )
    pair.client.open()
    pair.pump()
    assert one(SaslOutcomeReceived, pair.take("client")).code == SaslCode.AUTH
    assert one(SaslAuthenticated, pair.take("server")).code == SaslCode.AUTH
    assert pair.client.finished and pair.server.finished
    assert pair.client.remote_open is None and pair.server.remote_open is None
    # no AMQP header follows a failed outcome (5.3.3.6)
    assert all(b"AMQP\x00" not in data for _, data in pair.wire)


def _external(identity, known=("alice",)):
    return ServerSasl(
        ("PLAIN", "EXTERNAL"),
        verify_plain=_check_password,
        external_identity=identity,
        verify_external=lambda name: name in known,
    )


def test_sasl_external_takes_the_transports_identity():
    """RFC 4422 A.1: EXTERNAL with an empty authzid is the identity the transport proved
    (a TLS client certificate's CN, passed in by the driver)."""
    pair = _sasl_pair(ClientSasl("EXTERNAL"), _external("alice"))
    pair.open()
    auth = one(SaslAuthenticated, pair.take("server"))
    assert (auth.mechanism, auth.username, auth.code) == ("EXTERNAL", "alice", SaslCode.OK)
    assert pair.client.state is ConnState.OPENED


@pytest.mark.parametrize(
    "identity, authzid",
    [("mallory", ""), ("alice", "bob")],  # an unknown user; acting as another
)
def test_sasl_external_refuses_unknown_or_other_identities(identity, authzid):
    pair = _sasl_pair(
        ClientSasl("EXTERNAL", authzid=authzid), _external(identity, ("alice", "bob"))
    )
    pair.client.open()
    pair.pump()
    assert one(SaslOutcomeReceived, pair.take("client")).code == SaslCode.AUTH
    assert pair.client.remote_open is None and pair.server.remote_open is None


def test_sasl_external_is_offered_only_with_an_identity():
    assert _external(None).offered() == ("PLAIN",)
    assert _external("alice").offered() == ("PLAIN", "EXTERNAL")


def test_sasl_mechanism_not_offered():
    pair = _sasl_pair(ClientSasl("PLAIN", "u", "p"), ServerSasl(("ANONYMOUS",)))
    pair.client.open()
    pair.pump()
    error = one(ProtocolErrorRaised, pair.take("client"))
    assert error.condition == Cond.NOT_IMPLEMENTED and pair.client.finished


def test_header_mismatch_sasl_client_plain_server():
    pair = _sasl_pair(ClientSasl(), None)
    pair.client.open()
    pair.pump()
    # 2.2: the server answers with the header it supports and ends
    server_bytes = b"".join(d for direction, d in pair.wire if direction == "s>c")
    assert server_bytes == b"AMQP\x00\x01\x00\x00"
    assert pair.server.finished and pair.client.finished


# --- frame size, multi-frame, abort ---------------------------------------------------


def test_multi_frame_transfer_at_max_frame_size_512():
    pair, cs, sender, receiver = granted_link(2, max_frame_size=512)
    body = bytes(range(256)) * 10  # 2560 bytes: several 512-byte frames
    sender.send(body)
    sender.send(b"small")
    pair.pump()
    got = of(TransferReceived, pair.take("server"))
    assert [t.payload for t in got] == [body, b"small"]
    assert got[0].frame_count >= 6 and got[1].frame_count == 1
    # 2.6.7: continuation frames take no credit, but every frame is a transfer-id
    assert receiver.delivery_count == 2 and receiver.link_credit == 0
    assert cs.next_outgoing_id == got[0].frame_count + 1
    sizes = [len(frame.raw) for frame in _frames(pair, "c>s")]
    assert max(sizes) <= 512


def _frames(pair, direction):
    decoder = FrameDecoder()
    for d, data in pair.wire:
        if d == direction:
            decoder.feed(data)
    out = []
    while (item := decoder.next_item()) is not None:
        if hasattr(item, "raw"):
            out.append(item)
    return out


def test_drain_with_nothing_to_send_and_echo():
    pair, receiver, sender = client_attaching("r", sending=False, source=Source(address="q"))
    sender.accept()
    pair.pump()
    receiver.flow(link_credit=10, drain=True)
    pair.pump()
    assert sender.drain and sender.link_credit == 10
    sender.send(b"only")
    assert sender.drained() is True  # 2.6.7: the rest of the credit is used up
    assert sender.link_credit == 0 and sender.delivery_count == 10
    pair.pump()
    events = pair.take("client")
    assert [t.payload for t in of(TransferReceived, events)] == [b"only"]
    last_flow = of(FlowReceived, events)[-1].flow
    assert (last_flow.delivery_count, last_flow.link_credit) == (10, 0)
    assert receiver.link_credit == 0 and receiver.delivery_count == 10

    # echo: the sender answers with its flow state at once (2.7.4)
    sender.flow(available=7)
    pair.pump()
    assert receiver.available == 7
    pair.take("client")
    receiver.flow(link_credit=3, echo=True)
    pair.pump()
    echo = one(FlowReceived, pair.take("client")).flow
    assert (echo.delivery_count, echo.link_credit, echo.available) == (10, 3, 7)


def windowed_link(incoming_window: int, link_credit: int):
    """A sender on an opened pair whose receiving session grants its incoming-window by hand
    (auto_window off, `incoming_window` to start) and whose receiver grants `link_credit`:
    (pair, client session, server session, sender, receiver)."""
    pair = opened_pair()
    cs, ss = session_pair(pair)
    ss.auto_window = False
    ss.flow(incoming_window=incoming_window)
    pair.pump()
    sender, receiver = sender_link(pair, cs)
    receiver.flow(link_credit=link_credit)
    pair.pump()
    return pair, cs, ss, sender, receiver


def test_session_window_exhaustion_and_refill():
    pair, cs, ss, sender, _receiver = windowed_link(incoming_window=2, link_credit=10)
    assert cs.remote_incoming_window == 2
    for i in range(5):
        sender.send(bytes([i]))
    pair.pump()
    assert len(of(TransferReceived, pair.take("server"))) == 2
    assert cs.remote_incoming_window == 0 and cs.queued_frames == 3  # 2.5.6: held back
    assert ss.incoming_window == 0
    ss.flow(incoming_window=2)
    pair.pump()
    assert [t.payload for t in of(TransferReceived, pair.take("server"))] == [b"\x02", b"\x03"]
    ss.flow(incoming_window=5)
    pair.pump()
    assert [t.payload for t in of(TransferReceived, pair.take("server"))] == [b"\x04"]
    assert cs.queued_frames == 0 and cs.remote_incoming_window == 4


def test_auto_window_refills():
    pair, cs, sender, _receiver = granted_link(50, begin={"incoming_window": 4})
    for i in range(20):
        sender.send(b"%d" % i)
    pair.pump()
    assert len(of(TransferReceived, pair.take("server"))) == 20
    assert cs.queued_frames == 0


def test_detach_waits_behind_queued_transfers():
    pair, _cs, ss, sender, receiver = windowed_link(incoming_window=1, link_credit=5)
    sender.send(b"1")
    sender.send(b"2")
    sender.detach()
    pair.pump()
    assert receiver.state is LinkState.ATTACHED  # the detach is still queued
    ss.flow(incoming_window=5)
    pair.pump()
    events = pair.take("server")
    assert [t.payload for t in of(TransferReceived, events)] == [b"1", b"2"]
    assert one(RemoteDetach, events).link is receiver


# --- idle time-out (2.4.5) with an injected clock -----------------------------------------


def test_idle_timeout_heartbeats_keep_the_connection_alive():
    client = Connection("client", "c", idle_timeout_ms=1000)
    server = Connection("server", "s", idle_timeout_ms=4000)
    pair = ConnectionPair(client, server)
    pair.open()
    assert client.remote_idle_timeout_ms == 4000 and server.remote_idle_timeout_ms == 1000
    now = 0.0
    for _ in range(40):  # 20 s of silence, both sides only heartbeat
        timers = [t for t in (client.get_timer(), server.get_timer()) if t is not None]
        now = min(timers)
        client.handle_timer(now)
        server.handle_timer(now)
        pair.pump(now)
    assert now > 10
    assert client.state is server.state is ConnState.OPENED
    assert not of(IdleTimeout, pair.take("client") + pair.take("server"))


def test_idle_timeout_expires_without_traffic():
    client = Connection("client", "c", idle_timeout_ms=1000)
    pair = ConnectionPair(client, Connection("server", "s"))
    pair.open()
    deadline = client.get_timer()
    assert deadline == pytest.approx(1.0)
    client.handle_timer(0.5)
    assert client.state is ConnState.OPENED
    client.handle_timer(deadline)
    assert one(IdleTimeout, pair.take("client")).timeout_ms == 1000
    pair.pump(deadline)
    close = one(RemoteClose, pair.take("server"))
    assert close.error.condition == Cond.RESOURCE_LIMIT_EXCEEDED
    assert client.state is ConnState.END


def test_idle_threshold_separate_from_the_advertised_idle_timeout():
    # 2.4.5: advertise T, tolerate silence up to the real threshold (here 2T)
    client = Connection("client", "c", idle_timeout_ms=1000, idle_threshold_ms=2000)
    server = Connection("server", "s")
    pair = ConnectionPair(client, server)
    pair.open()
    assert server.remote_idle_timeout_ms == 1000
    assert client.get_timer() == pytest.approx(2.0)
    client.handle_timer(1.5)
    assert client.state is ConnState.OPENED and not of(IdleTimeout, pair.take("client"))
    client.handle_timer(2.0)
    assert one(IdleTimeout, pair.take("client")).timeout_ms == 2000
    pair.pump(2.0)
    assert one(RemoteClose, pair.take("server")).error.condition == Cond.RESOURCE_LIMIT_EXCEEDED


def test_idle_timeout_when_the_peer_never_answers():
    client = Connection("client", "c", idle_timeout_ms=2000)
    client.open()
    assert client.data_to_send(10.0).startswith(b"AMQP")
    assert client.get_timer() == pytest.approx(12.0)  # counted from our open
    client.handle_timer(12.0)
    assert one(IdleTimeout, list(client.events())).timeout_ms == 2000
    assert client.state is ConnState.OC_PIPE  # close sent, the peer's header never came


def test_transport_closed_event():
    pair = opened_pair()
    pair.client.receive_data(b"", 1.0)
    assert one(TransportClosed, pair.take("client")).clean is False
    assert pair.client.finished


def test_usage_errors():
    pair = opened_pair()
    cs, _ = session_pair(pair)
    sender, receiver = sender_link(pair, cs)
    with pytest.raises(UsageError):
        sender.send(b"no credit yet")
    with pytest.raises(UsageError):
        receiver.send(b"wrong role")
    with pytest.raises(UsageError):
        sender.flow(link_credit=3)  # only the receiver grants credit
    with pytest.raises(UsageError):
        pair.client.open()
    sender.detach()
    with pytest.raises(UsageError):
        sender.detach()


def test_send_respects_the_peers_max_message_size():
    # an address string stands for Target
    pair, sender, receiver = client_attaching("m", sending=True, target="q")
    receiver.accept(max_message_size=4)
    receiver.flow(link_credit=2)
    pair.pump()
    assert sender.remote_attach.max_message_size == 4
    assert receiver.remote_attach.target == Target(address="q")
    with pytest.raises(UsageError):
        sender.send(b"12345")  # 2.7.3: larger than the peer's max-message-size
    sender.send(b"1234")
    pair.pump()
    assert [t.payload for t in of(TransferReceived, pair.take("server"))] == [b"1234"]


def test_aborted_delivery_is_dropped():
    pair, _cs, _sender, receiver = granted_link(2, max_frame_size=512)
    from amqpspec.amqp10.composites import Transfer
    from amqpspec.amqp10.frames import encode_frame

    first = Transfer(handle=0, delivery_id=0, delivery_tag=b"t", more=True)
    abort = Transfer(handle=0, aborted=True)
    pair.server.receive_data(encode_frame(first, 0, b"part") + encode_frame(abort, 0), 0.0)
    aborted = one(DeliveryAborted, pair.take("server"))
    assert (aborted.delivery_id, aborted.delivery_tag) == (0, b"t")
    assert receiver.delivery_count == 1  # the aborted delivery took its credit


def test_close_with_error_reaches_peer():
    pair = opened_pair()
    pair.server.close(Error(condition=Cond.CONNECTION_FORCED, description="bye"))
    pair.pump()
    assert one(RemoteClose, pair.take("client")).error.condition == Cond.CONNECTION_FORCED
    assert pair.client.state is ConnState.END and pair.server.state is ConnState.END


@pytest.mark.parametrize("link_echo", [False, True])
def test_an_echo_that_crossed_our_end_is_not_answered(link_echo):
    """2.7.8: after our end nothing more is sent on the session; an echo flow the peer
    sent before it read our end arrives in END_SENT and gets no reply (it used to make
    receive_data raise UsageError from the automatic echo reply)."""
    pair = opened_pair()
    cs, ss = session_pair(pair)
    _sender, receiver = sender_link(pair, cs)
    cs.end()  # queued, not yet read by the server
    if link_echo:
        receiver.flow(link_credit=1, echo=True)
    else:
        ss.flow(echo=True)
    pair.pump()
    assert one(RemoteEnd, pair.take("server")).session is ss
    assert cs.state is ss.state is SessState.UNMAPPED
    assert of(ProtocolErrorRaised, pair.take("client")) == []


def test_a_senders_flow_does_not_overtake_its_queued_transfers():
    """2.6.7: delivery-count counts deliveries sent. A drain reply (or any flow of the
    sender) while transfers wait for the peer's session window goes out behind them, so
    the receiver never sees a delivery after the flow that already counted it."""
    # one transfer at a time: the session's incoming-window is 1
    pair, cs, sender, receiver = granted_link(3, drain=True, begin={"incoming_window": 1})
    sender.send(b"a")
    sender.send(b"b")
    assert cs.queued_frames == 1  # the second transfer waits for the window
    assert sender.drained()
    pair.pump()
    events = pair.take("server")
    assert [t.payload for t in of(TransferReceived, events)] == [b"a", b"b"]
    assert of(ProtocolErrorRaised, events) == []
    flow = of(FlowReceived, events)[-1].flow
    assert (flow.delivery_count, flow.link_credit, flow.drain) == (3, 0, True)
    assert receiver.state is LinkState.ATTACHED and receiver.delivery_count == 3


def test_drained_refused_after_close_changes_nothing():
    """A refused drained() (the connection is closed) leaves the link's 2.6.7 state as it
    was: the refusal comes before any side effect."""
    pair, _cs, sender, _receiver = granted_link(3, drain=True)
    pair.client.close()
    with pytest.raises(UsageError):
        sender.drained()
    assert (sender.delivery_count, sender.link_credit) == (0, 3)
