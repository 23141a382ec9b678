"""Messages (amqp10.message): section round trips, strict 3.2 section order, and multi-frame
transfer split/reassembly honouring max-frame-size, incl. aborted deliveries.

Spec: 3.2 (message format), 2.6.14 (transfers), 2.7.5 (transfer: more, aborted), 2.7.1
(max-frame-size).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10 import codec
from amqpspec.amqp10 import message_head as head_module
from amqpspec.amqp10.composites import (
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    Footer,
    Header,
    MessageAnnotations,
    Open,
    Properties,
    Transfer,
)
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.amqp10.frames import FrameDecoder, decode_frame
from amqpspec.amqp10.message import (
    Message,
    TransferAssembler,
    max_transfer_payload,
    received_point,
    resume_offset,
    transfer_frame_count,
    transfer_frames,
)
from amqpspec.amqp10.message_head import message_head, publish_head, section_at, section_fault
from amqpspec.amqp10.spec import MIN_MAX_FRAME_SIZE
from amqpspec.amqp10.types import symbol
from amqpspec.fuzz import strategies as gen

SOME = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@SOME
@given(gen.messages())
def test_message_roundtrip(message):
    encoded = message.encode()
    decoded = Message.decode(encoded)
    assert gen.typed_repr(decoded) == gen.typed_repr(message)
    assert decoded.encode() == encoded


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(gen.sections())
def test_every_section_roundtrips_alone(section):
    encoded = section.encode()
    decoded = codec.decode(encoded)
    assert gen.typed_repr(decoded) == gen.typed_repr(section)


def test_message_of_and_value():
    data = Message.of(b"hello world!")
    assert data.body == [Data(b"hello world!")] and data.value == b"hello world!"
    assert data.encode() == bytes.fromhex("005375a00c") + b"hello world!"
    value = Message.of({"a": 1})
    assert value.body == [AmqpValue({"a": 1})] and value.value == {"a": 1}
    chunks = Message(body=[Data(b"ab"), Data(b"cd")])
    assert chunks.value == b"abcd"
    seqs = Message(body=[AmqpSequence([1]), AmqpSequence([2])])
    assert seqs.value == [[1], [2]]


def test_full_message_section_order_on_the_wire():
    message = Message(
        header=Header(durable=True),
        delivery_annotations={symbol("x-da"): 1},
        message_annotations={symbol("x-opt"): "v"},
        properties=Properties(message_id="id-1", to="q"),
        application_properties={"k": 2},
        body=[Data(b"1"), Data(b"2")],
        footer={symbol("x-f"): None},
    )
    encoded = message.encode()
    codes = []
    pos = 0
    while pos < len(encoded):
        section, pos = codec.decode_value(encoded, pos)
        codes.append(section.DESCRIPTOR_CODE)
    assert codes == [0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x75, 0x78]
    assert Message.decode(encoded) == message


def _sections(*items):
    return b"".join(item.encode() for item in items)


@pytest.mark.parametrize(
    "payload, why",
    [
        (_sections(Properties(), Header()), "properties before header"),
        (_sections(Header(), Header()), "two headers"),
        (_sections(Data(b"x"), ApplicationProperties({})), "app-properties after the body"),
        (_sections(Footer({}), Data(b"x")), "body after the footer"),
        (_sections(AmqpValue(1), AmqpValue(2)), "two amqp-value sections"),
        (_sections(Data(b"x"), AmqpSequence([])), "mixed body kinds"),
        (_sections(AmqpValue(1), Data(b"x")), "mixed body kinds"),
        (_sections(MessageAnnotations({}), MessageAnnotations({})), "twice"),
        (Open(container_id="c").encode(), "a performative is no section"),
        (codec.encode(1), "a plain value is no section"),
        (Data(b"x").encode()[:-1], "truncated"),
        (bytes.fromhex("005375a10178"), "data with a string"),
        (bytes.fromhex("005374a10178"), "application-properties with a string"),
    ],
)
def test_bad_section_sequences(payload, why):
    with pytest.raises(DecodeError):
        Message.decode(payload)


def test_body_kinds_are_checked_on_encode():
    with pytest.raises(EncodeError):
        Message(body=[AmqpValue(1), AmqpValue(2)]).encode()
    with pytest.raises(EncodeError):
        Message(body=[Data(b"x"), AmqpSequence([])]).encode()
    with pytest.raises(EncodeError):
        Message(body=[Footer({})]).encode()


def test_empty_message_is_empty_bytes():
    assert Message().encode() == b""
    assert Message.decode(b"") == Message()


# ------------------------------------------------------------------ multi-frame transfers


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    payload=st.binary(max_size=3000),
    max_frame_size=st.integers(MIN_MAX_FRAME_SIZE, 2048),
    channel=st.integers(0, 0xFFFF),
    transfer=gen.composite("transfer"),
)
def test_split_respects_max_frame_size_and_reassembles(payload, max_frame_size, channel, transfer):
    transfer = transfer.replace(more=False, aborted=False)
    frames = transfer_frames(transfer, payload, max_frame_size, channel)
    assert all(len(raw) <= max_frame_size for raw in frames)
    assert transfer_frame_count(transfer, len(payload), max_frame_size, channel) == len(frames)
    decoded = [decode_frame(raw, max_frame_size) for raw in frames]
    assert all(f.channel == channel and f.name == "transfer" for f in decoded)
    # all but the last frame say more=true (2.7.5); the last says more=false
    assert [f.performative.more for f in decoded] == [True] * (len(frames) - 1) + [False]
    first = decoded[0].performative
    assert first.replace(more=False) == transfer
    for cont in decoded[1:]:
        assert cont.performative.handle == transfer.handle
    assert b"".join(f.payload for f in decoded) == payload
    # Every frame but the last is full: the split wastes no frame.
    assert all(len(raw) == max_frame_size for raw in frames[:-1])
    assembler = TransferAssembler()
    results = [assembler.feed(f.performative, f.payload) for f in decoded]
    assert results[:-1] == [None] * (len(frames) - 1)
    whole_first, whole = results[-1]
    assert whole == payload and whole_first == decoded[0].performative
    assert not assembler.in_progress


def test_split_of_a_real_message_through_the_frame_decoder():
    message = Message.of(b"x" * 5000, properties=Properties(message_id="m"))
    transfer = Transfer(handle=2, delivery_id=9, delivery_tag=b"t", message_format=0)
    frames = transfer_frames(transfer, message.encode(), 512, channel=1)
    assert len(frames) > 9
    decoder = FrameDecoder(expect_header=False, max_frame_size=512)
    decoder.feed(b"".join(frames))
    assembler = TransferAssembler()
    result = None
    for frame in decoder:
        result = assembler.feed(frame.performative, frame.payload)
    first, payload = result
    assert first.delivery_id == 9 and Message.decode(payload) == message


def test_small_delivery_is_one_frame():
    (raw,) = transfer_frames(Transfer(handle=0, delivery_id=0), b"abc", 512)
    frame = decode_frame(raw)
    assert frame.performative.more is False and frame.payload == b"abc"


def test_max_transfer_payload_fills_the_frame_exactly():
    transfer = Transfer(handle=3, delivery_id=70000, delivery_tag=b"tag", message_format=0)
    room = max_transfer_payload(transfer, 512, channel=1)
    (raw,) = transfer_frames(transfer, b"x" * room, 512, channel=1)
    assert len(raw) == 512
    assert transfer_frame_count(transfer, room + 1, 512, channel=1) == 2
    assert max_transfer_payload(transfer, 10) < 0


def test_max_frame_size_too_small_for_the_transfer():
    with pytest.raises(EncodeError):
        transfer_frames(Transfer(handle=0, delivery_tag=b"t" * 40), b"x" * 100, 50)


def test_aborted_transfer_discards_the_delivery():
    assembler = TransferAssembler()
    first = Transfer(handle=0, delivery_id=1, delivery_tag=b"a", more=True)
    assert assembler.feed(first, b"part") is None
    assert assembler.in_progress
    aborted = assembler.feed(Transfer(handle=0, more=True, aborted=True), b"")
    assert aborted == (first, b"")
    assert not assembler.in_progress
    # The next delivery starts clean.
    nxt = Transfer(handle=0, delivery_id=2, delivery_tag=b"b")
    assert assembler.feed(nxt, b"whole") == (nxt, b"whole")


def test_section_fault_names_a_break_of_the_3_2_order_or_a_malformed_section() -> None:
    header, props = Header(durable=True).encode(), Properties(subject="s").encode()
    body = Data(b"x").encode()
    assert section_fault(header + props + body + body) is None  # two data sections
    assert section_fault(body + props) == "properties after data"
    assert section_fault(header + header + body) == "header after header"
    assert section_fault(AmqpValue(1).encode() + Footer({}).encode()) is None
    # not told apart without decoding: left to the full decoder
    assert section_fault(b"garbage") is None and section_fault(b"") is None
    assert section_fault(header + body[:-1]).startswith("data section malformed")


def test_received_point_and_resume_offset_count_sections_of_every_prefix():
    """3.4.1 received: (section-number, section-offset) of the first byte not yet received,
    and back to that byte's offset, for every cut of a three-section message."""
    message = Message.of(b"body-" * 20)
    message.header = Header(durable=True)
    message.properties = Properties(message_id="m")
    payload = message.encode()
    seen = set()
    for cut in range(len(payload) + 1):
        number, offset = received_point(payload[:cut])
        seen.add(number)
        assert resume_offset(payload[:cut], number, offset) == cut
    assert seen == {0, 1, 2, 3} and received_point(payload) == (3, 0)
    assert resume_offset(payload[:4], 0, 5) is None  # past the bytes received
    assert resume_offset(payload[:4], 2, 0) is None


def test_assembler_pending_is_the_delivery_under_way():
    assembler = TransferAssembler()
    assert assembler.pending() is None
    first = Transfer(handle=0, delivery_id=0, delivery_tag=b"t", more=True)
    assembler.feed(first, b"ab")
    assembler.feed(Transfer(handle=0, more=True), b"cd")
    assert assembler.pending() == (first, b"abcd")


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(gen.sections(), max_size=4), st.data())
def test_section_fault_steps_values_as_codec_value_end_does(sections, data) -> None:
    """The values section_fault steps over itself (fixed widths, one-byte sizes) end where
    codec.value_end says: the same answer as with every value stepped by codec.value_end, on
    sections in any order, cut short or with a byte changed."""
    payload = bytearray(b"".join(section.encode() for section in sections))
    if payload and data.draw(st.booleans()):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    payload = payload[: data.draw(st.integers(0, len(payload)))]
    fast = section_fault(bytes(payload))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(head_module, "_STEP", (0,) * 256)
        assert section_fault(bytes(payload)) == fast


def _reference_fault(payload: bytes) -> str | None:
    """The sections' 3.2 order and extent as the walk judges them, read the slow way: each
    descriptor by section_at, each value stepped by codec.value_end."""
    pos, end, last_rank, last_name = 0, len(payload), -1, ""
    while pos < end:
        found = section_at(payload, pos, end)
        if found is None:
            return None
        name, rank, value_at = found
        if rank < last_rank or (rank == last_rank and rank != 5):
            return f"{name} after {last_name}"
        last_rank, last_name = rank, name
        try:
            pos = codec.value_end(payload, value_at, end)
        except DecodeError as exc:
            return f"{name} section malformed ({exc})"
    return None


def _encoded(section) -> bytes:
    return section.encode()


def _outcome(read, payload: bytes):
    try:
        return read(payload)
    except DecodeError as exc:
        return (type(exc), str(exc))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(gen.messages().map(Message.encode), gen.sections().map(_encoded)), st.data())
def test_publish_head_is_the_section_fault_else_message_head(start, data) -> None:
    """publish_head's one walk answers what the two walks before it did: the sections' fault
    (the reference walk above) when there is one, else the head message_head reads, or its
    DecodeError; on whole messages and sections in any order, cut short or a byte changed."""
    payload = bytearray(start)
    for _ in range(data.draw(st.integers(0, 2))):
        payload += data.draw(gen.sections()).encode()
    if payload and data.draw(st.booleans()):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    payload = bytes(payload[: data.draw(st.integers(0, len(payload)))])
    fault = _reference_fault(payload)
    if fault is not None:
        assert publish_head(payload) == fault == section_fault(payload)
    else:
        assert _outcome(publish_head, payload) == _outcome(message_head, payload)
        assert section_fault(payload) is None


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(gen.messages().map(Message.encode), st.data())
def test_user_id_from_header_bytes_is_the_decoded_user_id(start, data) -> None:
    """The user-id read from a properties list's header and constructor bytes alone (an
    empty list, a list8 without user-id or with a null one) is what the full read gives
    (composites.list_header, codec.value_end, codec.decode_value): the same value or the
    same DecodeError, at every position of whole messages, cut short or a byte changed."""
    payload = bytearray(start)
    if payload and data.draw(st.booleans()):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    payload = bytes(payload[: data.draw(st.integers(0, len(payload)))])
    for at in range(len(payload)):
        fast = _outcome(lambda p, at=at: head_module._user_id(p, at, len(p)), payload)
        full = _outcome(lambda p, at=at: head_module._user_id_decoded(p, at, len(p)), payload)
        assert fast == full


def test_the_head_reads_take_any_bytes_like_payload() -> None:
    """publish_head, message_head and section_fault answer a bytearray or a memoryview as
    they answer the same bytes, compiled or pure (message_head.pxd types only the walk's
    own copy)."""
    message = Message.of(b"body")
    message.properties = Properties(message_id="m", user_id=b"u")
    message.message_annotations = {symbol("x-opt-a"): 1}
    for payload in (message.encode(), Data(b"m").encode() + message.encode()):
        for read in (publish_head, message_head, section_fault):
            expected = _outcome(read, payload)
            assert _outcome(read, bytearray(payload)) == expected
            assert _outcome(read, memoryview(payload)) == expected
