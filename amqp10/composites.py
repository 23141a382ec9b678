"""Typed objects for every described type of the spec table, generated at import.

Owns: one class per composite type (Open, Flow, Transfer, Source, Accepted, SaslInit, ...)
and per described restricted type (the message sections Data, AmqpValue,
MessageAnnotations, ...). Classes are generated from amqp10.spec, never written by hand:
fields, order, defaults and mandatory flags come from the XML.

Composite objects (1.4, 1.2): on decode, defaults are applied, mandatory fields must be
present, every field's constructor must match its declared type, multiple=true fields
become lists. On encode, trailing fields that are null or equal to their default are
omitted. The decoders registered here are the codec's fast path for performatives:
they read the list bytes field by field without building an intermediate list.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, ClassVar

from amqpspec.amqp10 import codec, speedups
from amqpspec.amqp10.codec import (
    ARRAY8,
    ARRAY32,
    CODES_OF_TYPE,
    DESCRIBED,
    LIST0,
    LIST8,
    LIST32,
    NULL,
    Decoder,
    Encoder,
)
from amqpspec.amqp10.errors import DecodeError, EncodeError, ErrorKind
from amqpspec.amqp10.spec import (
    COMPOSITES,
    SECTION_TYPES,
    CompositeType,
    Field,
    RestrictedType,
    default_value,
    primitive_of,
)
from amqpspec.amqp10.types import Array, Described, symbol

_BB = struct.Struct(">BB")
_II = struct.Struct(">II")
_ALL_CODES = frozenset(code for code in range(256) if codec.DECODERS[code] is not codec._invalid)


def class_name(spec_name: str) -> str:
    """'sasl-init' -> 'SaslInit'."""
    return "".join(part.capitalize() for part in spec_name.split("-"))


# Plain decoders: like codec.DECODERS but fixed-width numbers come back as plain int,
# because a composite field's declared type already says what they are.
def _plain_table() -> list[Decoder]:
    table = list(codec.DECODERS)
    unwrap = {
        codec.UBYTE: ">B",
        codec.USHORT: ">H",
        codec.UINT: ">I",
        codec.SMALLUINT: ">B",
        codec.ULONG: ">Q",
        codec.SMALLULONG: ">B",
        codec.BYTE: ">b",
        codec.SHORT: ">h",
        codec.INT: ">i",
        codec.SMALLINT: ">b",
        codec.LONG: ">q",
        codec.SMALLLONG: ">b",
    }
    for code, fmt in unwrap.items():
        table[code] = codec._fixed(struct.Struct(fmt), None, codec.TYPE_OF_CODE[code])
    table[codec.UINT0] = codec._constant(0)
    table[codec.ULONG0] = codec._constant(0)
    return table


PLAIN_DECODERS = _plain_table()


def _enc_fields_map(out: bytearray, value: dict) -> None:
    """fields / annotations maps (2.8.14, 3.2.10): plain str keys go out as symbols."""
    if any(type(key) is str for key in value):
        value = {symbol(k) if type(k) is str else k: v for k, v in value.items()}
    codec.enc_map(out, value)


def _field_codes(field: Field) -> frozenset[int]:
    primitive = primitive_of(field.type)
    if primitive == "*":
        return _ALL_CODES
    if primitive in COMPOSITES:
        return frozenset({DESCRIBED, NULL})
    codes = CODES_OF_TYPE[primitive] | {NULL}
    if field.multiple:
        codes |= {ARRAY8, ARRAY32}
    return frozenset(codes)


def _field_encoder(field: Field) -> Encoder:
    primitive = primitive_of(field.type)
    if primitive == "*" or primitive in COMPOSITES:
        return codec.encode_into
    if field.type in {"fields", "annotations", "node-properties", "filter-set"}:
        return _enc_fields_map
    single = codec.ENCODERS_BY_TYPE[primitive]
    if not field.multiple:
        return single

    def enc_multiple(out: bytearray, value: Any) -> None:
        if isinstance(value, (list, tuple)):
            codec.enc_array_of(out, primitive, value)
        elif isinstance(value, Array):
            codec.enc_array(out, value)
        else:
            single(out, value)

    return enc_multiple


class Composite:
    """Base of every generated composite class."""

    __slots__ = ()
    SPEC: ClassVar[CompositeType]
    NAME: ClassVar[str]
    DESCRIPTOR_CODE: ClassVar[int]
    FIELD_NAMES: ClassVar[tuple[str, ...]]
    _DEFAULTS: ClassVar[tuple[Any, ...]]
    _MANDATORY: ClassVar[tuple[bool, ...]]
    _ENCODERS: ClassVar[tuple[Encoder, ...]]
    _DESCRIPTOR_BYTES: ClassVar[bytes]

    def field_values(self) -> list[Any]:
        return [getattr(self, name) for name in self.FIELD_NAMES]

    def encode_into(self, out: bytearray) -> None:
        out += self._DESCRIPTOR_BYTES
        self.encode_list_into(out)

    def sent_fields(self) -> int:
        """How many fields the list encoding carries (1.4: trailing fields that are null
        or equal to their default are omitted)."""
        values = self.field_values()
        defaults = self._DEFAULTS
        last = len(values)
        while last and (values[last - 1] is None or values[last - 1] == defaults[last - 1]):
            if values[last - 1] is not None and type(values[last - 1]) is not type(
                defaults[last - 1]
            ):
                break
            last -= 1
        return last

    def encode_list_into(self, out: bytearray) -> None:
        """The composite's list (1.4) without its descriptor."""
        values = self.field_values()
        last = self.sent_fields()
        mandatory = self._MANDATORY
        if last == 0:
            if True in mandatory:
                raise EncodeError(
                    f"{self.NAME}.{self.FIELD_NAMES[mandatory.index(True)]} is mandatory"
                )
            out.append(LIST0)
            return
        body = bytearray()
        encoders = self._ENCODERS
        for index in range(last):
            value = values[index]
            if value is None:
                if mandatory[index]:
                    raise EncodeError(f"{self.NAME}.{self.FIELD_NAMES[index]} is mandatory")
                body.append(NULL)
            else:
                encoders[index](body, value)
        for index in range(last, len(values)):
            if mandatory[index] and values[index] is None:
                raise EncodeError(f"{self.NAME}.{self.FIELD_NAMES[index]} is mandatory")
        codec.write_compound(out, LIST8, LIST32, last, body)

    def encode(self) -> bytes:
        out = bytearray()
        self.encode_into(out)
        return bytes(out)

    def replace(self, **changes: Any) -> Composite:
        """A copy with some fields changed (for fuzzers and tests)."""
        values = {name: getattr(self, name) for name in self.FIELD_NAMES}
        values.update(changes)
        return type(self)(**values)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.field_values() == other.field_values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = []
        for name, default, value in zip(self.FIELD_NAMES, self._DEFAULTS, self.field_values()):
            if value is not None and value != default:
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


def _make_init(names: tuple[str, ...], defaults: tuple[Any, ...]) -> Any:
    params = ", ".join(f"{name}=None" for name in names)
    lines = [f"def __init__(self, {params}):" if names else "def __init__(self):"]
    for index, name in enumerate(names):
        if defaults[index] is None:
            lines.append(f"    self.{name} = {name}")
        else:
            lines.append(f"    self.{name} = _d[{index}] if {name} is None else {name}")
    if not names:
        lines.append("    pass")
    scope: dict[str, Any] = {"_d": defaults}
    exec("\n".join(lines), scope)
    return scope["__init__"]


def _field_table(field: Field) -> list[Decoder]:
    """The decoders of a field's items: typed values where its declared type does not say
    what they are ('*', maps, fields), plain ints otherwise."""
    if primitive_of(field.type) in ("*", "map") or field.type == "fields":
        return codec.DECODERS
    return PLAIN_DECODERS


def _list_header(buf: bytes, pos: int, end: int, name: str, count_max: int) -> tuple[int, int, int]:
    """(count, first field, stop) of the list of composite `name` at `pos` (1.4): a list
    constructor, its size within `end`, at most `count_max` fields."""
    code = buf[pos]
    start = pos
    if code == LIST0:
        count = 0
        pos += 1
        stop = pos
    elif code in (LIST8, LIST32):
        width = 1 if code == LIST8 else 4  # of the size and of the count
        if pos + 1 + 2 * width > end:
            codec._need(pos + 1, 2 * width, end, f"{name} list size and count")
        size, count = (_BB if width == 1 else _II).unpack_from(buf, pos + 1)
        stop = pos + 1 + width + size
        pos += 1 + 2 * width
    else:
        raise DecodeError(
            pos,
            f"{name} as a list, got constructor 0x{code:02x}",
            kind=ErrorKind.NOT_A_LIST,
            performative=name,
        )
    if stop > end or stop < pos:
        raise DecodeError(
            start,
            f"{name} list within {end - start} byte(s)",
            kind=ErrorKind.COMPOUND_OVERRUN,
            performative=name,
            declared=stop - start,
            limit=end - start,
        )
    if count > count_max:
        raise DecodeError(
            start,
            f"at most {count_max} fields of {name}, got {count}",
            kind=ErrorKind.TOO_MANY_FIELDS,
            performative=name,
            declared=count,
            allowed=count_max,
        )
    return count, pos, stop


list_header = _list_header  # public: amqp10.message_head reads a properties list's header


def _field_error(pos: int, expected: str, kind: ErrorKind, name: str, field: Field) -> DecodeError:
    """What is wrong with field `field` of composite `name` (1.4)."""
    return DecodeError(pos, expected, kind=kind, performative=name, field=field.name)


# a composite's checks after its fields are read, as field indexes: (mandatory, multiple,
# (index, archetype) of the '*' fields that require one)
_Checks = tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, str], ...]]


def _finish_fields(
    values: list[Any], start: int, name: str, fields: tuple[Field, ...], checks: _Checks
) -> None:
    """Mandatory fields present, multiple=true fields as lists, '*' fields of the archetype
    they require (1.4)."""
    mandatory, multiple, requires = checks
    for index in mandatory:
        if values[index] is None:
            field = fields[index]
            expected = f"mandatory field {name}.{field.name}"
            raise _field_error(start, expected, ErrorKind.MANDATORY_FIELD, name, field)
    for index in multiple:
        value = values[index]
        if value is not None:
            values[index] = list(value.items) if isinstance(value, Array) else [value]
    for index, archetype in requires:
        value = values[index]
        if isinstance(value, Composite) and archetype not in value.SPEC.provides:
            expected = f"{name}.{fields[index].name} to be a {archetype}"
            raise _field_error(start, expected, ErrorKind.FIELD_ARCHETYPE, name, fields[index])


def _make_body_decoder(cls: type[Composite], spec: CompositeType) -> Decoder:
    """Decode the list that follows the descriptor, straight into a `cls` instance (the
    reference the generated decoders are held to)."""
    fields = spec.fields
    count_max = len(fields)
    allowed = tuple(_field_codes(f) for f in fields)
    tables = tuple(_field_table(f) for f in fields)
    checks: _Checks = (
        tuple(i for i, f in enumerate(fields) if f.mandatory),
        tuple(i for i, f in enumerate(fields) if f.multiple),
        tuple(
            (i, f.requires)
            for i, f in enumerate(fields)
            if f.requires and primitive_of(f.type) == "*"
        ),
    )
    names = cls.FIELD_NAMES
    defaults = cls._DEFAULTS
    name = spec.name
    new = object.__new__

    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Composite, int]:
        start = pos
        count, pos, stop = _list_header(buf, pos, end, name, count_max)
        values: list[Any] = [None] * count_max
        for index in range(count):
            if pos >= stop:
                codec._need(pos, 1, stop, f"{name}.{names[index]}")
            item_code = buf[pos]
            if item_code not in allowed[index]:
                field = fields[index]
                expected = (
                    f"{name}.{field.name} of type {field.type}, got constructor 0x{item_code:02x}"
                )
                raise _field_error(pos, expected, ErrorKind.FIELD_TYPE, name, field)
            values[index], pos = tables[index][item_code](buf, pos + 1, stop, depth + 1)
        if pos != stop:
            raise DecodeError(
                pos,
                f"{name} list to end at byte {stop}",
                kind=ErrorKind.COMPOUND_END,
                performative=name,
            )
        _finish_fields(values, start, name, fields, checks)
        obj = new(cls)
        for index in range(count_max):
            value = values[index]
            object.__setattr__(obj, names[index], defaults[index] if value is None else value)
        return obj, stop

    return dec


def _build_from_list(cls: type[Composite], body_decoder: Decoder) -> codec.DescribedBuilder:
    """Composite inside an array of described items: items arrive already decoded."""

    def build(value: Any, pos: int) -> Composite:
        if not isinstance(value, list):
            raise DecodeError(
                pos, f"{cls.NAME} as a list", kind=ErrorKind.NOT_A_LIST, performative=cls.NAME
            )
        if not value:
            return body_decoder(b"\x45", 0, 1, 1)[0]
        body = bytearray()
        codec.enc_list(body, value)
        return body_decoder(bytes(body), 0, len(body), 1)[0]

    return build


def _make_composite(spec: CompositeType) -> type[Composite]:
    names = tuple(f.attr for f in spec.fields)
    defaults = tuple(default_value(f) for f in spec.fields)
    namespace: dict[str, Any] = {
        "__slots__": names,
        "__doc__": f"{spec.name} ({spec.descriptor_name}, {spec.section}).",
        "SPEC": spec,
        "NAME": spec.name,
        "DESCRIPTOR_CODE": spec.descriptor_code,
        "FIELD_NAMES": names,
        "_DEFAULTS": defaults,
        "_MANDATORY": tuple(f.mandatory for f in spec.fields),
        "_ENCODERS": tuple(_field_encoder(f) for f in spec.fields),
        "_DESCRIPTOR_BYTES": b"\x00" + codec.encode(codec.ulong(spec.descriptor_code)),
        "__init__": _make_init(names, defaults),
    }
    cls = type(class_name(spec.name), (Composite,), namespace)
    encode_list_into = _make_list_encoder(cls, spec)
    descriptor_bytes = cls._DESCRIPTOR_BYTES

    def encode_into(self: Composite, out: bytearray) -> None:
        out += descriptor_bytes
        encode_list_into(self, out)

    cls.encode_list_into = encode_list_into
    cls.encode_into = encode_into
    return cls


# ----------------------------------------------------------------- generated codecs
# The generated source below is exec'd (the pure path). scripts/build_speedups.py compiles the
# same texts, typed, into amqp10._generated (docs/speedups.md): a compiled twin is used only
# when it was built from the identical text and AMQP10_PURE is unset. GENERATED keeps every
# text (sha256 -> source, the scope names it reads) for that build.
GENERATED: dict[str, tuple[str, tuple[str, ...]]] = {}


def _compiled_factories() -> dict[str, Any]:
    if speedups.pure_forced():
        return {}
    try:
        from amqpspec.amqp10 import _generated as compiled  # type: ignore[attr-defined]
    except ImportError:
        return {}
    return compiled.FACTORIES


_FACTORIES = _compiled_factories()
COMPILED_TWINS: list[str] = []  # the names of the generated functions running compiled


def _generated(source: str, scope: dict[str, Any], name: str) -> Any:
    """The function `name` defined by `source` over `scope`: exec'd, or its compiled twin."""
    exec(source, scope)
    function = scope[name]
    key = hashlib.sha256(source.encode()).hexdigest()
    GENERATED[key] = (source, tuple(n for n in function.__code__.co_names if n in scope))
    factory = _FACTORIES.get(key)
    if factory is None:
        return function
    COMPILED_TWINS.append(name)
    return factory(scope, function)


# The fast path (bench/README.md "The fast path"): every
# composite class gets an encode and a decode function generated from its spec fields,
# with the common field types (uint, ulong, boolean, binary, symbol, string) inlined and
# no intermediate lists. The generic field encoders/decoders above stay the reference;
# tests/test_codec_composites.py and the proton oracle hold both to the same bytes.

_INLINE_ENCODE = {
    "uint": (
        "if {v} == 0:\n    out.append(0x43)\n"
        "elif 0 < {v} < 256:\n    out.append(0x52)\n    out.append({v})\n"
        "else:\n    out += _BI(0x70, {v})\n"
    ),
    "ulong": (
        "if {v} == 0:\n    out.append(0x44)\n"
        "elif 0 < {v} < 256:\n    out.append(0x53)\n    out.append({v})\n"
        "else:\n    out += _BQ(0x80, {v})\n"
    ),
    "boolean": "out.append(0x41 if {v} else 0x42)\n",
    "ubyte": "out += _BB(0x50, {v})\n",
    "ushort": "out += _BH(0x60, {v})\n",
    "binary": (
        "n = len({v})\n"
        "if n < 256:\n    out.append(0xA0)\n    out.append(n)\n"
        "else:\n    out += _BI(0xB0, n)\n"
        "out += {v}\n"
    ),
    "symbol": (
        "raw = {v}.encode('ascii')\nn = len(raw)\n"
        "if n < 256:\n    out.append(0xA3)\n    out.append(n)\n"
        "else:\n    out += _BI(0xB3, n)\n"
        "out += raw\n"
    ),
    "string": (
        "raw = {v}.encode('utf-8')\nn = len(raw)\n"
        "if n < 256:\n    out.append(0xA1)\n    out.append(n)\n"
        "else:\n    out += _BI(0xB1, n)\n"
        "out += raw\n"
    ),
}


def _facts(performative: str, field: str | None = None) -> str:
    """The structured facts of a generated raise site, as keyword arguments' source."""
    if field is None:
        return f"performative={performative!r}"
    return f"performative={performative!r}, field={field!r}"


def _indent(code: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line + "\n" for line in code.splitlines())


def _inline_kind(field: Field) -> str | None:
    """Which inline template encodes/decodes this field, or None for the generic path."""
    if field.multiple or field.type in {"fields", "annotations", "node-properties"}:
        return None
    primitive = primitive_of(field.type)
    return primitive if primitive in _INLINE_ENCODE else None


def _encoder_head(spec: CompositeType, names: tuple[str, ...]) -> list[str]:
    """Generated lines: v0..vN read from self, the mandatory ones checked (1.4)."""
    lines = ["def encode_list_into(self, out):"]
    for i, name in enumerate(names):
        lines.append(f"    v{i} = self.{name}")
    for i, field in enumerate(spec.fields):
        if field.mandatory:
            lines.append(f"    if v{i} is None:")
            lines.append(f"        raise EncodeError('{spec.name}.{names[i]} is mandatory')")
    return lines


def _encoder_last(defaults: tuple[Any, ...]) -> list[str]:
    """Generated lines: last = 1 + the index of the last field that must be sent (1.4:
    trailing fields that are null or equal to their default are omitted)."""
    count = len(defaults)
    lines = ["    last = 0"]
    for i in reversed(range(count)):
        keyword = "if" if i == count - 1 else "elif"
        if defaults[i] is None:
            cond = f"v{i} is not None"
        else:
            cond = f"v{i} is not None and not (v{i} == _d{i} and type(v{i}) is _t{i})"
        lines.append(f"    {keyword} {cond}:")
        lines.append(f"        last = {i + 1}")
    return lines


def _encoder_fields(fields: tuple[Field, ...]) -> list[str]:
    """Generated lines, inside the try: each field up to `last`, inlined where its type has
    a template (_INLINE_ENCODE), else through its field encoder _e{i}."""
    lines = []
    if not fields:
        lines.append("        pass")
    for i, field in enumerate(fields):
        body = []
        kind = _inline_kind(field)
        body.append(f"if v{i} is None:\n    out.append(0x40)\n")
        if kind is not None:
            body.append("else:\n" + _indent(_INLINE_ENCODE[kind].format(v=f"v{i}"), 4))
        else:
            body.append(f"else:\n    _e{i}(out, v{i})\n")
        code = "".join(body)
        if i == 0:
            lines.append(_indent(code, 8).rstrip("\n"))
        else:
            lines.append(f"        if last > {i}:")
            lines.append(_indent(code, 12).rstrip("\n"))
    return lines


def _encoder_tail(name: str) -> list[str]:
    """Generated lines: a failed field leaves `out` as it was; the list's size and count
    patched in, list32 when the body does not fit list8."""
    return [
        "    except EncodeError:",
        "        del out[start:]",
        "        raise",
        "    except (struct.error, UnicodeEncodeError, OverflowError, TypeError) as exc:",
        "        del out[start:]",
        f"        raise EncodeError(f'{name}: {{exc}}') from None",
        "    size = len(out) - start - 2",  # body bytes + the count byte
        "    if size < 256:",
        "        out[start + 1] = size",
        "        out[start + 2] = last",
        "    else:",
        "        out[start : start + 3] = _LIST32(0xD0, size + 3, last)",
    ]


def _encoder_scope(cls: type[Composite]) -> dict[str, Any]:
    """The names the generated encoder of `cls` reads."""
    scope: dict[str, Any] = {
        "EncodeError": EncodeError,
        "struct": struct,
        "_BI": struct.Struct(">BI").pack,
        "_BQ": struct.Struct(">BQ").pack,
        "_BB": struct.Struct(">BB").pack,
        "_BH": struct.Struct(">BH").pack,
        "_LIST32": struct.Struct(">BII").pack,
    }
    for i, default in enumerate(cls._DEFAULTS):
        scope[f"_d{i}"] = default
        scope[f"_t{i}"] = type(default)
        scope[f"_e{i}"] = cls._ENCODERS[i]
    return scope


def _make_list_encoder(cls: type[Composite], spec: CompositeType) -> Any:
    """encode_list_into(self, out): the composite's list (1.4), trailing null/default
    fields omitted, list8 when it fits, written straight into `out`."""
    lines = [
        *_encoder_head(spec, cls.FIELD_NAMES),
        *_encoder_last(cls._DEFAULTS),
        "    if last == 0:",
        "        out.append(0x45)",
        "        return",
        "    start = len(out)",
        "    out += b'\\xc0\\x00\\x00'",
        "    try:",
        *_encoder_fields(spec.fields),
        *_encoder_tail(spec.name),
    ]
    return _generated("\n".join(lines), _encoder_scope(cls), "encode_list_into")


# (constructor, width of the bytes after it, expression for the value) per inline type
_INLINE_DECODE: dict[str, list[tuple[int, int, str]]] = {
    "uint": [(0x52, 1, "buf[pos + 1]"), (0x43, 0, "0"), (0x70, 4, "_I(buf, pos + 1)[0]")],
    "ulong": [(0x53, 1, "buf[pos + 1]"), (0x44, 0, "0"), (0x80, 8, "_Q(buf, pos + 1)[0]")],
    "boolean": [(0x41, 0, "True"), (0x42, 0, "False")],
}


def _decode_field_code(i: int, field: Field, spec: CompositeType, what: str) -> str:
    """Code that decodes field i at `pos` (constructor byte `c`) into v{i}."""
    kind = _inline_kind(field)
    out = ["c = buf[pos]", "if c == 0x40:", "    pos += 1"]
    for code, width, expr in _INLINE_DECODE.get(kind or "", []):
        out.append(f"elif c == {code:#x}:")
        if width:
            out.append(f"    if pos + {1 + width} > stop:")
            out.append(f"        _need(pos + 1, {width}, stop, '{what}')")
        out.append(f"    v{i} = {expr}")
        out.append(f"    pos += {1 + width}")
    if kind == "binary":  # vbin8, e.g. a delivery-tag
        out.append("elif c == 0xA0:")
        out.append("    if pos + 2 > stop:")
        out.append(f"        _need(pos + 1, 1, stop, '{what} length')")
        out.append("    n = pos + 2 + buf[pos + 1]")
        out.append("    if n > stop:")
        out.append(
            f"        raise DecodeError(pos + 1, '{what} within its list', "
            f"kind={ErrorKind.SHORT_INPUT.value!r}, {_facts(spec.name, field.name)})"
        )
        out.append(f"    v{i} = bytes(buf[pos + 2 : n])")
        out.append("    pos = n")
    out.append(f"elif c in _allowed{i}:")
    out.append(f"    v{i}, pos = _table{i}[c](buf, pos + 1, stop, depth + 1)")
    out.append("else:")
    out.append(
        f"    raise DecodeError(pos, f'{what} of type {field.type}, got constructor 0x{{c:02x}}', "
        f"kind={ErrorKind.FIELD_TYPE.value!r}, {_facts(spec.name, field.name)})"
    )
    return "\n".join(out)


def _fast_list_header(name: str, count_max: int) -> list[str]:
    """Generated lines: the list's constructor, size and count (1.4) into start, stop, count
    and pos, the same checks as _list_header."""
    return [
        "    start = pos",
        "    code = buf[pos]",
        "    if code == 0xC0:",
        "        if pos + 3 > end:",
        f"            _need(pos + 1, 2, end, '{name} list size and count')",
        "        stop = pos + 2 + buf[pos + 1]",
        "        count = buf[pos + 2]",
        "        pos += 3",
        "    elif code == 0x45:",
        "        count = 0",
        "        pos += 1",
        "        stop = pos",
        "    elif code == 0xD0:",
        "        if pos + 9 > end:",
        f"            _need(pos + 1, 8, end, '{name} list size and count')",
        "        size, count = _II(buf, pos + 1)",
        "        stop = pos + 5 + size",
        "        pos += 9",
        "    else:",
        f"        raise DecodeError(pos, f'{name} as a list, got constructor 0x{{code:02x}}', "
        f"kind={ErrorKind.NOT_A_LIST.value!r}, {_facts(name)})",
        "    if stop > end or stop < pos:",
        f"        raise DecodeError(start, f'{name} list within {{end - start}} byte(s)', "
        f"kind={ErrorKind.COMPOUND_OVERRUN.value!r}, {_facts(name)}, "
        "declared=stop - start, limit=end - start)",
        f"    if count > {count_max}:",
        f"        raise DecodeError(start, f'at most {count_max} fields of {name}, got {{count}}', "
        f"kind={ErrorKind.TOO_MANY_FIELDS.value!r}, {_facts(name)}, "
        f"declared=count, allowed={count_max})",
    ]


def _fast_fields(spec: CompositeType) -> list[str]:
    """Generated lines: v0..vN from the fields present (the rest None), then the list's end."""
    name = spec.name
    lines = []
    if spec.fields:
        lines.append("    " + " = ".join(f"v{i}" for i in range(len(spec.fields))) + " = None")
    for i, field in enumerate(spec.fields):
        what = f"{name}.{field.name}"
        lines.append(f"    if count > {i}:")
        lines.append("        if pos >= stop:")
        lines.append(f"            _need(pos, 1, stop, '{what}')")
        lines.append(_indent(_decode_field_code(i, field, spec, what), 8).rstrip("\n"))
    lines.append("    if pos != stop:")
    lines.append(
        f"        raise DecodeError(pos, f'{name} list to end at byte {{stop}}', "
        f"kind={ErrorKind.COMPOUND_END.value!r}, {_facts(name)})"
    )
    return lines


def _fast_field_checks(spec: CompositeType) -> list[str]:
    """Generated lines, field by field: mandatory present, multiple=true as a list, a '*'
    field of the archetype it requires (1.4), the same checks as _finish_fields."""
    name = spec.name
    lines = []
    for i, field in enumerate(spec.fields):
        if field.mandatory:
            lines.append(f"    if v{i} is None:")
            lines.append(
                f"        raise DecodeError(start, 'mandatory field {name}.{field.name}', "
                f"kind={ErrorKind.MANDATORY_FIELD.value!r}, {_facts(name, field.name)})"
            )
        if field.multiple:
            lines.append(f"    if v{i} is not None:")
            lines.append(f"        v{i} = list(v{i}.items) if type(v{i}) is Array else [v{i}]")
        if field.requires and primitive_of(field.type) == "*":
            archetype = repr(field.requires)
            lines.append(
                f"    if isinstance(v{i}, Composite) and {archetype} not in v{i}.SPEC.provides:"
            )
            lines.append(
                f"        raise DecodeError(start, '{name}.{field.name} to be a {field.requires}', "
                f"kind={ErrorKind.FIELD_ARCHETYPE.value!r}, {_facts(name, field.name)})"
            )
    return lines


def _fast_decoder_scope(cls: type[Composite], spec: CompositeType) -> dict[str, Any]:
    """The names the generated decoder of `cls` reads."""
    scope: dict[str, Any] = {
        "DecodeError": DecodeError,
        "Array": Array,
        "Composite": Composite,
        "_need": codec._need,
        "_II": _II.unpack_from,
        "_I": struct.Struct(">I").unpack_from,
        "_Q": struct.Struct(">Q").unpack_from,
        "_new": object.__new__,
        "_cls": cls,
    }
    for i, field in enumerate(spec.fields):
        scope[f"_d{i}"] = cls._DEFAULTS[i]
        scope[f"_allowed{i}"] = _field_codes(field)
        scope[f"_table{i}"] = _field_table(field)
    return scope


def _make_fast_body_decoder(cls: type[Composite], spec: CompositeType) -> Decoder:
    """Like _make_body_decoder, generated per class with the common types inlined."""
    lines = [
        "def dec(buf, pos, end, depth):",
        *_fast_list_header(spec.name, len(spec.fields)),
        *_fast_fields(spec),
        *_fast_field_checks(spec),
        "    obj = _new(_cls)",
    ]
    for i, attr in enumerate(cls.FIELD_NAMES):
        if cls._DEFAULTS[i] is None:
            lines.append(f"    obj.{attr} = v{i}")
        else:
            lines.append(f"    obj.{attr} = _d{i} if v{i} is None else v{i}")
    lines.append("    return obj, stop")
    return _generated("\n".join(lines), _fast_decoder_scope(cls, spec), "dec")


class Section:
    """A described restricted type (message sections, 3.2): descriptor + one value."""

    __slots__ = ("value",)
    SPEC: ClassVar[RestrictedType]
    NAME: ClassVar[str]
    DESCRIPTOR_CODE: ClassVar[int]
    SOURCE: ClassVar[str]
    _DESCRIPTOR_BYTES: ClassVar[bytes]

    def __init__(self, value: Any) -> None:
        self.value = value

    def encode_into(self, out: bytearray) -> None:
        out += self._DESCRIPTOR_BYTES
        value = self.value
        if self.SOURCE == "map" and self.NAME != "application-properties":
            _enc_fields_map(out, value)  # annotations (3.2.10): symbol keys
        elif self.SOURCE == "map":
            codec.enc_map(out, value)  # application-properties (3.2.5): string keys
        elif self.SOURCE == "binary":
            codec.enc_binary(out, value)
        elif self.SOURCE == "list":
            codec.enc_list(out, value)
        else:
            codec.encode_into(out, value)

    def encode(self) -> bytes:
        out = bytearray()
        self.encode_into(out)
        return bytes(out)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.value == other.value  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


_SECTION_SOURCE_TYPES = {"map": dict, "binary": bytes, "list": list}


def _make_section(spec: RestrictedType) -> type[Section]:
    source = primitive_of(spec.source)
    namespace = {
        "__slots__": (),
        "__doc__": f"{spec.name} ({spec.descriptor_name}, {spec.section}).",
        "SPEC": spec,
        "NAME": spec.name,
        "DESCRIPTOR_CODE": spec.descriptor_code,
        "SOURCE": source,
        "_DESCRIPTOR_BYTES": b"\x00" + codec.encode(codec.ulong(spec.descriptor_code)),
    }
    cls = type(class_name(spec.name), (Section,), namespace)
    descriptor_bytes = cls._DESCRIPTOR_BYTES
    if source == "binary":
        enc_binary = codec.enc_binary

        def encode_into(self: Section, out: bytearray) -> None:
            out += descriptor_bytes
            enc_binary(out, self.value)

        cls.encode_into = encode_into
    return cls


def _section_builder(cls: type[Section]) -> codec.DescribedBuilder:
    expected = _SECTION_SOURCE_TYPES.get(cls.SOURCE)

    def build(value: Any, pos: int) -> Section:
        if expected is not None and not isinstance(value, expected):
            raise DecodeError(
                pos,
                f"{cls.NAME} to carry a {cls.SOURCE}",
                kind=ErrorKind.SECTION_TYPE,
                performative=cls.NAME,
            )
        return cls(value)

    return build


def _section_decoder(cls: type[Section]) -> Decoder:
    """The section's value straight after its descriptor (fast path of the codec)."""
    expected = _SECTION_SOURCE_TYPES.get(cls.SOURCE)
    decoders = codec.DECODERS
    new = object.__new__

    def dec(buf: bytes, pos: int, end: int, depth: int) -> tuple[Section, int]:
        value_pos = pos
        value, pos = decoders[buf[pos]](buf, pos + 1, end, depth)
        if expected is not None and not isinstance(value, expected):
            raise DecodeError(
                value_pos,
                f"{cls.NAME} to carry a {cls.SOURCE}",
                kind=ErrorKind.SECTION_TYPE,
                performative=cls.NAME,
            )
        section = new(cls)
        section.value = value
        return section, pos

    return dec


COMPOSITE_CLASSES: dict[str, type[Composite]] = {}
SECTION_CLASSES: dict[str, type[Section]] = {}
CLASS_BY_CODE: dict[int, type] = {}
# descriptor code -> the generic (reference) list decoder; the codec uses the generated one
REFERENCE_BODY_DECODERS: dict[int, Decoder] = {}


def _register() -> None:
    for spec in COMPOSITES.values():
        cls = _make_composite(spec)
        COMPOSITE_CLASSES[spec.name] = cls
        CLASS_BY_CODE[spec.descriptor_code] = cls
        REFERENCE_BODY_DECODERS[spec.descriptor_code] = _make_body_decoder(cls, spec)
        body = _make_fast_body_decoder(cls, spec)
        codec.COMPOSITE_BODY_DECODERS[spec.descriptor_code] = body
        codec.COMPOSITE_BODY_DECODERS[spec.descriptor_name] = body
        if spec.descriptor_code < 256:
            codec.SMALL_DESCRIBED_DECODERS[spec.descriptor_code] = body
        builder = _build_from_list(cls, body)
        codec.DESCRIBED_BUILDERS[spec.descriptor_code] = builder
        codec.DESCRIBED_BUILDERS[spec.descriptor_name] = builder
    for code, spec in SECTION_TYPES.items():
        cls = _make_section(spec)
        SECTION_CLASSES[spec.name] = cls
        CLASS_BY_CODE[code] = cls
        codec.DESCRIBED_BUILDERS[code] = _section_builder(cls)
        codec.DESCRIBED_BUILDERS[spec.descriptor_name] = _section_builder(cls)
        if code < 256:
            codec.SMALL_DESCRIBED_DECODERS[code] = _section_decoder(cls)


_register()


def unwrap_described(item: Any) -> Any:
    """The bare value of a described item (for arrays of described types)."""
    if isinstance(item, Composite):
        # Its list encoded with the declared field types (a handle stays a uint).
        body = bytearray()
        item.encode_list_into(body)
        return codec.PreEncoded(body)
    if isinstance(item, (Section, Described)):
        return item.value
    return item


codec.UNWRAP_DESCRIBED = unwrap_described

# The classes by name, for `from amqp10.composites import Open, Flow, ...`.
globals().update({cls.__name__: cls for cls in COMPOSITE_CLASSES.values()})
globals().update({cls.__name__: cls for cls in SECTION_CLASSES.values()})
