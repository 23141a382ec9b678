"""The frame builder (amqp10.builder) and the encoder's layout (amqp10.layout): every
override produces what it says, checked by decoding the result back with the core's
decoder; field offsets come from the encoder and are right for every composite of the
spec table, list8 and list32.

Spec: 1.2/1.4 (described lists), 2.2 (protocol headers), 2.3.1 (frame layout), 5.3.1.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10 import codec
from amqpspec.amqp10.builder import (
    CHANNEL_SPAN,
    DOFF_OFFSET,
    SIZE_SPAN,
    TYPE_OFFSET,
    build_frame,
    mutate,
    protocol_header,
    read_body,
    read_frame,
    sasl_frame,
)
from amqpspec.amqp10.codec import LIST0, LIST8, LIST32, decode_value
from amqpspec.amqp10.composites import Attach, Begin, Flow, SaslInit, Source, Target, Transfer
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.amqp10.frames import (
    FRAME_HEADER,
    Frame,
    FrameDecoder,
    FrameType,
    ProtocolHeader,
    decode_frame,
    encode_frame,
)
from amqpspec.amqp10.layout import encode_layout
from amqpspec.amqp10.spec import COMPOSITES, Cond, Role
from amqpspec.amqp10.types import Described, symbol, uint, ulong
from amqpspec.fuzz import strategies as gen

BEGIN = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
FLOW = Flow(next_incoming_id=1, incoming_window=10, next_outgoing_id=0, outgoing_window=5)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode_error(data: bytes) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode_frame(data)
    return info.value


# ---------------------------------------------------------------- frame header (2.3.1)


def test_defaults_are_the_encoder_s_frame():
    assert build_frame(BEGIN, 3) == encode_frame(BEGIN, 3)
    transfer = Transfer(handle=0, delivery_id=1, delivery_tag=b"t")
    assert build_frame(transfer, 1, payload=b"abc") == encode_frame(transfer, 1, b"abc")
    assert build_frame(None) == encode_frame(None)
    assert build_frame(BEGIN, extended_header=bytes(8)) == encode_frame(
        BEGIN, extended_header=bytes(8)
    )


def test_header_offsets_name_the_header_fields():
    frame = build_frame(BEGIN, 0x0102, doff=2, frame_type=0x07)
    size, doff, frame_type, channel = FRAME_HEADER.unpack_from(frame)
    assert int.from_bytes(frame[SIZE_SPAN[0] : SIZE_SPAN[1]], "big") == size == len(frame)
    assert frame[DOFF_OFFSET] == doff == 2
    assert frame[TYPE_OFFSET] == frame_type == 7
    assert int.from_bytes(frame[CHANNEL_SPAN[0] : CHANNEL_SPAN[1]], "big") == channel == 0x0102


def test_doff_below_two_is_a_framing_error():
    """2.3.1: DOFF MUST be 2 or greater."""
    error = _decode_error(build_frame(None, doff=1))
    assert error.condition == Cond.FRAMING_ERROR and "DOFF" in str(error)


def test_size_below_eight_is_a_framing_error():
    """2.3.1: SIZE includes the 8-byte header; 4 is malformed."""
    frame = build_frame(None, size=4, trailer=bytes(8))
    assert FRAME_HEADER.unpack_from(frame)[0] == 4 and len(frame) == 16
    decoder = FrameDecoder(expect_header=False)
    decoder.feed(frame)
    with pytest.raises(DecodeError) as info:
        decoder.next_item()
    assert info.value.condition == Cond.FRAMING_ERROR


def test_size_larger_than_the_bytes():
    frame = build_frame(BEGIN, size=200)
    assert FRAME_HEADER.unpack_from(frame)[0] == 200
    decoder = FrameDecoder(expect_header=False)
    decoder.feed(frame)
    assert decoder.next_item() is None  # waits for bytes that never come


def test_doff_beyond_size():
    error = _decode_error(build_frame(None, doff=5))
    assert error.condition == Cond.FRAMING_ERROR and "DOFF*4" in str(error)


def test_extended_header_and_wrong_doff():
    frame = build_frame(BEGIN, extended_header=b"\x01\x02\x03\x04")
    decoded = decode_frame(frame)
    assert decoded.extended_header == b"\x01\x02\x03\x04" and decoded.performative == BEGIN
    # DOFF 2 with 4 extra bytes: the body starts at the extended header
    wrong = build_frame(BEGIN, doff=2, extended_header=bytes(4))
    assert "descriptor" in str(_decode_error(wrong))  # 00 00 ..: described descriptor
    with pytest.raises(EncodeError):
        build_frame(BEGIN, extended_header=b"abc")
    assert FRAME_HEADER.unpack_from(build_frame(BEGIN, doff=3, extended_header=b"abc"))[1] == 3


def test_unknown_frame_type():
    error = _decode_error(build_frame(BEGIN, frame_type=0x07))
    assert error.condition == Cond.FRAMING_ERROR and error.offset == TYPE_OFFSET


def test_header_fields_out_of_range_refused():
    for kw in ({"channel": 0x10000}, {"doff": 256}, {"frame_type": -1}, {"size": 1 << 32}):
        with pytest.raises(EncodeError):
            build_frame(None, **kw)


def test_body_of_any_value():
    error = _decode_error(build_frame("not a performative"))
    assert "an AMQP performative" in str(error)
    error = _decode_error(build_frame(Described(ulong(0x13), "not a list"), 1))
    assert "flow as a list" in str(error)
    assert build_frame(b"\x00\x53\x11\x45") == FRAME_HEADER.pack(12, 2, 0, 0) + b"\x00\x53\x11\x45"


def test_sasl_frames():
    init = SaslInit(mechanism=symbol("PLAIN"), initial_response=b"\x00u\x00p")
    frame = sasl_frame(init)
    assert frame == encode_frame(init, 0, frame_type=FrameType.SASL)
    decoded = decode_frame(frame)
    assert decoded.type == FrameType.SASL and decoded.performative == init
    # a SASL body in an AMQP frame is not a performative (2.3.2)
    assert "an AMQP performative" in str(_decode_error(build_frame(init)))


@pytest.mark.parametrize(
    "args, kw, wire",
    [
        ((), {}, b"AMQP\x00\x01\x00\x00"),
        ((3,), {}, b"AMQP\x03\x01\x00\x00"),
        ((0, 1, 1, 0), {}, b"AMQP\x00\x01\x01\x00"),
        ((0, 0, 9, 1), {}, b"AMQP\x00\x00\x09\x01"),
        ((), {"magic": b"HTTP"}, b"HTTP\x00\x01\x00\x00"),
    ],
)
def test_protocol_header_variants(args, kw, wire):
    assert protocol_header(*args, **kw) == wire
    if wire.startswith(b"AMQP"):
        assert ProtocolHeader.decode(wire).encode() == wire


# ---------------------------------------------------------------- layout (1.4)


def _check_layout(composite, wide=False):
    layout = encode_layout(composite, wide=wide)
    data = layout.data
    if not wide:
        assert data == composite.encode()  # the encoder's own bytes
    value, end = decode_value(data)
    assert end == len(data) and value == composite
    assert data[0] == 0x00
    descriptor, after = decode_value(data, layout.descriptor[0])
    assert descriptor == composite.DESCRIPTOR_CODE and after == layout.descriptor[1]
    assert layout.constructor == layout.descriptor[1]
    code = data[layout.constructor]
    if not layout.fields and not wide:
        assert code == LIST0 and layout.size is None and layout.count is None
        return layout
    assert code == (LIST32 if wide else LIST8) or (code == LIST32 and len(data) > 255)
    size = int.from_bytes(data[layout.size[0] : layout.size[1]], "big")
    count = int.from_bytes(data[layout.count[0] : layout.count[1]], "big")
    assert layout.size[1] + size == len(data)  # size counts from after the size field
    assert count == len(layout.fields) == composite.sent_fields()
    position = layout.body_start
    for index, span in enumerate(layout.fields):
        field = composite.SPEC.fields[index]
        assert (span.index, span.name, span.type) == (index, field.name, field.type)
        assert (span.mandatory, span.multiple) == (field.mandatory, field.multiple)
        assert span.start == position
        _, position = decode_value(data, span.start)  # one whole value, nothing more
        assert position == span.end
        assert layout.field(span.name) is span and layout.field(span.attr) is span
    assert position == len(data)
    return layout


@FUZZ
@given(gen.any_composite(), st.booleans())
def test_layout_of_every_composite(composite, wide):
    layout = _check_layout(composite, wide)
    assert mutate(composite, wide=wide).encode() == layout.data  # unmutated: the same bytes


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_layout_of_each_composite_type_list8_and_list32(name):
    @FUZZ
    @given(gen.composite(name))
    def check(composite):
        _check_layout(composite)
        _check_layout(composite, wide=True)

    check()


def test_layout_of_a_large_performative_is_list32():
    attach = Attach(name="x" * 300, handle=0, role=Role.SENDER)
    layout = _check_layout(attach)
    assert layout.wide and layout.size == (layout.constructor + 1, layout.constructor + 5)


def test_layout_count_sends_trailing_fields_as_null():
    layout = encode_layout(Begin(), count=4)
    assert [layout.data[f.start] for f in layout.fields] == [0x40] * 4
    with pytest.raises(EncodeError):
        encode_layout(Begin(), count=9)
    with pytest.raises(KeyError):
        layout.field("handle-max")
    with pytest.raises(KeyError):
        layout.field("no-such-field")


# ---------------------------------------------------------------- mutations


def test_unmutated_is_the_encoding():
    assert mutate(BEGIN).encode() == BEGIN.encode() == bytes(mutate(BEGIN))
    assert mutate(BEGIN).frame(5) == encode_frame(BEGIN, 5)
    assert decode_frame(mutate(FLOW, wide=True).frame()).performative == FLOW


def test_set_constructor_to_an_unassigned_code():
    """1.2: an unassigned format code cannot be decoded; the offset is the encoder's."""
    data = mutate(BEGIN).set_constructor("next-outgoing-id", 0xFF).frame()
    span = encode_layout(BEGIN).field("next-outgoing-id")
    error = _decode_error(data)
    assert error.offset == 8 + span.start and "0xff" in str(error)


def test_null_mandatory_field():
    """1.4 / 2.7.2: next-outgoing-id is mandatory."""
    error = _decode_error(mutate(BEGIN).null_field("next_outgoing_id").frame())
    assert "mandatory field begin.next-outgoing-id" in str(error)
    error = _decode_error(mutate(Begin(), count=4).frame())
    assert "mandatory" in str(error)
    error = _decode_error(mutate(Attach(handle=0, role=Role.SENDER)).frame(1))
    assert "mandatory field attach.name" in str(error)


def test_replace_field_with_a_value_of_another_type():
    error = _decode_error(mutate(BEGIN).set_field("remote-channel", "zero").frame())
    assert "begin.remote-channel" in str(error)
    # a ulong where a uint belongs
    data = mutate(BEGIN).replace_field("incoming-window", codec.encode(ulong(7))).frame()
    assert "begin.incoming-window" in str(_decode_error(data))
    # the same type, another value: decodes, with that value
    data = mutate(BEGIN).set_field("incoming_window", uint(7)).frame()
    assert decode_frame(data).performative.incoming_window == 7


def test_replace_an_omitted_trailing_field_fills_nulls():
    data = mutate(BEGIN).set_field("handle-max", uint(9)).frame()
    begin = decode_frame(data).performative
    assert begin.handle_max == 9 and begin.incoming_window == 10
    assert mutate(BEGIN).set_field(4, uint(9)).frame() == data


def test_set_count_and_size():
    assert "at most 8 fields" in str(_decode_error(mutate(BEGIN).set_count(9).frame()))
    short = _decode_error(mutate(BEGIN).set_count(2).frame())
    assert "begin" in str(short)
    over = _decode_error(mutate(BEGIN).set_size(200).frame())
    assert "begin list within" in str(over)
    under = _decode_error(mutate(BEGIN).set_size(3).frame())
    assert isinstance(under, DecodeError)
    with pytest.raises(EncodeError):
        mutate(BEGIN).set_size(300).encode()  # does not fit list8: use wide()
    wide = mutate(BEGIN).wide().set_size(300).encode()
    assert wide[3] == LIST32 and int.from_bytes(wide[4:8], "big") == 300


def test_list_code():
    data = mutate(BEGIN).set_list_code(LIST0).frame()
    assert isinstance(_decode_error(data), DecodeError)  # list0 then stray field bytes
    data = mutate(Begin(), count=0).set_list_code(0xA1).encode()
    assert data == b"\x00\x53\x11\xa1"


def test_descriptor():
    assert "an AMQP performative" in str(_decode_error(mutate(BEGIN).descriptor(0x99).frame()))
    symbolic = mutate(BEGIN).descriptor("amqp:begin:list").frame()
    assert decode_frame(symbolic).performative == BEGIN
    raw = mutate(BEGIN).descriptor(codec.encode(ulong(0x11))).frame()
    assert decode_frame(raw).performative == BEGIN
    # begin's fields under flow's descriptor: a flow (next-incoming-id null, windows 0..)
    flow = decode_frame(mutate(BEGIN).descriptor(0x13).frame()).performative
    assert isinstance(flow, Flow) and flow.next_incoming_id is None
    assert "open." in str(_decode_error(mutate(BEGIN).descriptor(0x10).frame()))


def test_truncate_at_every_point_is_a_decode_error():
    whole = mutate(BEGIN).encode()
    for cut in range(len(whole)):
        data = mutate(BEGIN).truncate(cut).frame()
        assert FRAME_HEADER.unpack_from(data)[0] == 8 + cut
        if cut == 0:
            assert decode_frame(data).is_empty  # no body at all: a heartbeat
        else:
            _decode_error(data)
    assert mutate(BEGIN).truncate(-4).encode() == whole[:-4]


def test_drop_append_and_trailing_bytes():
    dropped = mutate(BEGIN).drop_field("remote-channel").frame()
    assert "begin" in str(_decode_error(dropped))
    extra = mutate(FLOW, count=11).append_field(b"\x40").frame()
    assert "at most 11 fields" in str(_decode_error(extra))
    tail = mutate(BEGIN).append_bytes(b"\x40").frame()
    assert "nothing after begin" in str(_decode_error(tail))


def test_nested_composite_field_mutated_through_its_own_layout():
    """A terminus inside an attach: mutate it, then put its bytes in the attach's field."""
    attach = Attach(
        name="l", handle=0, role=Role.SENDER, source=Source(address="q"), target=Target()
    )
    source = mutate(attach.source).set_field("durable", "x").encode()
    data = mutate(attach).replace_field("source", source).frame(1)
    assert "source.durable" in str(_decode_error(data))
    fine = mutate(attach).replace_field("source", mutate(attach.source).encode()).frame(1)
    assert decode_frame(fine).performative == attach


def test_copy_forks():
    base = mutate(BEGIN)
    fork = base.copy().null_field("incoming-window")
    assert base.encode() == BEGIN.encode() and fork.encode() != base.encode()
    assert [f.name for f in base.fields] == [
        "remote-channel",
        "next-outgoing-id",
        "incoming-window",
        "outgoing-window",
    ]


@FUZZ
@given(gen.any_composite(), st.data())
def test_every_field_replaced_by_null_or_cut_never_crashes_the_decoder(composite, data):
    """The fuzzer's loop: enumerate fields, change one, decode: a value or DecodeError."""
    m = mutate(composite)
    for span in m.fields:
        mutated = m.copy().null_field(span.name).encode()
        try:
            value, _ = decode_value(mutated)
        except DecodeError:
            continue
        if span.mandatory:
            pytest.fail(f"{composite.NAME}.{span.name} null decoded as {value!r}")
    cut = data.draw(st.integers(0, len(m.encode())))
    try:
        decode_value(m.copy().truncate(cut).encode())
    except DecodeError:
        pass


def test_frame_decoder_reads_built_frames_in_any_chunking():
    data = build_frame(BEGIN, 0) + build_frame(None) + mutate(FLOW).frame(0)
    decoder = FrameDecoder(expect_header=False)
    items = []
    for byte in data:
        decoder.feed(bytes([byte]))
        while (item := decoder.next_item()) is not None:
            items.append(item)
    assert [type(i) for i in items] == [Frame] * 3
    assert [i.name for i in items] == ["begin", "empty", "flow"]


# ---------------------------------------------------------------- reading bytes back (fields)


def test_read_frame_gives_the_bytes_back_and_names_the_fields():
    transfer = Transfer(handle=1, delivery_id=7, delivery_tag=b"t", message_format=0)
    data = build_frame(transfer, 3, payload=b"\x00Sw\xa1\x01x", extended_header=bytes(4))
    parts = read_frame(data)
    assert parts is not None and parts.build() == data
    assert (parts.channel, parts.extended_header) == (3, bytes(4))
    assert parts.payload == b"\x00Sw\xa1\x01x"
    assert parts.body.layout.composite == "transfer"
    assert parts.body.field_bytes("delivery-id") == codec.encode(uint(7))
    parts.body.null_field("delivery-tag")
    parts.payload = b""
    assert decode_frame(parts.build()).performative == Transfer(
        handle=1, delivery_id=7, message_format=0
    )


def test_read_body_takes_wrong_fields_counts_and_sizes_as_they_are():
    bad_type = mutate(BEGIN).set_constructor("incoming-window", codec.STR8)
    bad_type.replace_field("incoming-window", b"\xa1\x02\xff\xfe")
    flow_size = len(mutate(FLOW).encode()) - 5  # the list8 size: items + count byte
    uncounted = mutate(FLOW).set_size(flow_size + 2).append_bytes(b"\x40\x40")
    wide = mutate(FLOW, wide=True).append_field(codec.encode("extra"))
    tail = mutate(BEGIN).append_bytes(b"tail")
    for m in (bad_type, mutate(BEGIN).set_count(9), uncounted, wide, tail):
        body = m.encode()
        read = read_body(body)
        assert read is not None and read.encode() == body
    read = read_body(bad_type.encode())
    assert read.field_bytes("incoming-window") == b"\xa1\x02\xff\xfe"
    assert (
        read.null_field("incoming-window").encode()
        == mutate(BEGIN).null_field("incoming-window").encode()
    )
    assert read_body(uncounted.encode()).sent == FLOW.sent_fields() + 2
    every = len(COMPOSITES["flow"].fields)
    extra = read_body(mutate(FLOW, count=every).append_field(codec.encode("extra")).encode())
    assert extra.sent == every + 1 and extra.layout.fields[-1].name == f"#{every}"
    assert extra.field_bytes(every) == codec.encode("extra")
    assert extra.drop_trailing(every).encode() == mutate(FLOW, count=every).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        build_frame(BEGIN)[:7],
        build_frame(BEGIN, size=4, trailer=bytes(8)),
        build_frame(BEGIN, size=200),
        build_frame(None, doff=1),
        build_frame(BEGIN, doff=200),
    ],
)
def test_read_frame_refuses_what_cannot_be_framed(data):
    assert read_frame(data) is None


@pytest.mark.parametrize(
    "body",
    [
        mutate(BEGIN).truncate(-3).encode(),  # an item runs past the list
        mutate(BEGIN).descriptor(0x99).encode(),  # no spec composite
        codec.encode(Described(ulong(0x11), "not a list")),
        b"\x00\x53",
        b"",
    ],
)
def test_read_body_refuses_what_cannot_be_read_field_by_field(body):
    assert read_body(body) is None


def test_read_frame_keeps_an_unreadable_body_whole():
    data = build_frame(mutate(BEGIN).truncate(-3))
    parts = read_frame(data)
    assert parts is not None and parts.build() == data and isinstance(parts.body, bytes)


@FUZZ
@given(data=st.binary(max_size=64), framed=st.booleans())
def test_read_frame_and_body_never_raise_and_round_trip(data, framed):
    if framed:
        data = FRAME_HEADER.pack(8 + len(data), 2, 0, 0) + data
    parts = read_frame(data)
    assert parts is None or parts.build() == data
    m = read_body(data)
    assert m is None or m.encode() == data
