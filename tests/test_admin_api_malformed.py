"""The admin HTTP API under malformed and hostile requests, over real sockets to a whole
reference broker: bad Content-Length, huge heads, slow heads and bodies, garbage, HTTP/0.9,
non-JSON and oversized bodies. Each gets a clean 4xx (JSON body) and a close, or just a close
where HTTP has no reply to give; afterwards the broker still answers admin requests and AMQP.

Owns: these tests. Replies are read with http.client; every wait is bounded. The broker runs
with admin_timeout 2 s and admin_max_body 4096 so the timeouts are seen quickly.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from broker_support import connected_client, management, running_broker

from amqpspec.amqp10.engine import DispositionReceived, RemoteAttach
from amqpspec.amqp10.message import Message

TIMEOUT = 2.0  # [limits] admin_timeout of the broker under test
MAX_BODY = 4096  # [limits] admin_max_body
WAIT = 10.0
AUTH = "Authorization: Basic " + base64.b64encode(b"guest:guest").decode()


@pytest.fixture(scope="module")
def broker() -> Iterator:
    with running_broker(limits={"admin_timeout": TIMEOUT, "admin_max_body": MAX_BODY}) as b:
        management(b).declare_queue("after", durable=False)
        yield b


@dataclass
class Reply:
    status: int | None  # None: closed without a reply
    body: object
    closed: bool  # the server closed the connection after its reply
    seconds: float


def exchange(port: int, data: bytes, *, drip: float = 0.0, at_once: int = 0) -> Reply:
    """Send `data` (all at once, or `at_once` bytes and then one byte per `drip` seconds until
    the server answers or closes), then read one reply and whether the connection closes."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(data[:at_once] if drip else data)
        for i in range(at_once, len(data) if drip else 0):
            if select.select([sock], [], [], 0)[0]:
                break  # answered (or closed) before the whole request went out
            try:
                sock.sendall(data[i : i + 1])
            except OSError:
                break
            time.sleep(drip)
        response = http.client.HTTPResponse(sock)
        try:
            response.begin()
        except (http.client.RemoteDisconnected, ConnectionError):
            return Reply(None, None, True, time.monotonic() - started)
        text = response.read()
        seconds = time.monotonic() - started
        body = json.loads(text) if text else None
        closed = response.will_close and _closed(sock)
        return Reply(response.status, body, closed, seconds)


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def request(head: str, body: bytes = b"") -> bytes:
    return (head.replace("\n", "\r\n") + "\r\n").encode("latin-1") + body


PUT = "PUT /api/queues/%2F/x HTTP/1.1\nHost: t\n" + AUTH + "\n"
noise = random.Random(7)
CASES = {
    "content-length-negative": (request(PUT + "Content-Length: -1\n"), 400),
    "content-length-not-a-number": (request(PUT + "Content-Length: 12abc\n"), 400),
    "content-length-overflows": (request(PUT + "Content-Length: 99999999999999999999999\n"), 400),
    "content-length-over-limit": (request(PUT + "Content-Length: 1000000000000\n"), 413),
    "body-over-limit": (request(PUT + "Content-Length: 5000\n", b"x" * 5000), 413),
    "chunked-body-over-limit": (
        request(PUT + "Transfer-Encoding: chunked\n", b"1388\r\n" + b"x" * 5000 + b"\r\n0\r\n\r\n"),
        413,
    ),
    "content-length-larger-than-body": (request(PUT + "Content-Length: 100\n", b"{}"), 408),
    "huge-request-line": (request("GET /api/" + "a" * 70_000 + " HTTP/1.1\nHost: t\n"), 431),
    "huge-header": (
        request("GET /api/overview HTTP/1.1\nHost: t\nX-Big: " + "a" * 70_000 + "\n"),
        431,
    ),
    "too-many-headers": (
        request(
            "GET /api/overview HTTP/1.1\nHost: t\n" + "".join(f"X-{i}: v\n" for i in range(200))
        ),
        400,
    ),
    "garbage": (bytes(noise.getrandbits(8) for _ in range(4096)), 400),
    "http-0.9-with-version": (request("GET /api/overview HTTP/0.9\n"), 400),
    "http-2.0-request-line": (request("GET /api/overview HTTP/2.0\n"), 400),
    "http-1.1-without-host": (request("GET /api/overview HTTP/1.1\n" + AUTH + "\n"), 400),
    "not-json-to-a-json-route": (
        request(PUT + "Content-Length: 6\nConnection: close\n", b"{nope!"),
        400,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_malformed_request_gets_a_json_4xx_and_a_close(broker, name: str) -> None:
    data, status = CASES[name]
    reply = exchange(broker.admin_port, data)
    assert reply.status == status, reply
    assert isinstance(reply.body, dict) and reply.body["error"] == "bad_request", reply
    assert reply.body["reason"], reply
    assert reply.closed, reply
    assert reply.seconds < TIMEOUT + 3, reply  # a 408 comes after the body timeout, no later
    assert management(broker).overview()["node"]  # the admin API still answers


def test_an_http_0_9_simple_request_is_closed(broker) -> None:
    """HTTP/0.9 has no status line to answer with: the request never ends as HTTP/1.x, so the
    connection is closed once the head timeout passes."""
    reply = exchange(broker.admin_port, b"GET /api/overview\r\n")
    assert reply.status in (None, 400) and reply.closed, reply
    assert reply.seconds < TIMEOUT + 3, reply
    assert management(broker).overview()["node"]


def test_slowloris_body_gets_408_within_the_timeout(broker) -> None:
    """1 byte per 0.5 s of a 100-byte body: 408 once admin_timeout passes."""
    head = request(PUT + "Content-Length: 100\n")
    reply = exchange(broker.admin_port, head + b"{" + b" " * 99, drip=0.5, at_once=len(head))
    assert reply.status == 408 and reply.body["reason"] == "body not received in time", reply
    assert TIMEOUT - 0.5 <= reply.seconds < TIMEOUT + 3 and reply.closed, reply


def test_slowloris_head_is_closed_within_the_timeout(broker) -> None:
    """1 byte per 0.5 s of a request head: the connection is closed at admin_timeout."""
    reply = exchange(broker.admin_port, request("GET /api/overview HTTP/1.1\nHost: t\n"), drip=0.5)
    assert reply.status is None and reply.closed, reply
    assert TIMEOUT - 0.5 <= reply.seconds < TIMEOUT + 3, reply


def test_broker_serves_admin_and_amqp_while_and_after_hostile_clients(broker) -> None:
    """Ten slow heads and ten slow bodies at once: meanwhile and afterwards a normal admin GET
    answers and an AMQP client publishes a message the admin API then counts."""
    slow: list[Reply] = []
    lock = threading.Lock()

    def hostile(data: bytes, at_once: int) -> None:
        reply = exchange(broker.admin_port, data, drip=0.5, at_once=at_once)
        with lock:
            slow.append(reply)

    head = request(PUT + "Content-Length: 100\n")
    slow_body = (head + b"{" + b" " * 99, len(head))
    slow_head = (request("GET /api/overview HTTP/1.1\nHost: t\n" + AUTH + "\n"), 0)
    threads = [
        threading.Thread(target=hostile, args=args, daemon=True)
        for args in [slow_body] * 10 + [slow_head] * 10
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert management(broker).overview()["node"]
    assert time.monotonic() - started < 1.0  # not queued behind the slow ones
    publish_one(broker)
    for thread in threads:
        thread.join(TIMEOUT + 10)
    assert len(slow) == 20 and all(r.closed for r in slow), slow
    assert sorted(str(r.status) for r in slow) == ["408"] * 10 + ["None"] * 10, slow
    publish_one(broker)
    assert management(broker).queue("after")["messages"] >= 2


def publish_one(broker) -> None:
    with connected_client(broker) as client:
        session = client.conn.begin()
        client.wait_for(lambda: session.remote_channel is not None, "begin")
        link = session.attach_sender("after", target="/queues/after")
        client.wait_event(RemoteAttach, where=lambda e: e.link is link)
        client.wait_for(lambda: link.link_credit > 0, "publisher credit")
        delivery = link.send(Message.of(b"after").encode(), settled=False)
        client.wait_event(DispositionReceived, where=lambda e: e.first <= delivery <= e.last)
