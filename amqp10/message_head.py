"""The sections of an encoded message read without decoding them (3.2): their order, and
the head a broker judges a publish by (its delivery-annotations and message-annotations
sections and the user-id of its properties), with nothing after the properties decoded.

Owns `section_at(payload, pos, end)` (one section descriptor peeked), `publish_head(payload)`
(the broker's check of every publish: the 3.2 section order and the head in one walk),
`section_fault(payload)` (that walk's verdict on the order alone), `message_head(payload)`
(the head without the order check), `MessageHead` (`EMPTY_HEAD`) and
`reserved_key(annotations)` (the keys 3.2.10 reserves in an annotations map).

A broker that routes without decoding a message walks its sections on every publish, so
the walk is counted in calls (bench/README.md, "Cause of the send delta"): a descriptor
read in place, a value stepped over by its constructor, a section's name looked up only for a
fault, nothing built for a message with no annotations and no user-id; a properties section
costs its header bytes when it is empty or its user-id absent or null, else its list header,
one step over message-id and one decode of user-id. Compiled with the codec where the build
can (scripts/build_speedups.py, docs/speedups.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import list_header
from amqpspec.amqp10.errors import DecodeError, ErrorKind
from amqpspec.amqp10.message import SECTION_ORDER
from amqpspec.amqp10.types import symbol

# 3.2's sections in descriptor code order (0x70 header .. 0x78 footer): (name, rank in 3.2 order)
_SECTION_BY_CODE: tuple[tuple[str, int], ...] = tuple(SECTION_ORDER.items())
_FIRST_SECTION_CODE, _LAST_SECTION_CODE = 0x70, 0x70 + len(_SECTION_BY_CODE) - 1
_SMALLULONG, _ULONG = 0x53, 0x80
_LIST0, _LIST8, _NULL = 0x45, 0xC0, 0x40  # 1.6.22 list0, list8; 1.6.1 null
# the same by the one byte of a smallulong descriptor (1.5: 0x00 0x53 CODE), None: no section
_SECTION_BY_SMALL_CODE: tuple[tuple[str, int] | None, ...] = tuple(
    _SECTION_BY_CODE[code - _FIRST_SECTION_CODE]
    if _FIRST_SECTION_CODE <= code <= _LAST_SECTION_CODE
    else None
    for code in range(256)
)
# How the walk steps over a section's value without a call, by its constructor (1.2: the
# subcategory in the upper nibble): the bytes of a fixed-width value, constructor included
# (0x4-0x9: null, list0, booleans, numbers, ...), -1 for a one-byte size and then that many
# bytes (0xA, 0xC, 0xE: vbin8, str8, sym8, list8, map8, array8), 0 for the rest (described
# values, 32-bit sizes), which codec.value_end steps over, as does a value past the payload.
_FIXED_BYTES = {0x4: 1, 0x5: 2, 0x6: 3, 0x7: 5, 0x8: 9, 0x9: 17}
_STEP: tuple[int, ...] = tuple(
    _FIXED_BYTES.get(code >> 4, -1 if code >> 4 in (0xA, 0xC, 0xE) else 0) for code in range(256)
)
# the same as ranks alone (-1: no section), what the walk compares
_RANK_BY_SMALL_CODE: tuple[int, ...] = tuple(
    -1 if section is None else section[1] for section in _SECTION_BY_SMALL_CODE
)
_PROPERTIES_RANK = 3
_BODY_RANK = 5  # data, amqp-sequence, amqp-value: the one rank a message may repeat (3.2)
_PROPERTIES_FIELDS = 13  # 3.2.4: message-id ... reply-to-group-id
# 3.2.10 annotations: "All ulong keys, and all symbolic keys except those beginning with
# "x-" are reserved."
_UNRESERVED_PREFIX = "x-"


@dataclass(frozen=True, slots=True)
class MessageHead:
    """What a broker judges a publish by before its application data (3.2.2, 3.2.3, the
    user-id of 3.2.4); None where the message has no such section or field."""

    delivery_annotations: Mapping[Any, Any] | None = None
    message_annotations: Mapping[Any, Any] | None = None
    user_id: bytes | None = None


EMPTY_HEAD = MessageHead()  # a message with no annotations and no user-id


def section_at(payload: bytes, pos: int, end: int) -> tuple[str, int, int] | None:
    """The section whose descriptor starts at `pos`, read without decoding anything: (its
    name, its rank in 3.2's order, where its value starts), or None when the bytes there are
    not a section descriptor this cheap reading knows (not a described value, a symbolic
    descriptor, a code that is no section's)."""
    if payload[pos] != 0x00 or pos + 2 >= end:
        return None
    code = payload[pos + 1]
    if code == _SMALLULONG:
        number, value_at = payload[pos + 2], pos + 3
    elif code == _ULONG and pos + 10 <= end:
        number, value_at = int.from_bytes(payload[pos + 2 : pos + 10], "big"), pos + 10
    else:
        return None
    if not _FIRST_SECTION_CODE <= number <= _LAST_SECTION_CODE:
        return None
    name, rank = _SECTION_BY_CODE[number - _FIRST_SECTION_CODE]
    return name, rank, value_at


def publish_head(payload: bytes) -> MessageHead | str:
    """The sections of a published message in one walk: what is wrong with their order (a
    str: the first section out of 3.2's order, one after a later kind or a second header,
    properties, ..., or a section whose value runs past the payload's end), else the head
    `message_head` reads (its sections are those the walk passed before properties).

    Each section's descriptor is read in place (a smallulong code, its rank by index; anything
    else by `section_at`) and its value stepped over by its constructor's width or size byte,
    else by codec.value_end; only the head's sections are decoded, after the walk, and a
    section's name is looked up only for a fault. A payload whose sections cannot be told
    apart this way (not a described value, a symbolic descriptor) is judged up to there.
    DecodeError when the head cannot be decoded."""
    # bytes: what message_head.pxd types the walk's reads on (any bytes-like taken alike)
    data = payload if type(payload) is bytes else bytes(payload)
    pos, end, last_rank, last_at = 0, len(data), -1, -1
    delivery_at = message_at = properties_at = -1  # the head's sections, once passed
    steps, ranks = _STEP, _RANK_BY_SMALL_CODE
    while pos < end:
        if data[pos] == 0 and pos + 2 < end and data[pos + 1] == _SMALLULONG:
            rank = ranks[data[pos + 2]]  # section_at's reading, in place
            if rank < 0:
                break  # no section's code: not judged past here
            value_at = pos + 3
        else:
            found = section_at(data, pos, end)
            if found is None:
                break  # not told apart without decoding: not judged past here
            rank, value_at = found[1], found[2]
        if rank <= last_rank and (rank < last_rank or rank != _BODY_RANK):
            return f"{_name_at(data, pos)} after {_name_at(data, last_at)}"
        last_rank, last_at = rank, pos
        if rank <= _PROPERTIES_RANK:
            if rank == _PROPERTIES_RANK:
                properties_at = value_at
            elif rank == 2:
                message_at = pos
            elif rank == 1:
                delivery_at = pos
        if value_at < end:
            step = steps[data[value_at]]
            if step < 0 and value_at + 1 < end:
                step = 2 + data[value_at + 1]
            if 0 < step <= end - value_at:  # where codec.value_end says the value ends
                pos = value_at + step
                continue
        try:
            pos = codec.value_end(data, value_at, end)
        except DecodeError as exc:
            return f"{_name_at(data, pos)} section malformed ({exc})"
    if delivery_at < 0 and message_at < 0:
        if properties_at < 0:
            return EMPTY_HEAD  # the common publish: nothing to decode, nothing to build
        user_id = _user_id(data, properties_at, end)
        return EMPTY_HEAD if user_id is None else MessageHead(None, None, user_id)
    delivery = codec.decode_value(data, delivery_at, end)[0].value if delivery_at >= 0 else None
    message = codec.decode_value(data, message_at, end)[0].value if message_at >= 0 else None
    user_id = _user_id(data, properties_at, end) if properties_at >= 0 else None
    if delivery is None and message is None and user_id is None:
        return EMPTY_HEAD
    return MessageHead(delivery, message, user_id)


def _name_at(payload: bytes, pos: int) -> str:
    """The name of the section whose descriptor `publish_head` read at `pos` (for its verdict)."""
    found = section_at(payload, pos, len(payload))
    assert found is not None  # the walk read a section there
    return found[0]


def section_fault(payload: bytes) -> str | None:
    """What is wrong with the sections of `payload` (`publish_head`'s verdict on their 3.2
    order and extent), or None: also when the head it reads after an orderly walk cannot be
    decoded (a verdict on the head, not on the order)."""
    try:
        found = publish_head(payload)
    except DecodeError:
        return None
    return found if type(found) is str else None


def message_head(payload: bytes) -> MessageHead:
    """The delivery-annotations, message-annotations and properties' user-id of an encoded
    message, read in order up to its properties (nothing after them decoded) whatever the
    order of the sections (`publish_head` checks it too). Sections this cheap reading does
    not know (`section_at`: a symbolic descriptor, not a section) end the head there.
    DecodeError when what the head reads cannot be decoded."""
    pos, end = 0, len(payload)
    delivery = message = user_id = None
    while pos < end:
        at = section_at(payload, pos, end)
        if at is None or at[1] > _PROPERTIES_RANK:
            break
        name, _, value_at = at
        if name == "properties":
            user_id = _user_id(payload, value_at, end)
            break  # the last section of the head
        if name == "header":  # 3.2.1: nothing a broker judges here
            pos = codec.value_end(payload, value_at, end)
            continue
        section, pos = codec.decode_value(payload, pos, end)
        if name == "delivery-annotations":
            delivery = section.value if delivery is None else delivery
        else:
            message = section.value if message is None else message
    if delivery is None and message is None and user_id is None:
        return EMPTY_HEAD  # the common publish: nothing to build
    return MessageHead(delivery, message, user_id)


def _user_id(payload: bytes, at: int, end: int) -> bytes | None:
    """The user-id of the properties list at `at` (3.2.4: its second field), read as
    `_user_id_decoded` reads it; an empty list, or a list8 whose user-id is absent or null
    (most publishes), is answered from its header and constructor bytes, without a call."""
    code = payload[at]
    if code == _LIST0:
        return None  # no fields (list_header's count 0)
    if code == _LIST8 and at + 3 <= end:
        stop, count = at + 2 + payload[at + 1], payload[at + 2]
        if at + 3 <= stop <= end and count <= _PROPERTIES_FIELDS:  # list_header's checks
            if count < 2:
                return None  # no user-id field
            first = at + 3  # message-id: stepped over as publish_head steps a value
            step = _STEP[payload[first]] if first < end else 0
            if step < 0 and first + 1 < end:
                step = 2 + payload[first + 1]
            if 0 < step < end - first and payload[first + step] == _NULL:
                return None  # user-id null
    return _user_id_decoded(payload, at, end)


def _user_id_decoded(payload: bytes, at: int, end: int) -> bytes | None:
    """The user-id of the properties list at `at`: the list's header
    (composites.list_header, its size and count checked), message-id stepped over,
    nothing else of the list read."""
    count, first, _ = list_header(payload, at, end, "properties", _PROPERTIES_FIELDS)
    if count < 2:
        return None
    user_at = codec.value_end(payload, first, end)
    value, _ = codec.decode_value(payload, user_at, end)
    if value is not None and not isinstance(value, bytes | bytearray):
        raise DecodeError(
            user_at,
            f"properties.user-id of type binary, got {type(value).__name__}",
            kind=ErrorKind.FIELD_TYPE,
            performative="properties",
            field="user-id",
        )
    return bytes(value) if value is not None else None


def reserved_key(annotations: Mapping[Any, Any] | None) -> Any:
    """The first key of an annotations map that is not a symbol beginning with "x-", or
    None: a ulong key or a symbolic key 3.2.10 reserves (no annotation key of the
    specification's own is defined for these maps, so no container recognizes one), or a
    key of a type the annotations type does not allow (a string)."""
    if not annotations:
        return None
    for key in annotations:
        if not (isinstance(key, symbol) and key.startswith(_UNRESERVED_PREFIX)):
            return key
    return None
