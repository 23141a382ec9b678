"""Admin HTTP API over real HTTP on 127.0.0.1 (ephemeral port): every route, auth, errors,
keep-alive, malformed requests; plus the pure authentication function."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from amqpspec.reference_broker.admin.api import AdminApi, HttpError, authenticate, parse_target
from amqpspec.reference_broker.admin.client import ManagementClient, ManagementError
from amqpspec.reference_broker.admin.http_server import AdminServer
from amqpspec.reference_broker.config import BrokerConfig, User
from amqpspec.reference_broker.features.alarms import ResourceAlarms
from amqpspec.reference_broker.queues.classic import Delivery
from amqpspec.reference_broker.queues.vhost import ConnectionSummary, VirtualHost


@dataclass
class Running:
    port: int
    vhost: VirtualHost
    alarms: ResourceAlarms
    alarm_events: list[tuple[str, bool, bool]]
    loop: asyncio.AbstractEventLoop

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def call(self, method: str, path: str, body=None, auth=("guest", "guest"), raw=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url(path), method=method, data=data)
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None, response.headers
        except urllib.error.HTTPError as error:
            text = error.read()
            return error.code, json.loads(text) if text else None, error.headers

    def on_loop(self, fn):
        """Run fn in the broker's loop thread (the model is not thread-safe)."""
        return asyncio.run_coroutine_threadsafe(_call(fn), self.loop).result(10)


async def _call(fn):
    return fn()


@pytest.fixture
def admin() -> Iterator[Running]:
    config = BrokerConfig(
        users=(User("guest", "guest"), User("alice", "secret", ("monitoring",))),
    )
    vhost = VirtualHost()
    alarms = ResourceAlarms(
        memory_limit=1 << 40, disk_free_limit=0, read_memory=lambda: 1, read_disk_free=lambda: 1
    )
    events: list[tuple[str, bool, bool]] = []
    alarms.add_observer(lambda kind, active, any_active: events.append((kind, active, any_active)))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    api = AdminApi(vhost, alarms, config, listeners=[{"protocol": "amqp", "port": 5672}])
    server = AdminServer(api, max_body=4096)
    port = asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0), loop).result(10)
    try:
        yield Running(port, vhost, alarms, events, loop)
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# ---------------------------------------------------------------------- auth
def test_auth_required_and_bad_credentials(admin):
    for auth in (None, ("guest", "wrong"), ("nobody", "x")):
        status, body, headers = admin.call("GET", "/api/overview", auth=auth)
        assert status == 401
        assert body == {"error": "not_authorized", "reason": "Login failed"}
        assert headers["www-authenticate"].startswith("Basic")
    status, body, _ = admin.call("GET", "/api/whoami", auth=("alice", "secret"))
    assert status == 200 and body == {"name": "alice", "tags": ["monitoring"]}


def test_guest_is_loopback_only():
    config = BrokerConfig(users=(User("guest", "guest"), User("alice", "pw")))
    header = "Basic " + base64.b64encode(b"guest:guest").decode()
    assert authenticate(config, header, "127.0.0.1").name == "guest"
    assert authenticate(config, header, "::1").name == "guest"
    for remote in ("10.1.2.3", "192.0.2.7", "2001:db8::1"):
        with pytest.raises(HttpError) as info:
            authenticate(config, header, remote)
        assert info.value.response.status == 401
        assert info.value.response.body["reason"] == "User can only log in via localhost"
    alice = "Basic " + base64.b64encode(b"alice:pw").decode()
    assert authenticate(config, alice, "10.1.2.3").name == "alice"
    with pytest.raises(HttpError):
        authenticate(config, "Basic !!!notbase64", "127.0.0.1")


# ---------------------------------------------------------------------- queues
def test_queue_lifecycle(admin):
    body = {"durable": True, "auto_delete": False, "arguments": {"x-queue-type": "classic"}}
    assert admin.call("PUT", "/api/queues/%2F/cq", body)[0] == 201
    assert admin.call("PUT", "/api/queues/%2F/cq", body)[0] == 204  # exists, equivalent
    status, err, _ = admin.call("PUT", "/api/queues/%2F/cq", {"durable": False})
    assert status == 400 and err["error"] == "bad_request" and "inequivalent" in err["reason"]
    admin.on_loop(
        lambda: [
            admin.vhost.publish(admin.vhost.resolve_target("/queues/cq"), b"m") for _ in range(3)
        ]
    )
    status, queue, _ = admin.call("GET", "/api/queues/%2F/cq")
    assert status == 200
    assert {k: queue[k] for k in ("name", "vhost", "durable", "auto_delete", "type")} == {
        "name": "cq",
        "vhost": "/",
        "durable": True,
        "auto_delete": False,
        "type": "classic",
    }
    assert (queue["messages"], queue["messages_ready"], queue["messages_unacknowledged"]) == (
        3,
        3,
        0,
    )
    assert queue["consumers"] == 0 and queue["arguments"] == {"x-queue-type": "classic"}
    listed = admin.call("GET", "/api/queues")[1]
    assert [q["name"] for q in listed] == ["cq"]
    assert admin.call("GET", "/api/queues/%2F")[1] == listed
    assert admin.call("DELETE", "/api/queues/%2F/cq/contents")[0] == 204
    assert admin.call("GET", "/api/queues/%2F/cq")[1]["messages"] == 0
    assert admin.call("DELETE", "/api/queues/%2F/cq")[0] == 204
    status, body, _ = admin.call("GET", "/api/queues/%2F/cq")
    assert status == 404 and body == {"error": "Object Not Found", "reason": "Not Found"}


def test_queue_with_consumer_shows_unacked_and_if_unused(admin):
    admin.call("PUT", "/api/queues/%2F/q", {"durable": False})

    def consume():
        q = admin.vhost.get_queue("q")
        for _ in range(4):
            q.publish(b"x")
        q.add_consumer("link-1")
        q.flow("link-1", delivery_count=None, link_credit=3)
        return [e for e in admin.vhost.dispatch_pending() if isinstance(e, Delivery)]

    assert len(admin.on_loop(consume)) == 3
    queue = admin.call("GET", "/api/queues/%2F/q")[1]
    assert (queue["messages"], queue["messages_ready"], queue["messages_unacknowledged"]) == (
        4,
        1,
        3,
    )
    assert queue["consumers"] == 1 and queue["consumer_details"][0]["consumer_tag"] == "link-1"
    status, body, _ = admin.call("DELETE", "/api/queues/%2F/q?if-unused=true")
    assert status == 400 and "in use" in body["reason"]


def test_queue_names_are_percent_decoded(admin):
    assert admin.call("PUT", "/api/queues/%2F/a%2Fb%20c", {})[0] == 201
    assert admin.on_loop(lambda: admin.vhost.has_queue("a/b c"))
    assert admin.call("GET", "/api/queues/%2F/a%2Fb%20c")[1]["name"] == "a/b c"


def test_queue_errors(admin):
    status, body, _ = admin.call("PUT", "/api/queues/%2F/x", raw=b"{not json")
    assert (status, body) == (400, {"error": "bad_request", "reason": "not_json"})
    status, body, _ = admin.call("PUT", "/api/queues/%2F/x", {"arguments": {"x-queue-type": "q"}})
    assert status == 400 and "unsupported queue type" in body["reason"]
    assert admin.call("GET", "/api/queues/other-vhost")[0] == 404
    assert admin.call("GET", "/api/queues/other/x")[0] == 404
    assert admin.call("DELETE", "/api/queues/%2F/missing")[0] == 404
    assert admin.call("DELETE", "/api/queues/%2F/missing/contents")[0] == 404
    status, body, headers = admin.call("POST", "/api/queues/%2F/x", {})
    assert status == 405 and "PUT" in headers["allow"]
    assert admin.call("GET", "/api/nonsense")[0] == 404
    assert admin.call("GET", "/not-api")[0] == 404
    status, body, _ = admin.call("PUT", "/api/queues/%2F/big", raw=b"x" * 5000)
    assert status == 413


# ---------------------------------------------------------------------- exchanges / bindings
def test_exchanges(admin):
    assert admin.call("PUT", "/api/exchanges/%2F/tx", {"type": "topic", "durable": True})[0] == 201
    assert admin.call("PUT", "/api/exchanges/%2F/tx", {"type": "topic", "durable": True})[0] == 204
    status, body, _ = admin.call("PUT", "/api/exchanges/%2F/tx", {"type": "fanout"})
    assert status == 400 and "inequivalent" in body["reason"]
    status, ex, _ = admin.call("GET", "/api/exchanges/%2F/tx")
    assert (status, ex["name"], ex["type"], ex["durable"], ex["vhost"]) == (
        200,
        "tx",
        "topic",
        True,
        "/",
    )
    names = {e["name"] for e in admin.call("GET", "/api/exchanges/%2F")[1]}
    assert {"", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "tx"} <= names
    status, body, _ = admin.call("PUT", "/api/exchanges/%2F/bad", {"type": "bogus"})
    assert status == 400 and body["reason"] == "unknown exchange type 'bogus'"
    assert admin.call("PUT", "/api/exchanges/%2F/nt", {})[0] == 400
    assert admin.call("PUT", "/api/exchanges/%2F/amq.mine", {"type": "direct"})[0] == 403
    assert admin.call("DELETE", "/api/exchanges/%2F/amq.direct")[0] == 403
    assert admin.call("DELETE", "/api/exchanges/%2F/tx")[0] == 204
    assert admin.call("GET", "/api/exchanges/%2F/tx")[0] == 404


def test_bindings(admin):
    admin.call("PUT", "/api/queues/%2F/cq", {})
    admin.call("PUT", "/api/exchanges/%2F/tx", {"type": "topic"})
    status, _, headers = admin.call(
        "POST", "/api/bindings/%2F/e/tx/q/cq", {"routing_key": "a.*", "arguments": {}}
    )
    assert status == 201 and headers["location"] == "cq/a.%252A"
    admin.call("POST", "/api/bindings/%2F/e/tx/q/cq", {"routing_key": "", "arguments": {}})
    all_bindings = admin.call("GET", "/api/bindings/%2F")[1]
    assert {
        "source": "",
        "vhost": "/",
        "destination": "cq",
        "destination_type": "queue",
        "routing_key": "cq",
        "arguments": {},
        "properties_key": "cq",
    } in all_bindings
    between = admin.call("GET", "/api/bindings/%2F/e/tx/q/cq")[1]
    assert sorted(b["properties_key"] for b in between) == ["a.%2A", "~"]
    routed = admin.on_loop(
        lambda: admin.vhost.publish(admin.vhost.resolve_target("/exchanges/tx/a.b"), b"m")
    )
    assert [q.name for q in routed.queues] == ["cq"]
    assert admin.call("GET", "/api/bindings/%2F/e/tx/q/cq/a.%252A")[1]["routing_key"] == "a.*"
    assert admin.call("DELETE", "/api/bindings/%2F/e/tx/q/cq/a.%252A")[0] == 204
    assert admin.call("DELETE", "/api/bindings/%2F/e/tx/q/cq/a.%252A")[0] == 404
    assert admin.call("DELETE", "/api/bindings/%2F/e/tx/q/cq/~")[0] == 204
    assert admin.call("GET", "/api/bindings/%2F/e/tx/q/cq")[1] == []
    assert admin.call("POST", "/api/bindings/%2F/e/missing/q/cq", {})[0] == 404
    assert admin.call("POST", "/api/bindings/%2F/e/tx/q/missing", {})[0] == 404
    assert admin.call("POST", "/api/bindings/%2F/e/tx/q/cq", {"routing_key": 5})[0] == 400
    assert admin.call("GET", "/api/queues/%2F/cq/bindings")[1][0]["source"] == ""


def test_headers_binding_with_arguments(admin):
    admin.call("PUT", "/api/queues/%2F/hq", {})
    admin.call(
        "POST",
        "/api/bindings/%2F/e/amq.headers/q/hq",
        {"routing_key": "", "arguments": {"x-match": "any", "k": "v"}},
    )
    (binding,) = admin.call("GET", "/api/bindings/%2F/e/amq.headers/q/hq")[1]
    assert binding["properties_key"].startswith("~") and binding["arguments"]["k"] == "v"
    quoted = urllib.request.quote(binding["properties_key"], safe="")
    assert admin.call("DELETE", f"/api/bindings/%2F/e/amq.headers/q/hq/{quoted}")[0] == 204


# ---------------------------------------------------------------------- overview & co
def test_overview_nodes_connections(admin):
    admin.call("PUT", "/api/queues/%2F/q1", {})
    admin.on_loop(
        lambda: admin.vhost.register_connection(
            ConnectionSummary(
                "127.0.0.1:50000 -> 127.0.0.1:5672",
                "127.0.0.1",
                50000,
                "127.0.0.1",
                5672,
                user="guest",
                container_id="c1",
                channels=2,
            )
        )
    )
    overview = admin.call("GET", "/api/overview")[1]
    assert overview["object_totals"]["queues"] == 1
    assert overview["object_totals"]["connections"] == 1
    assert overview["object_totals"]["channels"] == 2
    assert overview["queue_totals"]["messages"] == 0
    assert overview["listeners"][0]["port"] == 5672
    assert overview["handshake_timeout"] == 10_000  # ms, RabbitMQ's key (the default 10 s)
    assert overview["sasl_timeout"] == 0  # none by default
    (conn,) = admin.call("GET", "/api/connections")[1]
    assert (conn["peer_port"], conn["user"], conn["container_id"], conn["channels"]) == (
        50000,
        "guest",
        "c1",
        2,
    )
    (node,) = admin.call("GET", "/api/nodes")[1]
    assert node["mem_alarm"] is False and node["disk_free_alarm"] is False


def test_alarms_routes_notify_observers(admin):
    assert admin.call("GET", "/api/health/checks/alarms")[:2] == (200, {"status": "ok"})
    assert admin.call("PUT", "/api/alarms/memory")[0] == 204
    assert admin.alarm_events == [("memory", True, True)]
    status, body, _ = admin.call("GET", "/api/health/checks/alarms")
    assert status == 503 and body["alarms"][0]["resource"] == "memory"
    assert admin.call("GET", "/api/alarms")[1]["memory"]["active"] is True
    assert admin.call("GET", "/api/alarms/memory")[1]["manual"] is True
    assert admin.call("GET", "/api/nodes")[1][0]["mem_alarm"] is True
    assert admin.call("PUT", "/api/alarms/disk")[0] == 204
    assert admin.call("DELETE", "/api/alarms/memory")[0] == 204
    assert admin.call("DELETE", "/api/alarms/disk")[0] == 204
    assert admin.alarm_events == [
        ("memory", True, True),
        ("disk", True, True),
        ("memory", False, True),
        ("disk", False, False),
    ]
    assert admin.call("PUT", "/api/alarms/cpu")[0] == 404


# ---------------------------------------------------------------------- HTTP behaviour
def test_keep_alive_client_reuses_one_connection(admin):
    with ManagementClient(f"http://127.0.0.1:{admin.port}") as client:
        assert client.declare_queue("k1") is True
        assert client.declare_queue("k1") is False
        sock = client._conn.sock  # type: ignore[union-attr]
        for _ in range(20):
            client.queue("k1")
        assert client._conn.sock is sock  # type: ignore[union-attr]
        with pytest.raises(ManagementError) as info:
            client.queue("missing")
        assert info.value.status == 404 and info.value.reason == "Not Found"


def raw_exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_pipelined_requests_then_close(admin):
    auth = base64.b64encode(b"guest:guest").decode()
    request = f"GET /api/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n\r\n"
    last = request.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")
    reply = raw_exchange(admin.port, (request * 2 + last).encode())
    assert reply.count(b"HTTP/1.1 200 OK") == 3
    assert reply.rstrip().endswith(b'"tags": ["administrator"]}')


def test_expect_100_continue_and_http_1_0(admin):
    auth = base64.b64encode(b"guest:guest").decode()
    body = b'{"durable": true}'
    request = (
        f"PUT /api/queues/%2F/e1 HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    ).encode() + body
    reply = raw_exchange(admin.port, request)
    assert reply.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created")
    old = f"GET /api/whoami HTTP/1.0\r\nAuthorization: Basic {auth}\r\n\r\n".encode()
    assert raw_exchange(admin.port, old).startswith(b"HTTP/1.1 200 OK")  # then closed


@pytest.mark.parametrize(
    "garbage",
    [
        b"NOT HTTP\r\n\r\n",
        b"GET /api/overview HTTP/2.0\r\n\r\n",
        b"GET /api/overview HTTP/1.1\r\nbad header line\r\n\r\n",
        b"PUT /api/queues/%2F/x HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        b"PUT /api/queues/%2F/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
    ],
)
def test_malformed_requests_get_an_error_and_server_survives(admin, garbage):
    reply = raw_exchange(admin.port, garbage)
    status = int(reply.split(b" ", 2)[1])
    assert status in (400, 431, 501)
    assert admin.call("GET", "/api/overview")[0] == 200


def test_parse_target_decodes_segments_and_query():
    path, segments, query = parse_target("/api/queues/%2F/a%20b/?if-unused=true&x=a+b")
    assert path == "/api/queues/%2F/a%20b/"
    assert segments == ["queues", "/", "a b"]
    assert query == {"if-unused": "true", "x": "a b"}
    assert parse_target("/other")[1] == []


def test_a_slow_body_does_not_hold_up_other_clients(admin):
    """A request that announces 100 bytes and sends 10 (slowloris on the body) waits alone;
    the API keeps answering everyone else, and answers the slow one once its body is in."""
    auth = base64.b64encode(b"guest:guest").decode()
    head = (
        f"PUT /api/queues/%2F/slow HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n"
        "Content-Length: 17\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", admin.port), timeout=10) as slow:
        slow.sendall(head + b'{"durable"')
        for _ in range(3):
            assert admin.call("GET", "/api/overview")[0] == 200
        slow.sendall(b": true}")
        assert slow.recv(65536).startswith(b"HTTP/1.1 201")


# ---------------------------------------------------------------------- users & permissions
def test_users_and_permissions_lifecycle(admin):
    """PUT /api/users creates a runtime user with no permissions; PUT /api/permissions sets
    its three regexes (RabbitMQ's paths and bodies); DELETE removes it: its logins fail."""
    new = {"password": "pw", "tags": ""}
    assert admin.call("PUT", "/api/users/bob", new)[0] == 201
    assert admin.call("PUT", "/api/users/bob", new)[0] == 204  # an update
    status, body, _ = admin.call("GET", "/api/users/bob")
    assert status == 200 and body == {"name": "bob", "tags": []}
    names = [u["name"] for u in admin.call("GET", "/api/users")[1]]
    assert names == ["guest", "alice", "bob"]
    _, body, _ = admin.call("GET", "/api/permissions/%2F/bob")
    assert (body["configure"], body["write"], body["read"]) == ("^$", "^$", "^$")
    rights = {"configure": "^$", "write": "^q", "read": ".*"}
    assert admin.call("PUT", "/api/permissions/%2F/bob", rights)[0] == 201
    _, body, _ = admin.call("GET", "/api/permissions/%2F/bob")
    assert body == {"user": "bob", "vhost": "/"} | rights
    # no management tag: the API refuses bob's own login (as RabbitMQ)
    assert admin.call("GET", "/api/overview", auth=("bob", "pw"))[0] == 401
    assert admin.call("DELETE", "/api/users/bob")[0] == 204
    assert admin.call("GET", "/api/users/bob")[0] == 404
    assert admin.call("DELETE", "/api/users/bob")[0] == 404
    assert admin.call("PUT", "/api/permissions/%2F/bob", rights)[0] == 404
    status, body, _ = admin.call("GET", "/api/whoami", auth=("bob", "pw"))
    assert status == 401 and body["reason"] == "Login failed"


def test_users_need_administrator_and_spare_configured_users(admin):
    alice = ("alice", "secret")  # tag monitoring: may use the API, not manage users
    for method, path, body in (
        ("GET", "/api/users", None),
        ("PUT", "/api/users/eve", {"password": "x", "tags": "administrator"}),
        ("PUT", "/api/permissions/%2F/alice", {"configure": ".*", "write": ".*", "read": ".*"}),
        ("DELETE", "/api/users/guest", None),
    ):
        status, reply, _ = admin.call(method, path, body, auth=alice)
        assert status == 403, (method, path)
        assert reply == {"error": "not_authorised", "reason": "Access refused (administrator only)"}
    assert admin.call("GET", "/api/users/eve")[0] == 404
    for method, path, body in (
        ("DELETE", "/api/users/alice", None),
        ("PUT", "/api/users/alice", {"password": "x"}),
        ("PUT", "/api/permissions/%2F/alice", {"configure": ".*"}),
    ):
        status, reply, _ = admin.call(method, path, body)
        assert status == 400 and "configuration" in reply["reason"], (method, path)
    assert admin.call("PUT", "/api/users/x", {"tags": ""})[0] == 400  # no password
    assert admin.call("PUT", "/api/users/x", {"password": "p"})[0] == 201
    assert admin.call("PUT", "/api/permissions/%2F/x", {"read": "("})[0] == 400
    assert admin.call("GET", "/api/whoami", auth=alice)[0] == 200
