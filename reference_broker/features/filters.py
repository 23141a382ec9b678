"""The reference broker's source filters (3.5.3 `filter`, the filter-set of 3.5.8): which
filters of a receiver's source it puts in place, the filter-set its attach reports, and the
property filters it evaluates.

Owns: `in_place(source, stream=..., faults=...)`, which sorts a receiver's filter-set into
the filters this broker applies and the rest, and `FiltersInPlace` (the source to report,
the predicate a consumer's deliveries must pass). The link handler
(protocol/link_handler.py) calls it once per consumer attach; the stream queue
(queues/streams.py) skips the entries the predicate refuses, a classic or quorum queue
hands the consumer only the messages it accepts (queues/selection.py). No AMQP bytes:
payloads are decoded with amqp10.message.

What is in place: on a stream queue, `rabbitmq:stream-offset-spec` (queues/streams.py reads it) and
the property filters of OASIS "AMQP Filter Expressions Version 1.0" (Committee
Specification Draft 01, https://docs.oasis-open.org/amqp/filtex/v1.0/csd01/
filtex-v1.0-csd01.html; RabbitMQ 4.1 ships them, on streams only, as here):
`amqp:properties-filter` (descriptor 0x173: a map from a properties field name, a symbol,
to the value it must have) and `amqp:application-properties-filter` (0x174: a map from an
application-properties key, a string, to its value). A message passes when every entry
matches (filtex 4.2.4, 4.2.5); a reference value matches when it is null, when it is equal
(numbers of different types compared as numbers, filtex 4.1.1), or, for a string, when it
starts `&p:` (prefix) or `&s:` (suffix) and the field is a string with that prefix or
suffix; `&&` escapes a leading `&`; any other leading `&` makes the filter invalid. At most
16 entries per filter (filtex 7.1's complexity limit, RabbitMQ's figure). Also on a stream
queue: `amqp:sql-filter` (0x120) and the JMS selector `apache.org:selector-filter:string`
(0x0000468C:0x00000004), a string each, parsed and evaluated by features/selectors.py (an
expression it cannot parse is left out like an invalid property filter). Those two are in
place on classic and quorum queues too (as Qpid Broker-J and ActiveMQ Artemis apply
selectors on queues): the consumer is handed only the messages they accept, the others stay
queued (queues/selection.py). Property filters on a classic queue are left out.

Everything else is left out of the attach reply: an unknown filter, a property filter on a
classic queue, an invalid one. 3.5.3 filter: "the sending endpoint sets the filter actually
in place"; 2.6.3: an endpoint that cannot create the terminus as asked "MAY adjust the
properties [...] In this case the endpoint MUST report the actual properties of the
terminus as created"; the receiver then decides whether to detach (3.5.3 filter: "The
receiving endpoint MUST check that the filter in place meets its needs and take
responsibility for detaching if it does not"). A null entry is no filter (3.5.8) and is
left out too. The `report-unknown-filters` fault echoes the whole filter-set asked for;
`properties-filter-ignores-subject` applies a properties filter without its subject entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import Described

from ..faults.catalog import Faults
from .selectors import SELECTOR, SQL, SelectorError, SqlExpression, compile_expression

OFFSET_SPEC = "rabbitmq:stream-offset-spec"  # queues/streams.py
PROPERTIES_FILTER = frozenset({"amqp:properties-filter", 0x173})
APPLICATION_PROPERTIES_FILTER = frozenset({"amqp:application-properties-filter", 0x174})
# the SQL-like filters (features/selectors.py): filtex's SQL filter, Qpid's JMS selector
SQL_FILTER = frozenset({"amqp:sql-filter", 0x120})
SELECTOR_FILTER = frozenset({"apache.org:selector-filter:string", 0x0000468C00000004})
MAX_FIELDS = 16
# properties-filter keys (3.2.4 field names) -> the Properties attribute
PROPERTY_FIELDS = {
    name: name.replace("-", "_")
    for name in (
        "message-id", "user-id", "to", "subject", "reply-to", "correlation-id",
        "content-type", "content-encoding", "absolute-expiry-time", "creation-time",
        "group-id", "group-sequence", "reply-to-group-id",
    )
}  # fmt: skip
_MISSING = object()


class InvalidFilterError(ValueError):
    """A property filter this broker cannot put in place (left out of the reply)."""


@dataclass(frozen=True, slots=True)
class _Affix:
    prefix: bool
    text: str

    def matches(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        return value.startswith(self.text) if self.prefix else value.endswith(self.text)


@dataclass(frozen=True, slots=True)
class _Expression:
    """One property filter: which section it reads and each entry's reference value."""

    application: bool
    entries: tuple[tuple[str, Any], ...]

    def passes(self, message: Message) -> bool:
        if self.application:
            fields = message.application_properties or {}
            return all(_matches(ref, fields.get(key, _MISSING)) for key, ref in self.entries)
        properties = message.properties
        return all(
            _matches(ref, getattr(properties, PROPERTY_FIELDS[key], None) if properties else None)
            for key, ref in self.entries
        )


@dataclass(slots=True)
class FiltersInPlace:
    """The filters a consumer's source has: `source` to report in the attach, `accepts`
    (None: every message) for its deliveries."""

    source: Any
    expressions: list[_Expression | SqlExpression] = field(default_factory=list)

    @property
    def accepts(self) -> Callable[[bytes], bool] | None:
        return self._accepts if self.expressions else None

    def _accepts(self, payload: bytes) -> bool:
        try:
            message = Message.decode(payload)
        except DecodeError:
            return False  # nothing to read the fields from
        return all(expression.passes(message) for expression in self.expressions)


def in_place(source: Any, *, stream: bool, faults: Faults) -> FiltersInPlace:
    """Sort `source`'s filter-set (3.5.3) into what this broker applies and what it leaves
    out; the source returned reports only the filters in place (2.6.3)."""
    asked: Mapping[Any, Any] | None = getattr(source, "filter", None)
    if not asked:
        return FiltersInPlace(source)
    kept: dict[Any, Any] = {}
    expressions: list[_Expression | SqlExpression] = []
    for key, entry in asked.items():
        if entry is None:
            continue  # 3.5.8: a null filter is no filter
        if str(key) == OFFSET_SPEC:
            if stream:
                kept[key] = entry
            continue
        descriptor = entry.descriptor if isinstance(entry, Described) else None
        kind = None if descriptor is None else _kind(descriptor)
        if kind is None:
            continue  # a filter type this broker does not know
        if not stream and kind not in (SQL, SELECTOR):
            continue  # property filters: on streams only, as RabbitMQ 4.1 has them
        try:
            expression = _parse_entry(kind, entry.value, faults)
        except (InvalidFilterError, SelectorError):
            continue
        kept[key] = entry
        expressions.append(expression)
    reported = dict(asked) if faults.report_unknown_filters else kept
    return FiltersInPlace(source.replace(filter=reported or None), expressions)


def _kind(descriptor: Any) -> str | None:
    """The filter type of a descriptor (symbol or ulong code): "application" or
    "properties" (property filters), SQL or SELECTOR (features/selectors.py), else None."""
    name: Any = str(descriptor) if isinstance(descriptor, str) else descriptor
    for kind, names in (
        ("properties", PROPERTIES_FILTER),
        ("application", APPLICATION_PROPERTIES_FILTER),
        (SQL, SQL_FILTER),
        (SELECTOR, SELECTOR_FILTER),
    ):
        if name in names:
            return kind
    return None


def _parse_entry(kind: str, value: Any, faults: Faults) -> _Expression | SqlExpression:
    if kind in (SQL, SELECTOR):
        return compile_expression(value, kind, faults=faults)
    return _parse(value, application=kind == "application", faults=faults)


def _parse(value: Any, *, application: bool, faults: Faults) -> _Expression:
    if not isinstance(value, Mapping) or not value or len(value) > MAX_FIELDS:
        raise InvalidFilterError(f"not a map of 1 to {MAX_FIELDS} entries: {value!r}")
    entries = []
    for key, ref in value.items():
        if not isinstance(key, str) or (not application and str(key) not in PROPERTY_FIELDS):
            raise InvalidFilterError(f"no such field {key!r}")
        if faults.properties_filter_ignores_subject and not application and key == "subject":
            continue  # fault: the subject entry never checked
        entries.append((str(key), _reference(ref)))
    return _Expression(application, tuple(entries))


def _reference(ref: Any) -> Any:
    """filtex 4.1.1: a string's `&p:` / `&s:` modifier, `&&` escape; other `&` invalid."""
    if not isinstance(ref, str) or not ref.startswith("&"):
        return ref
    if ref.startswith("&p:"):
        return _Affix(True, ref[3:])
    if ref.startswith("&s:"):
        return _Affix(False, ref[3:])
    if ref.startswith("&&"):
        return ref[1:]
    raise InvalidFilterError(f"unknown string modifier in {ref!r}")


def _matches(ref: Any, value: Any) -> bool:
    if ref is None:
        return True
    if value is _MISSING or value is None:
        return False
    if isinstance(ref, _Affix):
        return ref.matches(value)
    if isinstance(ref, bool) or isinstance(value, bool):
        return isinstance(ref, bool) and isinstance(value, bool) and ref == value
    if isinstance(ref, int | float) and isinstance(value, int | float):
        return ref == value  # numbers of any two types, as numbers
    if isinstance(ref, str) and isinstance(value, str):
        return str(ref) == str(value)
    if isinstance(ref, bytes | bytearray) and isinstance(value, bytes | bytearray):
        return bytes(ref) == bytes(value)
    return type(ref) is type(value) and ref == value
