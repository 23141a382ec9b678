"""Hypothesis strategies for AMQP 1.0 values, composites and messages, built from the spec table.

Owns: `primitive(name)` (a typed value of one primitive type), `values()` (any AMQP value:
primitives, lists, maps, arrays incl. arrays of arrays and of described types, described
values, spec composites and sections), `composite(name)` / `any_composite()` (every field
drawn from its declared type, `multiple`, `mandatory` and `requires`), `sections()`,
`messages()`, and `typed_repr(value)`, a type-strict comparable form (NaN-safe) for
round-trip assertions. Tests and fuzzers import these; amqp10 never does (it must not
depend on hypothesis).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from hypothesis import strategies as st

from amqpspec.amqp10 import codec, spec
from amqpspec.amqp10 import composites as amqp_composites
from amqpspec.amqp10 import types as amqp_types
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import INT_RANGES, WRAPPERS, Array, Described, symbol, ulong

# the integral types by AMQP name (ranges: amqp10.types.INT_RANGES)
INT_CLASSES = {name: cls for name, cls in WRAPPERS.items() if cls in INT_RANGES}


def _int_values(cls: type) -> st.SearchStrategy[int]:
    low, high = INT_RANGES[cls]
    # Bias towards the encodings' switch-over points (0, 255/256, -128/127, extremes).
    edges = [v for v in (0, 1, 127, 128, 255, 256, -128, -129, low, high) if low <= v <= high]
    return st.one_of(st.sampled_from(edges), st.integers(low, high)).map(cls)


symbols = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=20).map(symbol)
short_symbols = st.text("abcdefghijklmnopqrstuvwxyz:-_.", min_size=1, max_size=12).map(symbol)


def primitive(name: str, allow_nan: bool = False, max_size: int = 40) -> st.SearchStrategy:
    """A value of AMQP primitive type `name`, as the codec's typed Python value."""
    if name in INT_CLASSES:
        return _int_values(INT_CLASSES[name])
    simple: dict[str, st.SearchStrategy] = {
        "null": st.none(),
        "boolean": st.booleans(),
        "float": st.floats(width=32, allow_nan=allow_nan).map(amqp_types.float32),
        "double": st.floats(allow_nan=allow_nan),
        "decimal32": st.binary(min_size=4, max_size=4).map(amqp_types.decimal32),
        "decimal64": st.binary(min_size=8, max_size=8).map(amqp_types.decimal64),
        "decimal128": st.binary(min_size=16, max_size=16).map(amqp_types.decimal128),
        "char": st.characters(exclude_categories=("Cs",)).map(amqp_types.char),
        "uuid": st.uuids(),
        "binary": st.binary(max_size=max_size),
        "string": st.text(max_size=max_size),
        "symbol": symbols,
    }
    return simple[name]


SCALAR_TYPES = [
    "null",
    "boolean",
    "ubyte",
    "ushort",
    "uint",
    "ulong",
    "byte",
    "short",
    "int",
    "long",
    "float",
    "double",
    "decimal32",
    "decimal64",
    "decimal128",
    "char",
    "timestamp",
    "uuid",
    "binary",
    "string",
    "symbol",
]
HASHABLE_KEYS = st.one_of(*(primitive(n) for n in SCALAR_TYPES if n not in ("float", "double")))
scalars = st.one_of(*(primitive(n) for n in SCALAR_TYPES))

_SPEC_DESCRIPTORS = {
    key
    for t in [*spec.COMPOSITES.values(), *spec.RESTRICTED.values()]
    if t.descriptor_code is not None
    for key in (t.descriptor_code, t.descriptor_name)
}
# Descriptors of no spec type: they decode as Described.
foreign_descriptors = st.one_of(
    st.integers(0, 2**64 - 1).filter(lambda c: c not in _SPEC_DESCRIPTORS).map(ulong),
    short_symbols.filter(lambda s: s not in _SPEC_DESCRIPTORS),
)


def _array_of(element: str, children: st.SearchStrategy | None = None) -> st.SearchStrategy:
    children = children if children is not None else scalars
    if element == "list":
        items = st.lists(st.lists(children, max_size=3), max_size=4)
    elif element == "map":
        items = st.lists(
            st.dictionaries(HASHABLE_KEYS, children, max_size=3),
            max_size=4,
        )
    else:
        items = st.lists(primitive(element, max_size=10), max_size=8)
    return items.map(lambda xs: Array(element, xs))


def arrays(children: st.SearchStrategy | None = None) -> st.SearchStrategy[Array]:
    """Arrays of every element type, arrays of arrays and arrays of described values."""
    flat = st.sampled_from([*SCALAR_TYPES, "list", "map"]).flatmap(lambda e: _array_of(e, children))
    of_arrays = st.sampled_from(SCALAR_TYPES).flatmap(
        lambda e: st.lists(_array_of(e), max_size=3).map(lambda xs: Array("array", xs))
    )

    @st.composite
    def of_described(draw: Any) -> Array:
        descriptor = draw(foreign_descriptors)
        element = draw(st.sampled_from(SCALAR_TYPES))
        inner = draw(st.lists(primitive(element, max_size=10), max_size=5))
        return Array(element, [Described(descriptor, v) for v in inner], descriptor)

    @st.composite
    def of_composites(draw: Any) -> Array:
        name = draw(st.sampled_from(sorted(spec.COMPOSITES)))
        cls = amqp_composites.COMPOSITE_CLASSES[name]
        items = draw(st.lists(composite(name, depth=1), max_size=3))
        return Array("list", items, codec.ulong(cls.DESCRIPTOR_CODE))

    return st.one_of(flat, of_arrays, of_described(), of_composites())


def values(max_leaves: int = 12, with_spec_types: bool = True) -> st.SearchStrategy:
    """Any AMQP value: scalars, lists, maps, arrays, described values (and spec types)."""
    leaves = scalars
    if with_spec_types:
        leaves = st.one_of(scalars, st.deferred(lambda: any_composite(depth=1)))

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(
            st.lists(children, max_size=5),
            st.dictionaries(HASHABLE_KEYS, children, max_size=4),
            arrays(children),
            st.builds(Described, foreign_descriptors, children),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


# ----------------------------------------------------------------- spec composites


def _restricted_value(name: str) -> st.SearchStrategy:
    restricted = spec.RESTRICTED[name]
    if restricted.choices:
        return st.sampled_from(
            [
                spec.default_value(spec.Field("x", name, False, False, choice, None))
                for choice, _ in restricted.choices
            ]
        )
    return _plain(spec.primitive_of(name))


def _plain(primitive_name: str) -> st.SearchStrategy:
    """Composite fields carry plain ints (the declared type says what they are)."""
    if primitive_name in INT_CLASSES and primitive_name != "timestamp":
        return _int_values(INT_CLASSES[primitive_name]).map(int)
    if primitive_name in ("map",):
        return st.dictionaries(HASHABLE_KEYS, scalars, max_size=3)
    if primitive_name == "list":
        return st.lists(scalars, max_size=3)
    if primitive_name == "array":
        return arrays()
    return primitive(primitive_name, max_size=20)


def _fields_map() -> st.SearchStrategy[dict]:
    return st.dictionaries(short_symbols, scalars, max_size=3)


def _provider(archetype: str, depth: int) -> st.SearchStrategy:
    options = []
    for name in spec.providers_of(archetype):
        if name in spec.COMPOSITES:
            options.append(composite(name, depth + 1))
        else:
            options.append(_plain_typed(spec.primitive_of(name)))
    return st.one_of(*options) if options else primitive("binary")


def _plain_typed(primitive_name: str) -> st.SearchStrategy:
    """A '*' field's value keeps its type on the wire, so it is a typed wrapper."""
    return primitive(primitive_name, max_size=20)


def _field_value(field: spec.Field, depth: int) -> st.SearchStrategy:
    ftype = field.type
    if ftype == "*":
        single = _provider(field.requires, depth) if field.requires else scalars
    elif ftype in spec.COMPOSITES:
        single = composite(ftype, depth + 1)
    elif ftype in ("fields", "node-properties"):
        single = _fields_map()
    elif ftype == "filter-set":
        single = st.dictionaries(
            short_symbols,
            st.one_of(st.none(), st.builds(Described, short_symbols.map(symbol), st.text())),
            max_size=2,
        )
    elif ftype in spec.RESTRICTED:
        single = _restricted_value(ftype)
    else:
        single = _plain(ftype)
    if field.multiple:
        single = st.lists(single, max_size=3)
    if field.mandatory:
        return single
    return st.one_of(st.none(), single)


MAX_COMPOSITE_DEPTH = 3


@st.composite
def _composite(draw: Any, name: str, depth: int) -> amqp_composites.Composite:
    cls = amqp_composites.COMPOSITE_CLASSES[name]
    kwargs = {}
    for field in spec.COMPOSITES[name].fields:
        if depth >= MAX_COMPOSITE_DEPTH and not field.mandatory:
            continue
        kwargs[field.attr] = draw(_field_value(field, depth))
    return cls(**kwargs)


def composite(name: str, depth: int = 0) -> st.SearchStrategy[amqp_composites.Composite]:
    """An instance of spec composite `name` with every field drawn from its declared type."""
    return _composite(name, depth)


def any_composite(depth: int = 0) -> st.SearchStrategy[amqp_composites.Composite]:
    return st.sampled_from(sorted(spec.COMPOSITES)).flatmap(lambda n: composite(n, depth))


# ----------------------------------------------------------------- sections and messages

annotation_keys = st.one_of(short_symbols, _int_values(ulong))
annotations = st.dictionaries(annotation_keys, scalars, max_size=3)
application_properties = st.dictionaries(st.text(max_size=10), scalars, max_size=4)


def bodies() -> st.SearchStrategy[list]:
    return st.one_of(
        st.lists(st.binary(max_size=30).map(amqp_composites.Data), min_size=1, max_size=3),
        st.lists(
            st.lists(scalars, max_size=3).map(amqp_composites.AmqpSequence), min_size=1, max_size=2
        ),
        values(max_leaves=6, with_spec_types=False).map(lambda v: [amqp_composites.AmqpValue(v)]),
        st.just([]),
    )


def sections() -> st.SearchStrategy:
    return st.one_of(
        composite("header"),
        composite("properties"),
        annotations.map(amqp_composites.DeliveryAnnotations),
        annotations.map(amqp_composites.MessageAnnotations),
        application_properties.map(amqp_composites.ApplicationProperties),
        st.binary(max_size=30).map(amqp_composites.Data),
        st.lists(scalars, max_size=3).map(amqp_composites.AmqpSequence),
        values(max_leaves=6).map(amqp_composites.AmqpValue),
        annotations.map(amqp_composites.Footer),
    )


def messages() -> st.SearchStrategy[Message]:
    return st.builds(
        Message,
        header=st.one_of(st.none(), composite("header")),
        delivery_annotations=st.one_of(st.none(), annotations),
        message_annotations=st.one_of(st.none(), annotations),
        properties=st.one_of(st.none(), composite("properties")),
        application_properties=st.one_of(st.none(), application_properties),
        body=bodies(),
        footer=st.one_of(st.none(), annotations),
    )


# ----------------------------------------------------------------- comparison


def typed_repr(value: Any) -> Any:
    """A comparable form that keeps AMQP types apart (ubyte(1) != uint(1)) and NaN == NaN."""
    if isinstance(value, amqp_composites.Composite):
        return (type(value).__name__, tuple(typed_repr(v) for v in value.field_values()))
    if isinstance(value, amqp_composites.Section):
        return (type(value).__name__, typed_repr(value.value))
    if isinstance(value, Message):
        return ("message", *(typed_repr(getattr(value, n)) for n in value.__slots__))
    if isinstance(value, Array):
        return (
            "array",
            value.element_type,
            typed_repr(value.descriptor),
            tuple(typed_repr(v) for v in value.items),
        )
    if isinstance(value, Described):
        return ("described", typed_repr(value.descriptor), typed_repr(value.value))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(typed_repr(v) for v in value))
    if isinstance(value, dict):
        return ("map", tuple((typed_repr(k), typed_repr(v)) for k, v in value.items()))
    if type(value) is amqp_types.float32:
        return ("float", struct.pack(">f", value))
    if type(value) is float:
        return ("double", struct.pack(">d", value))
    if isinstance(value, (bytes, bytearray, memoryview)) and type(value) in (
        bytes,
        bytearray,
        memoryview,
    ):
        return ("binary", bytes(value))
    if isinstance(value, uuid.UUID):
        return ("uuid", value.bytes)
    return (type(value).__name__, value)
