"""The AMQP 1.0 type system on the wire (1.2-1.6): encode and decode every primitive
encoding, arrays, maps, lists and described values.

Owns: constructor-byte dispatch tables, the strict decoder and the encoder. Decoding is
strict and total: on ANY bytes it returns a value or raises DecodeError with the offset
(never IndexError, struct.error, RecursionError, UnicodeError, or a hang). Described
values whose descriptor is a spec type are handed to the registry that
amqp10.composites fills (so this module does not import it).

Implementation limits (hostile-input bounds, each a DecodeError): nesting deeper than
MAX_DEPTH; an array of more than MAX_ZERO_WIDTH_ARRAY items whose constructor has no
width (null/true/false/uint0/ulong0/list0). Spec types are named only by a ulong or
symbol descriptor.

Decoder functions share one signature: `dec(buf, pos, end, depth) -> (value, new_pos)`,
where `pos` points just past the constructor byte and `end` is the end of the enclosing
compound; they never read at or past `end`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.errors import DecodeError, EncodeError, ErrorKind
from amqpspec.amqp10.types import (
    INT_RANGES,
    Array,
    Described,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    long,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

MAX_DEPTH = 64  # nesting of compounds/described values before we call the input hostile
# Items of an array whose element constructor has no width (null, true, false, uint0,
# ulong0, list0): they cost no input bytes, so an array of arrays of them could make a
# small frame decode into millions of items. This implementation limit bounds that.
MAX_ZERO_WIDTH_ARRAY = 64

Decoder = Callable[[bytes, int, int, int], tuple[Any, int]]

_B = struct.Struct(">B")
_H = struct.Struct(">H")
_I = struct.Struct(">I")
_Q = struct.Struct(">Q")
_b = struct.Struct(">b")
_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")
_f = struct.Struct(">f")
_d = struct.Struct(">d")
_BB = struct.Struct(">BB")
_II = struct.Struct(">II")

# Constructor codes (1.6), one commented block as in go-amqp.
NULL = 0x40
BOOL = 0x56
TRUE = 0x41
FALSE = 0x42
UBYTE = 0x50
USHORT = 0x60
UINT = 0x70
SMALLUINT = 0x52
UINT0 = 0x43
ULONG = 0x80
SMALLULONG = 0x53
ULONG0 = 0x44
BYTE = 0x51
SHORT = 0x61
INT = 0x71
SMALLINT = 0x54
LONG = 0x81
SMALLLONG = 0x55
FLOAT = 0x72
DOUBLE = 0x82
DECIMAL32 = 0x74
DECIMAL64 = 0x84
DECIMAL128 = 0x94
CHAR = 0x73
TIMESTAMP = 0x83
UUID = 0x98
VBIN8 = 0xA0
VBIN32 = 0xB0
STR8 = 0xA1
STR32 = 0xB1
SYM8 = 0xA3
SYM32 = 0xB3
LIST0 = 0x45
LIST8 = 0xC0
LIST32 = 0xD0
MAP8 = 0xC1
MAP32 = 0xD1
ARRAY8 = 0xE0
ARRAY32 = 0xF0
DESCRIBED = 0x00

# Every constructor of each primitive type (used to validate composite fields).
CODES_OF_TYPE: dict[str, frozenset[int]] = {
    "null": frozenset({NULL}),
    "boolean": frozenset({BOOL, TRUE, FALSE}),
    "ubyte": frozenset({UBYTE}),
    "ushort": frozenset({USHORT}),
    "uint": frozenset({UINT, SMALLUINT, UINT0}),
    "ulong": frozenset({ULONG, SMALLULONG, ULONG0}),
    "byte": frozenset({BYTE}),
    "short": frozenset({SHORT}),
    "int": frozenset({INT, SMALLINT}),
    "long": frozenset({LONG, SMALLLONG}),
    "float": frozenset({FLOAT}),
    "double": frozenset({DOUBLE}),
    "decimal32": frozenset({DECIMAL32}),
    "decimal64": frozenset({DECIMAL64}),
    "decimal128": frozenset({DECIMAL128}),
    "char": frozenset({CHAR}),
    "timestamp": frozenset({TIMESTAMP}),
    "uuid": frozenset({UUID}),
    "binary": frozenset({VBIN8, VBIN32}),
    "string": frozenset({STR8, STR32}),
    "symbol": frozenset({SYM8, SYM32}),
    "list": frozenset({LIST0, LIST8, LIST32}),
    "map": frozenset({MAP8, MAP32}),
    "array": frozenset({ARRAY8, ARRAY32}),
}
TYPE_OF_CODE: dict[int, str] = {c: t for t, codes in CODES_OF_TYPE.items() for c in codes}


# --------------------------------------------------------------------------- decoding


def _need(pos: int, n: int, end: int, what: str) -> None:
    if pos + n > end:
        raise DecodeError(
            pos,
            f"{n} byte(s) of {what}, only {max(end - pos, 0)} left",
            kind=ErrorKind.SHORT_INPUT,
            declared=n,
            limit=max(end - pos, 0),
        )


def _fixed(unpacker: struct.Struct, wrap: type | None, what: str) -> Decoder:
    size = unpacker.size
    unpack_from = unpacker.unpack_from

    if wrap is None:

        def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
            if pos + size > end:
                _need(pos, size, end, what)
            return unpack_from(buf, pos)[0], pos + size

    else:

        def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
            if pos + size > end:
                _need(pos, size, end, what)
            return wrap(unpack_from(buf, pos)[0]), pos + size

    return dec


def _constant(value: Any) -> Decoder:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        return value, pos

    return dec


def _dec_bool(buf: bytes, pos: int, end: int, depth: int) -> tuple[bool, int]:
    if pos >= end:
        _need(pos, 1, end, "boolean")
    octet = buf[pos]
    if octet > 1:
        raise DecodeError(
            pos, f"boolean 0x00 or 0x01, got 0x{octet:02x}", kind=ErrorKind.INVALID_VALUE
        )
    return octet == 1, pos + 1


def _raw(width: int, wrap: type, what: str) -> Decoder:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        if pos + width > end:
            _need(pos, width, end, what)
        return wrap(buf[pos : pos + width]), pos + width

    return dec


def _dec_char(buf: bytes, pos: int, end: int, depth: int) -> tuple[char, int]:
    if pos + 4 > end:
        _need(pos, 4, end, "char")
    code_point = _I.unpack_from(buf, pos)[0]
    if code_point > 0x10FFFF or 0xD800 <= code_point <= 0xDFFF:
        raise DecodeError(
            pos, f"a Unicode scalar value, got 0x{code_point:x}", kind=ErrorKind.INVALID_VALUE
        )
    return char(chr(code_point)), pos + 4


def _dec_uuid(buf: bytes, pos: int, end: int, depth: int) -> tuple[uuid.UUID, int]:
    if pos + 16 > end:
        _need(pos, 16, end, "uuid")
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def _variable(width: int, kind: str) -> Decoder:
    """vbin/str/sym 8 and 32: a length prefix then that many bytes."""
    length_of = _B.unpack_from if width == 1 else _I.unpack_from

    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
        if pos + width > end:
            _need(pos, width, end, f"{kind} length")
        length = length_of(buf, pos)[0]
        start = pos + width
        stop = start + length
        if stop > end:
            raise DecodeError(
                pos,
                f"{length} byte(s) of {kind}, only {end - start} left",
                kind=ErrorKind.SHORT_INPUT,
                declared=length,
                limit=end - start,
            )
        raw = bytes(buf[start:stop])
        if kind == "binary":
            return raw, stop
        try:
            text = raw.decode("utf-8" if kind == "string" else "ascii")
        except UnicodeDecodeError as exc:
            raise DecodeError(
                start + exc.start, f"valid {kind} bytes", kind=ErrorKind.INVALID_ENCODING
            ) from None
        return (text if kind == "string" else symbol(text)), stop

    return dec


def _compound_header(buf: bytes, pos: int, end: int, width: int, what: str) -> tuple[int, int, int]:
    """size and count of a list/map/array; returns (count, body_pos, compound_end)."""
    header = 2 * width
    if pos + header > end:
        _need(pos, header, end, f"{what} size and count")
    if width == 1:
        size, count = _BB.unpack_from(buf, pos)
    else:
        size, count = _II.unpack_from(buf, pos)
    stop = pos + width + size
    if size < width or stop > end:
        raise DecodeError(
            pos,
            f"{what} size {size} within {end - pos - width} byte(s)",
            kind=ErrorKind.COMPOUND_OVERRUN,
            declared=size,
            limit=end - pos - width,
        )
    return count, pos + header, stop


def _dec_list0(buf: bytes, pos: int, end: int, depth: int) -> tuple[list, int]:
    return [], pos


def _list(width: int) -> Decoder:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[list, int]:
        count, pos, stop = _compound_header(buf, pos, end, width, "list")
        if count > stop - pos:
            raise DecodeError(
                pos,
                f"list of {count} items in {stop - pos} byte(s)",
                kind=ErrorKind.COUNT_EXCEEDS_SIZE,
                declared=count,
                limit=stop - pos,
            )
        if depth >= MAX_DEPTH:
            raise DecodeError(
                pos,
                f"nesting under {MAX_DEPTH} levels",
                kind=ErrorKind.NESTING_TOO_DEEP,
                allowed=MAX_DEPTH,
            )
        items = []
        append = items.append
        table = DECODERS
        for _ in range(count):
            if pos >= stop:
                _need(pos, 1, stop, "list item constructor")
            value, pos = table[buf[pos]](buf, pos + 1, stop, depth + 1)
            append(value)
        if pos != stop:
            raise DecodeError(pos, f"list to end at byte {stop}", kind=ErrorKind.COMPOUND_END)
        return items, pos

    return dec


def _map(width: int) -> Decoder:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[dict, int]:
        count, pos, stop = _compound_header(buf, pos, end, width, "map")
        if count % 2:
            raise DecodeError(
                pos,
                f"an even number of map items, got {count}",
                kind=ErrorKind.ODD_MAP_COUNT,
                declared=count,
            )
        if count > stop - pos:
            raise DecodeError(
                pos,
                f"map of {count} items in {stop - pos} byte(s)",
                kind=ErrorKind.COUNT_EXCEEDS_SIZE,
                declared=count,
                limit=stop - pos,
            )
        if depth >= MAX_DEPTH:
            raise DecodeError(
                pos,
                f"nesting under {MAX_DEPTH} levels",
                kind=ErrorKind.NESTING_TOO_DEEP,
                allowed=MAX_DEPTH,
            )
        result: dict = {}
        table = DECODERS
        for _ in range(count // 2):
            key_pos = pos
            if pos >= stop:
                _need(pos, 1, stop, "map key constructor")
            key, pos = table[buf[pos]](buf, pos + 1, stop, depth + 1)
            if pos >= stop:
                _need(pos, 1, stop, "map value constructor")
            value, pos = table[buf[pos]](buf, pos + 1, stop, depth + 1)
            try:
                if key in result:
                    raise DecodeError(
                        key_pos,
                        f"unique map keys, {key!r} repeats",
                        kind=ErrorKind.DUPLICATE_MAP_KEY,
                    )
                result[key] = value
            except TypeError:
                raise DecodeError(
                    key_pos, "a hashable map key", kind=ErrorKind.UNHASHABLE_MAP_KEY
                ) from None
        if pos != stop:
            raise DecodeError(pos, f"map to end at byte {stop}", kind=ErrorKind.COMPOUND_END)
        return result, pos

    return dec


def _array(width: int) -> Decoder:
    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Array, int]:
        count, pos, stop = _compound_header(buf, pos, end, width, "array")
        if depth >= MAX_DEPTH:
            raise DecodeError(
                pos,
                f"nesting under {MAX_DEPTH} levels",
                kind=ErrorKind.NESTING_TOO_DEEP,
                allowed=MAX_DEPTH,
            )
        if pos >= stop:
            _need(pos, 1, stop, "array element constructor")
        descriptor = None
        code = buf[pos]
        pos += 1
        if code == DESCRIBED:
            if pos >= stop:
                _need(pos, 1, stop, "array element descriptor")
            descriptor, pos = DECODERS[buf[pos]](buf, pos + 1, stop, depth + 1)
            if pos >= stop:
                _need(pos, 1, stop, "array element constructor")
            code = buf[pos]
            pos += 1
        element_type = TYPE_OF_CODE.get(code)
        if element_type is None:
            raise DecodeError(
                pos - 1,
                f"a primitive element constructor, got 0x{code:02x}",
                kind=ErrorKind.ARRAY_ELEMENT_CONSTRUCTOR,
            )
        if code in _ZERO_WIDTH:
            return _zero_width_array(code, element_type, count, descriptor, pos, stop)
        if count > stop - pos:
            raise DecodeError(
                pos,
                f"array of {count} items in {stop - pos} byte(s)",
                kind=ErrorKind.COUNT_EXCEEDS_SIZE,
                declared=count,
                limit=stop - pos,
            )
        element = DECODERS[code]
        items = []
        append = items.append
        for _ in range(count):
            value, pos = element(buf, pos, stop, depth + 1)
            append(value)
        if pos != stop:
            raise DecodeError(pos, f"array to end at byte {stop}", kind=ErrorKind.COMPOUND_END)
        if descriptor is not None:
            items = [_described_value(descriptor, item, pos) for item in items]
        return Array(element_type, items, descriptor), pos

    return dec


def _zero_width_array(
    code: int, element_type: str, count: int, descriptor: Any, pos: int, stop: int
) -> tuple[Array, int]:
    """Elements with no bytes (null, true, false, uint0, ulong0, list0): `count` costs no
    input, so it is capped (an implementation limit, MAX_ZERO_WIDTH_ARRAY) to keep the
    work of decoding proportional to the input, and the one value is shared."""
    if count > MAX_ZERO_WIDTH_ARRAY:
        raise DecodeError(
            pos,
            f"at most {MAX_ZERO_WIDTH_ARRAY} zero-width array items",
            kind=ErrorKind.ZERO_WIDTH_ARRAY_LIMIT,
            declared=count,
            allowed=MAX_ZERO_WIDTH_ARRAY,
        )
    if pos != stop:
        raise DecodeError(pos, f"array to end at byte {stop}", kind=ErrorKind.COMPOUND_END)
    if not count:
        return Array(element_type, (), descriptor), pos
    value = DECODERS[code](b"", 0, 0, 0)[0]
    if descriptor is not None:
        value = _described_value(descriptor, value, pos)
    elif code == LIST0:
        return Array(element_type, [[] for _ in range(count)], descriptor), pos
    return Array(element_type, (value,) * count, descriptor), pos


# Described values: amqp10.composites registers a builder per descriptor (code and name).
DescribedBuilder = Callable[[Any, int], Any]
DESCRIBED_BUILDERS: dict[Any, DescribedBuilder] = {}


def _described_value(descriptor: Any, value: Any, pos: int) -> Any:
    # 1.2 / 1.5: a spec type is named by its ulong code or its symbol, nothing else.
    kind = type(descriptor)
    builder = DESCRIBED_BUILDERS.get(descriptor) if kind is ulong or kind is symbol else None
    if builder is None:
        try:
            return Described(descriptor, value)
        except TypeError:  # pragma: no cover - dataclass never raises on construction
            raise DecodeError(pos, "a described value", kind=ErrorKind.INVALID_DESCRIBED) from None
    return builder(value, pos)


def _dec_described(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
    if depth >= MAX_DEPTH:
        raise DecodeError(
            pos,
            f"nesting under {MAX_DEPTH} levels",
            kind=ErrorKind.NESTING_TOO_DEEP,
            allowed=MAX_DEPTH,
        )
    if pos + 2 < end and buf[pos] == SMALLULONG:
        # Fast path: every spec type has a descriptor code < 256, sent as smallulong.
        fast = SMALL_DESCRIBED_DECODERS.get(buf[pos + 1])
        if fast is not None:
            return fast(buf, pos + 2, end, depth + 1)
    if pos >= end:
        _need(pos, 1, end, "descriptor constructor")
    code = buf[pos]
    if code == DESCRIBED:
        raise DecodeError(
            pos, "a descriptor that is not itself described", kind=ErrorKind.NESTED_DESCRIPTOR
        )
    descriptor, pos = DECODERS[code](buf, pos + 1, end, depth + 1)
    if pos >= end:
        _need(pos, 1, end, "described value constructor")
    value_pos = pos
    kind = type(descriptor)
    fast = COMPOSITE_BODY_DECODERS.get(descriptor) if kind is ulong or kind is symbol else None
    if fast is not None:
        return fast(buf, pos, end, depth + 1)
    value, pos = DECODERS[buf[pos]](buf, pos + 1, end, depth + 1)
    return _described_value(descriptor, value, value_pos), pos


# Composite types decode straight from the list bytes (amqp10.composites registers these).
COMPOSITE_BODY_DECODERS: dict[Any, Decoder] = {}
# Descriptor code (sent as smallulong) -> decoder of the described value that follows,
# for every spec composite and section (amqp10.composites registers these).
SMALL_DESCRIBED_DECODERS: dict[int, Decoder] = {}


def _invalid(buf: bytes, pos: int, end: int, depth: int) -> tuple[Any, int]:
    raise DecodeError(
        pos - 1,
        f"a constructor byte, got reserved 0x{buf[pos - 1]:02x}",
        kind=ErrorKind.RESERVED_CONSTRUCTOR,
    )


DECODERS: list[Decoder] = [_invalid] * 256
_ZERO_WIDTH = frozenset({NULL, TRUE, FALSE, UINT0, ULONG0, LIST0})


def _install_decoders() -> None:
    table = {
        NULL: _constant(None),
        TRUE: _constant(True),
        FALSE: _constant(False),
        BOOL: _dec_bool,
        UBYTE: _fixed(_B, ubyte, "ubyte"),
        USHORT: _fixed(_H, ushort, "ushort"),
        UINT: _fixed(_I, uint, "uint"),
        SMALLUINT: _fixed(_B, uint, "smalluint"),
        UINT0: _constant(uint(0)),
        ULONG: _fixed(_Q, ulong, "ulong"),
        SMALLULONG: _fixed(_B, ulong, "smallulong"),
        ULONG0: _constant(ulong(0)),
        BYTE: _fixed(_b, byte, "byte"),
        SHORT: _fixed(_h, short, "short"),
        INT: _fixed(_i, int32, "int"),
        SMALLINT: _fixed(_b, int32, "smallint"),
        LONG: _fixed(_q, long, "long"),
        SMALLLONG: _fixed(_b, long, "smalllong"),
        FLOAT: _fixed(_f, float32, "float"),
        DOUBLE: _fixed(_d, None, "double"),
        DECIMAL32: _raw(4, decimal32, "decimal32"),
        DECIMAL64: _raw(8, decimal64, "decimal64"),
        DECIMAL128: _raw(16, decimal128, "decimal128"),
        CHAR: _dec_char,
        TIMESTAMP: _fixed(_q, timestamp, "timestamp"),
        UUID: _dec_uuid,
        VBIN8: _variable(1, "binary"),
        VBIN32: _variable(4, "binary"),
        STR8: _variable(1, "string"),
        STR32: _variable(4, "string"),
        SYM8: _variable(1, "symbol"),
        SYM32: _variable(4, "symbol"),
        LIST0: _dec_list0,
        LIST8: _list(1),
        LIST32: _list(4),
        MAP8: _map(1),
        MAP32: _map(4),
        ARRAY8: _array(1),
        ARRAY32: _array(4),
        DESCRIBED: _dec_described,
    }
    for code, decoder in table.items():
        DECODERS[code] = decoder


_install_decoders()


def decode_value(buf: bytes, pos: int = 0, end: int | None = None) -> tuple[Any, int]:
    """Decode one value at `pos`; return (value, position after it)."""
    if end is None:
        end = len(buf)
    if pos >= end:
        raise DecodeError(
            pos, "a constructor byte, got end of input", kind=ErrorKind.MISSING_CONSTRUCTOR
        )
    try:
        return DECODERS[buf[pos]](buf, pos + 1, end, 0)
    except RecursionError:  # defensive: MAX_DEPTH keeps us far from the limit
        raise DecodeError(
            pos,
            f"nesting under {MAX_DEPTH} levels",
            kind=ErrorKind.NESTING_TOO_DEEP,
            allowed=MAX_DEPTH,
        ) from None


_FIXED_WIDTH = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}  # subcategory -> bytes
_SIZE_WIDTH = {0xA: 1, 0xB: 4, 0xC: 1, 0xD: 4, 0xE: 1, 0xF: 4}  # variable/compound/array


def value_end(buf: bytes, pos: int = 0, end: int | None = None) -> int:
    """Where the encoded value at `pos` ends, from its constructor's subcategory alone
    (1.2: the upper nibble of a format code gives its width class, so an unassigned code
    or a value of the wrong type can still be stepped over); a described value is its
    descriptor and then its value. Nothing is decoded or checked beyond the sizes.
    DecodeError if the value runs past `end` or its subcategory is reserved."""
    return _value_end(buf, pos, len(buf) if end is None else end, 0)


def _value_end(buf: bytes, pos: int, end: int, depth: int) -> int:
    if pos >= end:
        raise DecodeError(
            pos, "a constructor byte, got end of input", kind=ErrorKind.MISSING_CONSTRUCTOR
        )
    code = buf[pos]
    if code == DESCRIBED:
        if depth >= MAX_DEPTH:
            raise DecodeError(
                pos,
                f"nesting under {MAX_DEPTH} levels",
                kind=ErrorKind.NESTING_TOO_DEEP,
                allowed=MAX_DEPTH,
            )
        descriptor_end = _value_end(buf, pos + 1, end, depth + 1)
        return _value_end(buf, descriptor_end, end, depth + 1)
    nibble = code >> 4
    if nibble in _FIXED_WIDTH:
        stop = pos + 1 + _FIXED_WIDTH[nibble]
    elif nibble in _SIZE_WIDTH:
        width = _SIZE_WIDTH[nibble]
        _need(pos + 1, width, end, "size")
        size = (_B if width == 1 else _I).unpack_from(buf, pos + 1)[0]
        stop = pos + 1 + width + size
    else:
        raise DecodeError(
            pos,
            f"a constructor byte, got reserved 0x{code:02x}",
            kind=ErrorKind.RESERVED_CONSTRUCTOR,
        )
    if stop > end:
        raise DecodeError(
            pos,
            f"a value ending at byte {stop}, input ends at {end}",
            kind=ErrorKind.VALUE_OVERRUN,
            limit=end,
        )
    return stop


def decode(buf: bytes) -> Any:
    """Decode exactly one value that fills `buf`."""
    value, pos = decode_value(buf)
    if pos != len(buf):
        raise DecodeError(
            pos,
            f"end of input, {len(buf) - pos} byte(s) remain",
            kind=ErrorKind.TRAILING_BYTES,
            declared=len(buf) - pos,
        )
    return value


# --------------------------------------------------------------------------- encoding

Encoder = Callable[[bytearray, Any], None]


def _check_range(value: int, kind: type, name: str) -> None:
    low, high = INT_RANGES[kind]
    if not low <= value <= high:
        raise EncodeError(f"{value} out of range for {name}")


def enc_null(out: bytearray, value: Any) -> None:
    out.append(NULL)


def enc_boolean(out: bytearray, value: Any) -> None:
    out.append(TRUE if value else FALSE)


def enc_ubyte(out: bytearray, value: int) -> None:
    if not 0 <= value <= 0xFF:
        _check_range(value, ubyte, "ubyte")
    out += _BB.pack(UBYTE, value)


def enc_ushort(out: bytearray, value: int) -> None:
    if not 0 <= value <= 0xFFFF:
        _check_range(value, ushort, "ushort")
    out.append(USHORT)
    out += _H.pack(value)


def enc_uint(out: bytearray, value: int) -> None:
    if value == 0:
        out.append(UINT0)
    elif 0 < value < 256:
        out += _BB.pack(SMALLUINT, value)
    else:
        _check_range(value, uint, "uint")
        out.append(UINT)
        out += _I.pack(value)


def enc_ulong(out: bytearray, value: int) -> None:
    if value == 0:
        out.append(ULONG0)
    elif 0 < value < 256:
        out += _BB.pack(SMALLULONG, value)
    else:
        _check_range(value, ulong, "ulong")
        out.append(ULONG)
        out += _Q.pack(value)


def enc_byte(out: bytearray, value: int) -> None:
    _check_range(value, byte, "byte")
    out.append(BYTE)
    out += _b.pack(value)


def enc_short(out: bytearray, value: int) -> None:
    _check_range(value, short, "short")
    out.append(SHORT)
    out += _h.pack(value)


def enc_int(out: bytearray, value: int) -> None:
    if -128 <= value <= 127:
        out.append(SMALLINT)
        out += _b.pack(value)
    else:
        _check_range(value, int32, "int")
        out.append(INT)
        out += _i.pack(value)


def enc_long(out: bytearray, value: int) -> None:
    if -128 <= value <= 127:
        out.append(SMALLLONG)
        out += _b.pack(value)
    else:
        _check_range(value, long, "long")
        out.append(LONG)
        out += _q.pack(value)


def enc_float(out: bytearray, value: float) -> None:
    try:
        packed = _f.pack(value)
    except OverflowError:
        raise EncodeError(f"{value} out of range for float (binary32)") from None
    out.append(FLOAT)
    out += packed


def enc_double(out: bytearray, value: float) -> None:
    out.append(DOUBLE)
    out += _d.pack(value)


def _enc_raw(code: int, width: int, name: str) -> Encoder:
    def enc(out: bytearray, value: bytes) -> None:
        if len(value) != width:
            raise EncodeError(f"{name} takes {width} bytes, got {len(value)}")
        out.append(code)
        out += value

    return enc


enc_decimal32 = _enc_raw(DECIMAL32, 4, "decimal32")
enc_decimal64 = _enc_raw(DECIMAL64, 8, "decimal64")
enc_decimal128 = _enc_raw(DECIMAL128, 16, "decimal128")


def enc_char(out: bytearray, value: str) -> None:
    if len(value) != 1:
        raise EncodeError(f"char takes one code point, got {len(value)}")
    if 0xD800 <= ord(value) <= 0xDFFF:
        raise EncodeError("char must be a Unicode scalar value, not a surrogate (1.6.16)")
    out.append(CHAR)
    out += _I.pack(ord(value))


def enc_timestamp(out: bytearray, value: int) -> None:
    _check_range(value, timestamp, "timestamp")
    out.append(TIMESTAMP)
    out += _q.pack(value)


def enc_uuid(out: bytearray, value: uuid.UUID | bytes) -> None:
    raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
    if len(raw) != 16:
        raise EncodeError(f"uuid takes 16 bytes, got {len(raw)}")
    out.append(UUID)
    out += raw


def enc_binary(out: bytearray, value: bytes) -> None:
    length = len(value)
    if length < 256:
        out += _BB.pack(VBIN8, length)
    else:
        out.append(VBIN32)
        out += _I.pack(length)
    out += value


def enc_string(out: bytearray, value: str) -> None:
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodeError(f"string is not valid Unicode: {exc}") from None
    length = len(raw)
    if length < 256:
        out += _BB.pack(STR8, length)
    else:
        out.append(STR32)
        out += _I.pack(length)
    out += raw


def enc_symbol(out: bytearray, value: str) -> None:
    try:
        raw = value.encode("ascii")
    except UnicodeEncodeError:
        raise EncodeError(f"symbol must be ASCII: {value!r}") from None
    length = len(raw)
    if length < 256:
        out += _BB.pack(SYM8, length)
    else:
        out.append(SYM32)
        out += _I.pack(length)
    out += raw


def write_compound(out: bytearray, small: int, large: int, count: int, body: bytes) -> None:
    """list/map header + body, choosing the 8-bit form when size and count fit."""
    size = len(body)
    if size + 1 < 256 and count < 256:
        out += struct.pack(">BBB", small, size + 1, count)
    else:
        out.append(large)
        out += _II.pack(size + 4, count)
    out += body


def enc_list(out: bytearray, value: list | tuple) -> None:
    if not value:
        out.append(LIST0)
        return
    body = bytearray()
    for item in value:
        encode_into(body, item)
    write_compound(out, LIST8, LIST32, len(value), body)


def enc_map(out: bytearray, value: dict) -> None:
    body = bytearray()
    for key, item in value.items():
        encode_into(body, key)
        encode_into(body, item)
    write_compound(out, MAP8, MAP32, 2 * len(value), body)


def enc_described(out: bytearray, value: Described) -> None:
    out.append(DESCRIBED)
    encode_into(out, value.descriptor)
    encode_into(out, value.value)


# Array elements: one constructor for all items; the element bytes follow without it.
def _element_bytes(element_type: str, items: tuple) -> tuple[int, bytes]:
    """(constructor, concatenated element bodies) for an array of `element_type`."""
    encoder = ENCODERS_BY_TYPE.get(element_type)
    if encoder is None:
        raise EncodeError(f"cannot make an array of {element_type!r}")
    if element_type == "null":
        if len(items) > MAX_ZERO_WIDTH_ARRAY:
            raise EncodeError(f"an array of more than {MAX_ZERO_WIDTH_ARRAY} nulls")
        return NULL, b""
    if element_type == "boolean":
        return BOOL, bytes(1 if item else 0 for item in items)
    chunks = []
    for item in items:
        if type(item) is PreEncoded:
            chunks.append(item)
            continue
        one = bytearray()
        try:
            encoder(one, item)
        except (AttributeError, TypeError, ValueError) as exc:
            if isinstance(exc, EncodeError):
                raise
            raise EncodeError(f"array of {element_type}: cannot encode {item!r}") from None
        chunks.append(one)
    wide = _WIDE_CONSTRUCTOR.get(element_type)
    if wide is None:  # fixed-width types with a single constructor
        return (chunks[0][0] if chunks else CODES_OF_TYPE_PRIMARY[element_type]), b"".join(
            bytes(chunk[1:]) for chunk in chunks
        )
    return wide, b"".join(_widen(element_type, chunk) for chunk in chunks)


def _widen(element_type: str, chunk: bytearray) -> bytes:
    """Re-express one encoded item with the wide constructor (no constructor byte)."""
    code = chunk[0]
    body = bytes(chunk[1:])
    if element_type in {"binary", "string", "symbol"}:
        if code in (VBIN8, STR8, SYM8):
            return _I.pack(body[0]) + body[1:]
        return body
    if element_type in {"list", "map", "array"}:
        if code == LIST0:
            return _II.pack(4, 0)
        if code in (LIST8, MAP8, ARRAY8):
            size, count = body[0], body[1]
            return _II.pack(size + 3, count) + body[2:]
        return body
    if element_type in {"uint", "ulong"}:
        full = 4 if element_type == "uint" else 8
        number = 0 if code in (UINT0, ULONG0) else int.from_bytes(body, "big")
        return number.to_bytes(full, "big")
    if element_type in {"int", "long"}:
        full = 4 if element_type == "int" else 8
        return int.from_bytes(body, "big", signed=True).to_bytes(full, "big", signed=True)
    return body  # pragma: no cover - every widened type is handled above


_WIDE_CONSTRUCTOR = {
    "binary": VBIN32,
    "string": STR32,
    "symbol": SYM32,
    "list": LIST32,
    "map": MAP32,
    "array": ARRAY32,
    "uint": UINT,
    "ulong": ULONG,
    "int": INT,
    "long": LONG,
}
CODES_OF_TYPE_PRIMARY = {
    "ubyte": UBYTE,
    "ushort": USHORT,
    "byte": BYTE,
    "short": SHORT,
    "float": FLOAT,
    "double": DOUBLE,
    "decimal32": DECIMAL32,
    "decimal64": DECIMAL64,
    "decimal128": DECIMAL128,
    "char": CHAR,
    "timestamp": TIMESTAMP,
    "uuid": UUID,
}


class PreEncoded(bytes):
    """One value already encoded (constructor + body), e.g. a composite's list inside an
    array of described items; array encoding re-expresses it with the array's constructor."""

    __slots__ = ()


def _identity(item: Any) -> Any:
    return item


# Set by amqp10.composites: the bare value of a composite/section inside a described array.
UNWRAP_DESCRIBED: Callable[[Any], Any] = _identity


def enc_array(out: bytearray, value: Array) -> None:
    items = value.items
    if value.descriptor is not None:
        items = tuple(UNWRAP_DESCRIBED(item) for item in items)
    constructor, elements = _element_bytes(value.element_type, items)
    head = bytearray()
    if value.descriptor is not None:
        head.append(DESCRIBED)
        encode_into(head, value.descriptor)
    head.append(constructor)
    body = bytes(head) + elements
    count = len(value.items)
    if len(body) + 1 < 256 and count < 256:
        out += struct.pack(">BBB", ARRAY8, len(body) + 1, count)
    else:
        out.append(ARRAY32)
        out += _II.pack(len(body) + 4, count)
    out += body


def enc_array_of(out: bytearray, element_type: str, items: list | tuple) -> None:
    """Encode a Python sequence as an array of `element_type` (multiple=true fields)."""
    enc_array(out, Array(element_type, items))


ENCODERS_BY_TYPE: dict[str, Encoder] = {
    "null": enc_null,
    "boolean": enc_boolean,
    "ubyte": enc_ubyte,
    "ushort": enc_ushort,
    "uint": enc_uint,
    "ulong": enc_ulong,
    "byte": enc_byte,
    "short": enc_short,
    "int": enc_int,
    "long": enc_long,
    "float": enc_float,
    "double": enc_double,
    "decimal32": enc_decimal32,
    "decimal64": enc_decimal64,
    "decimal128": enc_decimal128,
    "char": enc_char,
    "timestamp": enc_timestamp,
    "uuid": enc_uuid,
    "binary": enc_binary,
    "string": enc_string,
    "symbol": enc_symbol,
    "list": enc_list,
    "map": enc_map,
    "array": enc_array,
}

# Python class -> encoder; subclasses (composites) are resolved through `encode_into`.
ENCODERS_BY_CLASS: dict[type, Encoder] = {
    type(None): enc_null,
    bool: enc_boolean,
    int: enc_long,
    float: enc_double,
    str: enc_string,
    bytes: enc_binary,
    bytearray: enc_binary,
    memoryview: lambda out, v: enc_binary(out, bytes(v)),
    list: enc_list,
    tuple: enc_list,
    dict: enc_map,
    uuid.UUID: enc_uuid,
    ubyte: enc_ubyte,
    ushort: enc_ushort,
    uint: enc_uint,
    ulong: enc_ulong,
    byte: enc_byte,
    short: enc_short,
    int32: enc_int,
    long: enc_long,
    timestamp: enc_timestamp,
    float32: enc_float,
    char: enc_char,
    symbol: enc_symbol,
    decimal32: enc_decimal32,
    decimal64: enc_decimal64,
    decimal128: enc_decimal128,
    Described: enc_described,
    Array: enc_array,
}


def encode_into(out: bytearray, value: Any) -> None:
    """Append the encoding of `value`, its AMQP type inferred from its Python class."""
    encoder = ENCODERS_BY_CLASS.get(type(value))
    if encoder is None:
        encode_self = getattr(value, "encode_into", None)
        if encode_self is None:
            raise EncodeError(f"no AMQP type for Python {type(value).__name__}")
        encode_self(out)
        return
    encoder(out, value)


def encode(value: Any) -> bytes:
    """The AMQP encoding of one value."""
    out = bytearray()
    encode_into(out, value)
    return bytes(out)
