"""The spec table (amqp10/spec_table.py, via amqp10.spec) equals the OASIS XML, field for field.

Owns: an independent reading of /usr/share/amqp/specs/1-0/*.bare.xml (its own ElementTree
walk, sharing nothing with tools/gen_spec_table.py) and the proof that every primitive
encoding, composite, restricted type and definition in the table matches it, and that the
table holds nothing the XML lacks. Also that amqp10.composites generates one class per
composite and per described restricted type, with fields in the XML's order.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from amqpspec.amqp10 import composites, spec

SPEC_DIR = Path("/usr/share/amqp/specs/1-0")
DOCS = ("types", "transport", "messaging", "security", "transactions")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _children(element: ET.Element, tag: str) -> list[ET.Element]:
    return [child for child in element if _local(child.tag) == tag]


def _descriptor_code(text: str) -> int:
    domain, ident = (int(part, 16) for part in text.split(":"))
    assert 0 <= domain < 2**32 and 0 <= ident < 2**32
    return domain * 2**32 + ident


def _read_xml() -> dict[str, dict]:
    """name -> {"doc", "section", "element"} for every <type>; also definitions."""
    types: dict[str, dict] = {}
    definitions: dict[str, str] = {}
    for doc in DOCS:
        root = ET.parse(SPEC_DIR / f"{doc}.bare.xml").getroot()
        assert _local(root.tag) == "amqp" and root.get("name") == doc
        for section in _children(root, "section"):
            for element in _children(section, "type"):
                name = element.get("name")
                assert name not in types, f"type {name} defined twice in the XML"
                types[name] = {"doc": doc, "section": section.get("name"), "element": element}
            for element in _children(section, "definition"):
                definitions[element.get("name")] = element.get("value")
    return {"types": types, "definitions": definitions}


XML = _read_xml() if SPEC_DIR.exists() else {"types": {}, "definitions": {}}
pytestmark = pytest.mark.skipif(
    not SPEC_DIR.exists(), reason="amqp-specs missing: apt-get install amqp-specs"
)


def _by_class(cls: str) -> dict[str, dict]:
    return {n: t for n, t in XML["types"].items() if t["element"].get("class") == cls}


def _provides(element: ET.Element) -> tuple[str, ...]:
    text = element.get("provides")
    return tuple(part.strip() for part in text.split(",")) if text else ()


def test_xml_was_read():
    # AMQP 1.0: 24 primitives (null ... array), 33 composites, the rest restricted.
    assert len(_by_class("primitive")) == 24
    assert len(_by_class("composite")) == 33
    assert len(_by_class("restricted")) > 30


def _sectioned(name: str, tables: dict[str, Any]) -> tuple[Any, Any]:
    """The XML element of type `name` and its entry in `tables`, whose section must be the
    XML's (doc/section)."""
    xml_type = XML["types"][name]
    table = tables[name]
    assert table.section == f"{xml_type['doc']}/{xml_type['section']}"
    return xml_type["element"], table


def test_table_holds_exactly_the_xml_types():
    assert set(spec.PRIMITIVES) == set(_by_class("primitive"))
    assert set(spec.COMPOSITES) == set(_by_class("composite"))
    assert set(spec.RESTRICTED) == set(_by_class("restricted"))
    # No name is in two kinds of table.
    assert not set(spec.PRIMITIVES) & set(spec.COMPOSITES)
    assert not set(spec.COMPOSITES) & set(spec.RESTRICTED)


@pytest.mark.parametrize("name", sorted(_by_class("primitive")))
def test_primitive_encodings(name):
    element, table = _sectioned(name, spec.PRIMITIVES)
    expected = [
        (enc.get("name"), int(enc.get("code"), 0), enc.get("category"), int(enc.get("width")))
        for enc in _children(element, "encoding")
    ]
    assert expected, name
    got = [(e.name, e.code, e.category, e.width) for e in table.encodings]
    assert got == expected


def test_every_constructor_code_is_unique():
    codes = [e.code for p in spec.PRIMITIVES.values() for e in p.encodings]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("name", sorted(_by_class("composite")))
def test_composite_fields(name):
    element, table = _sectioned(name, spec.COMPOSITES)
    assert table.source == element.get("source") == "list"
    assert table.provides == _provides(element)
    (descriptor,) = _children(element, "descriptor")
    assert table.descriptor_name == descriptor.get("name")
    assert table.descriptor_code == _descriptor_code(descriptor.get("code"))
    expected = [
        (
            f.get("name"),
            f.get("type"),
            f.get("mandatory", "false") == "true",
            f.get("default"),
            f.get("multiple", "false") == "true",
            f.get("requires"),
        )
        for f in _children(element, "field")
    ]
    got = [(f.name, f.type, f.mandatory, f.default, f.multiple, f.requires) for f in table.fields]
    assert got == expected


@pytest.mark.parametrize("name", sorted(_by_class("restricted")))
def test_restricted_types(name):
    element, table = _sectioned(name, spec.RESTRICTED)
    assert table.source == element.get("source")
    assert table.provides == _provides(element)
    descriptors = _children(element, "descriptor")
    if descriptors:
        assert table.descriptor_name == descriptors[0].get("name")
        assert table.descriptor_code == _descriptor_code(descriptors[0].get("code"))
    else:
        assert table.descriptor_name is None and table.descriptor_code is None
    expected = [(c.get("name"), c.get("value")) for c in _children(element, "choice")]
    assert list(table.choices) == expected


def test_definitions():
    assert XML["definitions"] == spec.DEFINITIONS
    assert spec.MIN_MAX_FRAME_SIZE == 512
    assert spec.PORT == 5672


def test_every_field_type_is_known():
    known = set(spec.PRIMITIVES) | set(spec.COMPOSITES) | set(spec.RESTRICTED) | {"*"}
    for composite in spec.COMPOSITES.values():
        for field in composite.fields:
            assert field.type in known, (composite.name, field.name, field.type)
    for restricted in spec.RESTRICTED.values():
        # amqp-value (3.2.8) is the one restricted type over "*" (any value).
        assert spec.primitive_of(restricted.name) in {*spec.PRIMITIVES, "*"}


def test_descriptor_codes_and_names_unique():
    described = [
        (t.descriptor_name, t.descriptor_code)
        for t in [*spec.COMPOSITES.values(), *spec.RESTRICTED.values()]
        if t.descriptor_code is not None
    ]
    assert len({n for n, _ in described}) == len(described)
    assert len({c for _, c in described}) == len(described)


def test_constants_come_from_the_choices():
    amqp_errors = dict(spec.RESTRICTED["amqp-error"].choices)
    assert spec.Cond.DECODE_ERROR == amqp_errors["decode-error"] == "amqp:decode-error"
    assert spec.Cond.WINDOW_VIOLATION == "amqp:session:window-violation"
    assert spec.Cond.FRAMING_ERROR == "amqp:connection:framing-error"
    role = dict(spec.RESTRICTED["role"].choices)
    assert (role["sender"], role["receiver"]) == ("false", "true")
    assert (spec.Role.SENDER, spec.Role.RECEIVER) == (False, True)
    settle = dict(spec.RESTRICTED["sender-settle-mode"].choices)
    assert int(settle["mixed"]) == spec.SndSettleMode.MIXED
    assert int(dict(spec.RESTRICTED["receiver-settle-mode"].choices)["second"]) == 1
    sasl = dict(spec.RESTRICTED["sasl-code"].choices)
    assert int(sasl["sys-temp"]) == spec.SaslCode.SYS_TEMP


# --------------------------------------------------------------- generated classes


@pytest.mark.parametrize("name", sorted(_by_class("composite")))
def test_composite_class(name):
    element = XML["types"][name]["element"]
    cls = composites.COMPOSITE_CLASSES[name]
    assert name == cls.NAME
    assert cls.__name__ == "".join(p.capitalize() for p in name.split("-"))
    assert getattr(composites, cls.__name__) is cls
    xml_fields = [f.get("name").replace("-", "_") for f in _children(element, "field")]
    assert list(cls.FIELD_NAMES) == xml_fields
    (descriptor,) = _children(element, "descriptor")
    assert _descriptor_code(descriptor.get("code")) == cls.DESCRIPTOR_CODE
    assert composites.CLASS_BY_CODE[cls.DESCRIPTOR_CODE] is cls
    # Defaults are applied on construction, absent fields are None.
    obj = cls()
    for field_el, attr in zip(_children(element, "field"), xml_fields):
        if field_el.get("default") is None:
            assert getattr(obj, attr) is None
        else:
            assert getattr(obj, attr) is not None


def test_a_class_for_every_described_restricted_type():
    described = {
        n for n, t in _by_class("restricted").items() if _children(t["element"], "descriptor")
    }
    assert described == set(composites.SECTION_CLASSES)
    for name in described:
        cls = composites.SECTION_CLASSES[name]
        assert name == cls.NAME
        assert composites.CLASS_BY_CODE[cls.DESCRIPTOR_CODE] is cls


def test_defaults_convert_to_python_values():
    from amqpspec.amqp10.composites import Attach, Flow, Header, Open, Source

    assert Open().max_frame_size == 4294967295
    assert Open().channel_max == 65535
    assert Flow().drain is False and Flow().echo is False
    # The XML gives header (3.2.1) no default attributes: the prose defaults
    # (durable=false, priority=4) are not in the table, so absent means None.
    assert Header().durable is None and Header().priority is None
    assert Attach().snd_settle_mode == spec.SndSettleMode.MIXED
    assert Attach().rcv_settle_mode == spec.RcvSettleMode.FIRST
    assert Source().durable == 0  # terminus-durability "none" -> 0
    assert Source().expiry_policy == "session-end"
    assert Source().timeout == 0


def test_committed_table_is_what_the_generator_writes():
    """tools/gen_spec_table.py run on the XML reproduces amqp10/spec_table.py exactly."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    generated = subprocess.run(
        [sys.executable, str(root / "tools" / "gen_spec_table.py"), str(SPEC_DIR)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert generated == (root / "amqp10" / "spec_table.py").read_text()
