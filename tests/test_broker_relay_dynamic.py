"""The reference broker's anonymous relay (reference_broker/features/relay.py:
ANONYMOUS-RELAY in its open, routing errors naming the delivery, rejected or detached as the
sender's source allows) and its dynamic nodes with lifetime policies
(reference_broker/features/dynamic_nodes.py, 3.5.9 / 3.5.10), in memory, with the two faults
of those areas."""

from __future__ import annotations

from broker_support import memory_session

from amqpspec.amqp10 import composites
from amqpspec.amqp10.engine import (
    DispositionReceived,
    RemoteAttach,
    RemoteDetach,
    TransferReceived,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol
from amqpspec.reference_broker.config import BrokerConfig
from amqpspec.reference_broker.faults.catalog import Faults
from amqpspec.reference_broker.runtime.memory import MemoryBroker

TAG = symbol("delivery-tag")
LIFETIME = symbol("lifetime-policy")


def _broker(*faults: str) -> MemoryBroker:
    return MemoryBroker(
        BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, faults=Faults(faults))
    )


def _message(to: str | None) -> bytes:
    return Message.of(b"x", properties=composites.Properties(to=to)).encode()


def _states(conn) -> dict:
    return {
        e: ev.state for ev in conn.of(DispositionReceived) for e in range(ev.first, ev.last + 1)
    }


def test_the_broker_offers_anonymous_relay():
    with MemoryBroker() as broker, memory_session(broker) as (conn, _):
        assert "ANONYMOUS-RELAY" in [str(c) for c in conn.client.remote_open.offered_capabilities]


def test_relay_routes_by_to_and_rejects_an_unknown_one_naming_the_delivery():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q")
        link = session.attach_sender("anon", target=composites.Target(address=None))
        broker.pump()
        known = link.send(_message("/queues/q"), b"t-known", settled=False)
        unknown = link.send(_message("/queues/missing"), b"t-unknown", settled=False)
        broker.pump()
        states = _states(conn)
        assert type(states[known]).__name__ == "Accepted"
        assert isinstance(states[unknown], composites.Rejected)
        assert str(states[unknown].error.condition) == "amqp:not-found"
        assert states[unknown].error.info == {TAG: b"t-unknown"}
        assert broker.vhost.get_queue("q").messages == 1
        assert conn.of(RemoteDetach) == []


def test_a_source_without_rejected_gets_the_link_detached_naming_the_delivery():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        source = composites.Source(outcomes=[symbol("amqp:accepted:list")])
        link = session.attach_sender("anon", source=source, target=composites.Target(address=None))
        broker.pump()
        link.send(_message("/queues/missing"), b"t-1", settled=False)
        broker.pump()
        (detach,) = conn.of(RemoteDetach)
        assert str(detach.error.condition) == "amqp:not-found"
        assert detach.error.info == {TAG: b"t-1"}


def test_the_fault_leaves_the_delivery_tag_out():
    broker = _broker("relay-error-without-delivery-tag")
    with broker, memory_session(broker) as (conn, session):
        link = session.attach_sender("anon", target=composites.Target(address=None))
        broker.pump()
        sent = link.send(_message("/queues/missing"), b"t-1", settled=False)
        broker.pump()
        assert _states(conn)[sent].error.info is None


def _dynamic(session, broker, conn, policy=None, *, target: bool = False, capabilities=None):
    properties = {LIFETIME: policy} if policy is not None else None
    if target:
        terminus = composites.Target(
            dynamic=True, dynamic_node_properties=properties, capabilities=capabilities
        )
        link = session.attach_sender(f"dyn-{id(terminus)}", target=terminus)
    else:
        terminus = composites.Source(
            dynamic=True, dynamic_node_properties=properties, capabilities=capabilities
        )
        link = session.attach_receiver(f"dyn-{id(terminus)}", source=terminus)
    broker.pump()
    (attach,) = [e.attach for e in conn.of(RemoteAttach) if e.link is link]
    reported = attach.target if target else attach.source
    return link, reported, reported.address.removeprefix("/queues/")


def test_a_dynamic_target_is_created_reported_and_deleted_on_close():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        link, target, name = _dynamic(
            session, broker, conn, target=True, capabilities=[symbol("temporary-queue")]
        )
        assert broker.vhost.has_queue(name)
        assert type(target.dynamic_node_properties[LIFETIME]).__name__ == "DeleteOnClose"
        assert [str(c) for c in target.capabilities] == ["temporary-queue"]
        link.send(Message.of(b"m").encode(), settled=True)
        broker.pump()
        assert broker.vhost.get_queue(name).messages == 1
        link.detach(closed=False)  # suspended: the termini exist (2.6)
        broker.pump()
        assert broker.vhost.has_queue(name)
    assert not broker.vhost.has_queue(name)  # its connection ended


def test_delete_on_close_goes_with_the_closed_link_unless_the_fault_keeps_it():
    for faults, kept in (((), False), (("keep-dynamic-nodes",), True)):
        with _broker(*faults) as broker, memory_session(broker) as (conn, session):
            link, _, name = _dynamic(session, broker, conn, composites.DeleteOnClose())
            link.detach()
            broker.pump()
            assert broker.vhost.has_queue(name) is kept


def test_delete_on_no_links_waits_for_the_last_link():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        creator, source, name = _dynamic(session, broker, conn, composites.DeleteOnNoLinks())
        other = session.attach_receiver("other", source=source.address)
        broker.pump()
        creator.detach()
        broker.pump()
        assert broker.vhost.has_queue(name)
        other.detach()
        broker.pump()
        assert not broker.vhost.has_queue(name)


def test_delete_on_no_messages_waits_for_the_last_message():
    for policy in (composites.DeleteOnNoMessages(), composites.DeleteOnNoLinksOrMessages()):
        with MemoryBroker() as broker, memory_session(broker) as (conn, session):
            creator, source, name = _dynamic(session, broker, conn, policy)
            broker.vhost.get_queue(name).publish(Message.of(b"m").encode())
            creator.detach()
            broker.pump()
            assert broker.vhost.has_queue(name)
            reader = session.attach_receiver("reader", source=source.address)
            broker.pump()
            reader.flow(link_credit=1)
            broker.pump()
            reader.detach()  # the unsettled delivery goes back: still a message
            broker.pump()
            assert broker.vhost.has_queue(name)
            broker.vhost.get_queue(name).purge()
            broker.context.dynamic.sweep()
            assert not broker.vhost.has_queue(name)


def test_a_lifetime_policy_that_is_none_is_refused():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        source = composites.Source(dynamic=True, dynamic_node_properties={LIFETIME: "forever"})
        link = session.attach_receiver("bad", source=source)
        broker.pump()
        (detach,) = [e for e in conn.of(RemoteDetach) if e.link is link]
        assert str(detach.error.condition) == "amqp:invalid-field"


def test_another_connection_cannot_consume_from_a_dynamic_node():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        _, source, _ = _dynamic(session, broker, conn)
        with memory_session(broker, "other") as (other, other_session):
            link = other_session.attach_receiver("thief", source=source.address)
            broker.pump()
            (detach,) = [e for e in other.of(RemoteDetach) if e.link is link]
            assert str(detach.error.condition) == "amqp:resource-locked"


def test_supported_dist_modes_that_are_not_symbols_are_refused():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        properties = {symbol("supported-dist-modes"): 7}
        source = composites.Source(dynamic=True, dynamic_node_properties=properties)
        link = session.attach_receiver("bad-modes", source=source)
        broker.pump()
        (detach,) = [e for e in conn.of(RemoteDetach) if e.link is link]
        assert str(detach.error.condition) == "amqp:invalid-field"
        good = {symbol("supported-dist-modes"): [symbol("move")]}
        _, reported, _ = _dynamic(session, broker, conn, None)
        link = session.attach_receiver(
            "good-modes", source=composites.Source(dynamic=True, dynamic_node_properties=good)
        )
        broker.pump()
        (attach,) = [e.attach for e in conn.of(RemoteAttach) if e.link is link]
        assert set(attach.source.dynamic_node_properties) == {LIFETIME}
        assert set(reported.dynamic_node_properties) == {LIFETIME}


def _temporary_topic(session, broker, conn, target: bool):
    """A dynamic node asking for the temporary-topic capability: (the link, the terminus the
    broker answered with), a fresh exchange under /exchanges/ with that capability."""
    link, terminus, _ = _dynamic(
        session, broker, conn, target=target, capabilities=[symbol("temporary-topic")]
    )
    assert terminus.address.startswith("/exchanges/amqpspec.tmp-topic-")
    assert [str(c) for c in terminus.capabilities] == ["temporary-topic"]
    return link, terminus


def test_a_temporary_topic_fans_out_to_its_subscribers_and_goes_with_its_link():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        creator, target = _temporary_topic(session, broker, conn, target=True)
        readers = [session.attach_receiver(f"sub-{i}", source=target.address) for i in (1, 2)]
        broker.pump()
        for reader in readers:
            reader.flow(link_credit=5)
        creator.send(Message.of(b"to-all").encode(), settled=True)
        broker.pump()
        got = {e.link for e in conn.of(TransferReceived)}
        assert got == set(readers)
        with memory_session(broker, "other") as (other, other_session):
            thief = other_session.attach_receiver("thief", source=target.address)
            broker.pump()
            (detach,) = [e for e in other.of(RemoteDetach) if e.link is thief]
            assert str(detach.error.condition) == "amqp:resource-locked"
        name = target.address.removeprefix("/exchanges/")
        creator.detach()
        broker.pump()
        assert name not in broker.vhost.exchanges  # delete-on-close
        assert not [q for q in broker.vhost.queues if q.startswith("amq.gen-")]


def test_a_dynamic_source_asking_for_a_temporary_topic_subscribes_its_receiver():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        receiver, source = _temporary_topic(session, broker, conn, target=False)
        sender = session.attach_sender("to-topic", target=source.address)
        broker.pump()
        receiver.flow(link_credit=5)
        sender.send(Message.of(b"to-the-subscriber").encode(), settled=True)
        broker.pump()
        assert [e.link for e in conn.of(TransferReceived)] == [receiver]
        receiver.detach()
        broker.pump()
        assert source.address.removeprefix("/exchanges/") not in broker.vhost.exchanges
        assert not [q for q in broker.vhost.queues if q.startswith("amq.gen-")]


def test_a_suspended_link_attached_again_resumes_its_node_and_closing_it_deletes_it():
    with MemoryBroker() as broker, memory_session(broker) as (_, session):
        terminus = composites.Source(
            dynamic=True, dynamic_node_properties={LIFETIME: composites.DeleteOnClose()}
        )
        link = session.attach_receiver("resumed", source=terminus)
        broker.pump()
        first = link.remote_attach.source.address
        link.detach(closed=False)
        broker.pump()
        again = session.attach_receiver("resumed", source=terminus)
        broker.pump()
        assert again.remote_attach.source.address == first
        name = first.removeprefix("/queues/")
        assert broker.vhost.has_queue(name)
        again.detach()
        broker.pump()
        assert not broker.vhost.has_queue(name)


def test_a_transactional_message_the_relay_cannot_route_is_rejected_naming_the_delivery():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        control = session.attach_sender(
            "ctl",
            composites.Source(),
            composites.Coordinator(capabilities=[symbol("amqp:local-transactions")]),
        )
        broker.pump()
        declare = control.send(Message.of(composites.Declare()).encode(), b"d", settled=False)
        broker.pump()
        txn_id = _states(conn)[declare].txn_id
        anon = session.attach_sender("anon", target=composites.Target(address=None))
        broker.pump()
        state = composites.TransactionalState(txn_id=txn_id)
        sent = anon.send(_message("/queues/missing"), b"t-txn", False, state=state)
        broker.pump()
        outcome = _states(conn)[sent].outcome
        assert isinstance(outcome, composites.Rejected)
        assert outcome.error.info == {TAG: b"t-txn"}
        strict = session.attach_sender(
            "anon-strict",
            composites.Source(outcomes=[symbol("amqp:accepted:list")]),
            composites.Target(address=None),
        )
        broker.pump()
        strict.send(_message("/queues/missing"), b"t-2", False, state=state)
        broker.pump()
        (detach,) = [e for e in conn.of(RemoteDetach) if e.link is strict]
        assert detach.error.info == {TAG: b"t-2"}
