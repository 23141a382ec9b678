"""The scapy layer for AMQP 1.0 (fuzz.scapy_amqp): crafted frames are the core's bytes,
TCP 5672 payloads dissect as chains of headers and frames decoded by the core, and
scapy's fuzz() yields frames with random header fields."""

from __future__ import annotations

from scapy.layers.inet import IP, TCP
from scapy.packet import fuzz, raw

from amqpspec.amqp10 import spec
from amqpspec.amqp10.builder import build_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.fuzz.scapy_amqp import PERFORMATIVES, AMQPFrame, AMQPHeader, frame


def test_every_frame_body_of_the_spec_table_is_named():
    bodies = {n for n, t in spec.COMPOSITES.items() if {"frame", "sasl-frame"} & set(t.provides)}
    assert set(PERFORMATIVES.values()) == bodies and len(bodies) == 14


def test_crafted_frames_are_the_cores_bytes():
    flow = COMPOSITE_CLASSES["flow"](incoming_window=1, next_outgoing_id=0, outgoing_window=1)
    assert raw(frame("flow", incoming_window=1, next_outgoing_id=0, outgoing_window=1)) == (
        build_frame(flow)
    )
    sasl = frame("sasl-init", mechanism="ANONYMOUS")
    assert sasl.type == 1 and sasl.performative.NAME == "sasl-init"


def test_a_tcp_5672_payload_dissects_as_a_chain():
    payload = raw(
        AMQPHeader()
        / frame("open", container_id="c")
        / frame("begin", next_outgoing_id=0, incoming_window=1, outgoing_window=1)
    )
    packet = IP(raw(IP(dst="127.0.0.1") / TCP(sport=40000, dport=5672) / payload))
    assert packet.haslayer(AMQPHeader) and packet[AMQPHeader].protocol_id == 0
    names, layer = [], packet.getlayer(AMQPFrame)
    while layer is not None:
        names.append(layer.performative.NAME)
        layer = layer.payload.getlayer(AMQPFrame)
    assert names == ["open", "begin"]
    assert "begin" in packet.getlayer(AMQPFrame, 2).mysummary()


def test_fuzzed_frames_keep_the_body_and_vary_the_header():
    seen = set()
    for _ in range(20):
        data = raw(fuzz(frame("flow", incoming_window=1, next_outgoing_id=0, outgoing_window=1)))
        seen.add(data[:6])
    assert len(seen) > 1
    broken = AMQPFrame(raw(AMQPFrame(size=9, doff=2, body=b"\x00\x53")))
    assert not hasattr(broken.performative, "NAME")  # the core's DecodeError, not a crash
