"""amqp10.composites' codecs are pinned (amqp10/composites.py "generated codecs", docs/speedups.md).

Two fingerprints, recorded here: the sha256 of the source text of every generated encoder and
decoder (the text the pure path exec's and scripts/build_speedups.py compiles), and the sha256
of what the reference decoders, the fast decoders and the generated encoders give on a fixed
corpus covering every composite type of the spec (1.4): two valid instances of each, every
byte of their encoding replaced by a few constructors, and every truncation. Outcomes are the
decoded value with its AMQP types, or the error's offset, words, kind and facts.

A refactoring of the generators must leave both unchanged: the same text is the same per-call
work and the same compiled twins (keyed by that sha256), and the same outcomes are the same
behaviour, pure (AMQP10_PURE=1) and compiled alike. A change meant to alter the codecs records
the new values (`python3 tests/test_composites_generated.py` prints them), rebuilds the
compiled tier (scripts/build_speedups.py) and is A/B'd (bench/README.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

from amqpspec.amqp10 import codec, composites, spec
from amqpspec.amqp10.composites import COMPOSITE_CLASSES, Composite, Error
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.amqp10.types import symbol, timestamp
from amqpspec.fuzz.strategies import typed_repr

# sha256 over the sorted sha256s of composites.GENERATED's texts, and how many there are
SOURCES = ("a86ea5199a58c65ef6e3388bf467246e56f4be7cde7c3c747b513ce53b16f770", 66)
# sha256 over the outcomes of the corpus (see _outcomes)
OUTCOMES = "5ca7fe0286a948ba4316f690a1f5aed0fdf9ddb70f3a90c76f89298119f33288"

_SAMPLES: dict[str, Any] = {
    "uint": 1,
    "ulong": 2,
    "ubyte": 1,
    "ushort": 3,
    "boolean": True,
    "symbol": symbol("s"),
    "string": "s",
    "binary": b"b",
    "map": {},
    "timestamp": timestamp(5),
    "error": Error(condition=symbol("amqp:internal-error")),
}
_REPLACEMENTS = (0x00, 0x40, 0x41, 0x45, 0x52, 0xA0, 0xC0, 0xFF)


def sources_fingerprint() -> tuple[str, int]:
    keys = sorted(composites.GENERATED)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest(), len(keys)


def _instances(cls: type[Composite]) -> Iterator[Composite]:
    """Every field set: '*' fields to a binary, then to an outcome (Accepted), which some
    fields' archetype (`requires`) refuses."""
    for star in (b"t", composites.Accepted()):
        values = {}
        for field in cls.SPEC.fields:
            primitive = spec.primitive_of(field.type)
            value = star if primitive == "*" else _SAMPLES.get(primitive)
            values[field.attr] = [value] if field.multiple and value is not None else value
        yield cls(**values)


def _mutations(raw: bytes) -> Iterator[bytes]:
    yield raw
    for index in range(3, len(raw)):
        yield raw[:index]
        for byte in _REPLACEMENTS:
            yield raw[:index] + bytes([byte]) + raw[index + 1 :]


def _attempt(call: Callable[..., Any], *args: Any) -> Any:
    try:
        value = call(*args)
    except DecodeError as error:
        return ("decode-error", error.offset, error.expected, error.facts())
    except EncodeError as error:
        return ("encode-error", str(error))
    if isinstance(value, tuple):
        return ("ok", typed_repr(value[0]), value[1])
    return ("ok", value)


def _encoded(obj: Composite) -> bytes:
    out = bytearray()
    obj.encode_list_into(out)  # the generated encoder
    return bytes(out)


def _outcomes() -> Iterator[Any]:
    """Per composite type: the generated encoder's bytes, then each decoder on each mutation."""
    for name in sorted(COMPOSITE_CLASSES):
        cls = COMPOSITE_CLASSES[name]
        code = cls.DESCRIPTOR_CODE
        reference = composites.REFERENCE_BODY_DECODERS[code]
        fast = codec.COMPOSITE_BODY_DECODERS[code]
        for obj in _instances(cls):
            yield name, _attempt(_encoded, obj)
            raw = obj.encode()
            for body in _mutations(raw):
                end = len(body)
                # the body decoders start after the descriptor (0x00 0x53 code, 0x00 0x80 code)
                start = 3 if raw[1] == 0x53 else 10
                if start >= end:
                    continue
                yield _attempt(reference, body, start, end, 1)
                yield _attempt(fast, body, start, end, 1)


def outcomes_fingerprint() -> str:
    digest = hashlib.sha256()
    for outcome in _outcomes():
        digest.update(repr(outcome).encode())
    return digest.hexdigest()


def test_generated_sources_are_the_recorded_ones() -> None:
    assert sources_fingerprint() == SOURCES


def test_codecs_give_the_recorded_outcomes() -> None:
    assert outcomes_fingerprint() == OUTCOMES


if __name__ == "__main__":
    print(f"SOURCES = {sources_fingerprint()!r}\nOUTCOMES = {outcomes_fingerprint()!r}")
