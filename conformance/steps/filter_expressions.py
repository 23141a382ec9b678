"""The suite's own evaluator of OASIS "AMQP Filter Expressions Version 1.0" property filters
(Committee Specification Draft 01, https://docs.oasis-open.org/amqp/filtex/v1.0/csd01/
filtex-v1.0-csd01.html; not in conformance/spec, so what it decides is a model, never a
verdict of the core specification), written apart from the reference broker's
(reference_broker/features/filters.py is never imported here): the filter cases compare what a
broker delivers with `selects(filter_set, message)`.

Owns: the filter descriptors (`amqp:properties-filter` 0x173, `amqp:application-properties-
filter` 0x174, as RabbitMQ 4.1's rabbit_amqp_filter_prop reads them), `properties_filter` /
`application_properties_filter` (the described values a receiver puts in its source's
filter-set) and `selects`, the decision for one message.

The rules, filtex 4.1.1 as quoted by RabbitMQ 4.1's implementation: "The filter evaluates
to true if all properties enclosed in the filter expression match the respective
properties in the message" (4.2.4; 4.2.5 the same for application-properties entries); a
reference value matches when it is null, when the field has the same value (numbers of
different types "equal when treated as a floating-point"), or, for a string reference
starting `&p:` / `&s:`, when the field is a string starting / ending with the rest; `&&`
stands for one leading `&`. A field the message lacks matches only a null reference. 3.5.8:
"A message will pass through a filter-set if and only if it passes through each of the
named filters"; a null filter passes everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import Described, symbol, ulong

PROPERTIES_FILTER_CODE = ulong(0x173)
APPLICATION_PROPERTIES_FILTER_CODE = ulong(0x174)
PROPERTIES_FILTER_NAME = symbol("amqp:properties-filter")
APPLICATION_PROPERTIES_FILTER_NAME = symbol("amqp:application-properties-filter")
_CODES = {
    PROPERTIES_FILTER_CODE: "properties",
    APPLICATION_PROPERTIES_FILTER_CODE: "application-properties",
    str(PROPERTIES_FILTER_NAME): "properties",
    str(APPLICATION_PROPERTIES_FILTER_NAME): "application-properties",
}


def properties_filter(fields: Mapping[str, Any], *, by_name: bool = False) -> Described:
    """An amqp:properties-filter: properties field name (e.g. "subject") -> reference."""
    descriptor = PROPERTIES_FILTER_NAME if by_name else PROPERTIES_FILTER_CODE
    return Described(descriptor, {symbol(name): value for name, value in fields.items()})


def application_properties_filter(
    entries: Mapping[str, Any], *, by_name: bool = False
) -> Described:
    """An amqp:application-properties-filter: application-properties key -> reference."""
    descriptor = (
        APPLICATION_PROPERTIES_FILTER_NAME if by_name else APPLICATION_PROPERTIES_FILTER_CODE
    )
    return Described(descriptor, dict(entries))


def kind_of(entry: Any) -> str | None:
    """ "properties" / "application-properties" for a property filter, else None."""
    if not isinstance(entry, Described):
        return None
    descriptor = entry.descriptor
    key = str(descriptor) if isinstance(descriptor, str) else descriptor
    return _CODES.get(key)


def _family(value: Any) -> str:
    """The comparison family of a value: numbers compare across their types, nothing
    compares across families (a boolean is no number here, as in AMQP)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes | bytearray):
        return "binary"
    return type(value).__name__


def reference_matches(reference: Any, present: bool, value: Any) -> bool:
    """filtex 4.1.1: does a message field (`present`, `value`) match `reference`?"""
    if reference is None:
        return True
    if not present or value is None:
        return False
    if isinstance(reference, str) and reference[:1] == "&":
        modifier, rest = reference[:3], reference[3:]
        if modifier == "&p:":
            return isinstance(value, str) and value[: len(rest)] == rest
        if modifier == "&s:":
            return (
                isinstance(value, str)
                and len(value) >= len(rest)
                and (value[len(value) - len(rest) :] == rest)
            )
        if reference[:2] != "&&":
            raise ValueError(f"{reference!r}: no such string modifier (filtex 4.1.1)")
        reference = reference[1:]  # "&&...": the escaped leading "&"
    if _family(reference) != _family(value):
        return False
    if _family(value) == "number":
        return float(reference) == float(value)
    return bytes(reference) == bytes(value) if _family(value) == "binary" else reference == value


def _fields(message: Message, kind: str) -> dict[str, Any]:
    if kind == "application-properties":
        return dict(message.application_properties or {})
    properties = message.properties
    if properties is None:
        return {}
    out = {}
    for attribute in type(properties).__slots__:
        value = getattr(properties, attribute, None)
        if value is not None:
            out[attribute.replace("_", "-")] = value
    return out


def selects(filter_set: Mapping[Any, Any] | None, message: Message) -> bool:
    """3.5.8: the message passes every property filter of `filter_set` (other entries,
    such as a stream offset-spec, select everything)."""
    for entry in (filter_set or {}).values():
        kind = kind_of(entry)
        if kind is None:
            continue
        fields = _fields(message, kind)
        for key, reference in entry.value.items():
            name = str(key)
            if not reference_matches(reference, name in fields, fields.get(name)):
                return False
    return True
