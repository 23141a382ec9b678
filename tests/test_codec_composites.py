"""Composite types (amqp10.composites) generated from the spec table: round trip of every
composite with fields drawn from their declared types, defaults, mandatory fields,
trailing-null omission, multiple=true fields, type checks and `requires`.

Spec: 1.4 (composite types), 2.7 (performatives), 3.2, 3.4, 3.5, 4.5, 5.3.3.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10 import codec, spec
from amqpspec.amqp10.composites import (
    COMPOSITE_CLASSES,
    Accepted,
    Attach,
    Begin,
    Disposition,
    Error,
    Flow,
    Open,
    Received,
    SaslMechanisms,
    Source,
    Target,
    Transfer,
)
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.amqp10.types import Array, symbol, uint
from amqpspec.fuzz import strategies as gen

EACH = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", sorted(spec.COMPOSITES))
@EACH
@given(data=st.data())
def test_composite_roundtrip(name, data):
    obj = data.draw(gen.composite(name))
    encoded = obj.encode()
    assert encoded[0] == codec.DESCRIBED
    decoded = codec.decode(encoded)
    assert type(decoded) is type(obj)
    assert decoded == obj
    assert gen.typed_repr(decoded) == gen.typed_repr(obj)
    # Re-encoding what we decoded gives the same bytes (one canonical encoding).
    assert decoded.encode() == encoded


def test_trailing_nulls_and_defaults_are_omitted():
    flow = Flow(next_incoming_id=0, incoming_window=10, next_outgoing_id=0, outgoing_window=5)
    # 1.4: the list holds 4 fields; handle onward (null or default) are not sent.
    assert flow.encode() == bytes.fromhex("005313c0070443520a435205")
    assert Open(container_id="c").encode() == bytes.fromhex("005310c00401a10163")
    assert Accepted().encode() == bytes.fromhex("00532445")


def test_null_in_the_middle_is_sent_as_null():
    attach = Attach(name="l", handle=0, role=True, target=Target(address="q"))
    body = codec.decode(attach.encode())
    assert body == attach and body.source is None
    raw = attach.encode()
    # name, handle, role, snd-settle-mode(default->null), rcv-settle-mode, source=null, target
    assert raw[3] == codec.LIST8 and raw[5] == 7


def test_defaults_applied_on_decode_for_absent_and_null_fields():
    decoded = codec.decode(bytes.fromhex("005314c00402520140"))  # transfer: handle, null
    assert decoded == Transfer(handle=1)
    assert decoded.more is False and decoded.aborted is False and decoded.batchable is False
    assert decoded.settled is None  # no default in the XML
    open_ = codec.decode(bytes.fromhex("005310c00401a10163"))
    assert open_.max_frame_size == 0xFFFFFFFF and open_.channel_max == 0xFFFF


@pytest.mark.parametrize(
    "obj",
    [Open(), Begin(next_outgoing_id=1), Received(section_number=1), SaslMechanisms()],
)
def test_mandatory_fields_are_enforced_on_encode(obj):
    with pytest.raises(EncodeError):
        obj.encode()


@pytest.mark.parametrize(
    "wire",
    [
        "00531045",  # open without container-id
        "005310c0020140",  # open with a null container-id
        "005314c0020140",  # transfer without handle
        "005323c003024340",  # received without section-offset
    ],
)
def test_mandatory_fields_are_enforced_on_decode(wire):
    with pytest.raises(DecodeError, match="mandatory"):
        codec.decode(bytes.fromhex(wire))


@pytest.mark.parametrize(
    "wire, why",
    [
        ("005310c003015501", "open.container-id is a string, not a long"),
        ("005313c00301a100", "flow.next-incoming-id is a uint"),
        ("005314c003015501", "transfer.handle is a uint, not a smalllong"),
        ("005315c003015201", "disposition.role is a boolean"),
        ("005318c00301a100", "close.error is an error composite"),
        ("005324c0020140", "accepted has no fields"),
        ("005310a100", "a composite is a list"),
        ("005310c1020140", "not a map"),
        ("005310c00302a10163", "list count beyond its items"),
    ],
)
def test_field_types_are_checked(wire, why):
    with pytest.raises(DecodeError):
        codec.decode(bytes.fromhex(wire))


def test_requires_is_checked_for_star_fields():
    # attach.source requires a `source` (2.7.3): a target in that slot is an error.
    bad = Attach(name="x", handle=0, role=False, source=Target(address="q"))
    with pytest.raises(DecodeError, match="source"):
        codec.decode(bad.encode())
    # disposition.state requires a delivery-state: Source is not one.
    bad_state = Disposition(role=True, first=0, state=Source())
    with pytest.raises(DecodeError):
        codec.decode(bad_state.encode())


def test_multiple_fields_decode_to_lists():
    # 1.4 / multiple=true: a single value or an array is allowed on the wire.
    single = codec.decode(bytes.fromhex("005340c00801a305504c41494e"))
    assert single.sasl_server_mechanisms == ["PLAIN"]
    many = SaslMechanisms(sasl_server_mechanisms=[symbol("ANONYMOUS"), symbol("PLAIN")])
    raw = many.encode()
    assert raw[6] == codec.ARRAY8
    assert codec.decode(raw).sasl_server_mechanisms == ["ANONYMOUS", "PLAIN"]
    as_array = SaslMechanisms(sasl_server_mechanisms=Array("symbol", [symbol("X")]))
    assert codec.decode(as_array.encode()).sasl_server_mechanisms == ["X"]


def test_fields_maps_get_symbol_keys():
    error = Error(condition=symbol("amqp:x"), info={"k": 1})
    raw = error.encode()
    decoded = codec.decode(raw)
    assert decoded.info == {"k": 1}
    assert type(next(iter(decoded.info))) is symbol


def test_plain_ints_in_composites():
    flow = codec.decode(
        Flow(incoming_window=uint(7), next_outgoing_id=0, outgoing_window=1).encode()
    )
    assert type(flow.incoming_window) is int and flow.incoming_window == 7


def test_replace_and_repr():
    flow = Flow(incoming_window=10, next_outgoing_id=0, outgoing_window=5, handle=0)
    more = flow.replace(link_credit=3)
    assert more.link_credit == 3 and flow.link_credit is None
    assert "link_credit=3" in repr(more) and "drain" not in repr(more)
    assert more != flow and Flow() == Flow()
    assert Flow().__eq__(Open()) is NotImplemented


def test_every_composite_class_exists():
    assert set(COMPOSITE_CLASSES) == set(spec.COMPOSITES)


# The generated fast-path decoders must agree with the generic reference decoders.


def _reference_decode(raw: bytes):
    from amqpspec.amqp10.composites import REFERENCE_BODY_DECODERS

    descriptor_end = 3  # 0x00 0x53 <code>
    reference = REFERENCE_BODY_DECODERS[raw[2]]
    return reference(raw, descriptor_end, len(raw), 1)


def _fast_decode(raw: bytes):
    return codec.COMPOSITE_BODY_DECODERS[raw[2]](raw, 3, len(raw), 1)


def _outcome(decode, raw):
    try:
        return ("ok", gen.typed_repr(decode(raw)[0]), decode(raw)[1])
    except DecodeError:
        return ("error",)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(gen.any_composite(), st.data())
def test_fast_and_reference_decoders_agree(obj, data):
    raw = bytearray(obj.encode())
    assert raw[:2] == b"\x00\x53"
    assert _outcome(_fast_decode, bytes(raw)) == _outcome(_reference_decode, bytes(raw))
    for _ in range(data.draw(st.integers(0, 3))):
        if len(raw) <= 3:
            break
        index = data.draw(st.integers(3, len(raw) - 1))
        raw[index] = data.draw(st.integers(0, 255))
    mutated = bytes(raw[: data.draw(st.integers(4, max(4, len(raw))))])
    assert _outcome(_fast_decode, mutated) == _outcome(_reference_decode, mutated)


@pytest.mark.parametrize(
    "obj",
    [
        Flow(next_incoming_id=-1, incoming_window=1, next_outgoing_id=0, outgoing_window=1),
        Flow(next_incoming_id=2**32, incoming_window=1, next_outgoing_id=0, outgoing_window=1),
        Transfer(handle=0, delivery_tag="not bytes"),
        Attach(name="x", handle=0, role=False, snd_settle_mode=256),
        Open(container_id="c", offered_capabilities=[symbol("é")]),
    ],
)
def test_out_of_range_fields_raise_encode_error_and_leave_out_clean(obj):
    out = bytearray(b"keep")
    with pytest.raises(EncodeError):
        obj.encode_into(out)
    assert out.startswith(b"keep") and len(out) <= 4 + 3


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(gen.any_composite())
def test_generated_encoder_matches_the_generic_one(obj):
    from amqpspec.amqp10.composites import Composite

    generic = bytearray()
    Composite.encode_list_into(obj, generic)  # the reference implementation
    generated = bytearray()
    obj.encode_list_into(generated)
    assert generated == generic


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    channel=st.integers(0, 0xFFFF),
    handle=st.sampled_from([0, 1, 255, 256, 0xFFFFFFFF]) | st.integers(0, 0xFFFFFFFF),
    delivery_id=st.sampled_from([0, 1, 255, 256, 0xFFFFFFFF]) | st.integers(0, 0xFFFFFFFF),
    tag=st.binary(max_size=32),
    message_format=st.sampled_from([0, 1, 255, 256, 0x80013700]) | st.integers(0, 0xFFFFFFFF),
    settled=st.booleans(),
    payload=st.binary(max_size=600),
)
def test_transfer_fast_encoder_matches_encode_frame(
    channel, handle, delivery_id, tag, message_format, settled, payload
):
    """frames.encode_transfer_frame (the engine's send path) == encode_frame(Transfer)."""
    from amqpspec.amqp10.frames import encode_frame, encode_transfer_frame

    transfer = Transfer(
        handle=handle,
        delivery_id=delivery_id,
        delivery_tag=tag,
        message_format=message_format,
        settled=settled,
    )
    fast = encode_transfer_frame(
        channel, handle, delivery_id, tag, message_format, settled, payload
    )
    assert fast == encode_frame(transfer, channel, payload)
