"""A conformance statement per broker (`amqpspec report DIR... --statement`), Markdown and HTML.

Owns: `Statement` (one broker's results read off a `report.Matrix`) and its renderings: what
a vendor writes by hand about its own product, from the run: the run header (the product
and version from the broker's open frame, amqpspec's version, the date, the profile and
the command); conformance per part of the spec in numbers (cases judged, OK, FAILED,
NON-STRICT, the share met); the capabilities the broker does not support, listed once
(those the profile opted out of, never run, apart from those the broker showed it lacks);
then every deviation section by section (FAILED, ERROR, NON-STRICT; a pipelined twin with
the same verdict folded into its case), each with the manifest sentence quoted, the case,
the evidence frame and links to its trace and pcap, and where the broker's reviewed ledger
(conformance/expectations/ledger/<broker>.toml, docs/conformance.md "The reviewed ledger")
has the case with the same verdict, its sentence, evidence and rationale instead of the
run's own; and the model's behaviour (DIFFERS) apart, as it is not required by the spec.
Reads the ledger; otherwise pure.
"""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amqpspec.conformance.audit.ledger import ledger_path, load_ledger
from amqpspec.conformance.report.matrix import (
    CHECKER,
    DIFFERS,
    PIPELINED,
    Matrix,
    is_opted_out,
    opted_out_capability,
    section_key,
    section_of,
    section_title,
    shown_path,
)
from amqpspec.conformance.run.registry import quote

PARTS = {"1": "Types", "2": "Transport", "3": "Messaging", "4": "Transactions", "5": "Security"}
DEVIATIONS = ("FAILED", "ERROR", "NON-STRICT")
JUDGED = ("OK", "FAILED", "NON-STRICT")  # a verdict on the spec's text (not MODEL, not skipped)


def what_lacks(reason: str) -> str:
    """The head of an UNSUPPORTED reason, without the observation's timings, so that the
    cases lacking one thing are listed together."""
    return " ".join(reason.split(" (expected ", 1)[0].split())[:200]


@dataclass
class Deviation:
    case_id: str
    verdict: str
    level: str
    sentence: str  # the quoted sentence (the ledger's choice when it has one)
    evidence: str
    rationale: str = ""
    reading: str = ""
    reviewed: bool = False  # the ledger's entry, with the same verdict
    trace: str = ""
    pcap: str = ""
    page: str = ""  # its page (case_page), when the report wrote one
    also_pipelined: str = ""  # the twin's trace, when it has the same verdict


@dataclass
class Statement:
    broker: str
    matrix: Matrix
    out_dir: Path
    ledger: dict[str, dict[str, str]] = field(default_factory=dict)

    ledger_file: str = ""

    @classmethod
    def build(
        cls, matrix: Matrix, broker: str, out_dir: Path, ledger: str | Path | None = None
    ) -> Statement:
        """The statement of `broker`, quoting its reviewed ledger (`ledger`, by default
        conformance/expectations/ledger/<broker>.toml)."""
        path = Path(ledger) if ledger is not None else ledger_path(broker)
        entries = load_ledger(path)
        return cls(broker, matrix, out_dir, entries, shown_path(path) if entries else "")

    def cell(self, case_id: str) -> dict[str, Any] | None:
        return self.matrix.cells.get((self.broker, case_id))

    def cases(self) -> list[str]:
        return [c for c in self.matrix.cases if self.cell(c) is not None]

    def per_part(self) -> list[tuple[str, dict[str, int]]]:
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for case_id in self.cases():
            verdict = self.cell(case_id)["verdict"]  # type: ignore[index]
            part = section_of(case_id).split(".")[0]
            counts[part][verdict] += 1
        return sorted(((p, dict(c)) for p, c in counts.items()), key=lambda pc: pc[0])

    def unsupported(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """(capability the profile opted out of -> cases, reason the broker gave -> cases)."""
        opted: dict[str, list[str]] = defaultdict(list)
        lacks: dict[str, list[str]] = defaultdict(list)
        for case_id in self.cases():
            cell = self.cell(case_id)
            if cell is None or cell["verdict"] != "UNSUPPORTED":
                continue
            if case_id.endswith(PIPELINED) and self.cell(case_id.removesuffix(PIPELINED)):
                continue  # its base case says it
            if is_opted_out(cell):
                opted[opted_out_capability(cell)].append(case_id)
            else:
                lacks[what_lacks(cell.get("reason", ""))].append(case_id)
        return dict(sorted(opted.items())), dict(sorted(lacks.items()))

    def deviations(self, verdicts: tuple[str, ...] = DEVIATIONS) -> dict[str, list[Deviation]]:
        """section -> its deviations, in section order."""
        found: dict[str, list[Deviation]] = defaultdict(list)
        for case_id in self.cases():
            cell = self.cell(case_id)
            if cell is None or cell["verdict"] not in verdicts:
                continue
            base = case_id.removesuffix(PIPELINED)
            base_cell = self.cell(base) if base != case_id else None
            if base_cell is not None and base_cell["verdict"] == cell["verdict"]:
                continue  # folded into its base case's entry
            key = "checker" if case_id.startswith(CHECKER) else section_of(case_id)
            found[key].append(self._deviation(case_id, cell))
        return dict(sorted(found.items(), key=lambda kv: (kv[0] == "checker", section_key(kv[0]))))

    def _deviation(self, case_id: str, cell: dict[str, Any]) -> Deviation:
        entry = self.ledger.get(case_id, {})
        reviewed = bool(entry) and entry.get("verdict") == cell["verdict"]
        ids = self.matrix.sentence_ids.get(case_id, ())
        sentence_id = entry.get("sentence", "") if reviewed else (ids[0] if ids else "")
        if sentence_id.startswith("model:"):
            sentence = f"the {sentence_id.removeprefix('model:')} model (no sentence)"
        elif sentence_id:
            sentence = quote(sentence_id)
        else:
            sentence = self.matrix.sentences.get(case_id, "")
        twin = self.cell(case_id + PIPELINED)
        link = self.matrix.link
        return Deviation(
            case_id=case_id,
            verdict=cell["verdict"],
            level=cell.get("level") or self.matrix.levels.get(case_id, ""),
            sentence=sentence,
            evidence=(entry.get("evidence", "") if reviewed else "") or cell.get("reason", ""),
            rationale=entry.get("rationale", "") if reviewed else "",
            reading=entry.get("reading", "") if reviewed else "",
            reviewed=reviewed,
            trace=link(self.broker, cell["trace"], self.out_dir) if cell.get("trace") else "",
            pcap=link(self.broker, cell["pcap"], self.out_dir) if cell.get("pcap") else "",
            page=(
                self.matrix.cell_link(self.broker, case_id, self.out_dir)
                if (self.broker, case_id) in self.matrix.pages
                else ""
            ),
            also_pipelined=(
                link(self.broker, twin["trace"], self.out_dir)
                if twin is not None and twin["verdict"] == cell["verdict"]
                else ""
            ),
        )


def _title(statement: Statement) -> str:
    product = statement.matrix.runs[statement.broker].product
    return f"AMQP 1.0 conformance statement: {product or statement.broker}"


def _part_rows(statement: Statement) -> list[list[str]]:
    rows = []
    for part, counts in statement.per_part():
        judged = sum(counts.get(v, 0) for v in JUDGED)
        ok = counts.get("OK", 0)
        share = f"{100 * ok / judged:.1f} %" if judged else "-"
        rows.append(
            [
                f"Part {part}: {PARTS.get(part, '')}".strip(),
                str(sum(counts.values())),
                str(judged),
                str(ok),
                str(counts.get("FAILED", 0)),
                str(counts.get("NON-STRICT", 0)),
                str(counts.get("ERROR", 0)),
                str(counts.get(DIFFERS, 0)),
                str(counts.get("UNSUPPORTED", 0)),
                share,
            ]
        )
    return rows


PART_HEADS = [
    "part", "cases", "judged (OK, FAILED, NON-STRICT)", "OK", "FAILED", "NON-STRICT",
    "ERROR", "DIFFERS (model)", "UNSUPPORTED", "met (OK / judged)",
]  # fmt: skip


def _header_rows(statement: Statement) -> list[tuple[str, str]]:
    info = statement.matrix.runs[statement.broker]
    return [
        ("broker", f"{statement.broker}: {info.announced}"),
        ("profile", info.profile or "?"),
        ("amqpspec", (info.amqpspec_version or "?") + (f" ({info.commit})" if info.commit else "")),
        ("run", f"{info.started or '?'} to {info.finished or '?'}"),
        ("command", info.command or "(not recorded)"),
        ("expectations", statement.matrix.expectation_files.get(statement.broker, "(none)")),
        ("reviewed ledger", statement.ledger_file or "(none)"),
    ]


def _md(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def render_statement_markdown(statement: Statement) -> str:
    lines = [f"# {_title(statement)}", ""]
    for name, value in _header_rows(statement):
        lines.append(f"- {name}: {_md(value)}")
    lines += ["", "## Conformance per part of the specification", ""]
    lines += ["| " + " | ".join(PART_HEADS) + " |", "|" + " --- |" * len(PART_HEADS)]
    lines += ["| " + " | ".join(row) + " |" for row in _part_rows(statement)]
    opted, lacks = statement.unsupported()
    lines += ["", "## Capabilities not supported", ""]
    if not opted and not lacks:
        lines.append("None: every case ran.")
    for capability, cases in opted.items():
        lines.append(
            f"- `{capability}` (the profile says the broker lacks it): {len(cases)} case(s)"
        )
    for reason, cases in lacks.items():
        named = ", ".join(f"`{c}`" for c in cases)
        lines.append(f"- the broker showed it lacks it: {_md(reason)} ({named})")
    lines += ["", "## Deviations, section by section", ""]
    deviations = statement.deviations()
    if not deviations:
        lines.append("None: no FAILED, ERROR or NON-STRICT verdict.")
    for section, found in deviations.items():
        title = "Checker rows" if section == "checker" else section_title(section)
        lines += [f"### {title}", ""]
        for item in found:
            lines += _deviation_md(item)
    differs = statement.deviations((DIFFERS,))
    if differs:
        lines += [
            "## Model behaviour (DIFFERS: not required by the specification)",
            "",
        ]
        for found in differs.values():
            for item in found:
                lines += _deviation_md(item)
    return "\n".join(lines) + "\n"


def _deviation_md(item: Deviation) -> list[str]:
    links = f"[trace]({item.trace})" if item.trace else ""
    if item.page:
        links = f"[page]({item.page}), {links}"
    if item.pcap:
        links += f", [pcap]({item.pcap})"
    if item.also_pipelined:
        links += f"; the same with pipelined frames: [trace]({item.also_pipelined})"
    lines = [
        f"- **{item.verdict}** `{item.case_id}` [{item.level}]"
        + (" (reviewed)" if item.reviewed else ""),
        f"  - sentence: {_md(item.sentence)}",
        f"  - evidence: {_md(item.evidence)}",
    ]
    if item.rationale:
        lines.append(f"  - rationale: {_md(item.rationale)}")
    if item.reading:
        lines.append(f"  - reading: {_md(item.reading)}")
    lines += [f"  - {links}", ""]
    return lines


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:70em;color:#1a1a1a}
table{border-collapse:collapse}th,td{border:1px solid #bbb;padding:3px 8px;font-size:13px}
th{background:#eee;text-align:left}dl.dev{margin:.3em 0 1em 1em}dt{font-weight:600}
dd{margin:0 0 .3em 1em}a{color:#0b5394}
"""


def render_statement_html(statement: Statement) -> str:
    esc = html.escape
    title = esc(_title(statement))
    header = "".join(
        f"<tr><th>{esc(n)}</th><td>{esc(v)}</td></tr>" for n, v in _header_rows(statement)
    )
    parts = "".join(
        "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>"
        for row in _part_rows(statement)
    )
    heads = "".join(f"<th>{esc(h)}</th>" for h in PART_HEADS)
    opted, lacks = statement.unsupported()
    unsupported = "".join(
        f"<li><code>{esc(c)}</code> (the profile says the broker lacks it): {len(v)} case(s)</li>"
        for c, v in opted.items()
    ) + "".join(
        f"<li>the broker showed it lacks it: {esc(r)} ({esc(', '.join(v))})</li>"
        for r, v in lacks.items()
    )
    body = []
    for section, found in statement.deviations().items():
        name = "Checker rows" if section == "checker" else section_title(section)
        body.append(f'<h3 id="s-{esc(section)}">{esc(name)}</h3>')
        body += [_deviation_html(item) for item in found]
    model = [
        _deviation_html(item)
        for found in statement.deviations((DIFFERS,)).values()
        for item in found
    ]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{STYLE}</style></head><body><h1>{title}</h1>"
        f"<table>{header}</table>"
        "<h2>Conformance per part of the specification</h2>"
        f"<table><tr>{heads}</tr>{parts}</table>"
        f"<h2>Capabilities not supported</h2><ul>{unsupported or '<li>None</li>'}</ul>"
        "<h2>Deviations, section by section</h2>"
        + ("".join(body) or "<p>None: no FAILED, ERROR or NON-STRICT verdict.</p>")
        + (
            "<h2>Model behaviour (DIFFERS: not required by the specification)</h2>" + "".join(model)
            if model
            else ""
        )
        + "</body></html>\n"
    )


def _deviation_html(item: Deviation) -> str:
    esc = html.escape
    links = [f'<a href="{esc(item.page, quote=True)}">page</a>'] if item.page else []
    if item.trace:
        links.append(f'<a href="{esc(item.trace, quote=True)}">trace</a>')
    if item.pcap:
        links.append(f'<a href="{esc(item.pcap, quote=True)}">pcap</a>')
    if item.also_pipelined:
        links.append(
            f'the same with pipelined frames: <a href="{esc(item.also_pipelined, quote=True)}">'
            "trace</a>"
        )
    rows = [("sentence", item.sentence), ("evidence", item.evidence)]
    if item.rationale:
        rows.append(("rationale", item.rationale))
    if item.reading:
        rows.append(("reading", item.reading))
    details = "".join(f"<dt>{esc(n)}</dt><dd>{esc(v)}</dd>" for n, v in rows)
    reviewed = " (reviewed)" if item.reviewed else ""
    return (
        f"<p><b>{esc(item.verdict)}</b> <code>{esc(item.case_id)}</code> [{esc(item.level)}]"
        f"{reviewed}</p><dl class='dev'>{details}<dd>{' · '.join(links)}</dd></dl>"
    )
