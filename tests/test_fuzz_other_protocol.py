"""fuzz.oracle: a broker that accepts the other protocol a case asked for (an AMQP 0-9-1
header: RabbitMQ 3.10 answers with 0-9-1's connection.start) is not judged as writing
undecodable AMQP 1.0 frames (2.2); one that answers an AMQP 1.0 header with bytes that are
no frame still is. A loopback peer that writes fixed bytes (a unit test of the oracle; the
RabbitMQ 3.10 replay is in reports/fuzz-brokers.md)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from amqpspec.fuzz.case import HEADER, Step
from amqpspec.fuzz.oracle import Bounds, Target, run_case

AMQP_091 = b"AMQP\x00\x00\x09\x01"
AMQP_10 = b"AMQP\x00\x01\x00\x00"
# the head of 0-9-1's connection.start: a method frame (type 1, channel 0), class 10 method 10
CONNECTION_START = bytes.fromhex("010000000001f5000a000a0009000001d0") + bytes(480) + b"\xce"


@pytest.fixture
def peer() -> Iterator[tuple[int, list[bytes]]]:
    """A peer on loopback that reads the 8-byte header, writes the bytes put in its list
    and closes: (port, list)."""
    reply: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            conn.recv(8)
            conn.sendall(b"".join(reply))
            conn.shutdown(socket.SHUT_WR)
            try:
                while conn.recv(4096):
                    pass
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], reply
    finally:
        server.close()
        thread.join(10)


def _run(peer: tuple[int, list[bytes]], header: bytes, answer: bytes):  # type: ignore[no-untyped-def]
    port, reply = peer
    reply.append(answer)
    target = Target("127.0.0.1", port, bounds=Bounds(reply=0.5, liveness=1.0, connect=1.0))
    return run_case(target, [Step(header, "protocol-header", HEADER)], quick=True)


def test_the_other_protocol_the_case_asked_for_is_not_judged(peer) -> None:
    outcome = _run(peer, AMQP_091, CONNECTION_START)
    verdict = outcome.verdict
    assert verdict is None or verdict.rule != "frame.undecodable", verdict


def test_bytes_after_an_amqp_10_header_that_are_no_frame_are_judged(peer) -> None:
    outcome = _run(peer, AMQP_10, AMQP_10 + CONNECTION_START)
    assert outcome.verdict is not None and outcome.verdict.rule == "frame.undecodable"
