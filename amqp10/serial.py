"""Serial-number arithmetic (RFC 1982, SERIAL_BITS = 32) for sequence-no values (2.8.9).

Owns: comparison, addition and ranges of delivery-count, delivery-id, transfer-id and the
like, which wrap at 2**32. `serial_lt(a, b)` is undefined by RFC 1982 when a and b are exactly
2**31 apart; here it returns False for that case (neither is "less").
"""

from __future__ import annotations

MOD = 1 << 32
HALF = 1 << 31
MASK = MOD - 1


def serial_add(a: int, n: int) -> int:
    """a + n mod 2**32 (n may be negative)."""
    return (a + n) & MASK


def serial_diff(a: int, b: int) -> int:
    """The signed distance b - a in (-2**31, 2**31]; positive when b is after a."""
    d = (b - a) & MASK
    return d - MOD if d > HALF else d


def serial_offset(first: int, value: int) -> int:
    """How far `value` is after `first`, counting forward: (value - first) mod 2**32, in
    [0, 2**32). `serial_offset(first, v) < n` says v is one of the n ids from `first`."""
    return (value - first) & MASK


def serial_count(first: int, last: int) -> int:
    """The number of ids in the inclusive range first..last (a disposition's range,
    2.7.6), counting forward across the wrap: 1 when first == last."""
    return ((last - first) & MASK) + 1


def serial_lt(a: int, b: int) -> bool:
    """a < b in serial arithmetic."""
    d = (b - a) & MASK
    return 0 < d < HALF


def serial_le(a: int, b: int) -> bool:
    return a == b or serial_lt(a, b)


def serial_gt(a: int, b: int) -> bool:
    return serial_lt(b, a)


def serial_ge(a: int, b: int) -> bool:
    return a == b or serial_lt(b, a)


def serial_max(a: int, b: int) -> int:
    return b if serial_lt(a, b) else a
