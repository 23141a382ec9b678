"""Extract every normative sentence of the AMQP 1.0 XML into conformance/manifest/sentences.toml.

Owns: sentence splitting of a paragraph, the normative forms the spec uses and their level,
the stable ids (`<section>/<anchor>.<n>`), and the generated file. Run
`python -m amqpspec.conformance.manifest.extract` to rewrite sentences.toml (`--check`: exit 1
when the committed file differs from a fresh extraction). Reads the XML through `spec`;
writes only sentences.toml.

Normative forms (read from the text, not assumed):
- RFC 2119 words in capitals: MUST, MUST NOT, SHOULD, SHOULD NOT, SHALL, SHALL NOT, REQUIRED
  ("MUST not" and "should NOT" occur: the level is the modal's with NOT).
- The same words in lower case: the spec writes many of its obligations so ("each peer must
  send an open frame before sending any other Frames", 2.4.1; "the first attach must then be
  closed with a link error of stolen", 2.6.1). They get the level of the word; `keyword`
  keeps the spelling, so a reader sees which form a verdict rests on. A conditional "should"
  ("If this should happen", "Should this happen") is no obligation and is left out.
- Prohibitions in plain words, level PROHIBITED: "it is illegal", "is an error", "is invalid",
  "may not be inserted", "it may not change", "cannot send", "is malformed", "can only" and
  "may only" (a restriction), "Only the X may/can", "Only when ... may", "are reserved",
  "is not permitted", "controls whether a null element value is permitted" (the only text
  behind mandatory fields, 1.3). MAY and OPTIONAL grant, they do not oblige: a sentence with
  only those is left out.
- NOT_NORMATIVE lists the sentences a form matches that state no obligation (a description of
  an error condition, an example), each with the reason.
A sentence with several forms gets the strongest level: MUST-class words over PROHIBITED over
SHOULD-class words; the first such word in the sentence decides within a class.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from amqpspec.conformance.manifest import spec

SENTENCES_FILE = Path(__file__).with_name("sentences.toml")

# a sentence ends at . ! ? (or a closing parenthesis or quote after one) before white space
# and a capital, a quote or an opening parenthesis; not after these abbreviations
_END = re.compile(r"([.!?][)\"']?)\s+(?=[A-Z\"'(])")
_ABBREVIATIONS = ("e.g.", "i.e.", "eg.", "ie.", "cf.", "vs.", "N.A.")

_MUST = re.compile(r"\b(MUST|SHALL|must|shall)(\s+(?:NOT|not))?\b|\bREQUIRED\b")
_SHOULD = re.compile(r"\b(SHOULD|should)(\s+(?:NOT|not))?\b")
# "If this should happen", "Should this happen", "..., should this be operationally required"
_CONDITIONAL_SHOULD = re.compile(r"\b[Ii]f this should\b|^Should\b|\bshould this\b")
_PROHIBITIONS = (
    r"\b[Ii]t is illegal\b",
    r"\bis an (?:irrecoverable )?error\b",
    r"\b[Ii]t is an error\b",
    r"\b(?:is|are) invalid\b",
    r"\b[Ii]t is invalid\b",
    r"\bmay not be inserted\b",
    r"\bit may not change\b",
    r"\bcannot send\b",
    r"\b(?:can|may) only\b",
    r"\bOnly the \w+(?: \w+)? (?:may|can)\b",
    r"\bOnly when\b.*\bmay\b",
    r"\bare(?:, while not syntactically invalid,)? reserved\b",
    r"\bis not permitted\b",
    r"\bis malformed\b",
    r"\bcontrols whether a null element value is permitted\b",
)
_PROHIBITED = re.compile("|".join(f"(?:{p})" for p in _PROHIBITIONS))

# sentences a normative form matches that oblige nobody: text prefix -> reason
NOT_NORMATIVE: dict[str, str] = {
    "Messages may only travel along a Link if they meet the entry criteria": (
        "2.1 overview: describes what a link is, the obligations are in 3.5"
    ),
    "The peer sent a frame that is not permitted in the current state": (
        "describes the amqp:illegal-state error condition"
    ),
    "At the target, the rejected outcome is used to indicate that an incoming Message is "
    "invalid": "describes the rejected outcome",
    "The footer section is used for details about the message or delivery which can only": (
        "describes what the footer is for"
    ),
    "However, in contrast to the cases of delivery-tag 1 and delivery-tag 5, since we know "
    "that the sender can only": "3.4.6 worked example: says what the sender knows",
    "When present, its value indicates what additional content encodings have been applied": (
        "describes what content-encoding means to a reader of the message"
    ),
    "In resuming-deliveries the general scheme for how two endpoints should": (
        "refers back to 2.6.13, which carries the obligations"
    ),
    "The peer cannot send a frame because the smallest encoding": (
        "describes the amqp:frame-size-too-small error condition"
    ),
}

LEVELS = (
    "MUST",
    "MUST NOT",
    "SHALL",
    "SHALL NOT",
    "REQUIRED",
    "PROHIBITED",
    "SHOULD",
    "SHOULD NOT",
)


@dataclass(frozen=True, slots=True)
class Extracted:
    id: str
    part: int
    section: str
    anchor: str
    level: str
    keyword: str
    text: str


def split_sentences(text: str) -> list[str]:
    """A folded paragraph split into sentences (abbreviations such as "i.e." do not end one)."""
    pieces: list[str] = []
    start = 0
    for match in _END.finditer(text):
        head = text[start : match.end(1)]
        if head.rstrip(")\"'").rsplit(" ", 1)[-1].endswith(_ABBREVIATIONS):
            continue
        pieces.append(head.strip())
        start = match.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def classify(sentence: str) -> tuple[str, str] | None:
    """(level, keyword) of a sentence, or None when it is not normative."""
    must = _MUST.search(sentence)
    if must:
        word = must.group(0)
        if word == "REQUIRED":
            return "REQUIRED", word
        modal = "MUST" if must.group(1).upper() == "MUST" else "SHALL"
        return (f"{modal} NOT" if must.group(2) else modal), " ".join(word.split())
    prohibited = _PROHIBITED.search(sentence)
    if prohibited:
        return "PROHIBITED", " ".join(prohibited.group(0).split())
    for should in _SHOULD.finditer(sentence):
        window = sentence[max(0, should.start() - 8) : should.end() + 5]
        if should.group(1) == "should" and _CONDITIONAL_SHOULD.search(window):
            continue
        return ("SHOULD NOT" if should.group(2) else "SHOULD"), " ".join(should.group(0).split())
    return None


def _not_normative(sentence: str) -> bool:
    return any(sentence.startswith(prefix) for prefix in NOT_NORMATIVE)


def extract() -> list[Extracted]:
    """Every normative sentence of Parts 1-5, in document order, with its id."""
    counters: dict[tuple[str, str], int] = defaultdict(int)
    found = []
    for paragraph in spec.paragraphs():
        for sentence in split_sentences(paragraph.text):
            kind = classify(sentence)
            if kind is None or _not_normative(sentence):
                continue
            key = (paragraph.section, paragraph.anchor)
            counters[key] += 1
            found.append(
                Extracted(
                    f"{paragraph.section}/{paragraph.anchor}.{counters[key]}",
                    paragraph.part,
                    paragraph.section,
                    paragraph.anchor,
                    kind[0],
                    kind[1],
                    sentence,
                )
            )
    return found


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def render() -> str:
    """sentences.toml's text: the sections, then one table per normative sentence."""
    lines = [
        "# The normative sentences of the AMQP 1.0 specification, Parts 1-5.",
        "# GENERATED from conformance/spec/amqp-1.0/*.xml by",
        "# `python -m amqpspec.conformance.manifest.extract`; do not edit (a test compares).",
        "# Who each binds and what tests it: links.toml.",
        "",
    ]
    extracted = extract()
    lines.append("[sections]")
    for number, section in sorted(spec.sections().items(), key=lambda i: _key(i[0])):
        lines.append(f"{_string(number)} = {_string(section.title)}")
    lines.append("")
    for item in extracted:
        lines += [
            f"[sentence.{_string(item.id)}]",
            f"section = {_string(item.section)}",
            f"level = {_string(item.level)}",
            f"keyword = {_string(item.keyword)}",
            f"text = {_string(item.text)}",
            "",
        ]
    return "\n".join(lines)


def _key(number: str) -> tuple[int, ...]:
    return tuple(int(n) for n in number.split("."))


def summary(items: list[Extracted]) -> Iterator[str]:
    by_part: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for item in items:
        by_part[item.part][item.level] += 1
    for part in sorted(by_part):
        counts = ", ".join(f"{lvl} {by_part[part][lvl]}" for lvl in LEVELS if by_part[part][lvl])
        yield f"Part {part}: {sum(by_part[part].values())} ({counts})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m amqpspec.conformance.manifest.extract")
    parser.add_argument("--check", action="store_true", help="exit 1 if sentences.toml is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = SENTENCES_FILE.read_text(encoding="utf-8") if SENTENCES_FILE.exists() else ""
        if current != text:
            print(f"{SENTENCES_FILE} differs from a fresh extraction", file=sys.stderr)
            return 1
        return 0
    SENTENCES_FILE.write_text(text, encoding="utf-8")
    items = extract()
    print(f"{len(items)} normative sentences -> {SENTENCES_FILE}")
    for line in summary(items):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
