"""The normative manifest: every normative sentence of AMQP 1.0 Parts 1-5, who it binds and
what tests it.

Owns the public API: `sentence(id) -> Sentence` (KeyError for an unknown id),
`sentences() -> dict[str, Sentence]` in document order, `sections()` (number -> title),
`Sentence`. Reads sentences.toml (generated from conformance/spec/amqp-1.0/*.xml by
`python -m amqpspec.conformance.manifest.extract`) and links.toml (reviewed by hand: who
each sentence binds, the cases that test it, or why no client can see it on the wire);
the checker rules that enforce a sentence are the rules naming its id in
amqp10/checker/rules.py (`Rule.sentences`). Touches nothing else.

Ids: `<section>/<anchor>.<n>`: the section as the spec numbers it, the nearest named XML
element (a type, `type.field`, a choice as `type.choice`, or the titled section slugged),
the ordinal of the normative sentence under that anchor from 1, e.g.
`2.7.4/flow.delivery-count.3`. The XML is a fixed standard: ids never change.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SENTENCES_FILE = HERE / "sentences.toml"
LINKS_FILE = HERE / "links.toml"

# who a sentence obliges (links.toml `binds`)
BINDS = frozenset(
    {
        "sender",  # the sending link endpoint (or the sender of the frame named)
        "receiver",  # the receiving link endpoint (or the receiver of the frame named)
        "either",  # each peer / both endpoints / any implementation
        "node",  # the node or distribution node behind a link: the broker as a node
        "container",  # the container (2.6.1 link names, 3.2.10 annotations)
        "client",  # the TCP/SASL/TLS client (the peer that opened the connection)
        "server",  # the TCP/SASL/TLS server
        "controller",  # the transaction controller (Part 4)
        "coordinator",  # the transaction coordinator / transactional resource (Part 4)
        "intermediary",  # a node relaying messages (3.2)
        "application",  # the application above the endpoint (no wire effect of its own)
        "none",  # defines a value or an encoding, obliges no party by itself
    }
)


@dataclass(frozen=True, slots=True)
class Sentence:
    id: str
    part: int  # 1-5
    section: str  # "2.7.4"
    level: str  # MUST, MUST NOT, SHOULD, SHOULD NOT, SHALL, SHALL NOT, REQUIRED, PROHIBITED
    text: str  # exactly as in the XML, white space folded
    keyword: str = ""  # the words that make it normative as the text spells them ("must")
    binds: str = ""  # BINDS; "" until reviewed in links.toml
    cases: tuple[str, ...] = ()  # conformance case ids (links.toml)
    untestable: str = ""  # why no client can see it on the wire ("" when testable)
    note: str = ""  # a reviewer's remark (links.toml)
    rules: tuple[str, ...] = field(default=())  # checker rules naming this id

    @property
    def anchor(self) -> str:
        return self.id.split("/", 1)[1].rsplit(".", 1)[0]

    @property
    def obligation(self) -> str:
        """MUST (MUST, MUST NOT, SHALL, SHALL NOT, REQUIRED, PROHIBITED) or SHOULD."""
        return "SHOULD" if self.level.startswith("SHOULD") else "MUST"


def _load(path: Path) -> dict:
    if not path.exists():
        return {}
    with path.open("rb") as handle:
        return tomllib.load(handle)


def _rule_links() -> dict[str, tuple[str, ...]]:
    """sentence id -> ids of the checker rules that name it (Rule.sentences)."""
    from amqpspec.amqp10.checker.rules import RULES

    found: dict[str, list[str]] = {}
    for rule in RULES.values():
        for sentence_id in getattr(rule, "sentences", ()):
            found.setdefault(sentence_id, []).append(rule.rule_id)
    return {k: tuple(v) for k, v in found.items()}


@functools.cache
def sentences() -> dict[str, Sentence]:
    """Every normative sentence, by id, in document order."""
    extracted = _load(SENTENCES_FILE).get("sentence", {})
    links = _load(LINKS_FILE).get("sentence", {})
    rules = _rule_links()
    found = {}
    for sentence_id, data in extracted.items():
        link = links.get(sentence_id, {})
        found[sentence_id] = Sentence(
            id=sentence_id,
            part=int(data["section"].split(".", 1)[0]),
            section=data["section"],
            level=data["level"],
            text=data["text"],
            keyword=data.get("keyword", ""),
            binds=link.get("binds", ""),
            cases=tuple(link.get("cases", ())),
            untestable=link.get("untestable", ""),
            note=link.get("note", ""),
            rules=rules.get(sentence_id, ()),
        )
    return found


def sentence(sentence_id: str) -> Sentence:
    """The sentence `sentence_id` (KeyError for an unknown id)."""
    return sentences()[sentence_id]


@functools.cache
def rule_notes() -> dict[str, dict]:
    """links.toml [rules]: rule id -> {"faults": [...], "basis": ..., "not_normative": ...}."""
    return dict(_load(LINKS_FILE).get("rules", {}))


@functools.cache
def case_notes() -> dict[str, str]:
    """links.toml [case_notes]: case id -> why it checks no sentence binding the broker."""
    return dict(_load(LINKS_FILE).get("case_notes", {}))


@functools.cache
def sections() -> dict[str, str]:
    """Every section and subsection number of Parts 1-5 -> its title."""
    return dict(_load(SENTENCES_FILE).get("sections", {}))


__all__ = [
    "BINDS",
    "Sentence",
    "case_notes",
    "rule_notes",
    "sections",
    "sentence",
    "sentences",
]
