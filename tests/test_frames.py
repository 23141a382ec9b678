"""Framing (amqp10.frames): protocol headers, frame headers, extended headers, empty and SASL
frames, and the FrameDecoder fed whole, byte by byte, in random chunks and with trailing
bytes.

Spec: 2.2 (version negotiation), 2.3 (framing), 2.3.1 (frame layout), 5.2 (TLS), 5.3 (SASL).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import (
    Begin,
    Close,
    Detach,
    Disposition,
    Flow,
    Open,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    Transfer,
)
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.amqp10.frames import (
    AMQP_HEADER,
    EMPTY_FRAME,
    SASL_HEADER,
    TLS_HEADER,
    Frame,
    FrameDecoder,
    FrameType,
    ProtocolHeader,
    decode_frame,
    decode_stream,
    encode_frame,
)
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import symbol
from amqpspec.fuzz import strategies as gen

FRAMING = "amqp:connection:framing-error"


def _flow(**kw):
    base = dict(next_incoming_id=1, incoming_window=10, next_outgoing_id=0, outgoing_window=5)
    base.update(kw)
    return Flow(**base)


# ------------------------------------------------------------------ protocol headers (2.2)


@pytest.mark.parametrize(
    "header, wire, protocol_id",
    [
        (AMQP_HEADER, b"AMQP\x00\x01\x00\x00", 0),
        (TLS_HEADER, b"AMQP\x02\x01\x00\x00", 2),
        (SASL_HEADER, b"AMQP\x03\x01\x00\x00", 3),
    ],
)
def test_protocol_headers(header, wire, protocol_id):
    assert header.encode() == wire
    decoded = ProtocolHeader.decode(wire)
    assert decoded == header and decoded.protocol_id == protocol_id and decoded.is_supported


@pytest.mark.parametrize(
    "wire", [b"AMQP\x00\x01\x00\x01", b"AMQP\x00\x00\x09\x01", b"AMQP\x01\x01\x00\x00"]
)
def test_other_versions_decode_but_are_not_supported(wire):
    header = ProtocolHeader.decode(wire)
    assert not header.is_supported  # the engine answers with its own header and closes


@pytest.mark.parametrize("wire", [b"HTTP/1.1", b"AMQ\x00\x00\x01\x00\x00", b"\x00" * 8])
def test_wrong_magic_is_a_framing_error(wire):
    with pytest.raises(DecodeError) as info:
        ProtocolHeader.decode(wire)
    assert info.value.condition == FRAMING
    decoder = FrameDecoder()
    decoder.feed(wire)
    with pytest.raises(DecodeError):
        decoder.next_item()


def test_wrong_magic_is_detected_before_eight_bytes():
    decoder = FrameDecoder()
    decoder.feed(b"GET")
    with pytest.raises(DecodeError):
        decoder.next_item()


def test_short_header_needs_more_bytes():
    decoder = FrameDecoder()
    decoder.feed(b"AMQP\x00")
    assert decoder.next_item() is None
    decoder.feed(b"\x01\x00\x00")
    assert decoder.next_item() == AMQP_HEADER
    with pytest.raises(DecodeError):
        ProtocolHeader.decode(b"AMQP")


# ------------------------------------------------------------------ frame layout (2.3.1)


def test_frame_header_fields():
    flow = _flow(handle=0, link_credit=5)
    raw = encode_frame(flow, channel=7)
    size, doff, frame_type, channel = struct.unpack(">IBBH", raw[:8])
    assert (size, doff, frame_type, channel) == (len(raw), 2, 0, 7)
    assert raw[8:] == flow.encode()
    frame = decode_frame(raw)
    assert frame == Frame(0, 7, flow, b"", b"", len(raw), raw)
    assert frame.name == "flow" and not frame.is_empty


def test_empty_frame_is_a_heartbeat():
    assert bytes.fromhex("0000000802000000") == EMPTY_FRAME
    frame = decode_frame(EMPTY_FRAME)
    assert frame.is_empty and frame.name == "empty" and frame.performative is None
    # An empty frame may carry an extended header and any type/channel.
    odd = struct.pack(">IBBH", 12, 3, 0, 9) + b"\x01\x02\x03\x04"
    frame = decode_frame(odd)
    assert frame.is_empty and frame.extended_header == b"\x01\x02\x03\x04" and frame.channel == 9


def test_extended_header_is_skipped():
    ext = b"\xaa" * 8
    raw = encode_frame(
        Begin(next_outgoing_id=0, incoming_window=1, outgoing_window=1),
        channel=1,
        extended_header=ext,
    )
    assert raw[4] == 4  # DOFF counts 4-byte words: 2 + 2
    frame = decode_frame(raw)
    assert frame.extended_header == ext and frame.name == "begin"
    with pytest.raises(EncodeError):
        encode_frame(None, extended_header=b"\x00")  # not a whole word


@pytest.mark.parametrize(
    "raw, why",
    [
        (struct.pack(">IBBH", 8, 1, 0, 0), "DOFF < 2"),
        (struct.pack(">IBBH", 8, 0, 0, 0), "DOFF 0"),
        (struct.pack(">IBBH", 7, 2, 0, 0), "SIZE < 8"),
        (struct.pack(">IBBH", 0, 2, 0, 0), "SIZE 0"),
        (struct.pack(">IBBH", 8, 3, 0, 0), "DOFF*4 > SIZE"),
        (struct.pack(">IBBH", 9, 2, 0, 0) + b"\x40", "a null is no performative"),
        (struct.pack(">IBBH", 9, 2, 0x7, 0) + b"\x45", "unknown frame type with a body"),
        (b"\x00\x00\x00", "shorter than a frame header"),
    ],
)
def test_bad_frame_headers(raw, why):
    with pytest.raises(DecodeError) as info:
        decode_frame(raw)
    assert info.value.condition in (FRAMING, Cond.DECODE_ERROR)


@pytest.mark.parametrize("doff, size", [(1, 8), (0, 100), (2, 7), (2, 4)])
def test_frame_decoder_rejects_bad_headers_with_framing_error(doff, size):
    decoder = FrameDecoder(expect_header=False)
    decoder.feed(struct.pack(">IBBH", size, doff, 0, 0))
    with pytest.raises(DecodeError) as info:
        decoder.next_item()
    assert info.value.condition == FRAMING


def test_size_over_max_frame_size_is_rejected_from_the_header_alone():
    decoder = FrameDecoder(expect_header=False, max_frame_size=512)
    decoder.feed(struct.pack(">IBBH", 513, 2, 0, 0))  # the body has not even arrived
    with pytest.raises(DecodeError) as info:
        decoder.next_item()
    assert info.value.condition == FRAMING
    with pytest.raises(DecodeError):
        decode_frame(encode_frame(Open(container_id="x" * 600)), max_frame_size=512)


def test_size_must_match_the_bytes_given():
    raw = encode_frame(Close())
    with pytest.raises(DecodeError):
        decode_frame(raw + b"\x00")
    with pytest.raises(DecodeError):
        decode_frame(raw[:-1])


def test_performative_must_fill_the_body_unless_transfer():
    raw = encode_frame(Close())
    padded = struct.pack(">I", len(raw) + 1) + raw[4:] + b"\x40"
    with pytest.raises(DecodeError, match="nothing after close"):
        decode_frame(padded)
    transfer = encode_frame(Transfer(handle=0), payload=b"\x00\x53\x75\xa0\x01x")
    assert decode_frame(transfer).payload == b"\x00\x53\x75\xa0\x01x"


def test_sasl_frames():
    mechanisms = SaslMechanisms(sasl_server_mechanisms=[symbol("ANONYMOUS"), symbol("PLAIN")])
    raw = encode_frame(mechanisms, frame_type=FrameType.SASL)
    assert raw[5] == 1
    frame = decode_frame(raw)
    assert frame.type == FrameType.SASL and frame.name == "sasl-mechanisms"
    assert frame.performative == mechanisms
    init = encode_frame(
        SaslInit(mechanism=symbol("PLAIN"), initial_response=b"\x00u\x00p"),
        frame_type=FrameType.SASL,
    )
    assert decode_frame(init).name == "sasl-init"
    # A SASL body in an AMQP frame, or a performative in a SASL frame, is malformed.
    with pytest.raises(DecodeError):
        decode_frame(encode_frame(mechanisms, frame_type=FrameType.AMQP))
    with pytest.raises(DecodeError):
        decode_frame(encode_frame(Open(container_id="c"), frame_type=FrameType.SASL))


def test_decode_stream_with_sasl_then_amqp():
    stream = (
        SASL_HEADER.encode()
        + encode_frame(SaslInit(mechanism=symbol("ANONYMOUS")), frame_type=FrameType.SASL)
        + encode_frame(SaslOutcome(code=0), frame_type=FrameType.SASL)
        + AMQP_HEADER.encode()
        + encode_frame(Open(container_id="c"))
        + EMPTY_FRAME
    )
    items = decode_stream(stream)
    names = [i.name if isinstance(i, Frame) else i.protocol_id for i in items]
    assert names == [3, "sasl-init", "sasl-outcome", 0, "open", "empty"]


def test_decoder_reports_stream_offsets_and_skips_a_whole_bad_frame():
    good = encode_frame(Close())
    bad = struct.pack(">IBBH", 10, 2, 0, 0) + b"\x45\x45"  # list0 is no performative
    decoder = FrameDecoder(expect_header=False)
    decoder.feed(good + bad + good)
    assert decoder.next_item().name == "close"
    with pytest.raises(DecodeError) as info:
        decoder.next_item()
    assert info.value.offset >= len(good)
    assert decoder.next_item().name == "close"
    assert decoder.next_item() is None and decoder.buffered == 0


# ------------------------------------------------------------------ any chunking


PERFORMATIVES = st.one_of(
    gen.composite("open"),
    gen.composite("begin"),
    gen.composite("attach"),
    gen.composite("flow"),
    gen.composite("disposition"),
    gen.composite("detach"),
    gen.composite("end"),
    gen.composite("close"),
)


@st.composite
def frame_streams(draw):
    """(bytes, expected items): an AMQP header, then frames of every kind."""
    items = [AMQP_HEADER]
    raw = bytearray(AMQP_HEADER.encode())
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["perf", "transfer", "empty"]))
        channel = draw(st.integers(0, 0xFFFF))
        ext = draw(st.sampled_from([b"", b"\x00\x01\x02\x03"]))
        if kind == "empty":
            frame = encode_frame(None, channel, extended_header=ext)
        elif kind == "transfer":
            transfer = draw(gen.composite("transfer"))
            payload = draw(st.binary(max_size=300))
            frame = encode_frame(transfer, channel, payload, extended_header=ext)
        else:
            frame = encode_frame(draw(PERFORMATIVES), channel, extended_header=ext)
        raw += frame
        items.append(decode_frame(frame))
    return bytes(raw), items


def _drain(decoder):
    out = []
    while (item := decoder.next_item()) is not None:
        out.append(item)
    return out


def _feed_in_chunks(data, cuts):
    decoder = FrameDecoder()
    items = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        decoder.feed(data[start:cut])
        items += _drain(decoder)
        start = cut
    assert decoder.buffered == 0
    return items


STREAMS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@STREAMS
@given(frame_streams())
def test_whole_buffer(stream):
    data, expected = stream
    assert _feed_in_chunks(data, []) == expected
    assert decode_stream(data) == expected


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(frame_streams())
def test_one_byte_at_a_time(stream):
    data, expected = stream
    assert _feed_in_chunks(data, range(1, len(data))) == expected


@STREAMS
@given(frame_streams(), st.data())
def test_random_chunking(stream, data):
    raw, expected = stream
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12))
    assert _feed_in_chunks(raw, cuts) == expected


@STREAMS
@given(frame_streams(), st.integers(1, 40))
def test_trailing_partial_frame_stays_buffered(stream, keep):
    data, expected = stream
    extra = encode_frame(Detach(handle=3, closed=True), 5)
    keep = min(keep, len(extra) - 1)
    decoder = FrameDecoder()
    decoder.feed(data + extra[:keep])
    assert _drain(decoder) == expected
    assert decoder.buffered == keep
    assert decoder.offset == len(data)
    decoder.feed(extra[keep:])
    (frame,) = _drain(decoder)
    assert frame.performative == Detach(handle=3, closed=True) and frame.channel == 5


def test_iteration_and_header_after_sasl():
    decoder = FrameDecoder()
    decoder.feed(SASL_HEADER.encode() + encode_frame(SaslOutcome(code=0), frame_type=1))
    header, outcome = list(decoder)
    assert header == SASL_HEADER and outcome.name == "sasl-outcome"
    decoder.expect_protocol_header()
    decoder.feed(AMQP_HEADER.encode() + EMPTY_FRAME)
    assert list(decoder) == [AMQP_HEADER, decode_frame(EMPTY_FRAME)]


def test_frame_raw_keeps_the_exact_bytes():
    raw = encode_frame(_flow(handle=1, link_credit=100, drain=True), 3)
    assert decode_frame(raw).raw == raw
    assert codec.decode(raw[8:]) == _flow(handle=1, link_credit=100, drain=True)


def _decode_outcome(raw: bytes) -> object:
    try:
        frame = decode_frame(raw)
    except DecodeError as exc:
        return ("error", exc.offset, exc.expected, exc.condition)
    return ("frame", frame.performative, frame.payload)


_PERFORMATIVE_SAMPLES = [
    encode_frame(Transfer(handle=1, delivery_id=7, delivery_tag=b"t", settled=False), 0, b"m"),
    encode_frame(
        Flow(
            next_incoming_id=0,
            incoming_window=100,
            next_outgoing_id=1,
            outgoing_window=100,
            handle=0,
        )
    ),
    encode_frame(Disposition(role=True, first=3, last=9, settled=True)),
    encode_frame(Begin(next_outgoing_id=0, incoming_window=5, outgoing_window=5), 2),
]


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    sample=st.sampled_from(_PERFORMATIVE_SAMPLES),
    edits=st.lists(st.tuples(st.integers(8, 200), st.integers(0, 255)), max_size=3),
)
def test_performative_fast_dispatch_matches_decode_value(monkeypatch, sample, edits):
    """frames._frame_from decodes 0x00 0x53 <performative code> straight with the class's
    decoder; on any bytes it gives what the generic codec.decode_value path gives."""
    import amqpspec.amqp10.frames as frames

    raw = bytearray(sample)
    for at, value in edits:
        if at < len(raw):
            raw[at] = value
    fast = _decode_outcome(bytes(raw))
    with monkeypatch.context() as patch:
        patch.setattr(frames, "_PERFORMATIVE_DECODERS", {})
        generic = _decode_outcome(bytes(raw))
    assert fast == generic
