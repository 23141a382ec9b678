"""Encoding that reports where every part went: the byte layout of a composite (1.4).

Owns: `encode_layout(composite)`, which encodes a performative, SASL frame body or any
other spec composite exactly as `Composite.encode()` does, and returns with the bytes
the span of its descriptor, its list constructor, size and count, and of every field it
carries (`FieldSpan`: spec name, spec type, mandatory, multiple, start, end). Offsets
come from the encoder itself, so nothing downstream (the builder, the fuzzer's mutators,
conformance cases) hard-codes an offset, a descriptor code or an encoding width.

May touch: amqp10.codec (constructor codes) and the composite classes' per-field
encoders; no I/O. Unlike `encode()`, a null mandatory field is encoded as null here
(the layout of a deliberately wrong composite is still a layout).

    layout = encode_layout(Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10))
    span = layout.field("next-outgoing-id")   # FieldSpan(..., start=7, end=8)
    layout.data[span.start:span.end]          # b"\\x43" (uint0)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from amqp10.codec import LIST0, LIST8, LIST32, NULL
from amqp10.composites import Composite
from amqp10.errors import EncodeError
from amqp10.spec import COMPOSITES

_BB = struct.Struct(">BB")
_II = struct.Struct(">II")


@dataclass(frozen=True, slots=True)
class FieldSpan:
    """One field of an encoded composite: what the spec says of it, and its bytes
    `data[start:end]` (its constructor is `data[start]`)."""

    index: int
    name: str  # spec name, e.g. "remote-channel"
    type: str  # spec type, e.g. "ushort", "handle", "*"
    mandatory: bool
    multiple: bool
    start: int
    end: int

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True, slots=True)
class Layout:
    """The bytes of one described composite and where each part of them is.

    `data` = 0x00, descriptor value `data[descriptor[0]:descriptor[1]]`, the list
    constructor at `constructor`, then (list8/list32) size and count, then the fields.
    `size` and `count` are None for list0 (no fields)."""

    data: bytes
    composite: str  # spec name, e.g. "begin"
    descriptor: tuple[int, int]
    constructor: int
    size: tuple[int, int] | None
    count: tuple[int, int] | None
    fields: tuple[FieldSpan, ...]

    @property
    def body_start(self) -> int:
        """Offset of the first field's constructor (just past the list header)."""
        return self.count[1] if self.count is not None else self.constructor + 1

    @property
    def wide(self) -> bool:
        return self.data[self.constructor] == LIST32

    def field(self, name: str | int) -> FieldSpan:
        """The span of a field by spec name ('remote-channel'), attribute name
        ('remote_channel') or index; KeyError if the encoding does not carry it."""
        index = field_index(self.composite, name)
        if index >= len(self.fields):
            raise KeyError(
                f"{self.composite} encoding carries {len(self.fields)} field(s), not {name!r}"
            )
        return self.fields[index]


def field_index(composite: str, name: str | int) -> int:
    """Index of a field of spec composite `composite` by spec/attribute name or index."""
    fields = COMPOSITES[composite].fields
    if isinstance(name, int):
        if not 0 <= name < len(fields):
            raise KeyError(f"{composite} has no field #{name}")
        return name
    wanted = name.replace("_", "-")
    for index, field in enumerate(fields):
        if field.name == wanted:
            return index
    raise KeyError(f"{composite} has no field {name!r}")


def encode_layout(composite: Composite, *, wide: bool = False, count: int | None = None) -> Layout:
    """Encode `composite` and report where each part went.

    `wide=True` forces list32 (the encoder picks list8 whenever it fits); `count` sends
    that many fields (trailing ones as they are, null when unset) instead of omitting
    trailing defaults; it may not exceed the spec's field count."""
    cls = type(composite)
    spec = cls.SPEC
    values = composite.field_values()
    sent = composite.sent_fields() if count is None else count
    if not 0 <= sent <= len(values):
        raise EncodeError(f"{spec.name} has {len(values)} fields, cannot send {sent}")
    body = bytearray()
    ends = []
    encoders = cls._ENCODERS
    for index in range(sent):
        value = values[index]
        if value is None:
            body.append(NULL)
        else:
            encoders[index](body, value)
        ends.append(len(body))
    out = bytearray(cls._DESCRIPTOR_BYTES)
    descriptor = (1, len(out))
    constructor = len(out)
    size = count_span = None
    if sent == 0 and not wide:
        out.append(LIST0)
    elif not wide and len(body) + 1 < 256:
        out.append(LIST8)
        out += _BB.pack(len(body) + 1, sent)
        size, count_span = (constructor + 1, constructor + 2), (constructor + 2, constructor + 3)
    else:
        out.append(LIST32)
        out += _II.pack(len(body) + 4, sent)
        size, count_span = (constructor + 1, constructor + 5), (constructor + 5, constructor + 9)
    base = len(out)
    out += body
    spans = []
    start = base
    for index, end in enumerate(ends):
        field = spec.fields[index]
        spans.append(
            FieldSpan(
                index, field.name, field.type, field.mandatory, field.multiple, start, base + end
            )
        )
        start = base + end
    return Layout(bytes(out), spec.name, descriptor, constructor, size, count_span, tuple(spans))
