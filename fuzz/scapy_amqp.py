"""A scapy layer for AMQP 1.0: protocol headers and frames (AMQP and SASL), on TCP 5672/5671.

Owns: `AMQPHeader` (2.2: 'AMQP' + protocol id + version), `AMQPFrame` (2.3.1: SIZE, DOFF,
TYPE, channel, extended header, body; SIZE and DOFF computed unless set), the `AMQP`
dispatcher that picks one of them for each piece of a TCP payload (several frames per
segment dissect as a chain), the binding to TCP 5672 and 5671, and helpers that go through
the core: `frame(name, channel=0, **fields)` builds a frame for any performative or SASL
body of the spec table (`amqp10.composites`, `amqp10.builder`), `AMQPFrame.performative`
decodes the body with `amqp10.frames.decode_frame`, and `PERFORMATIVES` maps each frame
body's descriptor code to its name, from the spec table. Scapy's own `fuzz()` works on
every field (a fuzzed SIZE or DOFF is sent as is).

    >>> from amqpspec.fuzz.scapy_amqp import frame, AMQPHeader
    >>> pkt = AMQPHeader() / frame("open", container_id="c")
    >>> pkt.show()      # header, then the open with its decoded performative
    >>> IP()/TCP(dport=5672)/fuzz(frame("flow", incoming_window=1, next_outgoing_id=0,
    ...                                   outgoing_window=1))

No bytes are parsed or built here by hand: the frame header is scapy fields laid out as
2.3.1 says, the body is the core's encoding, and decoding is the core's.
"""

from __future__ import annotations

from typing import Any

from scapy.fields import (
    ByteEnumField,
    ByteField,
    IntField,
    ShortField,
    StrField,
    StrFixedLenField,
    StrLenField,
)
from scapy.layers.inet import TCP
from scapy.packet import Packet, Raw, bind_layers

from amqpspec.amqp10 import spec
from amqpspec.amqp10.builder import body_bytes
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import FRAME_HEADER_SIZE, PROTOCOL_HEADER_SIZE, FrameType, decode_frame

AMQP_PORTS = (5672, 5671)
PROTOCOL_IDS = {0: "AMQP", 2: "TLS", 3: "SASL"}
FRAME_TYPES = {FrameType.AMQP: "AMQP", FrameType.SASL: "SASL"}
# frame bodies of the spec table: descriptor code -> performative / SASL frame name
PERFORMATIVES = {
    t.descriptor_code: name
    for name, t in spec.COMPOSITES.items()
    if t.descriptor_code is not None and ({"frame", "sasl-frame"} & set(t.provides))
}


class AMQPHeader(Packet):
    """A protocol header (2.2, 5.2.1, 5.3.1)."""

    name = "AMQP protocol header"
    fields_desc = [
        StrFixedLenField("magic", b"AMQP", 4),
        ByteEnumField("protocol_id", 0, PROTOCOL_IDS),
        ByteField("major", 1),
        ByteField("minor", 0),
        ByteField("revision", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return AMQP.dispatch(payload)


class AMQPFrame(Packet):
    """One frame (2.3.1); `size` and `doff` are computed from the rest when left None."""

    name = "AMQP frame"
    fields_desc = [
        IntField("size", None),
        ByteField("doff", None),
        ByteEnumField("type", FrameType.AMQP, FRAME_TYPES),
        ShortField("channel", 0),
        StrLenField(
            "extended_header",
            b"",
            length_from=lambda pkt: max(0, 4 * ((pkt.doff if pkt.doff is not None else 2) - 2)),
        ),
        StrLenField(
            "body",
            b"",
            length_from=lambda pkt: max(0, (pkt.size or 0) - 4 * (pkt.doff or 2)),
        ),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        doff = self.doff if self.doff is not None else 2 + len(self.extended_header) // 4
        size = self.size if self.size is not None else len(pkt)
        header = size.to_bytes(4, "big") + bytes((doff & 0xFF,))
        return header + pkt[5:] + pay

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return AMQP.dispatch(payload)

    @property
    def performative(self) -> Any:
        """The body decoded by the core (a composite), or the DecodeError it raised."""
        try:
            return decode_frame(bytes(self)[: self.size or None]).performative
        except DecodeError as exc:
            return exc

    def mysummary(self) -> str:
        body = self.performative
        what = getattr(body, "NAME", "empty" if not self.body else f"undecodable ({body})")
        return f"AMQP {FRAME_TYPES.get(self.type, self.type)} ch={self.channel} {what}"


class AMQP(Packet):
    """The TCP payload dispatcher: each piece dissects as a header or a frame."""

    name = "AMQP"
    fields_desc = [StrField("data", b"")]

    @staticmethod
    def dispatch(payload: bytes) -> type[Packet]:
        if not payload:
            return Raw
        if payload[:4] == b"AMQP" and len(payload) >= PROTOCOL_HEADER_SIZE:
            return AMQPHeader
        if len(payload) >= FRAME_HEADER_SIZE:
            return AMQPFrame
        return Raw

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        return cls.dispatch(_pkt or b"")


def frame(name: str, channel: int = 0, payload: bytes = b"", **fields: Any) -> AMQPFrame:
    """A frame carrying performative or SASL body `name` of the spec table, fields by
    attribute name (`container_id=...`), encoded by the core."""
    composite = COMPOSITE_CLASSES[name](**fields)
    sasl = "sasl-frame" in spec.COMPOSITES[name].provides
    frame_type = FrameType.SASL if sasl else FrameType.AMQP
    # SIZE and DOFF left to post_build (and to scapy's fuzz(), which varies unset fields)
    return AMQPFrame(type=frame_type, channel=channel, body=body_bytes(composite) + payload)


for _port in AMQP_PORTS:
    bind_layers(TCP, AMQP, dport=_port)
    bind_layers(TCP, AMQP, sport=_port)
