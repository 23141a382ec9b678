"""The parser and state-machine faults of the reference broker (reference_broker.
parser_faults) behave as the real bugs did: the connection task dies (no close frame),
the connection hangs (no reply), memory is held, the process exits. In memory, except
the exit (a real subprocess)."""

from __future__ import annotations

import socket
import time

import pytest

from amqpspec.amqp10.builder import build_frame, mutate
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.frames import decode_stream
from amqpspec.amqp10.types import Described, symbol, ulong
from amqpspec.fuzz.model import Conversation, Handshake
from amqpspec.reference_broker.config import BrokerConfig
from amqpspec.reference_broker.faults import parser as parser_faults
from amqpspec.reference_broker.faults.catalog import CATALOG, PARSER_LAYER, Faults
from amqpspec.reference_broker.runtime.memory import MemoryBroker
from amqpspec.reference_broker.runtime.process import BrokerProcess

C = COMPOSITE_CLASSES


def _prefix(receiver: bool = False) -> bytes:
    conv = Conversation(Handshake(sasl="none", source="/queues/q", target="/queues/q")).open()
    session = conv.begin()
    if receiver:
        conv.attach_receiver(session, credit=1)
    return b"".join(s.data for s in conv.steps())


def _run(fault: str, trigger: bytes, receiver: bool = False):
    config = BrokerConfig(host="127.0.0.1", port=0, admin_port=-1, faults=Faults([fault]))
    broker = MemoryBroker(config, housekeeping=False)
    broker.vhost.declare_queue("q", durable=False)
    connection = broker.connect(raw=True)
    connection.send(_prefix(receiver))
    broker.pump()
    before = len(connection.take_output())
    connection.send(trigger + build_frame(C["close"]()))
    broker.pump()
    return broker, connection, before, connection.take_output()


def _names(data: bytes) -> list[str]:
    items = decode_stream(data, expect_header=data[:4] == b"AMQP")
    return [getattr(i, "name", "header") for i in items]


def test_there_are_at_least_eight_parser_faults():
    parser = [n for n, info in CATALOG.items() if info.layer == PARSER_LAYER]
    assert len(parser) >= 8
    assert all(CATALOG[n].origin for n in parser)


def test_die_on_channel_reuse_drops_the_socket_without_close():
    begin = build_frame(C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9))
    _, connection, before, after = _run("die-on-channel-reuse", begin)
    assert before and connection.broker_closed and "close" not in _names(after)
    # the clean broker closes with illegal-state (2.5.1)
    clean = MemoryBroker(housekeeping=False)
    conn = clean.connect(raw=True)
    conn.send(_prefix() + begin)
    clean.pump()
    assert "close" in _names(conn.take_output())


def test_die_on_nested_descriptor():
    value = {symbol("k"): Described(Described(ulong(1), ulong(2)), 3)}
    begin = C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)
    frame = mutate(begin).set_field("properties", value).frame(1)
    _, connection, _, after = _run("die-on-nested-descriptor", frame)
    assert connection.broker_closed and "close" not in _names(after)


def test_die_on_credit_overflow():
    flow = C["flow"](
        next_incoming_id=0,
        incoming_window=9,
        next_outgoing_id=0,
        outgoing_window=9,
        handle=0,
        delivery_count=0,
        link_credit=2**32 - 1,
    )
    _, connection, _, after = _run("die-on-credit-overflow", build_frame(flow), receiver=True)
    assert connection.broker_closed and after == b""


@pytest.mark.parametrize(
    "trigger",
    [
        C["flow"](
            next_incoming_id=0,
            incoming_window=9,
            next_outgoing_id=0,
            outgoing_window=9,
            handle=0,
            delivery_count=2**31,
            link_credit=1,
        ),
        C["begin"](next_outgoing_id=2**31, incoming_window=9, outgoing_window=9),
    ],
)
def test_hang_on_serial_wrap_answers_nothing_and_keeps_the_socket(trigger):
    channel = 1 if trigger.NAME == "begin" else 0
    _, connection, _, after = _run("hang-on-serial-wrap", build_frame(trigger, channel), True)
    assert after == b"" and not connection.broker_closed


def test_hang_on_disposition_range():
    disposition = C["disposition"](role=True, first=0, last=2**20, settled=True)
    _, connection, _, after = _run("hang-on-disposition-range", build_frame(disposition))
    assert after == b"" and not connection.broker_closed


def test_leak_on_declared_count_holds_memory():
    parser_faults._held.clear()
    begin = C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)
    frame = mutate(begin).set_count(200).frame(1)
    _, _, _, after = _run("leak-on-declared-count", frame)
    assert "close" in _names(after)  # refused as the spec says: the leak is the bug
    held = sum(len(chunk) for _, chunk in parser_faults._held)
    assert held >= 64 * 1024 * 1024
    parser_faults._held.clear()


def test_faults_off_change_nothing():
    begin = C["begin"](next_outgoing_id=2**31, incoming_window=9, outgoing_window=9)
    clean = MemoryBroker(housekeeping=False)
    conn = clean.connect(raw=True)
    conn.send(_prefix() + build_frame(begin, 1))
    clean.pump()
    assert _names(conn.take_output())[-1] == "begin"


@pytest.mark.parametrize(
    "fault, trigger",
    [
        ("exit-on-illegal-sasl", "sasl-response"),
        ("exit-on-compound-overrun", "begin-size"),
    ],
)
def test_exit_faults_end_the_broker_process(fault, trigger):
    from amqpspec.amqp10.builder import sasl_frame
    from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER

    if trigger == "sasl-response":
        data = SASL_HEADER.encode() + sasl_frame(C["sasl-response"](response=b"x"))
    else:
        begin = C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)
        data = AMQP_HEADER.encode() + build_frame(C["open"](container_id="c"))
        data += mutate(begin).set_size(200).frame(0)
    broker = BrokerProcess(faults=[fault])
    try:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as sock:
            sock.sendall(data)
            deadline = time.monotonic() + 10
            while broker.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        assert broker.proc.poll() == parser_faults.EXIT_STATUS
    finally:
        broker.kill()
