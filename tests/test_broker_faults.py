"""Every fault of reference_broker/faults/catalog.py is caught: one scenario per fault observes the
misbehaviour with the fault on and does NOT observe it with the fault off.

Scenarios run an amqp10 engine client over a real socket (tests/broker_support). The
engine client is a strict peer, so several faults surface as its own protocol errors
(transfer-limit-exceeded). The broker's engine policy has auto_echo off and the broker
answers echo itself, so `no-echo` suppresses every echo reply (link and session); the checker's
`link.echo.unanswered` rule names it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import pytest
from broker_support import (
    EngineClient,
    connected_client,
    management,
    running_broker,
    running_broker_with_queue,
)

from amqpspec.amqp10.composites import (
    Accepted,
    Coordinator,
    Declare,
    Discharge,
    Header,
    Modified,
    Properties,
    Source,
    Target,
    TransactionalState,
)
from amqpspec.amqp10.engine import (
    DispositionReceived,
    EndpointPolicy,
    FlowReceived,
    ProtocolErrorRaised,
    RemoteAttach,
    RemoteDetach,
    RemoteEnd,
)
from amqpspec.amqp10.engine import TransferReceived as Transfer
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.serial import serial_add
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import Described, symbol, uint
from amqpspec.reference_broker.admin.client import ManagementError
from amqpspec.reference_broker.features.transactions import LOCAL_TRANSACTIONS
from amqpspec.reference_broker.features.volatile_nodes import VOLATILE_ARGUMENT

QUEUE = "/queues/q"


def _publish(broker, count: int, size: int = 4) -> None:
    def fill() -> None:
        queue = broker.server.vhost.get_queue("q")
        for i in range(count):
            queue.publish(Message.of(str(i).encode().ljust(size, b".")).encode())

    broker.call(fill)


def _session(c: EngineClient):
    session = c.conn.begin()
    c.wait_for(lambda: session.remote_channel is not None, "begin")
    return session


def _receiver(c: EngineClient, session, name: str = "r"):
    link = session.attach_receiver(name, source=QUEUE)
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    return link


def _sender(c: EngineClient, session):
    link = session.attach_sender("s", target=QUEUE)
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    c.wait_for(lambda: link.link_credit > 0, "credit")
    return link


def _transfers(c: EngineClient, link) -> list[Transfer]:
    return [e for e in c.of(Transfer) if e.link is link]


def _limit_errors(c: EngineClient) -> bool:
    return any(e.condition == Cond.TRANSFER_LIMIT_EXCEEDED for e in c.of(ProtocolErrorRaised))


# --- scenarios: each returns True when it saw the misbehaviour --------------------------


def overdeliver_on_regrant(b, c) -> bool:
    _publish(b, 100)
    link = _receiver(c, _session(c))
    link.flow(link_credit=2)
    handled = 0
    while handled < 100 and not c.of(ProtocolErrorRaised) and not c.closed:
        got = _transfers(c, link)
        for _ in got[handled:]:
            link.flow(link_credit=2)
        handled = len(got)
        c.pump(0.05)
    return _limit_errors(c)


def transfer_before_credit(b, c) -> bool:
    _publish(b, 3)
    link = _receiver(c, _session(c))
    c.settle(0.3)
    return bool(_transfers(c, link)) or _limit_errors(c)


def _drain_reply(b, c) -> bool:
    link = _receiver(c, _session(c))
    link.flow(link_credit=5, drain=True)
    c.settle(0.4)
    return not [e for e in c.of(FlowReceived) if e.link is link and e.flow.drain]


ignore_drain = _drain_reply
no_drain_reply = _drain_reply


def excess_credit_after_drain(b, c) -> bool:
    link = _receiver(c, _session(c))
    link.flow(link_credit=5, drain=True)
    c.wait_for(lambda: [e for e in c.of(FlowReceived) if e.link is link], "drain reply")
    _publish(b, 2)  # credit is 0 after the drain: nothing may come
    c.settle(0.3)
    return bool(_transfers(c, link)) or _limit_errors(c)


def no_requeue_on_detach(b, c) -> bool:
    _publish(b, 3)
    link = _receiver(c, _session(c))
    link.flow(link_credit=3)
    c.wait_for(lambda: len(_transfers(c, link)) == 3, "3 transfers")
    link.detach(closed=True)
    c.settle(0.3)
    ready = b.call(lambda: b.server.vhost.get_queue("q").messages_ready)
    return ready != 3


def redeliver_undeliverable_here(b, c) -> bool:
    _publish(b, 1)
    link = _receiver(c, _session(c))
    link.flow(link_credit=1)
    first = c.wait_for(lambda: _transfers(c, link), "transfer")[0]
    link.disposition(first.delivery_id, settled=True, state=Modified(undeliverable_here=True))
    link.flow(link_credit=5)
    c.settle(0.3)
    return len(_transfers(c, link)) > 1


def _alarm_then_transfer(b, c) -> tuple[int, list[int]]:
    """Raise an alarm and send one transfer before reading the window-0 flow (in flight)."""
    session = _session(c)
    link = _sender(c, session)
    start = len(c.events)
    management(b).raise_alarm("memory")
    link.send(Message.of(b"in-flight").encode(), settled=False)  # window 0 not read yet
    c.settle(0.4)
    windows = [e.flow.incoming_window for e in c.of(FlowReceived, start) if e.link is None]
    management(b).clear_alarm("memory")
    return start, windows


def ignore_alarm(b, c) -> bool:
    _, windows = _alarm_then_transfer(b, c)
    return 0 not in windows


def negative_window_after_alarm(b, c) -> bool:
    _, windows = _alarm_then_transfer(b, c)
    limit = b.server.config.limits.max_incoming_window
    return any(w > limit for w in windows)


def credit_per_frame(b, c) -> bool:
    link = _receiver(c, _session(c))
    link.flow(link_credit=3)
    _publish(b, 1, size=2000)  # needs several 512-byte frames
    c.wait_for(lambda: _transfers(c, link), "first transfer")
    _publish(b, 2, size=10)  # two more fit the grant of 3
    c.settle(0.4)
    return len(_transfers(c, link)) < 3 or bool(c.of(ProtocolErrorRaised))


def skip_window_check(b, c) -> bool:
    session = _session(c)
    link = _sender(c, session)
    management(b).raise_alarm("memory")  # our window goes to 0 and stays there
    c.wait_for(lambda: any(e.flow.incoming_window == 0 for e in c.of(FlowReceived)), "window 0")
    # a peer ignoring the window: it believes it may send 40 frames
    session.remote_horizon = serial_add(session.next_outgoing_id, 1000)
    for i in range(40):
        link.send(Message.of(str(i).encode()).encode(), settled=True)  # lax client policy
    c.settle(0.4)
    management(b).clear_alarm("memory")
    ends = c.of(RemoteEnd)
    return not any(e.error and e.error.condition == Cond.WINDOW_VIOLATION for e in ends)


def _echo_replies(b, c) -> dict[str, bool]:
    """Ask for echo on a consumer link, a publisher link and the session: which got a
    flow back?"""
    session = _session(c)
    consumer = _receiver(c, session)
    publisher = _sender(c, session)
    start = len(c.events)
    consumer.flow(link_credit=1, echo=True)
    publisher.send_flow_state(echo=True)
    session.flow(echo=True)
    c.settle(0.3)
    flows = c.of(FlowReceived, start)
    return {
        "consumer": any(e.link is consumer for e in flows),
        "publisher": any(e.link is publisher for e in flows),
        "session": any(e.link is None for e in flows),
    }


def no_echo(b, c) -> bool:
    return not all(_echo_replies(b, c).values())


# --- wire faults: the broker's own frames break a field rule (2.7.3-2.7.5) ---------------


def _broker_frames(c: EngineClient, name: str) -> list:
    """The performatives named `name` the broker sent, as decoded on the wire."""
    return [
        i.item.performative
        for i in c.items
        if i.direction == "server" and i.item is not None and getattr(i.item, "name", "") == name
    ]


def _publisher_flows(c: EngineClient) -> list:
    """Publish 3 unsettled messages, wait for their dispositions, then ask the broker for its
    flow state of the link (echo): its link flows."""
    session = _session(c)
    link = _sender(c, session)
    for i in range(3):
        link.send(Message.of(str(i).encode()).encode(), settled=False)
    c.wait_for(lambda: _confirmed(c) >= 3, "3 dispositions")
    link.send_flow_state(echo=True)
    c.wait_for(lambda: len([e for e in c.of(FlowReceived) if e.link is link]) >= 2, "echo reply")
    return [e.flow for e in c.of(FlowReceived) if e.link is link]


def _confirmed(c: EngineClient) -> int:
    return sum(e.last - e.first + 1 for e in c.of(DispositionReceived) if e.settled)


def flow_without_delivery_count(b, c) -> bool:
    return any(flow.delivery_count is None for flow in _publisher_flows(c))


def stale_receiver_delivery_count(b, c) -> bool:
    """Our delivery-count is 3 after the 3 messages: the echo reply still says 0."""
    return _publisher_flows(c)[-1].delivery_count == 0


def sender_flow_without_delivery_count(b, c) -> bool:
    link = _receiver(c, _session(c))
    link.flow(link_credit=2, echo=True)
    c.wait_for(lambda: [e for e in c.of(FlowReceived) if e.link is link], "echo reply")
    return any(e.flow.delivery_count is None for e in c.of(FlowReceived) if e.link is link)


def session_flow_with_link_fields(b, c) -> bool:
    session = _session(c)
    session.flow(echo=True)
    c.wait_for(lambda: [e for e in c.of(FlowReceived) if e.link is None], "session flow")
    flows = [e.flow for e in c.of(FlowReceived) if e.link is None]
    return any(f.link_credit is not None or f.delivery_count is not None for f in flows)


def attach_without_initial_delivery_count(b, c) -> bool:
    link = _receiver(c, _session(c))
    return link.remote_attach.initial_delivery_count is None


def attach_unsettled_null_key(b, c) -> bool:
    link = _receiver(c, _session(c))
    return None in (link.remote_attach.unsettled or {})


def transfer_without_message_format(b, c) -> bool:
    _publish(b, 1)
    link = _receiver(c, _session(c))
    link.flow(link_credit=1)
    c.wait_for(lambda: _transfers(c, link), "transfer")
    c.pump(0.05)  # the monitor has the frame
    return any(t.message_format is None for t in _broker_frames(c, "transfer"))


def insert_properties(b, c) -> bool:
    """A message published without properties is delivered with a properties section."""
    _publish(b, 1)
    link = _receiver(c, _session(c))
    link.flow(link_credit=1)
    delivered = c.wait_for(lambda: _transfers(c, link), "transfer")[0]
    return Message.decode(delivered.payload).properties is not None


def relay_error_without_delivery_tag(b, c) -> bool:
    """A message to a queue that does not exist through the anonymous relay (relay.py):
    rejected, its error's info without the delivery-tag."""
    session = _session(c)
    link = session.attach_sender("anon", target=Target(address=None))
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    c.wait_for(lambda: link.link_credit > 0, "credit")
    payload = Message.of(b"x", properties=Properties(to="/queues/missing")).encode()
    sent = link.send(payload, b"t-1", settled=False)
    c.wait_for(lambda: [e for e in c.of(DispositionReceived) if e.first <= sent], "outcome")
    (state,) = [e.state for e in c.of(DispositionReceived) if e.first <= sent <= e.last]
    return not (state.error.info or {}).get(symbol("delivery-tag"))


def keep_dynamic_nodes(b, c) -> bool:
    """A dynamic source (delete-on-close by default, dynamic_nodes.py), its link closed:
    the node is still there."""
    session = _session(c)
    link = session.attach_receiver("dyn", source=Source(dynamic=True))
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    name = link.remote_attach.source.address.removeprefix("/queues/")
    link.detach()
    c.wait_event(RemoteDetach, where=lambda e: e.link is link)
    return b.call(lambda: b.server.vhost.has_queue(name))


def close_shared_subscription_with_links(b, c) -> bool:
    """A durable shared global subscription (features/topic_subscriptions.py) with two
    links, one detached with closed=true: answered without amqp:resource-locked."""
    session = _session(c)
    source = Source(
        address="/exchanges/amq.topic",
        durable=uint(1),
        expiry_policy=symbol("never"),
        capabilities=[symbol("topic"), symbol("shared"), symbol("global")],
    )
    first = session.attach_receiver("fault-sub|global", source=source)
    second = session.attach_receiver("fault-sub|global2", source=source)
    c.wait_event(RemoteAttach, where=lambda e: e.link is second)
    first.detach()
    detach = c.wait_event(RemoteDetach, where=lambda e: e.link is first)
    return detach.error is None


def forget_durable_subscriptions(b, c) -> bool:
    """A durable topic subscription (features/topic_subscriptions.py) whose one link
    detached with closed=false: its queue is gone."""
    session = _session(c)
    source = Source(
        address="/exchanges/amq.topic",
        durable=uint(1),
        expiry_policy=symbol("never"),
        capabilities=[symbol("topic")],
    )
    link = session.attach_receiver("fault-durable-sub", source=source)
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    link.detach(closed=False)
    c.wait_event(RemoteDetach, where=lambda e: e.link is link)
    queues = b.call(lambda: list(b.server.vhost.queues))
    return not any(q.startswith("amqpspec.sub-") for q in queues)


def forget_persistent_nodes(b, c) -> bool:
    """A dynamic source that never expires and is kept durably (expiry-policy never,
    durable configuration: dynamic_nodes.py), its connection closed without a detach: the
    node is gone."""
    other = EngineClient(b.port)
    try:
        other.open()
        session = _session(other)
        source = Source(dynamic=True, expiry_policy=symbol("never"), durable=uint(1))
        link = session.attach_receiver("persistent", source=source)
        other.wait_event(RemoteAttach, where=lambda e: e.link is link)
        name = link.remote_attach.source.address.removeprefix("/queues/")
    finally:
        other.close()
    c.settle(0.2)  # the broker handles the close
    return not b.call(lambda: b.server.vhost.has_queue(name))


def sole_connection_weak_detection(b, c) -> bool:
    """c's open did not ask for sole-connection-for-container; a second connection of its
    container asks for it (refuse-connection, sole_connection.py): it is not refused."""
    from amqpspec.amqp10.extensions import (
        CONNECTION_ESTABLISHMENT_FAILED,
        SOLE_CONNECTION_CAPABILITY,
    )

    other = EngineClient(b.port, desired_capabilities=[symbol(SOLE_CONNECTION_CAPABILITY)])
    other.conn.container_id = c.conn.container_id
    try:
        other.open()
        return not (other.conn.remote_open.properties or {}).get(CONNECTION_ESTABLISHMENT_FAILED)
    finally:
        other.close()


def session_scoped_delivery_tags(b, c) -> bool:
    """Two unsettled deliveries with one tag on two senders of one session (2.6.12: a tag
    is unique among one link's unsettled deliveries): is either left unsettled?"""
    session = _session(c)
    first = _sender(c, session)
    second = session.attach_sender("s2", target=QUEUE)
    c.wait_event(RemoteAttach, where=lambda e: e.link is second)
    c.wait_for(lambda: second.link_credit > 0, "credit")
    ids = {link.send(Message.of(b"x").encode(), b"same", settled=False) for link in (first, second)}
    c.settle(0.4)
    settled = {
        i for e in c.of(DispositionReceived) if e.settled for i in range(e.first, e.last + 1)
    }
    return not ids <= settled


def accept_new_after_incomplete_map(b, c) -> bool:
    """A publisher link to a target with expiry-policy never, suspended and attached again
    with an incomplete unsettled map: a new transfer (resume not set) is taken as a publish
    instead of detaching the link (2.7.3, features/publisher_recovery.py)."""
    session = _session(c)
    target = Target(address=QUEUE, expiry_policy="never")
    link = session.attach_sender("kept-target", Source(), target)
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    link.detach(closed=False)
    c.wait_event(RemoteDetach, where=lambda e: e.link is link)
    again = session.attach_sender(
        "kept-target", Source(), target, unsettled={}, incomplete_unsettled=True
    )
    c.wait_event(RemoteAttach, where=lambda e: e.link is again)
    c.wait_for(lambda: again.link_credit > 0, "credit")
    again.send(Message.of(b"new").encode(), b"new", settled=False)
    c.settle(0.3)
    return not [e for e in c.of(RemoteDetach) if e.link is again]


def forget_unsettled_on_reattach(b, c) -> bool:
    """A receiver from a source with expiry-policy never (recovery.py) takes one message
    unsettled, detaches with closed=false and attaches again: the broker's attach has no
    unsettled map (it should name the kept delivery, 2.6.13)."""
    _publish(b, 1)
    session = _session(c)
    source = Source(address=QUEUE, expiry_policy="never")
    link = session.attach_receiver("kept", source=source)
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    link.flow(link_credit=1)
    c.wait_for(lambda: _transfers(c, link), "transfer")
    link.detach(closed=False)
    c.wait_event(RemoteDetach, where=lambda e: e.link is link)
    again = session.attach_receiver("kept", source=source, unsettled={})
    c.wait_event(RemoteAttach, where=lambda e: e.link is again)
    return not again.remote_attach.unsettled


UNKNOWN_FILTER = {symbol("x"): Described(symbol("amqpspec:no-such-filter:string"), "y")}


def _published_to_queue(c, message: Message) -> object:
    """One unsettled message to the queue: its outcome, or the detach that answered it."""
    session = _session(c)
    link = session.attach_sender("s", target=Target(address=QUEUE))
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    c.wait_for(lambda: link.link_credit > 0, "credit")
    sent = link.send(message.encode(), b"t-1", settled=False)

    def answer():
        states = [e.state for e in c.of(DispositionReceived) if e.first <= sent <= e.last]
        detaches = [e for e in c.of(RemoteDetach) if e.link is link]
        return (states or detaches or [None])[0]

    c.wait_for(lambda: answer() is not None, "outcome or detach")
    return answer()


def accept_reserved_annotations(b, c) -> bool:
    """A message-annotations key 3.2.10 reserves: accepted rather than the link detached
    with amqp:not-implemented."""
    message = Message.of(b"m", message_annotations={symbol("reserved-key"): 1})
    return isinstance(_published_to_queue(c, message), Accepted)


def accept_any_user_id(b, c) -> bool:
    """A user-id naming another user than the connection's: accepted rather than rejected
    with amqp:unauthorized-access."""
    message = Message.of(b"m", properties=Properties(user_id=b"amqpspec-someone-else"))
    return isinstance(_published_to_queue(c, message), Accepted)


def report_unknown_filters(b, c) -> bool:
    """A receiver whose source has a filter of an unknown type (filters.py): the broker's
    attach reports it as in place."""
    link = _session(c).attach_receiver("f", source=Source(address=QUEUE, filter=UNKNOWN_FILTER))
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    return symbol("x") in (link.remote_attach.source.filter or {})


def properties_filter_ignores_subject(b, c) -> bool:
    """Two messages on a stream, subjects a and b; a receiver from the first offset with
    amqp:properties-filter {subject: a}: the message with subject b comes through too."""
    management(b).declare_queue("s", arguments={"x-queue-type": "stream"})

    def fill() -> None:
        queue = b.server.vhost.get_queue("s")
        for subject in ("a", "b"):
            queue.publish(Message.of(b"m", properties=Properties(subject=subject)).encode())

    b.call(fill)
    wanted = {symbol("subject"): "a"}
    filters = {
        symbol("rabbitmq:stream-offset-spec"): "first",
        symbol("p"): Described(symbol("amqp:properties-filter"), wanted),
    }
    link = _session(c).attach_receiver("f", source=Source(address="/queues/s", filter=filters))
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    link.flow(link_credit=5, drain=True)
    c.wait_for(lambda: link.link_credit == 0 and c.of(FlowReceived), "drain reply")
    return len(c.of(Transfer)) == 2


def selector_like_escape_ignored(b, c) -> bool:
    """Three messages on a stream, application property name a%, a!b and a!c; a receiver
    from the first offset with amqp:sql-filter "name LIKE 'a!%' ESCAPE '!'": a!b and a!c
    come through (the '!' taken literally, the '%' a wildcard) instead of a%."""
    management(b).declare_queue("s", arguments={"x-queue-type": "stream"})

    def fill() -> None:
        queue = b.server.vhost.get_queue("s")
        for name in ("a%", "a!b", "a!c"):
            queue.publish(Message.of(b"m", application_properties={"name": name}).encode())

    b.call(fill)
    filters = {
        symbol("rabbitmq:stream-offset-spec"): "first",
        symbol("sql"): Described(symbol("amqp:sql-filter"), "name LIKE 'a!%' ESCAPE '!'"),
    }
    link = _session(c).attach_receiver("f", source=Source(address="/queues/s", filter=filters))
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    link.flow(link_credit=5, drain=True)
    c.wait_for(lambda: link.link_credit == 0 and c.of(FlowReceived), "drain reply")
    return len(c.of(Transfer)) == 2


def _controller(c: EngineClient, session):
    """A control link to the transaction coordinator (Part 4) and a request function:
    body -> the broker's disposition state for it."""
    link = session.attach_sender("ctl", target=Coordinator(capabilities=[LOCAL_TRANSACTIONS]))
    c.wait_for(lambda: link.link_credit > 0, "coordinator credit")

    def request(body) -> object:
        delivery_id = link.send(Message.of(body).encode(), settled=False)
        found = c.wait_event(
            DispositionReceived,
            "coordinator outcome",
            where=lambda e: e.first <= delivery_id <= e.last,
        )
        return found.state

    return request


def txn_post_immediately(b, c) -> bool:
    """A message posted in a transaction that is then rolled back ends up in the queue."""
    session = _session(c)
    request = _controller(c, session)
    txn_id = request(Declare()).txn_id
    sender = _sender(c, session)
    sender.send(Message.of(b"x").encode(), settled=False, state=TransactionalState(txn_id=txn_id))
    request(Discharge(txn_id=txn_id, fail=True))
    return b.call(lambda: b.server.vhost.get_queue("q").messages) == 1


def txn_discharge_unknown_accepted(b, c) -> bool:
    """A discharge for a txn-id never declared is accepted."""
    request = _controller(c, _session(c))
    return isinstance(request(Discharge(txn_id=b"\xff\xff")), Accepted)


def txn_timeout_never_fires(b, c) -> bool:
    """With a transaction timeout of 0.2 s, a transaction 0.4 s old still commits."""
    import time

    request = _controller(c, _session(c))
    txn_id = request(Declare()).txn_id
    time.sleep(0.4)
    return isinstance(request(Discharge(txn_id=txn_id)), Accepted)


def sasl_answers_as_client(b, c) -> bool:
    """A second connection sends the SASL header and, after the broker's sasl-mechanisms,
    a sasl-mechanisms of its own: the broker answers it with a sasl-init (5.3.2)."""
    import socket
    import time

    from amqpspec.amqp10.builder import sasl_frame
    from amqpspec.amqp10.composites import SaslMechanisms
    from amqpspec.amqp10.frames import SASL_HEADER, Frame, decode_stream

    received = b""
    with socket.create_connection(("127.0.0.1", b.port), timeout=0.5) as sock:
        sock.sendall(SASL_HEADER.encode())
        deadline = time.monotonic() + 3.0
        sent = False
        while time.monotonic() < deadline:
            if not sent and b"\x00\x53\x40" in received:  # sasl-mechanisms arrived
                sock.sendall(sasl_frame(SaslMechanisms(sasl_server_mechanisms=[symbol("PLAIN")])))
                sent = True
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            if not chunk:
                break
            received += chunk
    frames = [item for item in decode_stream(received) if isinstance(item, Frame)]
    return any(frame.name == "sasl-init" for frame in frames)


def scram_accepts_any_proof(b, c) -> bool:
    """A second connection runs SCRAM-SHA-256 for guest with the proof of a wrong
    password: the broker answers sasl-outcome ok (RFC 5802 3: it verifies the proof)."""
    import socket

    from amqpspec.amqp10.builder import sasl_frame
    from amqpspec.amqp10.composites import SaslInit, SaslResponse
    from amqpspec.amqp10.engine.scram import SCRAM_SHA_256, ScramClient
    from amqpspec.amqp10.frames import SASL_HEADER, Frame, decode_stream

    client = ScramClient("guest", "guest")
    init = SaslInit(mechanism=symbol(SCRAM_SHA_256), initial_response=client.first())

    def frames_until(sock, name: str, received: bytes) -> tuple[bytes, list[Frame]]:
        while True:
            frames = [i for i in decode_stream(received) if isinstance(i, Frame)]
            if any(frame.name == name for frame in frames):
                return received, frames
            chunk = sock.recv(4096)
            if not chunk:
                return received, frames
            received += chunk

    with socket.create_connection(("127.0.0.1", b.port), timeout=3.0) as sock:
        sock.sendall(SASL_HEADER.encode() + sasl_frame(init))
        received, frames = frames_until(sock, "sasl-challenge", b"")
        challenge = bytes(frames[-1].performative.challenge)
        final = client.final(challenge, proof_password="amqpspec-wrong-password")
        sock.sendall(sasl_frame(SaslResponse(response=final)))
        _, frames = frames_until(sock, "sasl-outcome", received)
    outcomes = [frame for frame in frames if frame.name == "sasl-outcome"]
    return bool(outcomes) and outcomes[-1].performative.code == 0


def publish_without_write_permission(b, c) -> bool:
    """A user with no rights ("^$" configure / write / read), made through the admin API,
    attaches a sender to the queue: the broker attaches it (no detach with an error)."""
    from amqpspec.amqp10.engine import ClientSasl

    admin = management(b)
    admin.create_user("norights", "norights-pw")
    admin.set_permissions("norights", "^$", "^$", "^$")
    user = EngineClient(b.port, sasl=ClientSasl("PLAIN", "norights", "norights-pw"))
    try:
        user.open()
        link = _session(user).attach_sender("s", target=Target(address=QUEUE))
        user.wait_event(RemoteAttach, where=lambda e: e.link is link)
        user.settle()
        refused = [e for e in user.of(RemoteDetach) if e.error is not None] + user.of(RemoteEnd)
        return link.remote_attach.target is not None and not refused
    finally:
        user.close()


def no_sasl_timeout(b, c) -> bool:
    """A second connection sends the SASL header and then nothing: it is still open past
    the broker's SASL time-out (0.5 s here)."""
    import socket

    from amqpspec.amqp10.frames import SASL_HEADER

    with socket.create_connection(("127.0.0.1", b.port), timeout=2.0) as sock:
        sock.sendall(SASL_HEADER.encode())
        try:
            while sock.recv(4096):  # the header and sasl-mechanisms, then EOF when dropped
                pass
        except TimeoutError:
            return True  # 2 s, four time-outs, and the socket is still open
    return False


def accept_misordered_sections(b, c) -> bool:
    """A message whose properties section follows its body, published unsettled to the
    queue: accepted (3.2's order unchecked) rather than rejected with decode-error."""
    from amqpspec.amqp10.composites import Data

    session = _session(c)
    link = session.attach_sender("s", target=Target(address=QUEUE))
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    c.wait_for(lambda: link.link_credit > 0, "credit")
    payload = Data(b"body").encode() + Properties(subject="late").encode()
    sent = link.send(payload, b"t-1", settled=False)
    c.wait_for(lambda: [e for e in c.of(DispositionReceived) if e.first <= sent], "outcome")
    (state,) = [e.state for e in c.of(DispositionReceived) if e.first <= sent <= e.last]
    return isinstance(state, Accepted)


def _restarted_keeps(b, *, consumed: bool) -> bool:
    """A broker with `b`'s faults and a data dir, a durable queue "q" holding one message
    (taken unsettled by a receiver when `consumed`); POST /api/restart: whether the
    message is still in the queue after it (3.2.1)."""
    import tempfile

    faults = tuple(sorted(b.server.config.faults.enabled))
    with tempfile.TemporaryDirectory() as data, running_broker(faults=faults, data_dir=data) as d:
        management(d).declare_queue("q", durable=True)
        _publish(d, 1)
        with connected_client(d) as c:
            if consumed:
                link = _receiver(c, _session(c))
                link.flow(link_credit=1)
                c.wait_event(Transfer, where=lambda e: e.link is link)
            admin = management(d)
            before = admin.restart()
            c.wait_for(lambda: c.closed, "the connection dropped by the restart")
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ManagementError):
                if management(d).overview().get("boot_id") != before:
                    break
            time.sleep(0.01)
        return d.call(lambda: d.server.vhost.get_queue("q").messages) == 1


def keep_publishers_of_deleted_nodes(b, c) -> bool:
    """A sender to /queues/q, the queue deleted through the admin API
    (features/deleted_targets.py): the link is not detached."""
    link = _sender(c, _session(c))
    management(b).delete_queue("q")
    c.settle(0.3)
    return not [e for e in c.of(RemoteDetach) if e.link is link]


def accept_durable_on_volatile(b, c) -> bool:
    """A message with header durable=true to a volatile queue (features/volatile_nodes.py):
    accepted."""
    management(b).declare_queue("v", durable=False, arguments={VOLATILE_ARGUMENT: True})
    link = _session(c).attach_sender("v", target="/queues/v")
    c.wait_event(RemoteAttach, where=lambda e: e.link is link)
    c.wait_for(lambda: link.link_credit > 0, "credit")
    payload = Message.of(b"x", header=Header(durable=True)).encode()
    sent = link.send(payload, b"t-1", settled=False)
    c.wait_for(lambda: [e for e in c.of(DispositionReceived) if e.first <= sent], "outcome")
    (state,) = [e.state for e in c.of(DispositionReceived) if e.first <= sent <= e.last]
    return isinstance(state, Accepted)


def durable_messages_in_memory(b, c) -> bool:
    """A durable message in a durable queue, the broker restarted: it is gone."""
    return not _restarted_keeps(b, consumed=False)


def consume_on_delivery(b, c) -> bool:
    """A durable message delivered unsettled when the broker restarts: it is gone."""
    return not _restarted_keeps(b, consumed=True)


SCENARIOS: dict[str, tuple[Callable, dict]] = {
    "overdeliver-on-regrant": (overdeliver_on_regrant, {}),
    "transfer-before-credit": (transfer_before_credit, {}),
    "ignore-drain": (ignore_drain, {}),
    "no-drain-reply": (no_drain_reply, {}),
    "excess-credit-after-drain": (excess_credit_after_drain, {}),
    "no-requeue-on-detach": (no_requeue_on_detach, {}),
    "redeliver-undeliverable-here": (redeliver_undeliverable_here, {}),
    "ignore-alarm": (ignore_alarm, {}),
    "negative-window-after-alarm": (negative_window_after_alarm, {}),
    "credit-per-frame": (credit_per_frame, {"max_frame_size": 512}),
    "skip-window-check": (skip_window_check, {"max_incoming_window": 4}),
    "no-echo": (no_echo, {}),
    "insert-properties": (insert_properties, {}),
    "flow-without-delivery-count": (flow_without_delivery_count, {}),
    "stale-receiver-delivery-count": (stale_receiver_delivery_count, {}),
    "sender-flow-without-delivery-count": (sender_flow_without_delivery_count, {}),
    "session-flow-with-link-fields": (session_flow_with_link_fields, {}),
    "attach-without-initial-delivery-count": (attach_without_initial_delivery_count, {}),
    "attach-unsettled-null-key": (attach_unsettled_null_key, {}),
    "transfer-without-message-format": (transfer_without_message_format, {}),
    "relay-error-without-delivery-tag": (relay_error_without_delivery_tag, {}),
    "keep-dynamic-nodes": (keep_dynamic_nodes, {}),
    "forget-persistent-nodes": (forget_persistent_nodes, {}),
    "close-shared-subscription-with-links": (close_shared_subscription_with_links, {}),
    "forget-durable-subscriptions": (forget_durable_subscriptions, {}),
    "sole-connection-weak-detection": (sole_connection_weak_detection, {}),
    "forget-unsettled-on-reattach": (forget_unsettled_on_reattach, {}),
    "accept-new-after-incomplete-map": (accept_new_after_incomplete_map, {}),
    "session-scoped-delivery-tags": (session_scoped_delivery_tags, {}),
    "sasl-answers-as-client": (sasl_answers_as_client, {}),
    "scram-accepts-any-proof": (scram_accepts_any_proof, {}),
    "publish-without-write-permission": (publish_without_write_permission, {}),
    "no-sasl-timeout": (no_sasl_timeout, {"sasl_timeout": 0.5}),
    "accept-misordered-sections": (accept_misordered_sections, {}),
    "accept-reserved-annotations": (accept_reserved_annotations, {}),
    "accept-any-user-id": (accept_any_user_id, {}),
    "report-unknown-filters": (report_unknown_filters, {}),
    "properties-filter-ignores-subject": (properties_filter_ignores_subject, {}),
    "selector-like-escape-ignored": (selector_like_escape_ignored, {}),
    "txn-post-immediately": (txn_post_immediately, {}),
    "txn-discharge-unknown-accepted": (txn_discharge_unknown_accepted, {}),
    "txn-timeout-never-fires": (txn_timeout_never_fires, {"transaction_timeout": 0.2}),
    "durable-messages-in-memory": (durable_messages_in_memory, {}),
    "keep-publishers-of-deleted-nodes": (keep_publishers_of_deleted_nodes, {}),
    "accept-durable-on-volatile": (accept_durable_on_volatile, {}),
    "consume-on-delivery": (consume_on_delivery, {}),
}


CLIENT_VIOLATES = {"skip-window-check"}  # the scenario's client breaks 2.5.6 on purpose


def run_scenario(fault: str, enabled: bool) -> bool:
    scenario, limits = SCENARIOS[fault]
    faults = (fault,) if enabled else ()
    with running_broker_with_queue(faults=faults, limits=limits or None) as b:
        options: dict = {"max_frame_size": 512 if "max_frame_size" in limits else 65536}
        if fault in CLIENT_VIOLATES:
            options["policy"] = EndpointPolicy(check_credit=False)
        with connected_client(b, **options) as c:
            observed = scenario(b, c)
        if not enabled and fault not in CLIENT_VIOLATES:
            # a correct broker: the checker finds nothing in the whole trace either
            assert [str(v) for v in c.violations] == []
        return observed


@pytest.mark.parametrize("fault", sorted(SCENARIOS))
def test_fault_is_caught(fault):
    assert run_scenario(fault, enabled=False) is False, "misbehaviour without the fault"
    assert run_scenario(fault, enabled=True) is True, "the fault went unnoticed"


def test_every_protocol_and_queue_fault_has_a_scenario():
    from amqpspec.reference_broker.faults.catalog import (
        CATALOG,
        CONCURRENCY_FAULTS,
        PARSER_LAYER,
        WEBSOCKET_FAULTS,
    )

    # parser-layer faults are the fuzzer's: tests/test_fuzz_faults.py; the concurrency
    # faults the multi-party fuzzer's, scripted against each: tests/test_fuzz_multiparty.py;
    # the WebSocket listener's over ws://: tests/test_websocket.py
    missing = {name for name, info in CATALOG.items() if info.layer != PARSER_LAYER}
    missing -= set(SCENARIOS) | set(CONCURRENCY_FAULTS) | set(WEBSOCKET_FAULTS)
    assert missing == set()


@pytest.mark.parametrize("enabled", [False, True])
def test_no_echo_suppresses_every_echo_reply_and_the_checker_names_it(enabled):
    with running_broker_with_queue(faults=("no-echo",) if enabled else ()) as b:
        c = EngineClient(b.port, liveness_bound=0.2)  # unanswered echo is a liveness rule
        try:
            c.open()
            replies = _echo_replies(b, c)
            # end the trace here: the close that follows forgets pending echo requests
            c.end_trace()
        finally:
            c.close()
    unanswered = [v for v in c.violations if v.rule_id == "link.echo.unanswered"]
    if enabled:
        assert replies == {"consumer": False, "publisher": False, "session": False}
        assert {v.origin for v in unanswered} == {"server"}  # the side that owes a reply
        assert len(unanswered) == 3
    else:
        assert replies == {"consumer": True, "publisher": True, "session": True}
        assert unanswered == []


@pytest.mark.parametrize(
    ("fault", "rule_id"),
    [
        ("overdeliver-on-regrant", "link.credit.transfer-beyond-credit"),
        ("transfer-before-credit", "link.credit.transfer-without-credit"),
    ],
)
def test_checker_names_the_credit_faults(fault, rule_id):
    scenario, _ = SCENARIOS[fault]
    with running_broker_with_queue(faults=(fault,)) as b, connected_client(b) as c:
        scenario(b, c)
    found = {v.rule_id for v in c.violations if v.origin == "server"}
    assert rule_id in found
