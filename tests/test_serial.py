"""Serial-number arithmetic (amqp10.serial): RFC 1982 with SERIAL_BITS = 32, as sequence-no
values use it (2.8.9), and the inclusive id ranges of dispositions (2.7.6).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from amqpspec.amqp10.serial import (
    HALF,
    MASK,
    serial_add,
    serial_count,
    serial_diff,
    serial_ge,
    serial_gt,
    serial_le,
    serial_lt,
    serial_max,
    serial_offset,
)

ids = st.integers(0, MASK)
steps = st.integers(1, HALF - 1)


def test_wrap():
    assert serial_add(MASK, 1) == 0
    assert serial_add(0, -1) == MASK
    assert serial_lt(MASK, 0) and serial_gt(0, MASK)
    assert serial_diff(MASK, 1) == 2 and serial_diff(1, MASK) == -2
    assert serial_count(MASK, 1) == 3 and serial_count(5, 5) == 1
    assert serial_offset(MASK, 1) == 2 and serial_offset(1, MASK) == MASK - 1
    assert serial_max(MASK, 0) == 0


def test_half_apart_is_neither_less_nor_greater():
    """RFC 1982 3.2: undefined for a distance of exactly 2**31; here neither."""
    assert not serial_lt(0, HALF) and not serial_gt(0, HALF)


@given(ids, steps)
def test_order_after_addition(a, n):
    b = serial_add(a, n)
    assert serial_lt(a, b) and serial_le(a, b) and serial_gt(b, a) and serial_ge(b, a)
    assert not serial_lt(b, a)
    assert serial_diff(a, b) == n and serial_diff(b, a) == -n
    assert serial_max(a, b) == b == serial_max(b, a)


@given(ids, st.integers(0, MASK))
def test_range_membership(first, span):
    last = serial_add(first, span)
    count = serial_count(first, last)
    assert count == span + 1
    assert serial_offset(first, last) == span < count
    assert serial_offset(first, serial_add(last, 1)) == count % (MASK + 1)
