"""Framing (2.2, 2.3, 5.3): protocol headers, frame headers, frame bodies, frame decoder.

Owns: the 8-byte protocol headers (AMQP 0 / TLS 2 / SASL 3, version 1.0.0), the frame
header (SIZE u32, DOFF u8 >= 2, TYPE u8, channel u16) with its extended header, empty
(heartbeat) frames, AMQP and SASL frame bodies (performative + payload), and
`FrameDecoder`, which turns bytes in any chunking into the same frames. Frames built
deliberately wrong (any header field, any field of a performative) come from
amqp10.builder (`build_frame`, `sasl_frame`, `protocol_header`, `mutate`), which builds
on this module.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import CLASS_BY_CODE, Composite, Transfer
from amqpspec.amqp10.errors import DecodeError, EncodeError, ErrorKind
from amqpspec.amqp10.spec import Cond

FRAME_HEADER = struct.Struct(">IBBH")
_SIZE = struct.Struct(">I")
FRAME_HEADER_SIZE = 8
PROTOCOL_HEADER_SIZE = 8


class ProtocolId(IntEnum):
    """The protocol id byte of a protocol header (2.2, 5.2.1, 5.3.1)."""

    AMQP = 0
    TLS = 2
    SASL = 3


class FrameType(IntEnum):
    AMQP = 0x00
    SASL = 0x01


@dataclass(frozen=True, slots=True)
class ProtocolHeader:
    """'AMQP' + protocol id + major.minor.revision."""

    protocol_id: int
    major: int = 1
    minor: int = 0
    revision: int = 0

    def encode(self) -> bytes:
        return b"AMQP" + bytes((self.protocol_id, self.major, self.minor, self.revision))

    @classmethod
    def decode(cls, data: bytes) -> ProtocolHeader:
        if len(data) < PROTOCOL_HEADER_SIZE:
            raise DecodeError(
                len(data), "an 8-byte protocol header", kind=ErrorKind.SHORT_PROTOCOL_HEADER
            )
        if bytes(data[:4]) != b"AMQP":
            raise DecodeError(
                0,
                f"protocol header 'AMQP', got {bytes(data[:4])!r}",
                Cond.FRAMING_ERROR,
                ErrorKind.BAD_PROTOCOL_HEADER,
            )
        return cls(data[4], data[5], data[6], data[7])

    @property
    def is_supported(self) -> bool:
        """Version 1.0.0 of a protocol id this core speaks."""
        return (self.major, self.minor, self.revision) == (1, 0, 0) and self.protocol_id in (
            ProtocolId.AMQP,
            ProtocolId.SASL,
            ProtocolId.TLS,
        )


AMQP_HEADER = ProtocolHeader(ProtocolId.AMQP)
SASL_HEADER = ProtocolHeader(ProtocolId.SASL)
TLS_HEADER = ProtocolHeader(ProtocolId.TLS)


@dataclass(slots=True)
class Frame:
    """One frame. `performative` is None for an empty (heartbeat) frame.

    `payload` is what follows the performative in the body (transfer message bytes);
    `raw` keeps the exact frame bytes when it came from the wire; `size` is SIZE.
    """

    type: int
    channel: int
    performative: Any
    payload: bytes = b""
    extended_header: bytes = b""
    size: int = 0
    raw: bytes = b""

    @property
    def is_empty(self) -> bool:
        return self.performative is None

    @property
    def name(self) -> str:
        """Performative name ('flow', 'sasl-init') or 'empty'."""
        performative = self.performative
        if performative is None:
            return "empty"
        try:
            return performative.NAME
        except AttributeError:
            return type(performative).__name__


def encode_frame(
    performative: Composite | None,
    channel: int = 0,
    payload: bytes = b"",
    frame_type: int = FrameType.AMQP,
    extended_header: bytes = b"",
) -> bytes:
    """The bytes of one frame; `performative=None` gives an empty (heartbeat) frame."""
    if not extended_header and 0 <= channel <= 0xFFFF and 0 <= frame_type <= 0xFF:
        # Fast path: header with SIZE patched in after the body is written.
        out = bytearray(FRAME_HEADER.pack(0, 2, frame_type, channel))
        if performative is not None:
            performative.encode_into(out)
            out += payload
        _SIZE.pack_into(out, 0, len(out))
        return bytes(out)
    if len(extended_header) % 4:
        raise EncodeError("extended header must be a whole number of 4-byte words")
    if not 0 <= channel <= 0xFFFF:
        raise EncodeError(f"channel {channel} out of range")
    body = bytearray()
    if performative is not None:
        performative.encode_into(body)
        body += payload
    doff = 2 + len(extended_header) // 4
    if doff > 255:
        raise EncodeError("extended header longer than DOFF allows")
    size = 4 * doff + len(body)
    return FRAME_HEADER.pack(size, doff, frame_type, channel) + extended_header + bytes(body)


EMPTY_FRAME = encode_frame(None)

_TRANSFER_HEAD = Transfer._DESCRIPTOR_BYTES + bytes((0xC0, 0, 5))  # described list8, 5 fields
_LIST_SIZE_AT = FRAME_HEADER_SIZE + len(Transfer._DESCRIPTOR_BYTES) + 1  # list8's size byte
_UINT = struct.Struct(">BI").pack
MAX_FAST_TAG = 32  # 2.8.7 delivery-tag: at most 32 octets


def encode_transfer_frame(
    channel: int,
    handle: int,
    delivery_id: int,
    delivery_tag: bytes,
    message_format: int,
    settled: bool,
    payload: bytes,
) -> bytes:
    """`encode_frame(Transfer(handle, delivery_id, delivery_tag, message_format, settled),
    channel, payload)` byte for byte, without building the Transfer: the one-frame
    delivery a sending link sends most (2.7.5). The caller keeps to what it covers: uint
    handle, delivery-id and message-format, a bytes delivery-tag of at most MAX_FAST_TAG
    octets (so the list is a list8), channel 0..65535; anything else goes through
    encode_frame. tests/test_codec_composites.py holds the two to the same bytes."""
    out = bytearray(FRAME_HEADER.pack(0, 2, 0, channel))
    out += _TRANSFER_HEAD
    for value in (handle, delivery_id):  # uint: uint0 / smalluint / uint (1.6.5)
        if value == 0:
            out.append(0x43)
        elif value < 256:
            out.append(0x52)
            out.append(value)
        else:
            out += _UINT(0x70, value)
    out.append(0xA0)  # vbin8
    out.append(len(delivery_tag))
    out += delivery_tag
    if message_format == 0:
        out.append(0x43)
    elif message_format < 256:
        out.append(0x52)
        out.append(message_format)
    else:
        out += _UINT(0x70, message_format)
    out.append(0x41 if settled else 0x42)
    out[_LIST_SIZE_AT] = len(out) - _LIST_SIZE_AT - 1  # list8 size: the count byte + fields
    out += payload
    _SIZE.pack_into(out, 0, len(out))
    return bytes(out)


def decode_frame(data: bytes, max_frame_size: int = 0xFFFFFFFF) -> Frame:
    """Decode exactly one whole frame held in `data`."""
    if len(data) < FRAME_HEADER_SIZE:
        raise DecodeError(
            len(data), "an 8-byte frame header", Cond.FRAMING_ERROR, ErrorKind.SHORT_FRAME_HEADER
        )
    size, doff, frame_type, channel = FRAME_HEADER.unpack_from(data, 0)
    if size < FRAME_HEADER_SIZE or doff < 2 or 4 * doff > size or size > max_frame_size:
        _check_header(size, doff, max_frame_size)
    if size != len(data):
        raise DecodeError(
            0,
            f"frame SIZE {size} to equal the {len(data)} bytes given",
            Cond.FRAMING_ERROR,
            ErrorKind.FRAME_SIZE_MISMATCH,
            declared=size,
            limit=len(data),
        )
    return _frame_from(bytes(data), size, doff, frame_type, channel)


def _check_header(size: int, doff: int, max_frame_size: int) -> None:
    """2.3.1: SIZE >= 8, DOFF >= 2, 4*DOFF <= SIZE; SIZE within the agreed max."""
    if size < FRAME_HEADER_SIZE:
        raise DecodeError(
            0,
            f"frame SIZE >= 8, got {size}",
            Cond.FRAMING_ERROR,
            ErrorKind.FRAME_SIZE_TOO_SMALL,
            declared=size,
        )
    if doff < 2:
        raise DecodeError(
            4, f"DOFF >= 2, got {doff}", Cond.FRAMING_ERROR, ErrorKind.DOFF_TOO_SMALL, declared=doff
        )
    if 4 * doff > size:
        raise DecodeError(
            4,
            f"DOFF*4 ({4 * doff}) <= SIZE ({size})",
            Cond.FRAMING_ERROR,
            ErrorKind.DOFF_BEYOND_SIZE,
            declared=doff,
            limit=size,
        )
    if size > max_frame_size:
        raise DecodeError(
            0,
            f"frame SIZE {size} <= max-frame-size {max_frame_size}",
            Cond.FRAMING_ERROR,
            ErrorKind.FRAME_SIZE_OVER_MAX,
            declared=size,
            limit=max_frame_size,
        )


# 2.3.2: an AMQP frame's body starts with a performative, described by a smallulong code
# (0x00 0x53 code): those go straight to their class's generated decoder, as
# codec.decode_value would dispatch them (same decoder, position, end and depth)
_PERFORMATIVE_DECODERS = {
    code: codec.SMALL_DESCRIBED_DECODERS[code]
    for code, cls in CLASS_BY_CODE.items()
    if code < 256 and issubclass(cls, Composite) and "frame" in cls.SPEC.provides
}


_new = object.__new__


def _frame(
    frame_type: int,
    channel: int,
    performative: Any,
    payload: bytes,
    extended: bytes,
    size: int,
    raw: bytes,
) -> Frame:
    """Frame(...) without the dataclass __init__ (2-3x faster per decoded frame)."""
    frame = _new(Frame)
    frame.type = frame_type
    frame.channel = channel
    frame.performative = performative
    frame.payload = payload
    frame.extended_header = extended
    frame.size = size
    frame.raw = raw
    return frame


def _frame_from(raw: bytes, size: int, doff: int, frame_type: int, channel: int) -> Frame:
    body_start = 4 * doff
    extended = raw[FRAME_HEADER_SIZE:body_start]
    if body_start == size:
        return _frame(frame_type, channel, None, b"", extended, size, raw)
    if (
        frame_type == 0  # FrameType.AMQP
        and body_start + 3 < size
        and raw[body_start] == 0  # described
        and raw[body_start + 1] == 0x53  # smallulong descriptor
        and (decode := _PERFORMATIVE_DECODERS.get(raw[body_start + 2])) is not None
    ):
        try:
            performative, end = decode(raw, body_start + 3, size, 1)
        except RecursionError:  # as codec.decode_value
            raise DecodeError(
                body_start,
                f"nesting under {codec.MAX_DEPTH} levels",
                kind=ErrorKind.NESTING_TOO_DEEP,
                allowed=codec.MAX_DEPTH,
            ) from None
    else:
        if frame_type not in (FrameType.AMQP, FrameType.SASL):
            raise DecodeError(
                5,
                f"frame type 0 or 1, got {frame_type}",
                Cond.FRAMING_ERROR,
                ErrorKind.FRAME_TYPE,
                declared=frame_type,
            )
        performative, end = codec.decode_value(raw, body_start, size)
        if not isinstance(performative, Composite) or not _provides_frame(performative, frame_type):
            if frame_type == FrameType.AMQP:
                kind, what = ErrorKind.NOT_A_PERFORMATIVE, "an AMQP performative"
            else:
                kind, what = ErrorKind.NOT_A_SASL_BODY, "a SASL frame body"
            raise DecodeError(body_start, f"{what}, got {type(performative).__name__}", kind=kind)
    payload = raw[end:size] if end < size else b""
    if payload and performative.NAME != "transfer":
        raise DecodeError(
            end,
            f"nothing after {performative.NAME}, got {len(payload)} byte(s)",
            kind=ErrorKind.TRAILING_BYTES,
            performative=performative.NAME,
            declared=len(payload),
        )
    return _frame(frame_type, channel, performative, payload, extended, size, raw)


def _provides_frame(performative: Composite, frame_type: int) -> bool:
    wanted = "frame" if frame_type == 0 else "sasl-frame"  # FrameType.AMQP / SASL
    return wanted in performative.SPEC.provides


class FrameDecoder:
    """Incremental decoder: feed bytes in any chunking, get the same frames.

    It expects a protocol header first (`expect_header=True`), then frames; after a SASL
    outcome the caller calls `expect_protocol_header()` again for the AMQP header.
    `next_item()` returns a ProtocolHeader, a Frame, or None when more bytes are needed.
    """

    def __init__(self, expect_header: bool = True, max_frame_size: int = 0xFFFFFFFF) -> None:
        self._buffer = bytearray()
        self._pos = 0  # start of the unconsumed bytes in _buffer (compacted lazily)
        self._expect_header = expect_header
        self.max_frame_size = max_frame_size
        self.offset = 0  # stream offset of the first unconsumed byte

    def feed(self, data: bytes) -> None:
        if self._pos and self._pos >= len(self._buffer) // 2:
            del self._buffer[: self._pos]  # amortized: each byte moves O(1) times
            self._pos = 0
        self._buffer += data

    def expect_protocol_header(self) -> None:
        self._expect_header = True

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._pos

    def next_item(self) -> ProtocolHeader | Frame | None:
        buffer = self._buffer
        base = self._pos
        available = len(buffer) - base
        if self._expect_header:
            if available < PROTOCOL_HEADER_SIZE:
                if available and not b"AMQP".startswith(bytes(buffer[base : base + 4])):
                    bad = DecodeError(
                        0,
                        "protocol header 'AMQP'",
                        Cond.FRAMING_ERROR,
                        ErrorKind.BAD_PROTOCOL_HEADER,
                    )
                    self._raise_at(0, bad)
                return None
            try:
                header = ProtocolHeader.decode(buffer[base : base + PROTOCOL_HEADER_SIZE])
            except DecodeError as exc:
                self._raise_at(0, exc)
            self._consume(PROTOCOL_HEADER_SIZE)
            self._expect_header = False
            return header
        if available < FRAME_HEADER_SIZE:
            return None
        size, doff, frame_type, channel = FRAME_HEADER.unpack_from(buffer, base)
        try:
            _check_header(size, doff, self.max_frame_size)
        except DecodeError as exc:
            self._raise_at(0, exc)
        if available < size:
            return None
        raw = bytes(buffer[base : base + size])
        try:
            frame = _frame_from(raw, size, doff, frame_type, channel)
        except DecodeError as exc:
            error = exc.moved(self.offset + exc.offset)
            self._consume(size)  # the frame is whole: skip it so a lenient caller can go on
            raise error from None
        self._consume(size)
        return frame

    def _raise_at(self, base: int, exc: DecodeError) -> None:
        raise exc.moved(self.offset + base + exc.offset) from None

    def _consume(self, count: int) -> None:
        self._pos += count
        self.offset += count
        if self._pos == len(self._buffer):
            self._buffer.clear()
            self._pos = 0

    def __iter__(self) -> FrameDecoder:
        return self

    def __next__(self) -> ProtocolHeader | Frame:
        item = self.next_item()
        if item is None:
            raise StopIteration
        return item


def decode_stream(data: bytes, expect_header: bool = True) -> list[ProtocolHeader | Frame]:
    """Every header and frame in `data` (SASL then AMQP headers handled in order)."""
    decoder = FrameDecoder(expect_header)
    decoder.feed(data)
    items: list[ProtocolHeader | Frame] = []
    while (item := decoder.next_item()) is not None:
        items.append(item)
        if isinstance(item, Frame) and item.name == "sasl-outcome":
            decoder.expect_protocol_header()
    return items
