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

`read_layout(data)` goes the other way, leniently: the layout of bytes that encode a
spec composite as a described list, whatever its fields hold (wrong types, unassigned
constructors, a count or size that does not match), as long as each item can be
stepped over (`codec.value_end`); the fuzzer's minimiser changes such bytes field by
field through `amqp10.builder.read_body`.

    layout = encode_layout(Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10))
    span = layout.field("next-outgoing-id")   # FieldSpan(..., start=7, end=8)
    layout.data[span.start:span.end]          # b"\\x43" (uint0)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from amqpspec.amqp10.codec import LIST0, LIST8, LIST32, NULL, decode_value, value_end
from amqpspec.amqp10.composites import Composite
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.amqp10.spec import COMPOSITE_BY_CODE, COMPOSITE_BY_DESCRIPTOR_NAME, COMPOSITES

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


def _composite_named_by(descriptor: object) -> str | None:
    if isinstance(descriptor, int) and not isinstance(descriptor, bool):
        found = COMPOSITE_BY_CODE.get(int(descriptor))
    elif isinstance(descriptor, str):
        found = COMPOSITE_BY_DESCRIPTOR_NAME.get(str(descriptor))
    else:
        found = None
    return found.name if found is not None else None


def read_layout(data: bytes) -> Layout | None:
    """The layout of `data` read leniently (see the module doc), or None when it is not
    a described list of a spec composite whose items all end inside the list's declared
    size (a truncated body, a list size beyond the bytes, a descriptor that names no
    spec composite). The list must be the whole of `data` up to its declared end; bytes
    after it are left to the caller (`Layout.data` is `data`). Items past the spec's
    fields get the name '#<index>' and type '*'. Never raises on any input."""
    try:
        if not data or data[0] != 0:
            return None
        descriptor_end = value_end(data, 1)
        composite = _composite_named_by(decode_value(data, 1, descriptor_end)[0])
        if composite is None or descriptor_end >= len(data):
            return None
        constructor = descriptor_end
        code = data[constructor]
        if code == LIST0:
            return Layout(data, composite, (1, descriptor_end), constructor, None, None, ())
        if code not in (LIST8, LIST32):
            return None
        width = 1 if code == LIST8 else 4
        header = _BB if width == 1 else _II
        if constructor + 1 + 2 * width > len(data):
            return None
        size = header.unpack_from(data, constructor + 1)[0]
        stop = constructor + 1 + width + size
        if size < width or stop > len(data):
            return None
        size_span = (constructor + 1, constructor + 1 + width)
        count_span = (size_span[1], size_span[1] + width)
        spec_fields = COMPOSITES[composite].fields
        spans = []
        position = count_span[1]
        while position < stop:
            end = value_end(data, position, stop)
            index = len(spans)
            if index < len(spec_fields):
                f = spec_fields[index]
                spans.append(
                    FieldSpan(index, f.name, f.type, f.mandatory, f.multiple, position, end)
                )
            else:
                spans.append(FieldSpan(index, f"#{index}", "*", False, False, position, end))
            position = end
        return Layout(
            data, composite, (1, descriptor_end), constructor, size_span, count_span, tuple(spans)
        )
    except DecodeError:
        return None
