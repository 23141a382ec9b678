"""The one place that builds frames right or deliberately wrong (2.2, 2.3, 1.4, 5.3).

Owns: `build_frame` (every frame-header field explicit and overridable: SIZE, DOFF,
TYPE, channel, extended header; the body a performative, a `Mutation`, encoded bytes, or
any value the codec encodes), `protocol_header` (any id, version or magic),
`sasl_frame`, and `mutate(composite)`: a performative whose encoding is changed field by
field, with every offset taken from the encoder (`amqp10.layout`), never hard-coded;
`read_frame` / `read_body` take such bytes apart again (leniently) to change them.
May touch: amqp10.codec, amqp10.frames, amqp10.layout; no I/O, no engine state. To send
such bytes through an engine that records them as sent, see
`amqp10.engine.Connection.send_performative` and `send_raw`.

Building wrong frames (each line is the bytes of one frame):

    build_frame(None, doff=1)                       # 8-byte frame, DOFF 1 (2.3.1: >= 2)
    build_frame(None, size=4, trailer=bytes(8))     # SIZE 4 < 8
    build_frame(begin, channel=0, doff=3, extended_header=bytes(4))   # valid, unusual
    build_frame(Described(ulong(0x13), "not a list"), channel=1)      # not a performative
    build_frame(begin, frame_type=0x07)             # unknown frame type
    sasl_frame(SaslInit(mechanism=symbol("PLAIN"), initial_response=b"..."))

Changing one field of a performative (the rest of the encoding stays the encoder's):

    m = mutate(Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10))
    m.set_constructor("next-outgoing-id", 0xFF).frame()   # unassigned format code
    m.null_field("incoming-window").frame()               # a mandatory field null
    mutate(begin).set_field("remote-channel", "zero").frame()   # a string for a ushort
    mutate(begin).replace_field("handle-max", codec.encode(ulong(7))).frame()
    mutate(begin).truncate(-4).frame()                    # body cut 4 bytes short
    mutate(begin).set_count(9).frame()                    # count beyond the fields sent
    mutate(begin).set_size(200).frame()                   # size beyond the frame
    mutate(begin).descriptor(0x99).frame()                # unknown descriptor code
    mutate(begin).descriptor("amqp:begin:list").frame()   # symbolic descriptor (valid)
    mutate(Begin(), count=4).frame()                      # [null, null, null, null]
    mutate(flow, wide=True)                               # list32 instead of list8
    mutate(attach).replace_field("source", mutate(source).null_field(0).encode())  # nested

Every method returns the Mutation (chain them); `encode()` / `bytes(m)` gives the body,
`frame(channel, ...)` a whole frame through `build_frame`. `m.fields` lists the spans
(spec name, type, mandatory, multiple, offsets) of the unmutated encoding, for
mutators that enumerate fields; a Mutation is cheap (one encode) and `copy()` forks it.

Going back from bytes, right or wrong (the fuzzer's field-level minimiser):

    parts = read_frame(data)             # header fields, body, payload, trailer
    parts.body.null_field("handle-max")  # body: a Mutation when readable field by field
    parts.build()                        # == data until something is changed
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from amqpspec.amqp10 import codec
from amqpspec.amqp10.codec import (
    ARRAY8,
    ARRAY32,
    LIST0,
    LIST8,
    LIST32,
    MAP8,
    MAP32,
    NULL,
    value_end,
)
from amqpspec.amqp10.composites import Composite
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.amqp10.frames import FRAME_HEADER, FRAME_HEADER_SIZE, FrameType, ProtocolId
from amqpspec.amqp10.layout import FieldSpan, Layout, encode_layout, field_index, read_layout
from amqpspec.amqp10.types import symbol, ulong

# Frame header fields (2.3.1): byte offsets within a frame.
SIZE_SPAN = (0, 4)
DOFF_OFFSET = 4
TYPE_OFFSET = 5
CHANNEL_SPAN = (6, 8)

_B = struct.Struct(">B")
_I = struct.Struct(">I")
_HEADER_WIDTH = {LIST8: 1, MAP8: 1, ARRAY8: 1, LIST32: 4, MAP32: 4, ARRAY32: 4}


def body_bytes(body: Any) -> bytes:
    """A frame body from a performative/composite, a Mutation, bytes, None (empty) or
    any value the codec can encode (a Described, a string, ...)."""
    if body is None:
        return b""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, (Composite, Mutation)):
        return body.encode()
    return codec.encode(body)


def build_frame(
    body: Any = None,
    channel: int = 0,
    *,
    payload: bytes = b"",
    frame_type: int = FrameType.AMQP,
    doff: int | None = None,
    size: int | None = None,
    extended_header: bytes = b"",
    trailer: bytes = b"",
) -> bytes:
    """One frame (2.3.1), any header field overridable to a wrong value.

    Defaults are the right values: DOFF = 2 + len(extended_header) / 4, SIZE = the bytes
    written (header, extended header, body, payload). `trailer` is appended after them
    and not counted in the default SIZE (bytes the frame does not announce).
    Values must fit their header field (SIZE u32, DOFF u8, TYPE u8, channel u16)."""
    data = body_bytes(body) + bytes(payload)
    if doff is None:
        if len(extended_header) % 4:
            raise EncodeError("extended header must be whole 4-byte words (or give doff)")
        doff = 2 + len(extended_header) // 4
    if size is None:
        size = FRAME_HEADER_SIZE + len(extended_header) + len(data)
    try:
        header = FRAME_HEADER.pack(size, doff, frame_type, channel)
    except struct.error as exc:
        raise EncodeError(f"frame header field out of range: {exc}") from None
    return header + bytes(extended_header) + data + bytes(trailer)


def sasl_frame(body: Any, **kw: Any) -> bytes:
    """A SASL frame (5.3.1: TYPE 1, channel 0 unless given)."""
    return build_frame(body, kw.pop("channel", 0), frame_type=FrameType.SASL, **kw)


def protocol_header(
    protocol_id: int = ProtocolId.AMQP,
    major: int = 1,
    minor: int = 0,
    revision: int = 0,
    *,
    magic: bytes = b"AMQP",
) -> bytes:
    """A protocol header (2.2, 5.2.1, 5.3.1), any id, version or magic."""
    return bytes(magic) + bytes((protocol_id, major, minor, revision))


class Mutation:
    """A composite's encoding as parts (descriptor, list constructor, size, count,
    fields, trailing bytes) that can each be replaced; `encode()` reassembles them with
    size and count recomputed unless they were set."""

    __slots__ = (
        "_code",
        "_count",
        "_cut",
        "_descriptor",
        "_items",
        "_size",
        "_tail",
        "_wide",
        "layout",
    )

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        data = layout.data
        self._descriptor = data[layout.descriptor[0] : layout.descriptor[1]]
        self._items = [data[f.start : f.end] for f in layout.fields]
        self._wide = layout.wide
        self._code: int | None = None
        self._size: int | None = None
        self._count: int | None = None
        self._cut: int | None = None
        self._tail = b""

    @property
    def fields(self) -> tuple[FieldSpan, ...]:
        """The fields of the original encoding with their spans (see amqp10.layout)."""
        return self.layout.fields

    def copy(self) -> Mutation:
        other = Mutation.__new__(Mutation)
        for name in Mutation.__slots__:
            setattr(other, name, getattr(self, name))
        other._items = list(self._items)
        return other

    # --- fields -----------------------------------------------------------------

    def _index(self, name: str | int) -> int:
        if isinstance(name, int) and 0 <= name < len(self._items):
            return name  # an item carried past the spec's fields (read_body)
        index = field_index(self.layout.composite, name)
        while len(self._items) <= index:  # an omitted trailing field: send nulls up to it
            self._items.append(bytes((NULL,)))
        return index

    @property
    def sent(self) -> int:
        """How many items the list carries now."""
        return len(self._items)

    def field_bytes(self, name: str | int) -> bytes:
        """The current encoding of field `name` (b"" when the list does not carry it)."""
        if isinstance(name, int) and 0 <= name < len(self._items):
            return self._items[name]
        index = field_index(self.layout.composite, name)
        return self._items[index] if index < len(self._items) else b""

    def drop_trailing(self, keep: int) -> Mutation:
        """Carry only the first `keep` items (what an encoder does with trailing nulls)."""
        del self._items[keep:]
        return self

    def replace_field(self, name: str | int, encoded: bytes) -> Mutation:
        """Field `name` (spec name, attribute name or index) becomes `encoded`, any bytes
        (one encoded value of any type, several, or none at all)."""
        self._items[self._index(name)] = bytes(encoded)
        return self

    def set_field(self, name: str | int, value: Any) -> Mutation:
        """Field `name` becomes `value`, encoded by its Python type (codec.encode): a
        `ulong(5)` where a uint belongs, a string for a ushort, ..."""
        return self.replace_field(name, codec.encode(value))

    def null_field(self, name: str | int) -> Mutation:
        """Field `name` becomes null (e.g. a mandatory one, 1.4)."""
        return self.replace_field(name, bytes((NULL,)))

    def set_constructor(self, name: str | int, code: int) -> Mutation:
        """The first byte (constructor, 1.2) of field `name` becomes `code`."""
        index = self._index(name)
        self._items[index] = bytes((code,)) + self._items[index][1:]
        return self

    def drop_field(self, name: str | int) -> Mutation:
        """Remove field `name`: later fields move up one position."""
        del self._items[self._index(name)]
        return self

    def append_field(self, encoded: bytes) -> Mutation:
        """One more item after the last field (beyond the spec's fields if need be)."""
        self._items.append(bytes(encoded))
        return self

    # --- list header and descriptor ------------------------------------------------

    def set_count(self, count: int) -> Mutation:
        """The list's count field says `count`, whatever the fields are."""
        self._count = count
        return self

    def set_size(self, size: int) -> Mutation:
        """The list's size field says `size`, whatever the bytes are."""
        self._size = size
        return self

    def set_list_code(self, code: int) -> Mutation:
        """The list constructor becomes `code` (list8/list32 keep their header width;
        list0 has none; any other code is written with no size/count at all)."""
        self._code = code
        return self

    def wide(self, wide: bool = True) -> Mutation:
        """Encode the list as list32 (wide) or as the smallest form that fits."""
        self._wide = wide
        return self

    def descriptor(self, descriptor: int | str | bytes) -> Mutation:
        """The descriptor becomes a ulong code, a symbol, or raw encoded bytes."""
        if isinstance(descriptor, int):
            self._descriptor = codec.encode(ulong(descriptor))
        elif isinstance(descriptor, str):
            self._descriptor = codec.encode(symbol(descriptor))
        else:
            self._descriptor = bytes(descriptor)
        return self

    # --- the bytes ---------------------------------------------------------------------

    def truncate(self, length: int) -> Mutation:
        """Keep only the first `length` bytes of the body (negative: cut that many from
        the end); a frame built from it announces the cut size."""
        self._cut = length
        return self

    def append_bytes(self, data: bytes) -> Mutation:
        """Bytes after the list, not counted in its size."""
        self._tail += bytes(data)
        return self

    def encode(self) -> bytes:
        items = b"".join(self._items)
        code = self._code
        if code is None:
            if self._wide or len(items) + 1 >= 256 or len(self._items) >= 256:
                code = LIST32
            elif self._items or self._size is not None or self._count is not None:
                code = LIST8
            else:
                code = LIST0
        width = _HEADER_WIDTH.get(code, 0)
        out = bytearray(b"\x00")
        out += self._descriptor
        out.append(code)
        if width:
            size = len(items) + width if self._size is None else self._size
            count = len(self._items) if self._count is None else self._count
            pack = _B.pack if width == 1 else _I.pack
            try:
                out += pack(size) + pack(count)
            except struct.error:
                raise EncodeError(f"size {size}, count {count}: not {width}-byte") from None
        out += items
        out += self._tail
        return bytes(out if self._cut is None else out[: self._cut])

    __bytes__ = encode

    def frame(self, channel: int = 0, **kw: Any) -> bytes:
        """A frame around this body (keywords as for build_frame)."""
        return build_frame(self.encode(), channel, **kw)


def read_body(body: bytes) -> Mutation | None:
    """A Mutation of encoded `body` bytes (a performative or other spec composite, right
    or wrong: `amqp10.layout.read_layout`), so that `encode()` gives `body` back exactly:
    the list constructor is kept, a count that does not match the items is kept as it
    is, bytes after the list are kept as its tail. None when the body cannot be
    read field by field (then it can only be kept whole)."""
    layout = read_layout(body)
    if layout is None:
        return None
    m = Mutation(layout)
    code = body[layout.constructor]
    m._code, m._wide = code, code == LIST32
    stop = layout.constructor + 1
    if layout.size is not None and layout.count is not None:
        width = layout.size[1] - layout.size[0]
        unpack = _B.unpack_from if width == 1 else _I.unpack_from
        size, count = unpack(body, layout.size[0])[0], unpack(body, layout.count[0])[0]
        if count != len(m._items):  # (the items fill the size: read_layout reads them so)
            m._count = count
        stop = layout.size[1] + size
    m._tail = body[stop:]
    return m if m.encode() == body else None


@dataclass(slots=True)
class FrameParts:
    """One frame's bytes as parts (`read_frame`): header fields, the body as a Mutation
    (or bytes when it cannot be read field by field), the payload and bytes after SIZE;
    `build()` writes it back through `build_frame` with SIZE and DOFF recomputed."""

    channel: int
    frame_type: int
    body: Mutation | bytes
    payload: bytes = b""
    extended_header: bytes = b""
    trailer: bytes = b""

    def build(self) -> bytes:
        return build_frame(
            self.body,
            self.channel,
            payload=self.payload,
            frame_type=self.frame_type,
            extended_header=self.extended_header,
            trailer=self.trailer,
        )


def read_frame(data: bytes) -> FrameParts | None:
    """The parts of one frame's bytes, right or wrong, such that `build()` gives `data`
    back; None when the header cannot frame them (SIZE below 8 or beyond the bytes, DOFF
    below 2 or beyond SIZE): such bytes can only be kept whole."""
    if len(data) < FRAME_HEADER_SIZE:
        return None
    size, doff, frame_type, channel = FRAME_HEADER.unpack_from(data)
    start = 4 * doff
    if size < FRAME_HEADER_SIZE or size > len(data) or doff < 2 or start > size:
        return None
    region = data[start:size]
    body: Mutation | bytes = region
    payload = b""
    if region:
        try:
            end = value_end(region)
        except DecodeError:
            end = len(region)
        body, payload = read_body(region[:end]) or region[:end], region[end:]
    parts = FrameParts(
        channel, frame_type, body, payload, data[FRAME_HEADER_SIZE:start], data[size:]
    )
    return parts if parts.build() == data else None


def mutate(composite: Composite, *, wide: bool = False, count: int | None = None) -> Mutation:
    """Start changing the encoding of `composite` (see the module docstring). `wide` and
    `count` are as for amqp10.layout.encode_layout; a Composite with null mandatory
    fields is accepted (they encode as null)."""
    return Mutation(encode_layout(composite, wide=wide, count=count))


__all__ = [
    "CHANNEL_SPAN",
    "DOFF_OFFSET",
    "SIZE_SPAN",
    "TYPE_OFFSET",
    "FieldSpan",
    "FrameParts",
    "Layout",
    "Mutation",
    "body_bytes",
    "build_frame",
    "encode_layout",
    "mutate",
    "protocol_header",
    "read_body",
    "read_frame",
    "sasl_frame",
]
