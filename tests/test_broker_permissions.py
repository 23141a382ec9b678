"""Per-user permissions (reference_broker.protocol.permissions): the three expressions, the config
that gives them, and their enforcement at attach, on publish to the anonymous terminus and
on the /management node, over the protocol in memory.
"""

from __future__ import annotations

import base64

import pytest
from broker_support import memory_session

from amqpspec.amqp10.composites import Properties, Source, Target
from amqpspec.amqp10.engine import (
    ClientSasl,
    Connection,
    DispositionReceived,
    RemoteAttach,
    TransferReceived,
)
from amqpspec.amqp10.message import Message
from amqpspec.reference_broker.admin.management import route
from amqpspec.reference_broker.config import BrokerConfig, ConfigError, User, from_mapping
from amqpspec.reference_broker.protocol.permissions import FULL, Permissions, UnauthorizedError
from amqpspec.reference_broker.queues.vhost import VirtualHost
from amqpspec.reference_broker.runtime.memory import MemoryBroker

UNAUTHORIZED = "amqp:unauthorized-access"
READER = Permissions(configure="^$", write="^$", read="^orders$")


def test_expressions_match_like_rabbitmq():
    assert FULL.allows("configure", "anything")
    assert READER.allows("read", "orders") and not READER.allows("read", "orders2")
    assert not Permissions(read="").allows("read", "q")  # empty: nothing
    assert Permissions(write="ord").allows("write", "my-orders")  # unanchored, as re:run
    with pytest.raises(UnauthorizedError) as caught:
        READER.check("reader", "write", "exchange", "")
    assert "amq.default" in caught.value.reason and caught.value.condition == UNAUTHORIZED


def test_config_gives_permissions_and_anonymous_gets_the_login_users():
    config = from_mapping(
        {
            "users": {
                "guest": {"password": "guest"},
                "reader": {"password": "s", "tags": [], "permissions": {"read": "^orders$"}},
            },
            "anonymous_login_user": "reader",
        }
    )
    assert config.permissions_of("reader").read == "^orders$"
    assert config.permissions_of("anonymous").read == "^orders$"
    assert config.permissions_of("guest") == FULL
    assert not config.permissions_of("stranger").allows("read", "orders")
    with pytest.raises(ConfigError):
        from_mapping({"users": {"x": {"password": "p", "permissions": {"read": "("}}}})


def test_management_routes_check_permissions():
    vhost = VirtualHost()
    vhost.declare_queue("orders")

    def permit(kind: str, what: str, name: str) -> None:
        READER.check("reader", kind, what, name)

    status, reason = route(vhost, "PUT", "/queues/new", {}, permit)
    assert status == 403 and reason.startswith(UNAUTHORIZED) and not vhost.has_queue("new")
    assert route(vhost, "DELETE", "/queues/orders/messages", None, permit)[0] == 200  # read
    assert route(vhost, "DELETE", "/queues/orders", None, permit)[0] == 403
    bind = {"source": "amq.topic", "destination_queue": "orders", "binding_key": "#"}
    assert route(vhost, "POST", "/bindings", bind, permit)[0] == 403
    assert route(vhost, "GET", "/queues/orders", None, permit)[0] == 200


@pytest.fixture
def reader_session():
    users = (User("guest", "guest"), User("reader", "secret", (), READER))
    config = BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, users=users)
    with MemoryBroker(config) as broker:
        broker.vhost.declare_queue("orders")
        broker.vhost.declare_queue("other")
        sasl = ClientSasl("PLAIN", "reader", "secret")
        with memory_session(broker, "perm-test", sasl=sasl) as (conn, session):
            yield broker, conn, session


def refused(broker, conn, link) -> str | None:
    broker.pump()
    assert any(e.link is link for e in conn.of(RemoteAttach))
    error = link.remote_detach.error if link.remote_detach is not None else None
    return error.condition if error is not None else None


def test_attach_needs_read_to_consume_and_write_to_publish(reader_session):
    broker, conn, session = reader_session
    assert refused(broker, conn, session.attach_receiver("ok", source="/queues/orders")) is None
    assert refused(broker, conn, session.attach_receiver("no", source="/queues/other")) == (
        UNAUTHORIZED
    )
    assert refused(broker, conn, session.attach_sender("pub", target="/queues/orders")) == (
        UNAUTHORIZED
    )
    x = session.attach_sender("x", target="/exchanges/amq.topic/k")
    assert refused(broker, conn, x) == UNAUTHORIZED


def test_anonymous_terminus_publish_is_rejected_per_message():
    users = (User("guest", "guest"), User("w", "p", (), Permissions("^$", "^amq\\.topic$", "")))
    config = BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, users=users)
    with MemoryBroker(config) as broker:
        broker.vhost.declare_queue("q")
        sasl = ClientSasl("PLAIN", "w", "p")
        conn = broker.connect(Connection("client", "perm-anon", sasl=sasl))
        conn.client.open()
        broker.pump()
        session = conn.client.begin()
        broker.pump()
        link = session.attach_sender("anon", target=Target(address=None))
        broker.pump()
        denied = Message.of(b"x", properties=Properties(to="/queues/q")).encode()
        allowed = Message.of(b"y", properties=Properties(to="/exchanges/amq.topic/k")).encode()
        first = link.send(denied, settled=False)
        second = link.send(allowed, settled=False)
        broker.pump()
        states = {
            d: e.state for e in conn.of(DispositionReceived) for d in range(e.first, e.last + 1)
        }
        assert states[first].error.condition == UNAUTHORIZED
        assert type(states[second]).__name__ == "Released"  # allowed; amq.topic routes nowhere
        assert broker.vhost.get_queue("q").messages == 0


def test_management_node_answers_403_to_a_user_without_configure(reader_session):
    broker, conn, session = reader_session
    sender = session.attach_sender("mgmt", target=Target(address="/management"))
    receiver = session.attach_receiver("mgmt", source=Source(address="/management"))
    broker.pump()
    receiver.flow(link_credit=5)
    props = Properties(message_id="1", to="/queues/made", subject="PUT", reply_to="$me")
    sender.send(Message.of({}, properties=props).encode(), settled=True)
    broker.pump()
    (reply,) = [Message.decode(e.payload) for e in conn.of(TransferReceived)]
    assert reply.properties.subject == "403" and UNAUTHORIZED in reply.value
    assert not broker.vhost.has_queue("made")


# --- connection limits (in all, per user) ---------------------------------------------------


def open_as(broker, user: str, password: str):
    sasl = ClientSasl("PLAIN", user, password)
    conn = broker.connect(Connection("client", f"limit-{user}", sasl=sasl))
    conn.client.open()
    broker.pump()
    return conn


@pytest.mark.parametrize(
    ("limits", "refused_user"),
    [({"max_connections": 2}, "b"), ({"max_connections_per_user": 1}, "a")],
)
def test_connection_limits_refuse_with_resource_limit_exceeded(limits, refused_user):
    from amqpspec.reference_broker.config import Limits

    users = (User("a", "p"), User("b", "p"))
    config = BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, users=users)
    config = config.replace(limits=Limits(**limits))
    with MemoryBroker(config) as broker:
        first = open_as(broker, "a", "p")
        second = open_as(broker, "b", "p")
        third = open_as(broker, refused_user, "p")
        assert first.client.remote_close is None and second.client.remote_close is None
        close = third.client.remote_close
        assert close is not None and close.error.condition == "amqp:resource-limit-exceeded"
        assert len(broker.vhost.connections) == 2  # the refused one never counted


# --- the admin HTTP API: same users, tags and permissions ----------------------------------


def admin_call(api, user: str, method: str, path: str, body: bytes = b""):
    from amqpspec.reference_broker.admin.api import Request, parse_target

    token = base64.b64encode(f"{user}:pw".encode()).decode()
    path_only, segments, query = parse_target(path)
    headers = {"authorization": f"Basic {token}"}
    return api.handle(Request(method, path_only, segments, query, headers, body)).status


def test_admin_api_needs_a_management_tag_and_the_permissions():
    from amqpspec.reference_broker.admin.api import AdminApi

    users = (
        User("boss", "pw"),  # administrator, everything
        User("watcher", "pw", ("monitoring",), READER),
        User("app", "pw", (), FULL),  # no management tag: AMQP only
    )
    vhost = VirtualHost()
    vhost.declare_queue("orders")
    api = AdminApi(vhost, None, BrokerConfig(users=users))
    assert admin_call(api, "app", "GET", "/api/overview") == 401
    assert admin_call(api, "watcher", "GET", "/api/queues") == 200
    assert admin_call(api, "watcher", "PUT", "/api/queues/%2F/new", b"{}") == 403
    assert admin_call(api, "watcher", "DELETE", "/api/queues/%2F/orders/contents") == 204  # read
    assert admin_call(api, "watcher", "DELETE", "/api/queues/%2F/orders") == 403
    assert admin_call(api, "boss", "PUT", "/api/queues/%2F/new", b"{}") == 201
    assert vhost.has_queue("orders") and vhost.has_queue("new")


def test_admin_api_closes_ones_own_connection_or_any_as_administrator():
    """DELETE /api/connections/{name}: the connection's own user or an administrator, as
    RabbitMQ's management plugin; anyone else is refused and the connection stays."""
    from amqpspec.reference_broker.admin.api import AdminApi
    from amqpspec.reference_broker.queues.vhost import ConnectionSummary

    users = (
        User("boss", "pw"),
        User("watcher", "pw", ("monitoring",), READER),
        User("owner", "pw", ("management",), FULL),
    )
    vhost = VirtualHost()
    closed: list[str] = []
    for name in ("a", "b"):
        vhost.register_connection(
            ConnectionSummary(
                name,
                "127.0.0.1",
                1,
                "127.0.0.1",
                2,
                user="owner",
                close_forced=lambda reason, name=name: closed.append(name),
            )
        )
    api = AdminApi(vhost, None, BrokerConfig(users=users))
    assert admin_call(api, "watcher", "DELETE", "/api/connections/a") == 403
    assert closed == []
    assert admin_call(api, "owner", "DELETE", "/api/connections/a") == 204
    assert admin_call(api, "boss", "DELETE", "/api/connections/b") == 204
    assert closed == ["a", "b"]
