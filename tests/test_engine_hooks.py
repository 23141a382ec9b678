"""Engine hooks a broker needs beyond the defaults: the EndpointPolicy switches (echo left
to the application: auto_echo; the 2.5.6 window check: enforce_window; sends beyond the
grant: check_credit) and when a grant counts, application-owned sender credit
(set_flow_state / send_flow_state),
attach termini checked against their archetype, bounded input steps (max_frames), and
ProtocolErrorRaised naming its session and link.

A scripted peer (crafted frames through amqp10.frames) talks to a real engine; the
engine's output is decoded and asserted on.
"""

from __future__ import annotations

import pytest
from engine_support import Peer, server_peer, transfer, with_receiving_link, with_session

from amqpspec.amqp10.composites import Attach, Coordinator, Detach, End, Flow, Source, Target
from amqpspec.amqp10.engine import (
    Connection,
    EndpointPolicy,
    FlowReceived,
    LinkState,
    ProtocolErrorRaised,
    RemoteAttach,
    SessState,
    TransferReceived,
    UsageError,
)
from amqpspec.amqp10.frames import encode_frame
from amqpspec.amqp10.spec import Cond, Role
from amqpspec.amqp10.types import Described, symbol

NO_ECHO = EndpointPolicy(auto_echo=False)


def events(peer: Peer) -> list:
    return list(peer.engine.events())


def session_flow(**fields) -> Flow:
    base = {"next_incoming_id": 0, "incoming_window": 100, "next_outgoing_id": 0}
    return Flow(outgoing_window=100, **{**base, **fields})


def receiver_attach(handle: int = 0, **fields) -> Attach:
    """The peer attaches as receiver: the engine's link is a sender."""
    values = {"source": Source(address="q"), "target": Target(address="t"), **fields}
    return Attach(name=f"r{handle}", handle=handle, role=Role.RECEIVER, **values)


def with_sending_link(peer: Peer, handle: int = 0):
    peer.frame(receiver_attach(handle))
    link = next(e for e in events(peer) if isinstance(e, RemoteAttach)).link
    link.accept()
    peer.read()
    return link


def grant(credit: int, delivery_count: int | None = 0, **fields) -> Flow:
    return session_flow(handle=0, delivery_count=delivery_count, link_credit=credit, **fields)


# --- 1. echo (2.7.4) --------------------------------------------------------------------


def test_link_and_session_echo_are_answered_by_default():
    peer = server_peer()
    with_session(peer)
    with_receiving_link(peer, credit=3)
    peer.read()
    peer.frame(session_flow(handle=0, delivery_count=0, link_credit=0, echo=True))
    peer.frame(session_flow(echo=True))
    flows = peer.performatives(Flow)
    assert [f.handle for f in flows[-2:]] == [0, None]
    assert flows[-2].link_credit == 3 and not flows[-2].echo


def test_auto_echo_off_leaves_the_answer_to_the_application():
    peer = server_peer(policy=NO_ECHO)
    session = with_session(peer)
    link = with_receiving_link(peer, credit=3)
    sent = len(peer.performatives(Flow))
    peer.frame(session_flow(handle=0, delivery_count=0, link_credit=0, echo=True))
    peer.frame(session_flow(echo=True))
    got = [e for e in events(peer) if isinstance(e, FlowReceived)]
    assert [(e.link, e.flow.echo) for e in got] == [(link, True), (None, True)]
    assert len(peer.performatives(Flow)) == sent  # nothing answered by the engine
    link.send_flow_state()
    session.flow()
    flows = peer.performatives(Flow)[sent:]
    assert [f.handle for f in flows] == [0, None]
    assert flows[0].link_credit == 3 and flows[0].delivery_count == 0


def test_send_flow_state_keeps_a_receivers_drain():
    peer = server_peer()
    with_session(peer)
    link = with_receiving_link(peer)
    link.flow(link_credit=4, drain=True)
    link.send_flow_state()
    flows = peer.performatives(Flow)[-2:]
    assert [(f.link_credit, f.drain) for f in flows] == [(4, True), (4, True)]


def test_echo_before_our_attach_is_answered_right_after_it():
    """2.7.4 with auto_echo: an echo on a link still in ATTACH_RCVD is not dropped."""
    peer = server_peer()
    with_session(peer)
    peer.send(
        encode_frame(receiver_attach()),
        encode_frame(grant(5, delivery_count=None, echo=True)),
    )
    link = next(e for e in events(peer) if isinstance(e, RemoteAttach)).link
    assert link.state is LinkState.ATTACH_RCVD
    assert peer.performatives(Flow) == []  # no flow before our attach
    link.accept()
    peer.read()
    kinds = [type(f.performative).__name__ for f in peer.received[-2:]]
    assert kinds == ["Attach", "Flow"]
    reply = peer.received[-1].performative
    assert (reply.handle, reply.delivery_count, reply.link_credit) == (0, 0, 5)


def test_echo_before_our_attach_with_auto_echo_off_is_an_event_only():
    peer = server_peer(policy=NO_ECHO)
    with_session(peer)
    peer.send(
        encode_frame(receiver_attach()),
        encode_frame(grant(5, delivery_count=None, echo=True)),
    )
    got = events(peer)
    link = next(e for e in got if isinstance(e, RemoteAttach)).link
    flow = next(e for e in got if isinstance(e, FlowReceived))
    assert flow.link is link and flow.flow.echo
    link.accept()
    assert peer.performatives(Flow) == []
    link.send_flow_state()
    assert peer.performatives(Flow)[-1].link_credit == 5


# --- 2. the window check (2.5.6) --------------------------------------------------------


def test_enforce_window_off_lets_transfers_beyond_the_window_through():
    peer = server_peer(policy=EndpointPolicy(enforce_window=False))
    session = with_session(peer, incoming_window=2, auto_window=False)
    assert session.connection.policy.enforce_window is False
    with_receiving_link(peer, credit=10)
    for delivery_id in range(6):
        peer.frame(transfer(delivery_id))
    assert peer.performatives(End) == []
    got = [e for e in events(peer) if isinstance(e, TransferReceived)]
    assert len(got) == 6 and session.state is SessState.MAPPED


def test_the_connection_policy_is_its_sessions_and_links_policy():
    assert Connection("client", "c").policy == EndpointPolicy(True, True, True)
    peer = Peer(Connection("client", "c", policy=EndpointPolicy(enforce_window=False)))
    peer.engine.open()
    session = peer.engine.begin()
    assert session.connection.policy.enforce_window is False


def test_a_regrant_counts_once_sent_so_a_burst_beyond_the_window_is_a_violation():
    """auto_window re-grants at half, but transfers in the same input were sent before
    the peer could see that flow: the 5th of 4 is a window-violation."""
    peer = server_peer()
    with_session(peer, incoming_window=4)
    with_receiving_link(peer, credit=10)
    peer.send(*(encode_frame(transfer(i)) for i in range(5)))
    assert [f.error.condition for f in peer.performatives(End)] == [Cond.WINDOW_VIOLATION]
    assert any(f.handle is None for f in peer.performatives(Flow))  # the re-grant went out


def test_a_regrant_written_out_admits_the_next_transfers():
    peer = server_peer()
    with_session(peer, incoming_window=4)
    with_receiving_link(peer, credit=10)
    peer.send(*(encode_frame(transfer(i)) for i in range(3)))  # re-grant queued
    peer.read()  # ... and written: the peer has seen it
    peer.send(*(encode_frame(transfer(i)) for i in range(3, 6)))
    assert peer.performatives(End) == []
    assert len([e for e in events(peer) if isinstance(e, TransferReceived)]) == 6


# --- 3. application-owned sender credit (2.6.7) -------------------------------------------


def test_set_flow_state_within_the_grant_and_send_flow_state():
    peer = server_peer()
    with_session(peer)
    link = with_sending_link(peer)
    with pytest.raises(UsageError):
        link.set_flow_state(link_credit=1)  # nothing granted yet
    peer.frame(grant(5, drain=True))
    link.set_flow_state(delivery_count=0, link_credit=5, available=7)
    link.send(b"m")
    assert (link.delivery_count, link.link_credit) == (1, 4)
    # a queue that completed a drain: delivery-count advanced by the credit, credit 0
    link.set_flow_state(delivery_count=5, link_credit=0, drain=True, available=3)
    link.send_flow_state()
    flow = peer.performatives(Flow)[-1]
    assert (flow.delivery_count, flow.link_credit, flow.drain, flow.available) == (5, 0, True, 3)


@pytest.mark.parametrize(
    ("state", "why"),
    [
        ({"delivery_count": 0, "link_credit": 6}, "beyond the grant"),
        ({"delivery_count": 3, "link_credit": 3}, "beyond the grant"),
        ({"delivery_count": 6, "link_credit": 0}, "count past the horizon"),
        ({"link_credit": -1}, "negative"),
    ],
)
def test_set_flow_state_refuses_state_beyond_the_receivers_grant(state, why):
    peer = server_peer()
    with_session(peer)
    link = with_sending_link(peer)
    peer.frame(grant(5))
    link.send(b"m")
    with pytest.raises(UsageError):
        link.set_flow_state(**state)
    with pytest.raises(UsageError):
        link.set_flow_state(delivery_count=0)  # goes back
    assert (link.delivery_count, link.link_credit) == (1, 4)  # unchanged


def test_set_flow_state_keeps_transfers_sent_before_a_credit_reduction():
    """2.6.7: the receiver cut credit to 0 while 3 transfers of its grant of 5 were in
    flight; the sender's state keeps them (delivery-count 3, credit 0) but may not add
    credit past the reduced grant."""
    peer = server_peer()
    with_session(peer)
    link = with_sending_link(peer)
    peer.frame(grant(5))
    for _ in range(3):
        link.send(b"m")
    peer.frame(grant(0))  # the receiver had seen none of them: horizon 0
    link.set_flow_state(delivery_count=3, link_credit=0, available=2)
    link.send_flow_state()
    flow = peer.performatives(Flow)[-1]
    assert (flow.delivery_count, flow.link_credit) == (3, 0)
    with pytest.raises(UsageError):
        link.set_flow_state(delivery_count=3, link_credit=1)
    with pytest.raises(UsageError):
        link.set_flow_state(delivery_count=4, link_credit=0)


def test_send_without_credit_is_refused_unless_check_credit_is_off():
    peer = server_peer()
    with_session(peer)
    link = with_sending_link(peer)
    with pytest.raises(UsageError):
        link.send(b"m")
    peer.engine.policy = EndpointPolicy(check_credit=False)  # fault injection only
    delivery_id = link.send(b"m")
    assert (link.delivery_count, link.link_credit) == (1, 0)
    link.set_flow_state(delivery_count=5, link_credit=9)
    assert (link.delivery_count, link.link_credit) == (5, 9)
    sent = peer.performatives(type(transfer(0)))
    assert [t.delivery_id for t in sent] == [delivery_id]


def test_set_flow_state_is_for_senders():
    peer = server_peer()
    with_session(peer)
    link = with_receiving_link(peer)
    with pytest.raises(UsageError):
        link.set_flow_state(link_credit=1)


# --- 4. attach termini (3.5.3, 3.5.4) ---------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"source": Described(symbol("x:not-a-source"), "s")},
        {"source": "just a string"},
        {"target": Described(symbol("x:not-a-target"), 1)},
        {"target": 42},
    ],
    ids=["source-described", "source-string", "target-described", "target-int"],
)
def test_attach_with_a_terminus_of_the_wrong_archetype_is_refused(fields):
    peer = server_peer()
    session = with_session(peer)
    peer.frame(receiver_attach(**fields))
    got = events(peer)
    assert not [e for e in got if isinstance(e, RemoteAttach)]
    error = next(e for e in got if isinstance(e, ProtocolErrorRaised))
    assert (error.condition, error.scope, error.session) == (Cond.INVALID_FIELD, "link", session)
    assert error.link is not None and error.link.state is LinkState.DETACH_SENT
    attach = peer.performatives(Attach)[-1]
    assert attach.source is None and attach.target is None and attach.role is Role.SENDER
    assert attach.initial_delivery_count == 0
    detach = peer.performatives(Detach)[-1]
    assert detach.closed and detach.error.condition == Cond.INVALID_FIELD
    assert session.state is SessState.MAPPED  # only the link is refused
    peer.frame(Detach(handle=0, closed=True))
    assert error.link.state is LinkState.DETACHED


def test_attach_with_a_coordinator_target_is_an_attach():
    peer = server_peer()
    with_session(peer)
    peer.frame(
        Attach(
            name="txn",
            handle=0,
            role=Role.SENDER,
            source=Source(),
            target=Coordinator(),
            initial_delivery_count=0,
        )
    )
    attach = next(e for e in events(peer) if isinstance(e, RemoteAttach))
    assert isinstance(attach.attach.target, Coordinator)


# --- 5. bounded input steps ---------------------------------------------------------------


def test_max_frames_handles_the_input_in_steps():
    peer = server_peer()
    with_session(peer)
    with_receiving_link(peer, credit=10)
    data = b"".join(encode_frame(transfer(i)) for i in range(5))
    engine = peer.engine
    steps = [engine.receive_data(data, 0.0, max_frames=2)]
    counts = [len([e for e in events(peer) if isinstance(e, TransferReceived)])]
    while steps[-1]:
        steps.append(engine.receive_buffered(0.0, max_frames=2))
        counts.append(len([e for e in events(peer) if isinstance(e, TransferReceived)]))
    assert counts == [2, 2, 1] and steps == [True, True, False]
    assert engine.receive_data(encode_frame(transfer(5)), 0.0) is False


# --- 6. ProtocolErrorRaised names its session and link ------------------------------------


def test_protocol_error_names_its_session_and_link():
    peer = server_peer()
    session = with_session(peer, incoming_window=1, auto_window=False)
    link = with_receiving_link(peer, credit=None)
    peer.frame(transfer(0))  # no credit: a link error
    error = next(e for e in events(peer) if isinstance(e, ProtocolErrorRaised))
    assert (error.scope, error.session, error.link) == ("link", session, link)
    peer.frame(transfer(1))  # beyond the window of 1: a session error
    error = next(e for e in events(peer) if isinstance(e, ProtocolErrorRaised))
    assert (error.scope, error.session, error.link) == ("session", session, None)
    peer.frame(Attach(name="x", handle=0, role=Role.SENDER, initial_delivery_count=0), 9)
    error = next(e for e in events(peer) if isinstance(e, ProtocolErrorRaised))
    assert (error.scope, error.session, error.link) == ("connection", None, None)
