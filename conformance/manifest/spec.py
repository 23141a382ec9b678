"""The AMQP 1.0 XML with prose (conformance/spec/amqp-1.0/) read as numbered paragraphs.

Owns: the part files and their order, the section numbering of the OASIS AMQP 1.0 core
specification computed from document order, the anchor of every paragraph (the nearest named
element), and the rendering of a paragraph to text (inline markup as the published text shows
it, white space folded). Reads the XML files; touches nothing else.

Numbering (checked against the published text, tests/test_manifest.py): each `section` of a
part file is `<part>.<n>` in document order; inside it each titled `doc` and each `type` is a
subsection in document order; the `definition` elements of a section together are its last
subsection, "Constant Definitions". A titled `doc` inside a titled `doc` is a sub-subsection
(4.4.4.1); an empty titled `doc` ("Security Frame Bodies", 5.3.3) heads the types that follow
it (5.3.3.1 sasl-mechanisms ... 5.3.3.6 sasl-code). Part 1 is laid out differently in the
published text than in this XML: the primitive type definitions that sit inside "Type
Encodings" here are 1.6.1 null ... 1.6.24 array there, so they are numbered so.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SPEC_DIR = Path(__file__).resolve().parents[1] / "spec" / "amqp-1.0"
# part number -> file, as the published specification orders its parts
PARTS: dict[int, str] = {
    1: "types.xml",
    2: "transport.xml",
    3: "messaging.xml",
    4: "transactions.xml",
    5: "security.xml",
}
PART_TITLES = {1: "Types", 2: "Transport", 3: "Messaging", 4: "Transactions", 5: "Security"}
PRIMITIVE_DEFINITIONS = "1.6"  # Part 1's "Primitive Type Definitions" (published numbering)
CONSTANTS_TITLE = "Constant Definitions"


@dataclass(frozen=True, slots=True)
class Paragraph:
    """One paragraph (`p`) of prose: where it is and its text."""

    part: int
    section: str  # "2.7.4"
    anchor: str  # "flow.delivery-count", "flow-control", "message-format"
    text: str  # rendered, white space folded


@dataclass(frozen=True, slots=True)
class Section:
    number: str
    title: str
    part: int


def fold(text: str) -> str:
    """White space folded to single spaces, ends stripped."""
    return " ".join(text.split())


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _render(element: ET.Element) -> str:
    """The text of inline markup as the published text shows it: an xref without text reads
    as the choice it names, else the name (a type, a section, an address)."""
    parts = [element.text or ""]
    for child in element:
        tag = _local(child.tag)
        if tag == "xref":
            inner = "".join(child.itertext())
            parts.append(inner if inner.strip() else child.get("choice") or child.get("name", ""))
        elif tag != "todo":
            parts.append(_render(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _paragraphs(element: ET.Element) -> Iterator[ET.Element]:
    """The `p` elements of a doc's own content (lists and definition lists included, nested
    titled docs excluded: they are subsections of their own)."""
    for child in element:
        tag = _local(child.tag)
        if tag == "p":
            yield child
        elif tag in ("ul", "ol", "li", "dl", "dd"):
            yield from _paragraphs(child)


class _Numbering:
    """Walks one part file in document order, yielding sections and paragraphs."""

    def __init__(self, part: int) -> None:
        self.part = part
        self.sections: list[Section] = []
        self.paragraphs: list[Paragraph] = []
        self._primitive = 0

    def walk(self, root: ET.Element) -> None:
        number = 0
        for section in root:
            if _local(section.tag) != "section":
                continue
            number += 1
            self._section(section, f"{self.part}.{number}")

    def _add_section(self, number: str, title: str) -> None:
        self.sections.append(Section(number, title, self.part))

    def _emit(self, element: ET.Element, section: str, anchor: str) -> None:
        for p in _paragraphs(element):
            text = fold(_render(p))
            if text:
                self.paragraphs.append(Paragraph(self.part, section, anchor, text))

    def _section(self, element: ET.Element, number: str) -> None:
        name = element.get("name", "")
        title = element.get("title") or name.replace("-", " ").title()
        self._add_section(number, title)
        anchor = slug(element.get("title")) if element.get("title") else name
        sub = 0
        group: str | None = None  # an empty titled doc heading the types after it
        group_sub = 0
        definitions = [child for child in element if _local(child.tag) == "definition"]
        for child in element:
            tag = _local(child.tag)
            if tag == "doc" and not child.get("title"):
                self._doc(child, number, anchor)
            elif tag == "doc":
                sub += 1
                group = None
                doc_number = f"{number}.{sub}"
                if len(child) == 0 and not (child.text or "").strip():
                    group, group_sub = doc_number, 0
                    self._add_section(doc_number, child.get("title", ""))
                else:
                    self._titled_doc(child, doc_number)
            elif tag == "type":
                if self.part == 1 and child.get("class") == "primitive":
                    self._primitive += 1
                    self._type(child, f"{PRIMITIVE_DEFINITIONS}.{self._primitive}")
                elif group is not None:
                    group_sub += 1
                    self._type(child, f"{group}.{group_sub}")
                else:
                    sub += 1
                    self._type(child, f"{number}.{sub}")
        if definitions:
            constants = f"{number}.{sub + 1}"
            self._add_section(constants, CONSTANTS_TITLE)
            for definition in definitions:
                for doc in definition:
                    if _local(doc.tag) == "doc":
                        self._doc(doc, constants, definition.get("name", ""))

    def _doc(self, doc: ET.Element, number: str, anchor: str) -> None:
        """An untitled doc: its paragraphs under `anchor`; titled docs inside it are
        subsections of `number` (none in this XML outside titled docs, kept general)."""
        self._emit(doc, number, anchor)
        sub = 0
        for child in doc:
            if _local(child.tag) == "doc":
                if child.get("title"):
                    sub += 1
                    self._titled_doc(child, f"{number}.{sub}")
                else:
                    self._doc(child, number, anchor)

    def _titled_doc(self, doc: ET.Element, number: str) -> None:
        title = doc.get("title", "")
        self._add_section(number, title)
        self._doc(doc, number, slug(title))

    def _type(self, element: ET.Element, number: str) -> None:
        name = element.get("name", "")
        self._add_section(number, name)
        for child in element:
            tag = _local(child.tag)
            if tag == "doc":
                self._doc(child, number, name)
            elif tag in ("field", "choice", "descriptor", "encoding"):
                anchor = f"{name}.{child.get('name')}" if child.get("name") else name
                for doc in child:
                    if _local(doc.tag) == "doc":
                        self._doc(doc, number, anchor)


@functools.cache
def _read(part: int) -> _Numbering:
    numbering = _Numbering(part)
    numbering.walk(ET.parse(SPEC_DIR / PARTS[part]).getroot())
    return numbering


def paragraphs(part: int | None = None) -> list[Paragraph]:
    """Every prose paragraph of Parts 1-5 (or of one part), in document order."""
    parts = [part] if part is not None else list(PARTS)
    return [p for n in parts for p in _read(n).paragraphs]


def sections() -> dict[str, Section]:
    """Every numbered section and subsection of Parts 1-5, by number."""
    found = {s.number: s for n in PARTS for s in _read(n).sections}
    for part, title in PART_TITLES.items():
        found.setdefault(str(part), Section(str(part), title, part))
    return found


@functools.cache
def prose() -> str:
    """All the prose of Parts 1-5, paragraphs joined by newlines, white space folded inside
    each: a quoted sentence is in the spec when `fold(quote)` is a substring of this."""
    return "\n".join(p.text for p in paragraphs())


def quoted_in_spec(quote: str) -> bool:
    """True when `quote` (white space folded) occurs in one paragraph of the spec's prose."""
    return fold(quote) in prose()
