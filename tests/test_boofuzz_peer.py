"""The boofuzz peer (bench/peers/boofuzz_amqp.py): its unfuzzed messages are what amqp10
decodes as the intended performatives, the reference broker answers them, and its close
probe reports a connection that dies without a close frame."""

from __future__ import annotations

import socket
import time

import pytest

from amqpspec.amqp10.frames import Frame, ProtocolHeader, decode_stream
from amqpspec.bench.peers.boofuzz_amqp import AMQP_MESSAGES, EDGES, build_session, render_path
from amqpspec.fuzz.cli import QUEUE as FUZZ_QUEUE
from amqpspec.fuzz.detection import Supervised, target_for

QUEUE = "/queues/boofuzz"
LIVE_QUEUE = f"/queues/{FUZZ_QUEUE}"
FIRST = 1941  # the flow node's first case with link-credit 2^31 (boofuzz is deterministic)
SASL = ["sasl-header", "sasl-init"]
AMQP = ["amqp-header", *AMQP_MESSAGES]


def _names(items: list[ProtocolHeader | Frame]) -> list[str]:
    return [f"header-{i.protocol_id}" if isinstance(i, ProtocolHeader) else i.name for i in items]


def test_every_message_decodes_as_its_performative():
    sasl = decode_stream(render_path(QUEUE, SASL))
    assert _names(sasl) == ["header-3", "sasl-init"]
    assert sasl[1].performative.mechanism == "ANONYMOUS"
    amqp = decode_stream(render_path(QUEUE, AMQP))
    expected = [
        "header-0",
        "open",
        "begin",
        "attach",
        "flow",
        "disposition",
        "detach",
        "attach",
        "transfer",
        "end",
        "close",
    ]
    assert _names(amqp) == expected
    receiver, sender, transfer = amqp[3].performative, amqp[7].performative, amqp[8]
    assert receiver.role is True and receiver.source.address == QUEUE
    assert sender.role is False and sender.target.address == QUEUE
    assert transfer.payload == b"\x00\x53\x75\xb0\x00\x00\x00\x05hello"  # one data section
    assert {dst for _, dst in EDGES} == set(SASL + AMQP)


def _replies(sock: socket.socket, bound: float = 10.0) -> list[str]:
    """What the broker sent until it went quiet for a second (bounded)."""
    data, deadline = b"", time.monotonic() + bound
    sock.settimeout(1.0)
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return _names(decode_stream(data))


@pytest.fixture(scope="module")
def broker():
    supervised = Supervised(["die-on-credit-overflow"])
    target_for(supervised)  # declares the queue of fuzz.cli.QUEUE
    yield supervised
    supervised.stop()


def test_the_reference_broker_answers_the_unfuzzed_path(broker):
    path = [*SASL, "amqp-header", "open", "begin", "attach-receiver", "flow"]
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as sock:
        sock.sendall(render_path(LIVE_QUEUE, path))
        replies = _replies(sock)
    assert replies[:6] == [
        "header-3",
        "sasl-mechanisms",
        "sasl-outcome",
        "header-0",
        "open",
        "begin",
    ]
    assert "attach" in replies and "close" not in replies and "detach" not in replies


def test_the_close_probe_reports_the_connection_that_dies(broker, tmp_path):
    """Flow cases FIRST-5..FIRST+4 of the flow node: the first link-credit at 2^31 (case
    FIRST) kills the connection (no close frame); the cases before it pass the probe."""
    path = "->".join([*SASL, "amqp-header", "open", "begin", "attach-receiver", "flow"])
    session, recorder = build_session(
        "127.0.0.1",
        broker.port,
        LIVE_QUEUE,
        str(tmp_path),
        broker,
        index_start=FIRST - 5,
        index_end=FIRST + 4,
    )
    session.fuzz(name=path)
    assert (recorder.index, recorder.node) == (FIRST, "flow"), recorder.message
    assert "without a close frame" in recorder.message
    assert "link-credit" in recorder.case_name  # boofuzz names the mutated primitive
    assert recorder.cases == 6  # stopped after the failing case
