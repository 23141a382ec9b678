"""Peer misbehaviour: crafted frames (amqp10.frames.encode_frame + composites) fed to a
real engine; the close / end / detach the engine sends back must carry the spec's
error condition. The engine's output is decoded with amqp10.frames.FrameDecoder."""

from __future__ import annotations

import pytest
from engine_support import (
    Peer,
    close_condition,
    end_condition,
    server_peer,
    transfer,
    with_receiving_link,
    with_session,
)

from amqpspec.amqp10 import composites
from amqpspec.amqp10.engine import (
    Connection,
    ConnState,
    LinkState,
    RemoteAttach,
    RemoteBegin,
    SessState,
    TransferReceived,
    UsageError,
)
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, FrameDecoder, encode_frame
from amqpspec.amqp10.spec import Cond, Role

# --- connection errors ------------------------------------------------------------------


def test_decode_error_closes_with_decode_error():
    peer = server_peer()
    bad = encode_frame(composites.End())[:-1] + b"\x40"  # the performative's list replaced by null
    peer.send(bad)
    assert close_condition(peer) == Cond.DECODE_ERROR
    assert peer.engine.state is ConnState.DISCARDING
    assert peer.errors()[0].condition == Cond.DECODE_ERROR
    # 2.4.6 DISCARDING: frames are dropped until the peer's close, which ends it
    peer.frame(composites.Begin(next_outgoing_id=0, incoming_window=1, outgoing_window=1))
    assert not peer.engine.sessions_by_channel
    peer.frame(composites.Close())
    assert peer.engine.state is ConnState.END


def test_frame_larger_than_max_frame_size_is_framing_error():
    peer = server_peer(max_frame_size=512)
    with_session(peer)
    with_receiving_link(peer, credit=5)
    peer.frame(transfer(0), payload=b"x" * 600)
    assert close_condition(peer) == Cond.FRAMING_ERROR
    assert peer.engine.finished  # frame boundaries are lost: no more input is read


def test_doff_below_two_is_framing_error():
    peer = server_peer()
    frame = bytearray(
        encode_frame(composites.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1))
    )
    frame[4] = 1  # DOFF
    peer.send(bytes(frame))
    assert close_condition(peer) == Cond.FRAMING_ERROR


def test_open_with_max_frame_size_below_512():
    peer = Peer(Connection("server", "engine"))
    peer.send(
        AMQP_HEADER.encode(), encode_frame(composites.Open(container_id="p", max_frame_size=256))
    )
    # 2.4.6: the engine still sends its open, then the close with the error
    opens, closes = peer.performatives(composites.Open), peer.performatives(composites.Close)
    assert len(opens) == 1 and closes[0].error.condition == Cond.FRAME_SIZE_TOO_SMALL
    kinds = [type(i.performative) for i in peer.received if isinstance(i, Frame)]
    assert kinds == [composites.Open, composites.Close]


def test_channel_above_channel_max_is_framing_error():
    peer = server_peer(channel_max=1)
    peer.frame(
        composites.Begin(next_outgoing_id=0, incoming_window=1, outgoing_window=1), channel=5
    )
    assert close_condition(peer) == Cond.FRAMING_ERROR


def test_accepting_a_begin_with_no_channel_left_changes_nothing():
    # found by the fuzzer's reference model (open[channel-max=0], two begins, an attach):
    # accept() failed after the session was already MAPPED, with no channel of its own,
    # and answering an attach on it raised TypeError from the frame encoder
    peer = Peer(Connection("server", "engine"))
    peer.send(
        AMQP_HEADER.encode(), encode_frame(composites.Open(container_id="peer", channel_max=0))
    )
    peer.engine.open()
    for channel in (0, 1):
        peer.frame(
            composites.Begin(next_outgoing_id=0, incoming_window=9, outgoing_window=9), channel
        )
    first, second = [e.session for e in peer.engine.events() if isinstance(e, RemoteBegin)]
    first.accept()
    with pytest.raises(UsageError, match="channel-max 0"):
        second.accept()
    assert second.state is SessState.BEGIN_RCVD and second.channel is None
    peer.frame(
        composites.Attach(
            name="l", handle=0, role=Role.SENDER, source=composites.Source(address="s")
        ),
        1,
    )
    link = next(e for e in peer.engine.events() if isinstance(e, RemoteAttach)).link
    with pytest.raises(UsageError):
        link.accept()


def test_second_open_is_illegal_state():
    peer = server_peer()
    peer.frame(composites.Open(container_id="again"))
    assert close_condition(peer) == Cond.ILLEGAL_STATE


def test_frame_on_unmapped_channel_is_illegal_state():
    peer = server_peer()
    peer.frame(composites.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1), channel=3)
    assert close_condition(peer) == Cond.ILLEGAL_STATE


def test_begin_on_mapped_channel_is_illegal_state():
    peer = server_peer()
    with_session(peer)
    peer.frame(composites.Begin(next_outgoing_id=0, incoming_window=1, outgoing_window=1))
    assert close_condition(peer) == Cond.ILLEGAL_STATE


@pytest.mark.parametrize("header", [b"AMQP\x01\x01\x00\x00", b"AMQP\x00\x02\x00\x00", b"HTTP/1.1"])
def test_unsupported_header_is_answered_with_ours(header):
    peer = Peer(Connection("server", "engine"))
    peer.send(header)
    items = peer.read()
    assert items == [AMQP_HEADER]
    assert peer.engine.finished and peer.engine.state is ConnState.END


def test_amqp_frame_before_header():
    peer = Peer(Connection("server", "engine"))
    peer.send(encode_frame(composites.Open(container_id="x")))
    assert peer.read() == [AMQP_HEADER]  # not a header: answered with ours, then the end
    assert peer.errors()[0].condition == Cond.FRAMING_ERROR


# --- session errors ---------------------------------------------------------------------


def test_transfer_beyond_incoming_window_is_window_violation():
    peer = server_peer()
    session = with_session(peer, incoming_window=2, auto_window=False)
    with_receiving_link(peer, credit=10)
    for delivery_id in range(2):
        peer.frame(transfer(delivery_id))
    assert peer.performatives(composites.End) == []
    peer.frame(transfer(2))
    assert end_condition(peer) == Cond.WINDOW_VIOLATION
    assert session.state is SessState.DISCARDING
    assert peer.engine.state is ConnState.OPENED  # only the session ends
    peer.frame(transfer(3))  # 2.5.5: discarded until the peer's end
    assert not peer.errors()[1:]
    peer.frame(composites.End())
    assert session.state is SessState.UNMAPPED


@pytest.mark.parametrize(
    "performative",
    [
        composites.Flow(
            incoming_window=9, next_outgoing_id=0, outgoing_window=9, handle=5, link_credit=1
        ),
        composites.Transfer(handle=5, delivery_id=0, delivery_tag=b"t"),
        composites.Detach(handle=5, closed=True),
    ],
    ids=["flow", "transfer", "detach"],
)
def test_unattached_handle(performative):
    peer = server_peer()
    with_session(peer)
    peer.frame(performative)
    assert end_condition(peer) == Cond.UNATTACHED_HANDLE


def test_attach_on_handle_in_use():
    peer = server_peer()
    with_session(peer)
    with_receiving_link(peer)
    peer.frame(
        composites.Attach(name="other", handle=0, role=Role.SENDER, initial_delivery_count=0)
    )
    assert end_condition(peer) == Cond.HANDLE_IN_USE


def test_handle_above_handle_max_is_framing_error():
    peer = server_peer()
    with_session(peer, handle_max=3)
    peer.frame(composites.Attach(name="big", handle=7, role=Role.SENDER, initial_delivery_count=0))
    assert close_condition(peer) == Cond.FRAMING_ERROR


def test_disposition_and_end_after_ok_traffic_are_accepted():
    peer = server_peer()
    session = with_session(peer)
    peer.frame(composites.Disposition(role=Role.RECEIVER, first=0, last=3, settled=True))
    assert not peer.errors()
    peer.frame(composites.End())
    assert session.state is SessState.UNMAPPED
    assert len(peer.performatives(composites.End)) == 1  # answered (auto_reply)


# --- link errors ------------------------------------------------------------------------


def test_transfer_without_credit_is_transfer_limit_exceeded():
    peer = server_peer()
    with_session(peer)
    link = with_receiving_link(peer, credit=None)
    peer.frame(transfer(0))
    detaches = peer.performatives(composites.Detach)
    assert detaches[0].error.condition == Cond.TRANSFER_LIMIT_EXCEEDED and detaches[0].closed
    assert link.state is LinkState.DETACH_SENT
    # frames in flight after our detach are discarded, the peer's detach completes it
    peer.frame(transfer(1))
    peer.frame(composites.Detach(handle=0, closed=True))
    assert link.state is LinkState.DETACHED


def test_transfer_beyond_granted_credit():
    peer = server_peer()
    with_session(peer)
    with_receiving_link(peer, credit=2)
    peer.frame(transfer(0))
    peer.frame(transfer(1))
    assert peer.performatives(composites.Detach) == []
    peer.frame(transfer(2))
    assert peer.performatives(composites.Detach)[0].error.condition == Cond.TRANSFER_LIMIT_EXCEEDED


def test_in_flight_transfers_after_credit_reduction_are_legal():
    """2.6.7: transfers sent against an older, larger grant are not a violation."""
    peer = server_peer()
    with_session(peer)
    link = with_receiving_link(peer, credit=5)
    link.flow(link_credit=1)  # reduced while the peer may already be sending
    peer.read()
    for delivery_id in range(3):
        peer.frame(transfer(delivery_id))
    assert peer.performatives(composites.Detach) == []
    received = [e for e in peer.engine.events() if isinstance(e, TransferReceived)]
    assert len(received) == 3


def test_continuation_frames_take_no_credit():
    peer = server_peer()
    with_session(peer)
    with_receiving_link(peer, credit=1)
    first = composites.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", more=True)
    peer.frame(first, payload=b"ab")
    peer.frame(composites.Transfer(handle=0, more=True), payload=b"cd")
    peer.frame(composites.Transfer(handle=0), payload=b"ef")
    events = [e for e in peer.engine.events() if isinstance(e, TransferReceived)]
    assert [e.payload for e in events] == [b"abcdef"] and events[0].frame_count == 3
    assert peer.performatives(composites.Detach) == []


def test_transfer_to_a_sending_link_is_illegal_state():
    peer = server_peer()
    with_session(peer)
    peer.frame(
        composites.Attach(
            name="r", handle=0, role=Role.RECEIVER, source=composites.Source(address="q")
        )
    )
    link = next(e for e in peer.engine.events() if isinstance(e, RemoteAttach)).link
    link.accept()
    peer.frame(transfer(0))
    assert peer.performatives(composites.Detach)[0].error.condition == Cond.ILLEGAL_STATE


def test_transfer_before_our_attach_is_transfer_limit_exceeded():
    peer = server_peer()
    with_session(peer)
    peer.frame(composites.Attach(name="s", handle=0, role=Role.SENDER, initial_delivery_count=0))
    peer.frame(transfer(0))
    # we never attached: the answer is our attach, then the detach with the error
    kinds = [
        type(p)
        for p in peer.performatives(object)
        if isinstance(p, (composites.Attach, composites.Detach))
    ]
    assert kinds == [composites.Attach, composites.Detach]
    assert peer.performatives(composites.Detach)[0].error.condition == Cond.TRANSFER_LIMIT_EXCEEDED


def test_errors_are_reported_as_events():
    peer = server_peer()
    with_session(peer)
    peer.frame(composites.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1, handle=9))
    error = peer.errors()[0]
    assert (error.condition, error.scope) == (Cond.UNATTACHED_HANDLE, "session")


def test_delivery_beyond_our_max_message_size():
    peer = Peer(Connection("server", "engine"))
    peer.send(AMQP_HEADER.encode(), encode_frame(composites.Open(container_id="peer")))
    peer.engine.open()
    with_session(peer)
    peer.frame(composites.Attach(name="m", handle=0, role=Role.SENDER, initial_delivery_count=0))
    link = next(e for e in peer.engine.events() if isinstance(e, RemoteAttach)).link
    link.accept(max_message_size=10)
    link.flow(link_credit=5)
    peer.frame(
        composites.Transfer(handle=0, delivery_id=0, delivery_tag=b"a", more=True), payload=b"x" * 6
    )
    assert peer.performatives(composites.Detach) == []
    peer.frame(composites.Transfer(handle=0), payload=b"x" * 6)
    assert peer.performatives(composites.Detach)[0].error.condition == Cond.MESSAGE_SIZE_EXCEEDED


def test_garbage_in_sasl_ends_the_exchange():
    from amqpspec.amqp10.composites import SaslInit
    from amqpspec.amqp10.engine import ServerSasl
    from amqpspec.amqp10.frames import SASL_HEADER, FrameType

    peer = Peer(Connection("server", "engine", sasl=ServerSasl()))
    peer.send(SASL_HEADER.encode())
    assert not peer.engine.finished
    init = encode_frame(SaslInit(mechanism="ANONYMOUS"), frame_type=FrameType.SASL)
    peer.send(init[:11] + b"\x40" + init[12:])  # the list constructor replaced by null
    assert peer.engine.finished
    assert [e.condition for e in peer.errors()] == [Cond.DECODE_ERROR]


def test_empty_frame_in_sasl_ends_the_exchange():
    """5.3.1: receipt of an empty frame is an irrecoverable error (no heartbeats in SASL):
    a valid sasl-init after it gets no outcome."""
    from amqpspec.amqp10.composites import SaslInit, SaslOutcome
    from amqpspec.amqp10.engine import ServerSasl
    from amqpspec.amqp10.frames import SASL_HEADER, FrameType

    peer = Peer(Connection("server", "engine", sasl=ServerSasl()))
    peer.send(SASL_HEADER.encode(), encode_frame(None, frame_type=FrameType.SASL))
    assert peer.engine.finished
    assert [e.condition for e in peer.errors()] == [Cond.FRAMING_ERROR]
    peer.send(encode_frame(SaslInit(mechanism="ANONYMOUS"), frame_type=FrameType.SASL))
    assert peer.performatives(SaslOutcome) == []


def test_amqp_header_after_sasl_is_required():
    from amqpspec.amqp10.engine import ClientSasl, ServerSasl

    server = Connection("server", "s", sasl=ServerSasl())
    client = Connection("client", "c", sasl=ClientSasl())
    client.open()
    server.receive_data(client.data_to_send(0.0), 0.0)
    client.receive_data(server.data_to_send(0.0), 0.0)
    init = client.data_to_send(0.0)  # the sasl-init
    server.receive_data(init, 0.0)
    assert server.sasl_outcome == 0
    server.receive_data(b"AMQP\x03\x01\x00\x00", 0.0)  # SASL again instead of AMQP
    out = server.data_to_send(0.0)
    assert out.endswith(b"AMQP\x00\x01\x00\x00") and server.finished


def test_open_and_close_pipelined_are_answered_with_open_then_close():
    """2.4.1: open is the first frame. A server that gets the client's open and close in
    one read (OPEN_RCVD -> CLOSE_RCVD) answers with its open, then its close (found by
    the fuzzer: the reference broker answered with a bare close)."""
    server = Connection("server", "s")
    server.receive_data(
        AMQP_HEADER.encode()
        + encode_frame(composites.Open(container_id="c"))
        + encode_frame(composites.Close()),
        0.0,
    )
    sent = FrameDecoder()
    sent.feed(server.data_to_send(0.0))
    names = [getattr(item, "name", "header") for item in sent]
    assert names == ["header", "open", "close"]


def test_a_begin_ended_in_the_same_read_cannot_be_accepted_again():
    """2.5.2: the client pipelines begin and end; the server engine answers both (begin,
    end). The application's later accept() of that begin is refused (UsageError) instead
    of a second begin on the channel (found by the fuzzer against the reference broker)."""
    server = Connection("server", "s")
    server.receive_data(AMQP_HEADER.encode() + encode_frame(composites.Open(container_id="c")), 0.0)
    server.open()
    begin = composites.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    server.receive_data(encode_frame(begin) + encode_frame(composites.End()), 0.0)
    remote_begin = next(e for e in server.events() if isinstance(e, RemoteBegin))
    with pytest.raises(UsageError):
        remote_begin.session.accept()
    sent = FrameDecoder()
    sent.feed(server.data_to_send(0.0))
    names = [getattr(item, "name", "header") for item in sent]
    assert names.count("begin") == 1 and names.index("begin") < names.index("end")
