"""Suspect and malformed encodings for fuzzers: the edges of the type system (1.2, 1.6) a
fuzzer tries, built here so that nothing outside amqp10 writes AMQP bytes by hand.

Owns: the byte values, constructors and descriptor codes a fuzzer picks from
(`BOUNDARY_BYTES`, `SUSPECT_CONSTRUCTORS`, `SUSPECT_DESCRIPTORS`, `INVALID_UTF8`), the
malformed encodings built from the codec's own (`str8_of(data)`: a str8 of any bytes,
invalid UTF-8 included; `map8_of(items)`: a map8 of a flat key/value list, duplicate keys
included), `amqp_value(value)` (an amqp-value body section, 3.2.8) and the two looks at
raw bytes a fuzzer needs before it decodes them (`starts_sasl(data)`, `is_described(data)`).
Fuzzers choose among these tuples by index, so their order is part of a seed's meaning:
append, never reorder. May touch: amqp10.codec, amqp10.composites, amqp10.frames; no I/O.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import AmqpValue
from amqpspec.amqp10.frames import SASL_HEADER

# byte values at the edges of a constructor's ranges (1.6: 0x40 null, 0x7F/0x80 the
# fixed/variable-width boundary, 0xFE/0xFF unassigned), written over a frame's bytes
BOUNDARY_BYTES = (0x00, 0x01, 0x40, 0x7F, 0x80, 0xFE, 0xFF)
# constructors a field may be given instead of its own: unassigned format codes (1.2,
# 1.6), then a compound and an array code where a scalar belongs
SUSPECT_CONSTRUCTORS = (0x01, 0x0F, 0x3F, 0x57, 0x8F, 0xFF, codec.LIST32, codec.ARRAY8)
# descriptor codes a performative may be given: no type's (0x00, 0x19, 0x99, 2**63), and
# open's (0x10) and sasl-init's (0x41) where they do not belong
SUSPECT_DESCRIPTORS = (0x00, 0x10, 0x19, 0x41, 0x99, 2**63)
# byte sequences that are not UTF-8 (1.6.20 str8-utf8 / str32-utf8 must be): a bad lead
# byte, a bad continuation, an encoded surrogate, a lone continuation
INVALID_UTF8 = (b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"a\x80")

_SASL_PREFIX = SASL_HEADER.encode()[:5]  # 'AMQP' and the SASL protocol id (5.3.1)


def str8_of(data: bytes) -> bytes:
    """A str8 (0xa1) holding `data` as it is, valid UTF-8 or not: the codec's vbin8 of
    `data` with its constructor changed (the same size and layout, 1.6.19-20)."""
    encoded = codec.encode(data)
    if encoded[0] != codec.VBIN8:
        raise ValueError(f"str8 holds at most 255 bytes, not {len(data)}")
    return bytes([codec.STR8]) + encoded[1:]


def map8_of(items: list[Any]) -> bytes:
    """A map8 (0xc1) of the flat key/value list `items`, repeated keys kept (1.6.23
    forbids them): the codec's list8 of `items` with its constructor changed (a map8
    has the list8's size and count layout)."""
    encoded = codec.encode(items)
    if encoded[0] != codec.LIST8:
        raise ValueError("map8_of needs a short, non-empty key/value list")
    return bytes([codec.MAP8]) + encoded[1:]


def amqp_value(value: Any) -> bytes:
    """The amqp-value body section (3.2.8) holding `value`, as the codec encodes it."""
    return codec.encode(AmqpValue(value))


def starts_sasl(data: bytes) -> bool:
    """Whether `data` begins with the SASL protocol header's 'AMQP' and id 3 (5.3.1),
    whatever version follows."""
    return data[:5] == _SASL_PREFIX


def is_described(data: bytes) -> bool:
    """Whether `data` begins with the described-type constructor 0x00 (1.2)."""
    return data[:1] == bytes([codec.DESCRIBED])
