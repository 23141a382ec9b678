"""Typed view of the spec table (amqp10.spec_table), the single source of truth.

Owns: lookups by name and by descriptor code, resolution of restricted types to their
primitive source, conversion of the XML's literal defaults to Python values, and the
error-condition / role / settle-mode constants every other module names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amqpspec.amqp10 import spec_table
from amqpspec.amqp10.types import symbol


@dataclass(frozen=True, slots=True)
class Encoding:
    name: str | None
    code: int
    category: str
    width: int


@dataclass(frozen=True, slots=True)
class PrimitiveType:
    name: str
    section: str
    encodings: tuple[Encoding, ...]


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str
    mandatory: bool
    multiple: bool
    default: str | None
    requires: str | None

    @property
    def attr(self) -> str:
        """Python attribute name: 'link-credit' -> 'link_credit'."""
        return self.name.replace("-", "_")


@dataclass(frozen=True, slots=True)
class CompositeType:
    name: str
    section: str
    source: str
    provides: tuple[str, ...]
    descriptor_name: str
    descriptor_code: int
    fields: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class RestrictedType:
    name: str
    section: str
    source: str
    provides: tuple[str, ...]
    descriptor_name: str | None
    descriptor_code: int | None
    choices: tuple[tuple[str, str], ...]


def _load() -> tuple[dict, dict, dict]:
    primitives = {
        p["name"]: PrimitiveType(
            p["name"], p["section"], tuple(Encoding(**e) for e in p["encodings"])
        )
        for p in spec_table.PRIMITIVES
    }
    composites = {
        c["name"]: CompositeType(
            c["name"],
            c["section"],
            c["source"],
            tuple(c["provides"]),
            c["descriptor"][0],
            c["descriptor"][1],
            tuple(Field(**f) for f in c["fields"]),
        )
        for c in spec_table.COMPOSITES
    }
    restricted = {
        r["name"]: RestrictedType(
            r["name"],
            r["section"],
            r["source"],
            tuple(r["provides"]),
            r["descriptor"][0] if r["descriptor"] else None,
            r["descriptor"][1] if r["descriptor"] else None,
            tuple(r["choices"]),
        )
        for r in spec_table.RESTRICTED
    }
    return primitives, composites, restricted


PRIMITIVES, COMPOSITES, RESTRICTED = _load()
DEFINITIONS: dict[str, str] = {d["name"]: d["value"] for d in spec_table.DEFINITIONS}
COMPOSITE_BY_CODE: dict[int, CompositeType] = {c.descriptor_code: c for c in COMPOSITES.values()}
COMPOSITE_BY_DESCRIPTOR_NAME: dict[str, CompositeType] = {
    c.descriptor_name: c for c in COMPOSITES.values()
}
SECTION_TYPES: dict[int, RestrictedType] = {
    r.descriptor_code: r for r in RESTRICTED.values() if r.descriptor_code is not None
}


def primitive_of(type_name: str) -> str:
    """Resolve a restricted type to the primitive it is encoded as ('handle' -> 'uint').

    Composite names resolve to 'list' only when described; callers treat composites
    separately. '*' stays '*' (any type, constrained by `requires`).
    """
    seen = type_name
    while seen in RESTRICTED:
        seen = RESTRICTED[seen].source
    return seen


def choices_of(type_name: str) -> dict[str, str]:
    """Choice name -> literal value of a restricted type ({} when unrestricted)."""
    restricted = RESTRICTED.get(type_name)
    return dict(restricted.choices) if restricted else {}


def providers_of(archetype: str) -> list[str]:
    """Every composite or restricted type that provides `archetype` (e.g. 'outcome')."""
    named = [*COMPOSITES.values(), *RESTRICTED.values()]
    return [t.name for t in named if archetype in t.provides]


def default_value(field: Field) -> Any:
    """The Python value of a field's XML default (a choice name or a literal), or None."""
    if field.default is None:
        return None
    literal = choices_of(field.type).get(field.default, field.default)
    primitive = primitive_of(field.type)
    if primitive == "boolean":
        return literal == "true"
    if primitive in {"ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"}:
        return int(literal)
    if primitive == "symbol":
        return symbol(literal)  # as decoded: expiry-policy "session-end" is a symbol
    return literal


def _condition_constants() -> dict[str, str]:
    names: dict[str, str] = {}
    for type_name in (
        "amqp-error",
        "connection-error",
        "session-error",
        "link-error",
        "transaction-error",
    ):
        for choice, value in RESTRICTED[type_name].choices:
            names[choice.upper().replace("-", "_")] = value
    return names


CONDITIONS: dict[str, str] = _condition_constants()


class Cond:
    """Error condition symbols (2.8.15-2.8.18), generated from the table."""

    INTERNAL_ERROR = CONDITIONS["INTERNAL_ERROR"]
    NOT_FOUND = CONDITIONS["NOT_FOUND"]
    UNAUTHORIZED_ACCESS = CONDITIONS["UNAUTHORIZED_ACCESS"]
    DECODE_ERROR = CONDITIONS["DECODE_ERROR"]
    RESOURCE_LIMIT_EXCEEDED = CONDITIONS["RESOURCE_LIMIT_EXCEEDED"]
    NOT_ALLOWED = CONDITIONS["NOT_ALLOWED"]
    INVALID_FIELD = CONDITIONS["INVALID_FIELD"]
    NOT_IMPLEMENTED = CONDITIONS["NOT_IMPLEMENTED"]
    RESOURCE_LOCKED = CONDITIONS["RESOURCE_LOCKED"]
    PRECONDITION_FAILED = CONDITIONS["PRECONDITION_FAILED"]
    RESOURCE_DELETED = CONDITIONS["RESOURCE_DELETED"]
    ILLEGAL_STATE = CONDITIONS["ILLEGAL_STATE"]
    FRAME_SIZE_TOO_SMALL = CONDITIONS["FRAME_SIZE_TOO_SMALL"]
    CONNECTION_FORCED = CONDITIONS["CONNECTION_FORCED"]
    FRAMING_ERROR = CONDITIONS["FRAMING_ERROR"]
    CONNECTION_REDIRECT = "amqp:connection:redirect"
    WINDOW_VIOLATION = CONDITIONS["WINDOW_VIOLATION"]
    ERRANT_LINK = CONDITIONS["ERRANT_LINK"]
    HANDLE_IN_USE = CONDITIONS["HANDLE_IN_USE"]
    UNATTACHED_HANDLE = CONDITIONS["UNATTACHED_HANDLE"]
    DETACH_FORCED = CONDITIONS["DETACH_FORCED"]
    TRANSFER_LIMIT_EXCEEDED = CONDITIONS["TRANSFER_LIMIT_EXCEEDED"]
    MESSAGE_SIZE_EXCEEDED = CONDITIONS["MESSAGE_SIZE_EXCEEDED"]
    LINK_REDIRECT = "amqp:link:redirect"
    STOLEN = CONDITIONS["STOLEN"]


class Role:
    """role (2.8.1): a boolean on the wire."""

    SENDER = False
    RECEIVER = True


class SndSettleMode:
    """sender-settle-mode (2.8.2)."""

    UNSETTLED = 0
    SETTLED = 1
    MIXED = 2


class RcvSettleMode:
    """receiver-settle-mode (2.8.3)."""

    FIRST = 0
    SECOND = 1


class SaslCode:
    """sasl-code (5.3.3.6)."""

    OK = 0
    AUTH = 1
    SYS = 2
    SYS_PERM = 3
    SYS_TEMP = 4


MIN_MAX_FRAME_SIZE = int(DEFINITIONS["MIN-MAX-FRAME-SIZE"])
PORT = int(DEFINITIONS["PORT"])
SECURE_PORT = int(DEFINITIONS["SECURE-PORT"])
MESSAGE_FORMAT = int(DEFINITIONS["MESSAGE-FORMAT"])
