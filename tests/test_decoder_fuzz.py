"""Decoder fuzz: arbitrary and mutated bytes only ever raise DecodeError, in bounded work.

Owns: hypothesis-driven fuzzing of codec.decode, decode_frame, FrameDecoder and
Message.decode with random bytes, mutations of valid encodings (bit flips, truncation,
inflated sizes and counts, spliced bytes) and hand-made hostile shapes (deep nesting,
zero-width arrays with huge counts, descriptor chains). Any exception other than
DecodeError (IndexError, struct.error, RecursionError, UnicodeError, OverflowError,
MemoryError, TypeError, ...) fails the test; the per-test timeout bounds the work, and
tracemalloc bounds the memory a tiny input may make the decoder allocate.
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10 import codec
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import FrameDecoder, decode_frame, encode_frame
from amqpspec.amqp10.message import Message
from amqpspec.fuzz import strategies as gen

pytestmark = pytest.mark.timeout(60)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def only_decode_errors(decode, data: bytes) -> None:
    try:
        decode(data)
    except DecodeError as exc:
        assert 0 <= exc.offset <= len(data) + 8 and exc.expected


def decode_with_frame_decoder(data: bytes) -> None:
    decoder = FrameDecoder(expect_header=False, max_frame_size=1 << 20)
    decoder.feed(data)
    for _ in range(len(data) + 1):  # each item consumes at least 8 bytes
        if decoder.next_item() is None:
            return
    raise AssertionError("FrameDecoder did not stop")


def decode_stream_with_headers(data: bytes) -> None:
    """The decoder as a peer sees it: a protocol header first (AMQP magic prepended so
    the fuzz reaches the frames), SASL outcome -> header again."""
    decoder = FrameDecoder(expect_header=True, max_frame_size=1 << 20)
    decoder.feed(b"AMQP" + data)
    for _ in range(len(data) + 2):
        item = decoder.next_item()
        if item is None:
            return
        if getattr(item, "name", None) == "sasl-outcome":
            decoder.expect_protocol_header()
    raise AssertionError("FrameDecoder did not stop")


TARGETS = {
    "FrameDecoder+headers": decode_stream_with_headers,
    "codec.decode": codec.decode,
    "decode_frame": decode_frame,
    "FrameDecoder": decode_with_frame_decoder,
    "Message.decode": Message.decode,
}


@st.composite
def valid_encodings(draw) -> bytes:
    kind = draw(st.sampled_from(["value", "composite", "message", "frame"]))
    if kind == "value":
        return codec.encode(draw(gen.values(max_leaves=8)))
    if kind == "composite":
        return draw(gen.any_composite()).encode()
    if kind == "message":
        return draw(gen.messages()).encode()
    performative = draw(gen.composite("transfer"))
    return encode_frame(performative, draw(st.integers(0, 9)), draw(st.binary(max_size=40)))


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(valid_encodings()))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "inflate8", "inflate32", "splice", "set"]))
        if not data:
            break
        index = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[index] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[index:]
        elif op == "inflate8":
            data[index] = draw(st.sampled_from([0xFF, 0xFE, 0x80, 0x7F, 0x00, 0x01]))
        elif op == "inflate32":
            data[index : index + 4] = struct.pack(
                ">I", draw(st.sampled_from([0xFFFFFFFF, 0x7FFFFFFF, 0x10000, 0x100, 0]))
            )
        elif op == "splice":
            data[index:index] = draw(st.binary(min_size=1, max_size=8))
        else:
            data[index] = draw(st.sampled_from([*sorted(codec.TYPE_OF_CODE), 0]))
    return bytes(data)


@pytest.mark.parametrize("target", sorted(TARGETS))
@FUZZ
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes(target, data):
    only_decode_errors(TARGETS[target], data)


@pytest.mark.parametrize("target", sorted(TARGETS))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=mutated())
def test_mutated_valid_encodings(target, data):
    only_decode_errors(TARGETS[target], data)


@FUZZ
@given(st.lists(st.sampled_from([*sorted(codec.TYPE_OF_CODE), 0]), max_size=60), st.data())
def test_constructor_soup(codes, data):
    """Sequences of valid constructor bytes with random size/count bytes between them."""
    raw = bytearray()
    for code in codes:
        raw.append(code)
        raw += data.draw(st.binary(max_size=3))
    for decode in TARGETS.values():
        only_decode_errors(decode, bytes(raw))


def _frame(body: bytes) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 0, 0) + body


HOSTILE = {
    "list8 nesting": b"\xc0\xff\x01" * 5000,
    "list32 nesting": b"\xd0\xff\xff\xff\xf0\x00\x00\x00\x01" * 2000,
    "map nesting": b"\xc1\xff\x02\x40" * 5000,
    "array of arrays nesting": b"\xe0\xff\x01\xe0" * 5000,
    "described chain": b"\x00" * 100_000,
    "descriptor of descriptors": b"\x00\x53\x10" * 10_000,
    "described nesting": b"\x00\x53\x77" * 10_000 + b"\x40",
    "array of nulls, huge count": b"\xf0\x00\x00\x00\x05\x7f\xff\xff\xff\x40",
    "array of list0, huge count": b"\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x45",
    "array of true, count 2^16": b"\xf0\x00\x00\x00\x05\x00\x01\x00\x00\x41",
    "list32 with 2^32-1 items": b"\xd0\x00\x00\x00\x08\xff\xff\xff\xff\x40\x40\x40\x40",
    "map32 with 2^32-2 items": b"\xd1\x00\x00\x00\x08\xff\xff\xff\xfe\x40\x40\x40\x40",
    "vbin32 of 4 GiB": b"\xb0\xff\xff\xff\xff" + b"x" * 10,
    "str32 of 2 GiB": b"\xb1\x7f\xff\xff\xff" + b"x" * 10,
    "array32 of 2^31 uints": b"\xf0\x00\x00\x00\x09\x7f\xff\xff\xff\x70\x00\x00\x00\x01",
    "composite with 255 fields": b"\x00\x53\x13\xc0\xff\xff" + b"\x40" * 254,
    "transfer with huge list": b"\x00\x53\x14\xd0\xff\xff\xff\xff\x00\x00\x00\x01\x43",
    "frame of nested lists": _frame(b"\x00\x53\x10" + b"\xc0\xff\x01" * 3000),
    "frame size 4 GiB": b"\xff\xff\xff\xff\x02\x00\x00\x00",
    "doff 255": b"\x00\x00\x00\x10\xff\x00\x00\x00" + b"\x00" * 8,
}


def _array_of_arrays_of_nulls(inner: int) -> bytes:
    # one outer array32 of `inner` array8 elements, each claiming the maximum nulls
    element = bytes([2, codec.MAX_ZERO_WIDTH_ARRAY + 1, codec.NULL])
    return b"\xf0" + struct.pack(">II", 5 + 3 * inner, inner) + b"\xe0" + element * inner


def _described_array_of_arrays(inner: int) -> bytes:
    # every inner array is an array of `accepted` (list0 elements) at the cap
    element = bytes([5, codec.MAX_ZERO_WIDTH_ARRAY, 0x00, 0x53, 0x24, codec.LIST0])
    return b"\xf0" + struct.pack(">II", 5 + 6 * inner, inner) + b"\xe0" + element * inner


HOSTILE["array of arrays of too many nulls"] = _array_of_arrays_of_nulls(20_000)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_shapes(name):
    data = HOSTILE[name]
    for decode in TARGETS.values():
        only_decode_errors(decode, data)


def test_amplification_is_bounded():
    """A zero-width array of arrays: items grow at most linearly with a small factor."""
    data = _described_array_of_arrays(5_000)  # 30 kB of input
    tracemalloc.start()
    try:
        value = codec.decode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    items = sum(len(inner.items) for inner in value.items)
    assert items == 5_000 * codec.MAX_ZERO_WIDTH_ARRAY
    assert peak < 400 * len(data)  # bytes allocated per input byte, far from gigabytes
    # the decoded composites are real (one shared Accepted per inner array)
    assert type(value.items[0].items[0]).__name__ == "Accepted"


def test_nesting_limit_is_a_decode_error_not_recursion():
    data = b"\x40"
    for _ in range(codec.MAX_DEPTH + 5):
        data = bytes([codec.LIST8, len(data) + 1, 1]) + data
    with pytest.raises(DecodeError, match="nesting"):
        codec.decode(data)
    deep_described = b"\x00\xa3\x01x" * 200 + b"\x40"
    with pytest.raises(DecodeError):
        codec.decode(deep_described)


def test_frame_decoder_survives_garbage_between_frames():
    good = encode_frame(gen.amqp_composites.Close())
    decoder = FrameDecoder(expect_header=False)
    decoder.feed(good + _frame(b"\x00\x53\x18\xc0\x02\x01\x99") + good)
    assert decoder.next_item().name == "close"
    with pytest.raises(DecodeError):
        decoder.next_item()
    assert decoder.next_item().name == "close"
