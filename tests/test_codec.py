"""Codec (amqp10.codec, amqp10.types): round trips, exact encodings at every size switch-over,
explicitly wide encodings, strictness of the decoder and the encoder's range checks.

Spec: AMQP 1.0 part 1 (types): 1.2 described types, 1.6 primitive encodings.
"""

from __future__ import annotations

import math
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10 import codec
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.amqp10.types import (
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
from amqpspec.fuzz import strategies as gen

FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def roundtrip(value):
    data = codec.encode(value)
    decoded = codec.decode(data)
    assert gen.typed_repr(decoded) == gen.typed_repr(value)
    # decode_value reports the position just past the value, also inside a larger buffer.
    assert codec.decode_value(b"\xff" + data + b"\xff", 1) == (decoded, len(data) + 1)
    return data


@pytest.mark.parametrize("type_name", gen.SCALAR_TYPES)
@FAST
@given(data=st.data())
def test_primitive_roundtrip(type_name, data):
    value = data.draw(gen.primitive(type_name, max_size=300))
    encoded = roundtrip(value)
    allowed = codec.CODES_OF_TYPE[type_name]
    assert encoded[0] in allowed


@pytest.mark.parametrize("element", [*gen.SCALAR_TYPES, "list", "map"])
@FAST
@given(data=st.data())
def test_array_roundtrip(element, data):
    array = data.draw(gen._array_of(element))
    encoded = roundtrip(array)
    assert encoded[0] in (codec.ARRAY8, codec.ARRAY32)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(gen.values())
def test_any_value_roundtrip(value):
    roundtrip(value)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(gen.values(), st.binary(max_size=4))
def test_value_end_steps_over_any_value(value, after):
    data = codec.encode(value)
    assert codec.value_end(data + after) == len(data)
    if len(data) > 1:
        with pytest.raises(DecodeError):
            codec.value_end(data, 0, len(data) - 1)


def test_value_end_needs_no_valid_contents_only_sizes():
    assert codec.value_end(b"\xa1\x02\xff\xfe") == 4  # bad UTF-8 is still 4 bytes
    assert codec.value_end(b"\x5f\x00\x40") == 2  # unassigned code of a 1-byte width
    assert codec.value_end(b"\x00\x53\x10\xc0\x01\x00") == 6  # a described list
    for reserved in (b"\x10", b"\x2f", b"\x3a"):
        with pytest.raises(DecodeError):
            codec.value_end(reserved)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(gen.arrays())
def test_arrays_of_arrays_and_described_roundtrip(array):
    roundtrip(array)


@pytest.mark.parametrize(
    "value, wire",
    [
        (float("nan"), b"\x82\x7f\xf8\x00\x00\x00\x00\x00\x00"),
        (float32(float("nan")), b"\x72\x7f\xc0\x00\x00"),
        (float("inf"), b"\x82\x7f\xf0\x00\x00\x00\x00\x00\x00"),
        (float32(float("-inf")), b"\x72\xff\x80\x00\x00"),
        (-0.0, b"\x82\x80\x00\x00\x00\x00\x00\x00\x00"),
    ],
)
def test_float_specials(value, wire):
    assert codec.encode(value) == wire
    decoded = codec.decode(wire)
    assert type(decoded) is type(value)
    if math.isnan(value):
        assert math.isnan(decoded)
    else:
        assert decoded == value and math.copysign(1, decoded) == math.copysign(1, value)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**23 - 1), st.integers(0, 1))
def test_float32_nan_payloads_decode_as_nan(mantissa, sign):
    bits = (sign << 31) | (0xFF << 23) | (mantissa or 1)
    decoded = codec.decode(b"\x72" + struct.pack(">I", bits))
    assert type(decoded) is float32 and math.isnan(decoded)


# ------------------------------------------------------------- exact encodings (1.6)

EXACT = [
    (None, "40"),
    (True, "41"),
    (False, "42"),
    (ubyte(255), "50ff"),
    (ushort(256), "600100"),
    (uint(0), "43"),
    (uint(1), "5201"),
    (uint(255), "52ff"),
    (uint(256), "7000000100"),
    (uint(2**32 - 1), "70ffffffff"),
    (ulong(0), "44"),
    (ulong(255), "53ff"),
    (ulong(256), "800000000000000100"),
    (byte(-128), "5180"),
    (short(-2), "61fffe"),
    (int32(127), "547f"),
    (int32(-128), "5480"),
    (int32(128), "7100000080"),
    (int32(-129), "71ffffff7f"),
    (long(127), "557f"),
    (long(-128), "5580"),
    (long(128), "810000000000000080"),
    (7, "5507"),  # plain int is long
    (2**63 - 1, "817fffffffffffffff"),
    (timestamp(1311704463521), "83" + (1311704463521).to_bytes(8, "big").hex()),
    (char("a"), "7300000061"),
    (char("\U0001f600"), "730001f600"),
    (decimal32(b"\x22\x50\x00\x01"), "7422500001"),
    (decimal64(bytes(range(8))), "840001020304050607"),
    (decimal128(bytes(range(16))), "94" + bytes(range(16)).hex()),
    (uuid.UUID(int=1), "98" + "00" * 15 + "01"),
    (b"", "a000"),
    ("", "a100"),
    ("é", "a102c3a9"),
    (symbol("ab"), "a3026162"),
    ([], "45"),
    ([None], "c0020140"),
    ({}, "c10100"),
    ({symbol("k"): None}, "c10502a3016b40"),
    (Array("uint", [uint(1)]), "e006017000000001"),
    (Array("null", [None, None]), "e0020240"),
    (Array("boolean", [True, False]), "e00402560100"),
    (Array("symbol", []), "e00200b3"),
    (Described(symbol("x"), None), "00a3017840"),
    (Described(ulong(0x1234), uint(5)), "0080000000000000123452" + "05"),
]


@pytest.mark.parametrize("value, wire", EXACT)
def test_exact_encoding(value, wire):
    assert codec.encode(value).hex() == wire
    expected = long(value) if type(value) is int else value  # plain int is AMQP long
    assert gen.typed_repr(codec.decode(bytes.fromhex(wire))) == gen.typed_repr(expected)


@pytest.mark.parametrize(
    "kind, make, small, large",
    [
        ("binary", lambda n: b"x" * n, codec.VBIN8, codec.VBIN32),
        ("string", lambda n: "x" * n, codec.STR8, codec.STR32),
        ("symbol", lambda n: symbol("x" * n), codec.SYM8, codec.SYM32),
    ],
)
def test_variable_width_switches_at_256_bytes(kind, make, small, large):
    at_255 = codec.encode(make(255))
    at_256 = codec.encode(make(256))
    assert at_255[:2] == bytes([small, 255]) and len(at_255) == 2 + 255
    assert at_256[:5] == bytes([large]) + struct.pack(">I", 256) and len(at_256) == 5 + 256
    assert codec.decode(at_255) == make(255) and codec.decode(at_256) == make(256)


def test_string_length_is_in_utf8_bytes():
    text = "é" * 128  # 128 characters, 256 bytes
    encoded = codec.encode(text)
    assert encoded[0] == codec.STR32 and struct.unpack(">I", encoded[1:5])[0] == 256


def test_list_switches_on_size_and_count():
    # list8: size (1 byte) counts the count byte and the items; it must fit 255.
    nulls_254 = [None] * 254  # size 1 + 254 = 255 -> list8
    assert codec.encode(nulls_254)[:3] == bytes([codec.LIST8, 255, 254])
    nulls_255 = [None] * 255  # size 256 -> list32
    assert codec.encode(nulls_255)[:9] == bytes([codec.LIST32]) + struct.pack(">II", 259, 255)
    for items in (nulls_254, nulls_255, [None] * 256, [b"y" * 300]):
        assert codec.decode(codec.encode(items)) == items


def test_map_switches_on_size_and_count():
    small = {ubyte(i): None for i in range(84)}  # 168 items, 84*3 = 252 bytes + count
    assert codec.encode(small)[0] == codec.MAP8
    big = {ubyte(i): None for i in range(85)}  # 255 bytes of items + count byte -> map32
    assert codec.encode(big)[0] == codec.MAP32
    many = {uint(0) if i == 0 else ushort(i): None for i in range(128)}  # count 256
    assert codec.encode(many)[0] == codec.MAP32
    for value in (small, big, many):
        assert codec.decode(codec.encode(value)) == value


def test_array_switches_on_size():
    bytes_253 = Array("ubyte", [ubyte(1)] * 253)  # size 1 + 1 + 253 = 255 -> array8
    assert codec.encode(bytes_253)[:3] == bytes([codec.ARRAY8, 255, 253])
    bytes_254 = Array("ubyte", [ubyte(1)] * 254)
    assert codec.encode(bytes_254)[:9] == bytes([codec.ARRAY32]) + struct.pack(">II", 259, 254)
    # count 256 with 1-byte items (size > 255 anyway) -> array32
    bools = Array("boolean", [True] * 256)
    assert codec.encode(bools)[0] == codec.ARRAY32
    for value in (bytes_253, bytes_254, bools):
        assert codec.decode(codec.encode(value)) == value


def test_zero_width_arrays_are_capped():
    # An array of null/true/false/uint0/ulong0/list0 items costs no bytes per item; an
    # implementation limit keeps decoding work proportional to the input.
    cap = codec.MAX_ZERO_WIDTH_ARRAY
    nulls = Array("null", [None] * cap)
    assert codec.encode(nulls) == bytes([codec.ARRAY8, 2, cap, codec.NULL])
    assert codec.decode(codec.encode(nulls)) == nulls
    with pytest.raises(EncodeError):
        codec.encode(Array("null", [None] * (cap + 1)))
    for constructor in (
        codec.NULL,
        codec.TRUE,
        codec.FALSE,
        codec.UINT0,
        codec.ULONG0,
        codec.LIST0,
    ):
        assert len(codec.decode(bytes([codec.ARRAY8, 2, cap, constructor])).items) == cap
        with pytest.raises(DecodeError):
            codec.decode(bytes([codec.ARRAY8, 2, cap + 1, constructor]))
    lists = codec.decode(bytes([codec.ARRAY8, 2, 3, codec.LIST0])).items
    assert lists == ([], [], []) and lists[0] is not lists[1]


def test_array_elements_share_the_widest_constructor():
    # One constructor for all items (1.6.24): small and large uints are all 0x70.
    encoded = codec.encode(Array("uint", [uint(0), uint(7), uint(70000)]))
    assert encoded == bytes([codec.ARRAY8, 14, 3, codec.UINT]) + struct.pack(">III", 0, 7, 70000)
    strings = codec.encode(Array("string", ["a", "bc"]))
    assert strings[3] == codec.STR32


@pytest.mark.parametrize(
    "wire, value",
    [
        ("7000000005", uint(5)),  # uint in the 4-byte form although it fits smalluint
        ("7000000000", uint(0)),
        ("5200", uint(0)),  # smalluint zero
        ("800000000000000001", ulong(1)),
        ("5300", ulong(0)),
        ("7100000001", int32(1)),
        ("810000000000000001", long(1)),
        ("5601", True),  # boolean in the one-byte form
        ("5600", False),
        ("b00000000161", b"a"),  # vbin32 with 1 byte
        ("b10000000162", "b"),
        ("b30000000163", symbol("c")),
        ("d0000000050000000140", [None]),  # list32 with 1 item
        ("d00000000400000000", []),  # list32 empty
        ("c00100", []),  # list8 empty
        ("d1000000070000000240a100", {None: ""}),  # map32
        ("f00000000600000001" + "5201", Array("uint", [uint(1)])),  # array32, small items
        ("e0040252" + "0102", Array("uint", [uint(1), uint(2)])),  # array of smalluint
        ("e003024343", None),  # array of uint0 has no item bytes: malformed size
    ],
)
def test_explicit_wider_encodings_decode(wire, value):
    if value is None:
        with pytest.raises(DecodeError):
            codec.decode(bytes.fromhex(wire))
        return
    assert gen.typed_repr(codec.decode(bytes.fromhex(wire))) == gen.typed_repr(value)


def test_array_of_uint0_and_list0_elements():
    assert codec.decode(bytes.fromhex("e0020343")) == Array("uint", [uint(0)] * 3)
    assert codec.decode(bytes.fromhex("e0020245")) == Array("list", [[], []])


def test_array_of_arrays():
    inner = [Array("symbol", [symbol("a")]), Array("ulong", [ulong(1), ulong(2**40)])]
    value = Array("array", inner)
    encoded = roundtrip(value)
    assert encoded[3] == codec.ARRAY32  # one constructor for every inner array


def test_array_of_described_composites_keeps_field_types():
    from amqpspec.amqp10.composites import Accepted, Flow, Rejected
    from amqpspec.amqp10.types import ulong as u

    flows = Array(
        "list",
        [
            Flow(
                next_incoming_id=1,
                incoming_window=2,
                next_outgoing_id=3,
                outgoing_window=4,
                handle=5,
                link_credit=6,
            )
        ],
        u(0x13),
    )
    decoded = codec.decode(codec.encode(flows))
    assert decoded.items[0] == flows.items[0] and decoded.descriptor == 0x13
    outcomes = Array("list", [Accepted(), Accepted()], u(0x24))
    assert codec.decode(codec.encode(outcomes)).items == (Accepted(), Accepted())
    rejected = Array("list", [Rejected()], u(0x25))
    assert codec.decode(codec.encode(rejected)).items == (Rejected(),)


def test_described_with_symbolic_spec_descriptor_decodes_as_the_composite():
    from amqpspec.amqp10.composites import Accepted, Data

    assert codec.decode(b"\x00\xa3\x12amqp:accepted:list\x45") == Accepted()
    assert codec.decode(b"\x00\xa3\x10amqp:data:binary\xa0\x01z") == Data(b"z")


# ------------------------------------------------------------- strictness


@pytest.mark.parametrize(
    "wire",
    [
        "",  # nothing
        "01",  # reserved constructor
        "ff",
        "5601" + "00",  # trailing byte after one value
        "5602",  # boolean byte other than 0/1
        "70000000",  # truncated uint
        "a005616263",  # vbin8 longer than the input
        "a102c328",  # invalid UTF-8
        "a301ff",  # symbol not ASCII
        "730000d800",  # a surrogate is not a char
        "7300110000",  # beyond U+10FFFF
        "c0020240",  # list8 count 2 but one item
        "c00301",  # list8 size past the end
        "c00040",  # list8 size 0 cannot hold its count
        "c1030140" + "40",  # map with an odd count
        "c10504" + "4040" + "4040",  # duplicate keys (null, null)
        "e0020101",  # array of a reserved element constructor
        "e00101",  # array with no element constructor
        "e003010040",  # array of described with no element constructor after descriptor
        "00",  # described with nothing after
        "0040",  # described with a descriptor and no value
        "000040" + "40",  # a described descriptor
        "d0ffffffff00000001",  # list32 size beyond input
        "f0000000ff7fffffff40",  # array32 of 2^31 nulls
    ],
)
def test_bad_input_raises_decode_error(wire):
    with pytest.raises(DecodeError) as info:
        codec.decode(bytes.fromhex(wire))
    assert info.value.offset >= 0 and info.value.expected
    assert info.value.condition == "amqp:decode-error"


def test_decode_error_offset_points_at_the_bad_byte():
    with pytest.raises(DecodeError) as info:
        codec.decode(bytes.fromhex("c0050340" + "5602" + "40"))
    assert info.value.offset == 5


def test_deep_nesting_is_a_decode_error():
    nested = b"\x45"
    for _ in range(200):
        nested = b"\xd0" + struct.pack(">II", len(nested) + 4, 1) + nested
    with pytest.raises(DecodeError):
        codec.decode(nested)
    ok = b"\x45"
    for _ in range(codec.MAX_DEPTH - 1):
        ok = b"\xd0" + struct.pack(">II", len(ok) + 4, 1) + ok
    codec.decode(ok)


@pytest.mark.parametrize(
    "value",
    [
        ubyte(256),
        ubyte(-1),
        ushort(2**16),
        uint(-1),
        uint(2**32),
        ulong(2**64),
        byte(128),
        short(-(2**15) - 1),
        int32(2**31),
        long(2**63),
        2**63,
        -(2**63) - 1,
        timestamp(2**63),
        symbol("é"),
        char("ab"),
        decimal32(b"123"),
        "\ud800",  # a lone surrogate is not Unicode text
        char("\udfff"),  # nor a char
        float32(1e39),  # beyond binary32
        float32(-1e39),
        object(),
        Array("no-such-type", [1]),
        Array("array", [1]),  # an item that is no array
        Array("uint", ["x"]),
        Array("binary", [1]),
    ],
)
def test_encode_rejects_out_of_range(value):
    with pytest.raises(EncodeError):
        codec.encode(value)
