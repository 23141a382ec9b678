"""The reference broker's message-level checks on a publish (reference_broker/features/
message_checks.py), in memory: a reserved annotation key detaches the link with
amqp:not-implemented (3.2.10), a user-id other than the authenticated user is refused with
amqp:unauthorized-access (rejected, or the link detached when the message came settled), a
matching one taken as it came; the two faults of the area; and amqp10.message_head, the
cheap reading of a message's sections the checks rest on (their 3.2 order judged first, then
the head)."""

from __future__ import annotations

import pytest
from broker_support import memory_session

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import Data, Header, Properties, Rejected, Target
from amqpspec.amqp10.engine import DispositionReceived, RemoteDetach
from amqpspec.amqp10.errors import DecodeError, ErrorKind
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.message_head import (
    EMPTY_HEAD,
    MessageHead,
    message_head,
    publish_head,
    reserved_key,
    section_at,
)
from amqpspec.amqp10.types import Described, symbol, ulong
from amqpspec.reference_broker.config import BrokerConfig
from amqpspec.reference_broker.faults.catalog import Faults
from amqpspec.reference_broker.runtime.memory import MemoryBroker

USER = "anonymous"  # the broker's user of a connection without SASL


def _broker(*faults: str) -> MemoryBroker:
    return MemoryBroker(
        BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, faults=Faults(faults))
    )


def _publish(broker, conn, session, message: Message | bytes, *, settled: bool = False):
    """One message (or a payload) to queue q: (its disposition's state or None, the detach
    error or None)."""
    broker.vhost.declare_queue("q")
    link = session.attach_sender("s", target=Target(address="/queues/q"))
    broker.pump()
    payload = message if isinstance(message, bytes) else message.encode()
    sent = link.send(payload, b"t-1", settled=settled)
    broker.pump()
    states = [e.state for e in conn.of(DispositionReceived) if e.first <= sent <= e.last]
    detaches = [e.error for e in conn.of(RemoteDetach) if e.link is link]
    return (states[0] if states else None), (detaches[0] if detaches else None)


def _user_message(user_id: str) -> Message:
    return Message.of(b"m", properties=Properties(message_id="m", user_id=user_id.encode()))


@pytest.mark.parametrize("key", [symbol("reserved-key"), ulong(7)])
def test_a_reserved_annotation_key_detaches_the_link_with_not_implemented(key):
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        message = Message.of(b"m", message_annotations={key: 1})
        state, error = _publish(broker, conn, session, message)
        assert state is None
        assert str(error.condition) == "amqp:not-implemented"
        assert "3.2.10" in error.description
        assert broker.vhost.get_queue("q").messages == 0


def test_x_keys_are_taken_and_the_fault_takes_reserved_ones():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        message = Message.of(b"m", message_annotations={symbol("x-opt-a"): 1, "x-b": 2})
        state, error = _publish(broker, conn, session, message)
        assert type(state).__name__ == "Accepted" and error is None
    broker = _broker("accept-reserved-annotations")
    with broker, memory_session(broker) as (conn, session):
        message = Message.of(b"m", message_annotations={symbol("reserved-key"): 1})
        state, error = _publish(broker, conn, session, message)
        assert type(state).__name__ == "Accepted" and error is None
        assert broker.vhost.get_queue("q").messages == 1


def test_a_user_id_of_another_user_is_rejected_with_unauthorized_access():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        state, error = _publish(broker, conn, session, _user_message("guest"))
        assert isinstance(state, Rejected) and error is None
        assert str(state.error.condition) == "amqp:unauthorized-access"
        assert broker.vhost.get_queue("q").messages == 0


def test_a_settled_message_of_another_user_detaches_the_link():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        state, error = _publish(broker, conn, session, _user_message("guest"), settled=True)
        assert state is None
        assert str(error.condition) == "amqp:unauthorized-access"


def test_the_own_user_id_is_taken_unchanged_and_the_fault_takes_any():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        sent = _user_message(USER)
        state, _ = _publish(broker, conn, session, sent)
        assert type(state).__name__ == "Accepted"
        (queued,) = broker.vhost.get_queue("q").ready_messages()
        assert queued.payload == sent.encode()
    broker = _broker("accept-any-user-id")
    with broker, memory_session(broker) as (conn, session):
        state, _ = _publish(broker, conn, session, _user_message("guest"))
        assert type(state).__name__ == "Accepted"


# a properties section whose user-id is a string, not binary (3.2.4): an undecodable head
_STRING_USER_ID = codec.encode(Described(ulong(0x73), ["id", "guest"]))


@pytest.mark.parametrize(
    ("payload", "description"),
    [
        (Data(b"m").encode() + Properties(subject="s").encode(), "message: properties after data"),
        (Data(b"m").encode() + _STRING_USER_ID, "message: properties after data"),  # order first
        (Header().encode() + Data(b"m").encode()[:-1], "message: data section malformed"),
        (_STRING_USER_ID + Data(b"m").encode(), "undecodable head"),
    ],
)
def test_a_publish_is_rejected_for_its_sections_order_first_then_for_its_head(payload, description):
    """3.2's order (or a section past the payload's end) is judged before the head: both
    rejected with amqp:decode-error, the description naming which."""
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        state, _ = _publish(broker, conn, session, payload)
        assert isinstance(state, Rejected) and str(state.error.condition) == "amqp:decode-error"
        assert state.error.description.startswith(description)
        assert broker.vhost.get_queue("q").messages == 0


def test_publish_head_gives_the_sections_fault_or_the_head():
    plain = Message.of(b"m", properties=Properties(message_id="m")).encode()
    assert publish_head(plain) is EMPTY_HEAD  # nothing built for the common publish
    assert publish_head(_user_message("u").encode()) == MessageHead(user_id=b"u")
    assert publish_head(Data(b"m").encode() + plain) == "properties after data"
    with pytest.raises(DecodeError) as raised:
        publish_head(_STRING_USER_ID)
    assert raised.value.kind == ErrorKind.FIELD_TYPE


def test_message_head_reads_the_sections_before_the_application_data():
    properties = Properties(message_id="id", user_id=b"u")
    message = Message(
        header=Header(durable=True),
        delivery_annotations={symbol("x-opt-d"): 1},
        message_annotations={symbol("x-opt-m"): 2},
        properties=properties,
        application_properties={"k": "v"},
        body=[Data(b"body")],
    )
    head = message_head(message.encode())
    assert head == MessageHead({"x-opt-d": 1}, {"x-opt-m": 2}, b"u")
    long_properties = Properties(message_id="m" * 300, user_id=b"v" * 300, subject="s")
    assert message_head(Message.of(b"b", properties=long_properties).encode()).user_id == (
        b"v" * 300
    )  # list32, str32, vbin32
    assert message_head(Message.of(b"b", properties=Properties(to="q")).encode()) == (MessageHead())
    assert message_head(Message.of(b"b", properties=Properties()).encode()) == MessageHead()
    assert message_head(Message.of(b"only a body").encode()) == MessageHead()
    assert message_head(b"\x01not a message") == MessageHead()
    name, rank, _ = section_at(message.encode(), 0, len(message.encode()))
    assert (name, rank) == ("header", 0)
    cut = Message.of(b"m", message_annotations={symbol("x-a"): "long value"}).encode()[:8]
    with pytest.raises(DecodeError):
        message_head(cut)


def test_reserved_key_names_the_first_key_3_2_10_reserves():
    assert reserved_key(None) is None
    assert reserved_key({symbol("x-a"): 1, symbol("x-opt-b"): 2}) is None
    assert reserved_key({symbol("x-a"): 1, symbol("key"): 2}) == "key"
    assert reserved_key({ulong(1): 1}) == 1
    assert reserved_key({"x-string-key": 1}) == "x-string-key"  # not a symbol


def test_a_head_whose_properties_are_no_list_or_whose_user_id_is_no_binary_is_refused():
    no_list = b"\x00\x53\x73\xa1\x01x"  # properties whose value is a str8
    with pytest.raises(DecodeError) as raised:
        message_head(no_list)
    assert raised.value.kind == ErrorKind.NOT_A_LIST
    wrong_type = b"\x00\x53\x73\xc0\x05\x02\x40\xa1\x01u"  # list8: message-id null, user-id str
    with pytest.raises(DecodeError) as raised:
        message_head(wrong_type)
    assert raised.value.kind == ErrorKind.FIELD_TYPE
