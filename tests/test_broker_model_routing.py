"""Exchanges (direct, fanout, topic, headers, default), address parsing (v2, v1, `to`), and
the vhost's routing, dynamic queues, durable definitions."""

from __future__ import annotations

import pytest

from amqpspec.reference_broker.queues.addressing import (
    AddressError,
    AddressKind,
    encode_segment,
    exchange_address,
    parse_source,
    parse_target,
    parse_to,
    queue_address,
)
from amqpspec.reference_broker.queues.classic import ACCEPTED, Delivery
from amqpspec.reference_broker.queues.exchanges import (
    Binding,
    DefaultExchange,
    Exchange,
    ExchangeError,
    freeze_arguments,
    headers_match,
    topic_matches,
)
from amqpspec.reference_broker.queues.vhost import (
    NotAllowedError,
    NotFoundError,
    PreconditionFailedError,
    VirtualHost,
)

# ---------------------------------------------------------------------- topic
TOPIC_TABLE = [
    # (binding key, routing key, matches)
    ("a.b.c", "a.b.c", True),
    ("a.b.c", "a.b", False),
    ("a.*.c", "a.b.c", True),
    ("a.*.c", "a.c", False),
    ("a.*", "a", False),
    ("*", "", False),  # "" is zero words
    ("#", "", True),
    ("#", "a.b.c", True),
    ("a.#", "a", True),  # zero words
    ("a.#", "a.b.c", True),
    ("a.#", "b.a", False),
    ("#.c", "c", True),
    ("#.c", "a.b.c", True),
    ("#.c", "a.b.c.d", False),
    ("a.#.c", "a.c", True),
    ("a.#.c", "a.x.y.c", True),
    ("a.#.#.c", "a.c", True),
    ("#.#", "x", True),
    ("*.#", "", False),
    ("*.#", "x", True),
    ("#.*", "x.y", True),
    ("*.*", "a.", True),  # "a." is two words, the second empty
    ("a..b", "a..b", True),
    ("a.*.b", "a..b", True),
    ("", "", True),
    ("", "a", False),
    ("a*", "ab", False),  # * is a wildcard only as a whole word
    ("a*", "a*", True),
]


@pytest.mark.parametrize(("binding", "key", "expected"), TOPIC_TABLE)
def test_topic_matching(binding, key, expected):
    assert topic_matches(binding, key) is expected


def test_topic_exchange_routes_each_queue_once():
    ex = Exchange("t", "topic")
    ex.add_binding(Binding("t", "q1", "a.*"))
    ex.add_binding(Binding("t", "q1", "a.#"))
    ex.add_binding(Binding("t", "q2", "#.b"))
    assert ex.route("a.b") == ["q1", "q2"]
    assert ex.route("x.y") == []
    assert ex.unroutable_total == 1


# ---------------------------------------------------------------------- other types
def test_direct_and_fanout():
    direct = Exchange("d", "direct")
    direct.add_binding(Binding("d", "q1", "k"))
    direct.add_binding(Binding("d", "q2", "k"))
    direct.add_binding(Binding("d", "q3", "other"))
    assert direct.route("k") == ["q1", "q2"]
    assert direct.add_binding(Binding("d", "q1", "k")) is False  # idempotent
    assert direct.remove_binding(Binding("d", "q1", "k")) is True
    assert direct.route("k") == ["q2"]
    fanout = Exchange("f", "fanout")
    fanout.add_binding(Binding("f", "q1", "ignored"))
    fanout.add_binding(Binding("f", "q2"))
    assert fanout.route("anything") == ["q1", "q2"]


HEADERS_TABLE = [
    ({"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": 0}, True),
    ({"a": 1, "b": "x"}, {"a": 1}, False),
    ({"x-match": "any", "a": 1, "b": "x"}, {"b": "x"}, True),
    ({"x-match": "any", "a": 1}, {"a": 2}, False),
    ({"x-match": "all"}, {}, True),
    ({"x-match": "any"}, {"a": 1}, False),
    ({"x-match": "all", "x-k": 1}, {}, True),  # x- arguments ignored
    ({"x-match": "all-with-x", "x-k": 1}, {}, False),
    ({"x-match": "any-with-x", "x-k": 1}, {"x-k": 1}, True),
]


@pytest.mark.parametrize(("args", "headers", "expected"), HEADERS_TABLE)
def test_headers_matching(args, headers, expected):
    assert headers_match(args, headers) is expected


def test_headers_exchange_and_bad_x_match():
    ex = Exchange("h", "headers")
    ex.add_binding(Binding("h", "q1", "", freeze_arguments({"x-match": "any", "k": "v"})))
    assert ex.route("", {"k": "v"}) == ["q1"]
    assert ex.route("", None) == []
    with pytest.raises(ExchangeError):
        ex.add_binding(Binding("h", "q2", "", freeze_arguments({"x-match": "some"})))
    with pytest.raises(ExchangeError):
        Exchange("bad", "x-delayed")


def test_default_exchange_routes_by_queue_name():
    names = {"q1"}
    ex = DefaultExchange(names.__contains__)
    assert ex.route("q1") == ["q1"]
    assert ex.route("nope") == []
    with pytest.raises(ExchangeError):
        ex.add_binding(Binding("", "q1", "q1"))


def test_binding_properties_key_like_rabbitmq():
    assert Binding("x", "q", "").properties_key == "~"
    assert Binding("x", "q", "a.*").properties_key == "a.%2A"
    assert Binding("x", "q", "a b/c~d-_.!x").properties_key == "a+b%2Fc%7Ed-_.%21x"
    with_args = Binding("x", "q", "k", freeze_arguments({"x-match": "any"}))
    assert with_args.properties_key.startswith("k~") and len(with_args.properties_key) > 3


# ---------------------------------------------------------------------- addresses
TARGETS = [
    # (address, kind, queue, exchange, routing key, version)
    ("/queues/q1", AddressKind.QUEUE, "q1", None, None, 2),
    ("/queues/my%20queue", AddressKind.QUEUE, "my queue", None, None, 2),
    ("/queues/a%2Fb", AddressKind.QUEUE, "a/b", None, None, 2),
    ("/queues/%C3%A9t%C3%A9", AddressKind.QUEUE, "été", None, None, 2),
    (
        "/exchanges/amq.direct/my-routing_key%2F123",
        AddressKind.EXCHANGE,
        None,
        "amq.direct",
        "my-routing_key/123",
        2,
    ),
    ("/exchanges/amq.fanout", AddressKind.EXCHANGE, None, "amq.fanout", "", 2),
    ("/exchanges/x/", AddressKind.EXCHANGE, None, "x", "", 2),
    (None, AddressKind.ANONYMOUS, None, None, None, 2),
    ("/amq/queue/q1", AddressKind.QUEUE, "q1", None, None, 1),
    ("/queue/q1", AddressKind.QUEUE, "q1", None, None, 1),
    ("q1", AddressKind.QUEUE, "q1", None, None, 1),
    ("/exchange/amq.direct/key", AddressKind.EXCHANGE, None, "amq.direct", "key", 1),
    ("/exchange/amq.direct", AddressKind.EXCHANGE, None, "amq.direct", None, 1),
    ("/topic/a.b", AddressKind.EXCHANGE, None, "amq.topic", "a.b", 1),
]


@pytest.mark.parametrize(("address", "kind", "queue", "exchange", "key", "version"), TARGETS)
def test_parse_target(address, kind, queue, exchange, key, version):
    parsed = parse_target(address)
    assert (parsed.kind, parsed.queue, parsed.exchange, parsed.routing_key, parsed.version) == (
        kind,
        queue,
        exchange,
        key,
        version,
    )
    assert parsed.is_v1 == (version == 1)


BAD_TARGETS = [
    ("/queues/", "amqp:invalid-field"),
    ("/queues/a/b", "amqp:invalid-field"),
    ("/queues/bad%2", "amqp:invalid-field"),
    ("/queues/bad%zz", "amqp:invalid-field"),
    ("/queues/%ff", "amqp:invalid-field"),  # not UTF-8
    ("/exchanges/x/a/b", "amqp:invalid-field"),
    ("/exchanges/", "amqp:not-allowed"),  # the default exchange, by name ""
    ("/exchanges/amq.default/q", "amqp:not-allowed"),
    ("/amq/queue/", "amqp:invalid-field"),
    ("/nonsense/x", "amqp:invalid-field"),
    ("", "amqp:invalid-field"),
    ("a/b", "amqp:invalid-field"),
]


@pytest.mark.parametrize(("address", "condition"), BAD_TARGETS)
def test_parse_target_errors(address, condition):
    with pytest.raises(AddressError) as info:
        parse_target(address)
    assert info.value.condition == condition


def test_v1_queue_declare_and_subject_forms():
    assert parse_target("/queue/q").declare is True
    assert parse_target("/amq/queue/q").declare is False
    assert parse_target("/queue").queue_from_subject is True
    with pytest.raises(AddressError):
        parse_target("/amq/queue/q", allow_v1=False)


def test_parse_source():
    assert parse_source("/queues/q%201").queue == "q 1"
    assert parse_source("/amq/queue/q").version == 1
    assert parse_source("/exchange/x/k").kind is AddressKind.EXCHANGE
    for bad in ("/exchanges/x/k", None, "/queue", "/exchange/x"):
        with pytest.raises(AddressError):
            parse_source(bad)


def test_parse_to_is_v2_only():
    assert parse_to("/queues/q").queue == "q"
    for bad in (None, "/amq/queue/q", "q"):
        with pytest.raises(AddressError) as refused:
            parse_to(bad)
        # RabbitMQ 4 rejects such a message on the anonymous terminus with this condition
        assert refused.value.condition == "amqp:precondition-failed"


def test_address_builders_round_trip():
    for name in ("q", "a/b", "my queue", "été", "x%y", "~._-"):
        assert parse_target(queue_address(name)).queue == name
        assert parse_target(exchange_address("ex", name)).routing_key == name
    assert encode_segment("a/b c") == "a%2Fb%20c"
    assert exchange_address("amq.fanout") == "/exchanges/amq.fanout"


# ---------------------------------------------------------------------- vhost
def test_vhost_publish_routes_and_releases_unroutable():
    v = VirtualHost()
    v.declare_queue("q1", durable=False)
    v.declare_queue("q2", durable=False)
    v.declare_exchange("t", "topic", durable=False)
    v.bind("t", "q1", "a.#")
    v.bind("t", "q2", "*.b")
    result = v.publish(v.resolve_target("/exchanges/t/a.b"), b"x")
    assert [q.name for q in result.queues] == ["q1", "q2"] and not result.released
    assert v.publish(v.resolve_target("/exchanges/t/z"), b"x").released
    assert [q.name for q in v.publish(v.resolve_target("/queues/q2"), b"y").queues] == ["q2"]
    anon = v.resolve_target(None)
    assert v.publish(anon, b"z", to="/queues/q1").queues[0].name == "q1"
    with pytest.raises(NotFoundError):
        v.publish(anon, b"z", to="/exchanges/missing/k")
    with pytest.raises(AddressError):
        v.publish(anon, b"z", to=None)
    assert v.get_queue("q1").messages == 2 and v.get_queue("q2").messages == 2


def test_vhost_v1_exchange_key_from_subject_and_headers():
    v = VirtualHost()
    v.declare_queue("q", durable=False)
    v.bind("amq.direct", "q", "k")
    target = v.resolve_target("/exchange/amq.direct")
    assert v.publish(target, b"1", subject="k").queues
    assert v.publish(target, b"2", subject="other").released
    v.bind("amq.headers", "q", "", {"x-match": "all", "color": "red"})
    headers_target = v.resolve_target("/exchanges/amq.headers")
    assert v.publish(headers_target, b"3", headers={"color": "red"}).queues
    assert v.publish(headers_target, b"4", headers={"color": "blue"}).released


def test_vhost_resolve_errors():
    v = VirtualHost()
    with pytest.raises(NotFoundError):
        v.resolve_target("/queues/missing")
    with pytest.raises(NotFoundError):
        v.resolve_source("/queues/missing")
    with pytest.raises(AddressError):
        v.resolve_source("/exchange/amq.topic/a.b")
    assert v.resolve_source("/queue/auto").name == "auto"  # v1 declares


def test_vhost_declare_conflicts_and_reserved_names():
    v = VirtualHost()
    v.declare_queue("q", durable=True)
    assert v.declare_queue("q", durable=True)[1] is False
    with pytest.raises(PreconditionFailedError):
        v.declare_queue("q", durable=False)
    with pytest.raises(PreconditionFailedError):
        v.declare_queue("qq", arguments={"x-queue-type": "delayed"})  # not a type here
    with pytest.raises(NotAllowedError):
        v.declare_exchange("amq.mine", "direct")
    with pytest.raises(NotAllowedError):
        v.delete_exchange("amq.direct")
    with pytest.raises(NotAllowedError):
        v.bind("", "q", "q")


def test_delete_queue_removes_bindings_and_tells_listeners():
    v = VirtualHost()
    told = []
    v.listeners.append(lambda event, queue: told.append((event, queue.name)))
    v.declare_queue("q", durable=False)
    v.bind("amq.fanout", "q")
    v.delete_queue("q")
    assert told == [("queue.deleted", "q")]
    assert v.exchanges["amq.fanout"].bindings == []
    with pytest.raises(NotFoundError):
        v.delete_queue("q")


def test_dynamic_queue_lifecycle():
    v = VirtualHost()
    link = object()
    queue = v.owners.create_dynamic_queue(link)
    assert queue.name.startswith("amq.gen-") and not queue.durable
    assert v.owners.is_dynamic(queue.name)
    other = v.owners.create_dynamic_queue(object())
    assert other.name != queue.name
    assert v.owners.release_owner(link) == [queue.name]
    assert not v.has_queue(queue.name) and v.has_queue(other.name)


def test_auto_delete_queue_goes_with_last_consumer():
    v = VirtualHost()
    q, _ = v.declare_queue("ad", durable=False, auto_delete=True)
    q.add_consumer("c")
    q.remove_consumer("c")
    v.consumer_removed(q)
    assert not v.has_queue("ad")


def test_dispatch_pending_collects_work_from_dirty_queues():
    v = VirtualHost()
    q, _ = v.declare_queue("q", durable=False)
    q.add_consumer("c", owner="link-1")
    q.flow("c", delivery_count=None, link_credit=5)
    v.publish(v.resolve_target("/queues/q"), b"a")
    v.publish(v.resolve_target("/queues/q"), b"b")
    events = v.dispatch_pending()
    assert [e.message.payload for e in events if isinstance(e, Delivery)] == [b"a", b"b"]
    assert all(e.consumer.owner == "link-1" for e in events)
    assert v.dispatch_pending() == []


def test_durable_definitions_and_messages_survive_restart(tmp_path):
    v = VirtualHost(data_dir=tmp_path, fsync=False)
    v.declare_queue("dq", durable=True)
    v.declare_queue("tq", durable=False)
    v.declare_exchange("dx", "topic", durable=True)
    v.bind("dx", "dq", "a.*")
    target = v.resolve_target("/exchanges/dx/a.b")
    tokens = []
    for i in range(5):
        tokens += v.publish(target, b"p%d" % i).tokens
    q = v.get_queue("dq")
    q.add_consumer("c")
    q.flow("c", delivery_count=None, link_credit=2)
    got = [e for e in q.dispatch() if isinstance(e, Delivery)]
    q.settle("c", [got[0].message.msg_id], ACCEPTED)
    assert v.store is not None and v.store.flush() >= max(tokens)
    v.close()

    again = VirtualHost(data_dir=tmp_path, fsync=False)
    assert again.has_queue("dq") and not again.has_queue("tq")
    assert again.get_exchange("dx").type == "topic"
    dq = again.get_queue("dq")
    assert [m.payload for m in dq.ready_messages()] == [b"p1", b"p2", b"p3", b"p4"]
    assert again.publish(again.resolve_target("/exchanges/dx/a.c"), b"new").queues == [dq]
    assert dq.ready_messages()[-1].msg_id > 5  # ids continue after the recovered ones
    again.close()
