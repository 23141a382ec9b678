"""Python representations of the AMQP 1.0 primitive types (1.6) that plain Python lacks.

Owns: the typed wrappers that let a value say which AMQP type it is (ubyte, uint, symbol,
timestamp, decimal128, ...) and WRAPPERS (type name -> wrapper), plus Described and
Array. Plain Python values map as:
None -> null, bool -> boolean, int -> long, float -> double, str -> string,
bytes -> binary, uuid.UUID -> uuid, list/tuple -> list, dict -> map.
The generic decoder returns these wrappers so that decode(encode(v)) keeps the type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ubyte(int):
    __slots__ = ()


class ushort(int):
    __slots__ = ()


class uint(int):
    __slots__ = ()


class ulong(int):
    __slots__ = ()


class byte(int):
    __slots__ = ()


class short(int):
    __slots__ = ()


class int32(int):
    """AMQP `int` (32-bit signed); named int32 to keep Python's int free."""

    __slots__ = ()


class long(int):
    __slots__ = ()


class timestamp(int):
    """Milliseconds since the Unix epoch (1.6.20), signed 64-bit."""

    __slots__ = ()


class float32(float):
    """AMQP `float` (IEEE 754 binary32); plain Python float is AMQP `double`."""

    __slots__ = ()


class char(str):
    """One UTF-32 code point (1.6.16)."""

    __slots__ = ()


class symbol(str):
    """ASCII symbolic value (1.6.21)."""

    __slots__ = ()


class decimal32(bytes):
    """IEEE 754-2008 decimal32, kept as its 4 raw bytes."""

    __slots__ = ()


class decimal64(bytes):
    __slots__ = ()


class decimal128(bytes):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Described:
    """A described value whose descriptor is not a type of the spec table (1.2)."""

    descriptor: Any
    value: Any


@dataclass(frozen=True, slots=True)
class Array:
    """An AMQP array (1.6.24): one element type for every item.

    `element_type` is a primitive type name ("symbol", "uint", "list", "array", ...);
    `descriptor` is set for arrays of described types (every item shares it).
    """

    element_type: str
    items: tuple
    descriptor: Any = None

    def __init__(self, element_type: str, items: Any = (), descriptor: Any = None) -> None:
        object.__setattr__(self, "element_type", element_type)
        object.__setattr__(self, "items", tuple(items))
        object.__setattr__(self, "descriptor", descriptor)


# Fixed value ranges of the integral types, for encoders and hypothesis strategies.
INT_RANGES: dict[type, tuple[int, int]] = {
    ubyte: (0, 2**8 - 1),
    ushort: (0, 2**16 - 1),
    uint: (0, 2**32 - 1),
    ulong: (0, 2**64 - 1),
    byte: (-(2**7), 2**7 - 1),
    short: (-(2**15), 2**15 - 1),
    int32: (-(2**31), 2**31 - 1),
    long: (-(2**63), 2**63 - 1),
    timestamp: (-(2**63), 2**63 - 1),
}

# AMQP primitive type name (1.6) -> its wrapper above, for the names plain Python lacks
# (AMQP "int" is int32, AMQP "float" is float32).
WRAPPERS: dict[str, type] = {
    "ubyte": ubyte,
    "ushort": ushort,
    "uint": uint,
    "ulong": ulong,
    "byte": byte,
    "short": short,
    "int": int32,
    "long": long,
    "timestamp": timestamp,
    "float": float32,
    "char": char,
    "symbol": symbol,
    "decimal32": decimal32,
    "decimal64": decimal64,
    "decimal128": decimal128,
}
