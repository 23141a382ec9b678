"""The reference broker's JMS topic subscriptions (reference_broker/features/
topic_subscriptions.py: source capabilities topic / shared / global, link names `sub|global`,
durable subscriptions kept on detach closed=false, removed on closed=true, refused with
amqp:resource-locked while other links use them), in memory, with the area's fault."""

from __future__ import annotations

from broker_support import memory_session

from amqpspec.amqp10.composites import Source
from amqpspec.amqp10.engine import RemoteAttach, RemoteDetach
from amqpspec.amqp10.types import symbol
from amqpspec.reference_broker.config import BrokerConfig
from amqpspec.reference_broker.faults.catalog import Faults
from amqpspec.reference_broker.runtime.memory import MemoryBroker

SHARED_GLOBAL = [symbol("topic"), symbol("shared"), symbol("global")]


def _broker(*faults: str) -> MemoryBroker:
    return MemoryBroker(
        BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, faults=Faults(faults))
    )


def _durable() -> Source:
    return Source(
        address="/exchanges/amq.topic",
        durable=1,
        expiry_policy=symbol("never"),
        capabilities=SHARED_GLOBAL,
    )


def _subscriptions(broker) -> list[str]:
    return sorted(q for q in broker.vhost.queues if q.startswith("amqpspec.sub-"))


def _detach(conn, link) -> RemoteDetach:
    return [e for e in conn.of(RemoteDetach) if e.link is link][-1]


def _close_and_gone(broker, conn, link) -> None:
    """`link` detached with closed=true: the broker answers without an error, and no
    subscription is left."""
    link.detach(closed=True)
    broker.pump()
    assert _detach(conn, link).error is None
    assert _subscriptions(broker) == []


def test_the_broker_offers_shared_subs():
    with MemoryBroker() as broker, memory_session(broker) as (conn, _):
        assert "SHARED-SUBS" in [str(c) for c in conn.client.remote_open.offered_capabilities]


def test_a_volatile_subscription_gets_what_the_topic_routes_and_goes_with_its_link():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        source = Source(address="/exchanges/amq.topic", capabilities=[symbol("topic")])
        link = session.attach_receiver("vol", source)
        broker.pump()
        attach = next(e for e in conn.of(RemoteAttach) if e.link is link).attach
        assert attach.source.address == "/exchanges/amq.topic"
        assert [str(c) for c in attach.source.capabilities] == ["topic"]
        assert len(_subscriptions(broker)) == 1
        _close_and_gone(broker, conn, link)


def test_a_shared_durable_subscription_is_kept_found_by_name_and_closed():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        first = session.attach_receiver("foo|global", _durable())
        second = session.attach_receiver("foo|global2", _durable())
        broker.pump()
        assert len(_subscriptions(broker)) == 1  # one subscription, two links
        second.detach(closed=False)
        first.detach(closed=False)
        broker.pump()
        assert len(_subscriptions(broker)) == 1  # kept
        again = session.attach_receiver("foo|global", None)
        broker.pump()
        attach = next(e for e in conn.of(RemoteAttach) if e.link is again).attach
        assert attach.source.address == "/exchanges/amq.topic"
        _close_and_gone(broker, conn, again)


def test_closing_a_shared_durable_subscription_in_use_is_resource_locked():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        first = session.attach_receiver("foo|global", _durable())
        session.attach_receiver("foo|global2", _durable())
        broker.pump()
        first.detach(closed=True)
        broker.pump()
        detach = _detach(conn, first)
        assert detach.closed and str(detach.error.condition) == "amqp:resource-locked"
        assert len(_subscriptions(broker)) == 1


def test_the_fault_removes_the_subscription_in_use_without_an_error():
    faulty = _broker("close-shared-subscription-with-links")
    with faulty as broker, memory_session(broker) as (conn, session):
        first = session.attach_receiver("foo|global", _durable())
        session.attach_receiver("foo|global2", _durable())
        broker.pump()
        _close_and_gone(broker, conn, first)
