"""The conformance run's relay for real client libraries (conformance/run/relay.py): the
capture proxy (traces/proxy.py) run for one connection, recorded into a probe Recording.

A raw server answers a client's AMQP header and open with its own and closes: the bytes go
through unchanged both ways, the recording holds them judged by the monitor, the relay
closes when either side closes, accepts one client only, and stops at its deadline.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from amqpspec.amqp10.composites import Close, Open
from amqpspec.amqp10.frames import AMQP_HEADER, encode_frame
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.conformance.run.relay import Relay

CLIENT_BYTES = AMQP_HEADER.encode() + encode_frame(Open(container_id="relay-client"))
SERVER_BYTES = (
    AMQP_HEADER.encode() + encode_frame(Open(container_id="relay-server")) + encode_frame(Close())
)


def _answering_server() -> tuple[socket.socket, threading.Thread, list[bytes]]:
    """Reads the client's bytes, answers SERVER_BYTES and closes (no EOF from the client)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    received: list[bytes] = []

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.settimeout(10)
            data = b""
            while len(data) < len(CLIENT_BYTES):
                data += connection.recv(65536)
            received.append(data)
            connection.sendall(SERVER_BYTES)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread, received


def _recv_until_eof(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_relays_records_and_closes_when_a_side_closes():
    server, thread, received = _answering_server()
    port = server.getsockname()[1]
    relay = Relay("127.0.0.1", port, time.monotonic() + 10)
    try:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as client:
            client.sendall(CLIENT_BYTES)
            assert _recv_until_eof(client) == SERVER_BYTES  # the server's close ends the pair
        thread.join(10)
        assert received == [CLIENT_BYTES]
        until = time.monotonic() + 5
        while not relay.closed and time.monotonic() < until:
            time.sleep(0.01)
        assert relay.closed
        with pytest.raises(OSError):  # one client only: the relay stopped listening
            socket.create_connection(("127.0.0.1", relay.port), timeout=2).close()
    finally:
        relay.disconnect()
        server.close()
    recording = relay.recording
    assert relay.conn is None and relay.violations == recording.violations
    sent = {
        d: b"".join(c.data for c in recording.chunks if c.direction == d) for d in (CLIENT, SERVER)
    }
    assert sent == {CLIENT: CLIENT_BYTES, SERVER: SERVER_BYTES}
    assert recording.start <= recording.chunks[0].time <= recording.end
    assert recording.server == f"127.0.0.1:{port}"
    names = [(item.direction, item.name) for item in recording.items]
    assert names[-1] == (SERVER, "close") and (CLIENT, "open") in names


def test_stops_at_its_deadline():
    server = socket.create_server(("127.0.0.1", 0))
    relay = Relay("127.0.0.1", server.getsockname()[1], time.monotonic() + 0.3)
    try:
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as client:
            client.settimeout(5)
            started = time.monotonic()
            assert client.recv(1) == b""  # the relay closed the client at the deadline
            assert time.monotonic() - started < 3
        relay.disconnect()
        assert relay.closed
    finally:
        relay.disconnect()
        server.close()
