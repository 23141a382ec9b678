"""The head of an encoded message (3.2): its delivery-annotations, message-annotations and
properties sections, decoded without touching what follows them (application-properties,
the body, the footer), and the keys 3.2.10 reserves in an annotations map.

Owns `MessageHead`, `message_head(payload)` and `reserved_key(annotations)`. A broker that
routes without decoding a message reads its head on every publish: a message with no
annotations and no properties costs one descriptor peek (`message.section_at`) per
leading section, a properties section one list decode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import Properties
from amqpspec.amqp10.message import section_at
from amqpspec.amqp10.types import symbol

_PROPERTIES_RANK = 3  # 3.2: header, delivery-annotations, message-annotations, properties
# 3.2.10 annotations: "All ulong keys, and all symbolic keys except those beginning with
# "x-" are reserved."
_UNRESERVED_PREFIX = "x-"


@dataclass(frozen=True, slots=True)
class MessageHead:
    """The sections of a message before its application data that a broker judges a
    publish by (3.2.2, 3.2.3, 3.2.4); None where the message has no such section."""

    delivery_annotations: Mapping[Any, Any] | None = None
    message_annotations: Mapping[Any, Any] | None = None
    properties: Properties | None = None


def message_head(payload: bytes) -> MessageHead:
    """The delivery-annotations, message-annotations and properties of an encoded message,
    read in order up to the first section after properties (nothing after it decoded).
    Sections this cheap reading does not know (`section_at`: a symbolic descriptor, not a
    section) end the head there. DecodeError when one of the head's sections cannot be
    decoded."""
    pos, end = 0, len(payload)
    found: dict[str, Any] = {}
    while pos < end:
        at = section_at(payload, pos, end)
        if at is None or at[1] > _PROPERTIES_RANK:
            break
        name, _, value_at = at
        if name == "header":  # 3.2.1: nothing a broker judges here
            pos = codec.value_end(payload, value_at, end)
            continue
        section, pos = codec.decode_value(payload, pos, end)
        found.setdefault(name, section)
    return MessageHead(
        delivery_annotations=_value(found.get("delivery-annotations")),
        message_annotations=_value(found.get("message-annotations")),
        properties=found.get("properties"),
    )


def _value(section: Any) -> Any:
    return section.value if section is not None else None


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
