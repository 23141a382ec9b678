"""amqp10/malformed.py: the suspect values and malformed encodings the fuzzer picks from,
built from the codec's own encodings (nothing outside amqp10 writes AMQP bytes by hand)."""

from __future__ import annotations

import pytest

from amqpspec.amqp10 import codec, malformed
from amqpspec.amqp10.composites import AmqpValue
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER
from amqpspec.amqp10.types import symbol


def test_str8_of_valid_utf8_decodes_as_the_string() -> None:
    assert codec.decode(malformed.str8_of(b"fuzz")) == "fuzz"


@pytest.mark.parametrize("bad", malformed.INVALID_UTF8)
def test_str8_of_invalid_utf8_is_refused_by_the_decoder(bad: bytes) -> None:
    encoded = malformed.str8_of(bad)
    assert encoded[0] == codec.STR8 and encoded[2:] == bad
    with pytest.raises(DecodeError):
        codec.decode(encoded)


def test_map8_of_keeps_repeated_keys() -> None:
    encoded = malformed.map8_of([symbol("dup"), 1, symbol("dup"), 2])
    assert encoded[0] == codec.MAP8
    assert encoded[1:] == codec.encode([symbol("dup"), 1, symbol("dup"), 2])[1:]


def test_amqp_value_is_the_codecs_section() -> None:
    assert malformed.amqp_value("fuzz") == codec.encode(AmqpValue("fuzz"))
    assert codec.decode(malformed.amqp_value("x")) == AmqpValue("x")


def test_raw_looks() -> None:
    assert malformed.starts_sasl(SASL_HEADER.encode())
    assert not malformed.starts_sasl(AMQP_HEADER.encode())
    assert malformed.is_described(codec.encode(AmqpValue(1)))
    assert not malformed.is_described(codec.encode(1))


def test_the_suspect_constructors_are_not_a_scalars_own() -> None:
    """Each is unassigned or a compound code: never the code of a scalar field."""
    scalars = {codec.UINT, codec.SMALLUINT, codec.UINT0, codec.USHORT, codec.STR8}
    assert not scalars & set(malformed.SUSPECT_CONSTRUCTORS)
