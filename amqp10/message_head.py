"""The head of an encoded message (3.2): its delivery-annotations and message-annotations
sections and the user-id of its properties, decoded without touching what follows them
(the other properties, application-properties, the body, the footer), and the keys 3.2.10
reserves in an annotations map.

Owns `MessageHead` (`EMPTY_HEAD`), `message_head(payload)` and `reserved_key(annotations)`.
A broker that routes without decoding a message reads its head on every publish: a message
with no annotations costs one descriptor peek (`message.section_at`) per leading section, a
properties section its list header, one step over message-id and one decode of user-id
(a whole Properties decode tripled the calls a publish costs the reference broker:
bench/README.md, "Cause of the send delta").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import list_header
from amqpspec.amqp10.errors import DecodeError, ErrorKind
from amqpspec.amqp10.message import section_at
from amqpspec.amqp10.types import symbol

_PROPERTIES_RANK = 3  # 3.2: header, delivery-annotations, message-annotations, properties
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


def message_head(payload: bytes) -> MessageHead:
    """The delivery-annotations, message-annotations and properties' user-id of an encoded
    message, read in order up to its properties (nothing after them decoded). Sections this
    cheap reading does not know (`section_at`: a symbolic descriptor, not a section) end the
    head there. DecodeError when what the head reads cannot be decoded."""
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
    """The user-id of the properties list at `at` (3.2.4: its second field): the list's
    header (composites.list_header, its size and count checked), message-id stepped over,
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
