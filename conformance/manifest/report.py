"""What tests the normative manifest, per part and section: the manifest half of
`amqpspec coverage`.

Owns `measure_manifest() -> ManifestCoverage` (every sentence with the cases that test it,
from links.toml and from the registry's `case(..., sentences=...)`, the checker rules naming
it, or why it is untestable) and its Markdown / HTML renderings. Reads the manifest, the case
registry and the rule catalog; writes nothing (`coverage_cli` writes the reports).
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field

from amqpspec.conformance import manifest
from amqpspec.conformance.manifest import spec

STATUSES = ("case", "rule", "untestable", "not yet")
# the roles a broker can play: a sentence binding one of them can be a broker's obligation
BROKER_ROLES = frozenset(
    {"either", "sender", "receiver", "node", "container", "intermediary", "server", "coordinator"}
)


@dataclass(frozen=True, slots=True)
class Entry:
    sentence: manifest.Sentence
    cases: tuple[str, ...]  # links.toml and the registry's own, merged

    @property
    def untestable(self) -> bool:
        return bool(self.sentence.untestable)

    @property
    def not_yet(self) -> bool:
        return not self.cases and not self.sentence.rules and not self.untestable


@dataclass
class ManifestCoverage:
    entries: list[Entry]
    case_notes: dict[str, str]  # cases that check no sentence binding the broker: why
    rules_without_sentence: dict[str, str]  # rule id -> why (links.toml not_normative)
    paraphrasing_cases: list[str] = field(default_factory=list)  # quote not in the XML

    def counts(self, entries: list[Entry] | None = None) -> dict[str, int]:
        """sentences, tested by a case, by a checker rule only, untestable, not yet tested
        (each sentence in one of the four)."""
        chosen = self.entries if entries is None else entries
        return {
            "sentences": len(chosen),
            "case": sum(1 for e in chosen if e.cases),
            "rule": sum(1 for e in chosen if e.sentence.rules and not e.cases),
            "untestable": sum(
                1 for e in chosen if e.untestable and not e.cases and not e.sentence.rules
            ),
            "not yet": sum(1 for e in chosen if e.not_yet),
        }

    def by_part(self) -> dict[int, list[Entry]]:
        parts: dict[int, list[Entry]] = {}
        for entry in self.entries:
            parts.setdefault(entry.sentence.part, []).append(entry)
        return parts

    def by_section(self) -> dict[str, list[Entry]]:
        sections: dict[str, list[Entry]] = {}
        for entry in self.entries:
            sections.setdefault(entry.sentence.section, []).append(entry)
        return dict(sorted(sections.items(), key=lambda item: _key(item[0])))

    def levels(self, part: int) -> Counter[str]:
        return Counter(e.sentence.level for e in self.entries if e.sentence.part == part)

    def gaps(self) -> list[Entry]:
        """Not yet tested sentences that can oblige a broker (its role binds), MUST first."""
        found = [e for e in self.entries if e.not_yet and e.sentence.binds in BROKER_ROLES]
        return sorted(found, key=_gap_order)


def _gap_order(entry: Entry) -> tuple[bool, tuple[int, ...]]:
    return entry.sentence.obligation != "MUST", _key(entry.sentence.section)


def _key(number: str) -> tuple[int, ...]:
    return tuple(int(n) for n in number.split("."))


def measure_manifest() -> ManifestCoverage:
    """The manifest against the registered cases and the checker's rule catalog."""
    from amqpspec.conformance.run.registry import load_cases

    cases = load_cases()
    own: dict[str, list[str]] = {}
    paraphrasing = []
    for case in cases:
        named = tuple(getattr(case, "sentences", ()) or ())
        for sentence_id in named:
            own.setdefault(sentence_id, []).append(case.case_id)
        if not spec.quoted_in_spec(case.sentence):
            paraphrasing.append(case.case_id)
    entries = []
    for sentence in manifest.sentences().values():
        merged = tuple(dict.fromkeys([*sentence.cases, *own.get(sentence.id, ())]))
        entries.append(Entry(sentence, merged))
    notes = manifest.rule_notes()
    without = {r: n["not_normative"] for r, n in notes.items() if n.get("not_normative")}
    return ManifestCoverage(entries, manifest.case_notes(), without, paraphrasing)


def _row(label: str, counts: dict[str, int]) -> str:
    return (
        f"| {label} | {counts['sentences']} | {counts['case']} | {counts['rule']} | "
        f"{counts['untestable']} | {counts['not yet']} |"
    )


HEADER = [
    "| | sentences | tested by a case | by a checker rule only | untestable | not yet tested |",
    "| --- | --- | --- | --- | --- | --- |",
]


def render_manifest_markdown(coverage: ManifestCoverage, heading: str = "#") -> str:
    """The manifest's coverage as Markdown; `heading` is the level of its title."""
    sub = heading + "#"
    titles = manifest.sections()
    total = coverage.counts()
    lines = [
        f"{heading} The normative manifest: {total['sentences']} sentences",
        "",
        "Every normative sentence of AMQP 1.0 Parts 1-5 (`conformance/manifest/`), with the",
        "cases that test it, the checker rules that enforce it, or why no client can see it on",
        "the wire. Each sentence counts once: tested by a case (a rule may enforce it too), by",
        "a checker rule only, untestable, or not yet tested.",
        "",
        *HEADER,
    ]
    parts = coverage.by_part()
    for part, entries in parts.items():
        lines.append(_row(f"Part {part} {spec.PART_TITLES[part]}", coverage.counts(entries)))
    lines.append(_row("**all**", total))
    lines += ["", "| part | " + " | ".join(_LEVELS) + " |"]
    lines.append("| --- |" + " --- |" * len(_LEVELS))
    for part in parts:
        levels = coverage.levels(part)
        lines.append(f"| {part} | " + " | ".join(str(levels[lvl]) for lvl in _LEVELS) + " |")
    lines += ["", f"{sub} Per section", "", *HEADER]
    for number, entries in coverage.by_section().items():
        lines.append(_row(f"{number} {titles.get(number, '')}", coverage.counts(entries)))
    lines += _what_is_missing(coverage, sub)
    return "\n".join(lines) + "\n"


def _what_is_missing(coverage: ManifestCoverage, sub: str) -> list[str]:
    """The lists after the tables: sentences not yet tested, checker rules with no sentence,
    cases that check no sentence binding the broker, paraphrasing cases."""
    gaps = coverage.gaps()
    lines = [
        "",
        f"{sub} Not yet tested, binding a role a broker plays ({len(gaps)})",
        "",
        "| id | level | binds | sentence |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| `{e.sentence.id}` | {e.sentence.level} | {e.sentence.binds} | {e.sentence.text} |"
        for e in gaps
    ]
    lines += [
        "",
        f"{sub} Checker rules with no normative sentence ({len(coverage.rules_without_sentence)})",
        "",
    ]
    lines += [f"- `{rule}`: {why}" for rule, why in sorted(coverage.rules_without_sentence.items())]
    lines += [
        "",
        f"{sub} Cases that check no sentence binding the broker ({len(coverage.case_notes)})",
        "",
        "<details><summary>case: why</summary>",
        "",
    ]
    lines += [f"- `{case}`: {why}" for case, why in sorted(coverage.case_notes.items())]
    lines += [
        "",
        "</details>",
        "",
        f"Cases whose quoted sentence is not in the XML (a paraphrase): "
        f"{len(coverage.paraphrasing_cases)}.",
    ]
    return lines


_LEVELS = ("MUST", "MUST NOT", "SHALL", "SHALL NOT", "REQUIRED", "PROHIBITED", "SHOULD",
           "SHOULD NOT")  # fmt: skip


def render_manifest_html(coverage: ManifestCoverage) -> str:
    """The manifest's coverage as an HTML fragment (a section of spec-coverage.html)."""
    esc = html.escape
    titles = manifest.sections()
    total = coverage.counts()
    head = "".join(f"<th>{esc(h)}</th>" for h in ("", "sentences", *STATUSES))
    parts = [
        f"<h2>The normative manifest: {total['sentences']} sentences</h2>",
        f"<table><tr>{head}</tr>",
    ]

    def row(label: str, counts: dict[str, int]) -> str:
        cells = "".join(f"<td>{counts[k]}</td>" for k in ("sentences", *STATUSES))
        return f"<tr><td>{esc(label)}</td>{cells}</tr>"

    for part, entries in coverage.by_part().items():
        parts.append(row(f"Part {part} {spec.PART_TITLES[part]}", coverage.counts(entries)))
    parts.append(row("all", total))
    for number, entries in coverage.by_section().items():
        parts.append(row(f"{number} {titles.get(number, '')}", coverage.counts(entries)))
    parts.append("</table>")
    gaps = coverage.gaps()
    parts.append(f"<h3>Not yet tested, binding a role a broker plays ({len(gaps)})</h3><table>")
    parts += [
        f"<tr class='no'><td><code>{esc(e.sentence.id)}</code></td><td>{esc(e.sentence.level)}"
        f"</td><td>{esc(e.sentence.binds)}</td><td>{esc(e.sentence.text)}</td></tr>"
        for e in gaps
    ]
    parts.append("</table>")
    return "\n".join(parts) + "\n"
