"""The brokers x cases matrix: Markdown and a self-contained HTML page from index.json files.

Owns: `Matrix` (merged results of one or more results directories), `render_markdown`
and `render_html`. Case metadata (level, the sentences and what the case expects) comes
from the registry. The cases of a model's behaviour (level MODEL, verdict DIFFERS when the
broker differs) are shown apart, after the spec's cases, with their own totals column and
reasons: they are never counted as non-conformance (docs/conformance.md, "Verdicts"). Pure
functions of their inputs; `report_cli` writes the files.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amqpspec.conformance.registry import load_cases
from amqpspec.conformance.results import load_index

COLOURS = {
    "OK": "#2e7d32",
    "NON-STRICT": "#f9a825",
    "UNSUPPORTED": "#9e9e9e",
    "FAILED": "#c62828",
    "ERROR": "#6a1b9a",
}
DIFFERS = "DIFFERS"  # shown apart: its own totals column, table and reasons
DIFFERS_COLOUR = "#0277bd"
MODEL_LEVEL = "MODEL"


@dataclass
class Matrix:
    brokers: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)
    cells: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    roots: dict[str, Path] = field(default_factory=dict)  # broker -> its results DIR
    levels: dict[str, str] = field(default_factory=dict)
    sentences: dict[str, str] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)  # MODEL cases: their model

    @classmethod
    def load(cls, dirs: list[str | Path]) -> Matrix:
        matrix = cls()
        known = {case.case_id: case for case in load_cases()}
        order = {case_id: n for n, case_id in enumerate(known)}
        seen: set[str] = set()
        for directory in dirs:
            root = Path(directory)
            for broker, entries in load_index(root).items():
                if broker not in matrix.brokers:
                    matrix.brokers.append(broker)
                matrix.roots[broker] = root
                for case_id, entry in entries.items():
                    matrix.cells[(broker, case_id)] = entry
                    seen.add(case_id)
                    matrix.levels.setdefault(case_id, entry.get("level", ""))
        matrix.cases = sorted(seen, key=lambda c: (order.get(c, len(order)), c))
        for case_id in matrix.cases:
            if case_id in known:
                case = known[case_id]
                matrix.levels[case_id] = case.level
                ids = f" ({', '.join(case.sentences)})" if case.sentences else ""
                matrix.sentences[case_id] = case.sentence + ids
                if case.model:
                    matrix.models[case_id] = case.model
        return matrix

    def spec_cases(self) -> list[str]:
        """The cases graded against the spec's sentences (not a model's)."""
        return [c for c in self.cases if self.levels.get(c) != MODEL_LEVEL]

    def model_cases(self) -> list[str]:
        """The cases of a model's behaviour (shown apart)."""
        return [c for c in self.cases if self.levels.get(c) == MODEL_LEVEL]

    def totals(self, broker: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for case_id in self.cases:
            cell = self.cells.get((broker, case_id))
            if cell is not None:
                counts[cell["verdict"]] = counts.get(cell["verdict"], 0) + 1
        return counts


def _link(matrix: Matrix, broker: str, cell: dict[str, Any], out_dir: Path) -> str:
    trace = matrix.roots[broker] / cell["trace"]
    return os.path.relpath(trace, out_dir)


def _case_rows(matrix: Matrix, cases: list[str], out_dir: Path) -> list[str]:
    lines = ["| case | level | " + " | ".join(matrix.brokers) + " |"]
    lines.append("| --- | --- |" + " --- |" * len(matrix.brokers))
    for case_id in cases:
        cells = []
        for broker in matrix.brokers:
            cell = matrix.cells.get((broker, case_id))
            if cell is None:
                cells.append("")
            else:
                cells.append(f"[{cell['verdict']}]({_link(matrix, broker, cell, out_dir)})")
        level = matrix.levels.get(case_id, "")
        if case_id in matrix.models:
            level += f" ({matrix.models[case_id]})"
        lines.append(f"| `{case_id}` | {level} | " + " | ".join(cells) + " |")
    return lines


def _reasons(matrix: Matrix, cases: list[str], verdicts: tuple[str, ...]) -> list[str]:
    lines = []
    for case_id in cases:
        for broker in matrix.brokers:
            cell = matrix.cells.get((broker, case_id), {})
            if cell.get("verdict") in verdicts:
                reason = cell.get("reason", "").replace("|", "\\|").replace("\n", " ")
                lines.append(f"- **{broker}** `{case_id}` {cell['verdict']}: {reason}")
    return lines


def render_markdown(matrix: Matrix, out_dir: Path) -> str:
    lines = ["# AMQP 1.0 conformance matrix", ""]
    verdicts = sorted(COLOURS)
    lines.append("| broker | " + " | ".join(verdicts) + f" | {DIFFERS} (model) |")
    lines.append("| --- |" + " --- |" * (len(verdicts) + 1))
    for broker in matrix.brokers:
        totals = matrix.totals(broker)
        counts = [str(totals.get(v, 0)) for v in (*verdicts, DIFFERS)]
        lines.append(f"| {broker} | " + " | ".join(counts) + " |")
    lines += ["", *_case_rows(matrix, matrix.spec_cases(), out_dir)]
    models = matrix.model_cases()
    if models:
        lines += [
            "",
            "## Model behaviour (not required by the spec)",
            "",
            "Behaviour of a model a profile may claim (e.g. RabbitMQ 4's requeue on detach): "
            "OK when the broker behaves so, DIFFERS when not; never non-conformance.",
            "",
        ]
        lines += _case_rows(matrix, models, out_dir)
    failures = _reasons(matrix, matrix.spec_cases(), ("FAILED", "ERROR", "NON-STRICT"))
    failures += _reasons(matrix, models, ("FAILED", "ERROR"))
    if failures:
        lines += ["", "## Reasons", "", *failures]
    differs = _reasons(matrix, models, (DIFFERS,))
    if differs:
        lines += ["", "## Differs from the model", "", *differs]
    return "\n".join(lines) + "\n"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#eee}
td.v{color:#fff;text-align:center;font-weight:600}td.v a{color:#fff;text-decoration:none}
td.id{font-family:monospace}tr:hover td{outline:1px solid #888}
"""


def _html_rows(matrix: Matrix, cases: list[str], out_dir: Path) -> str:
    esc = html.escape
    rows = []
    for case_id in cases:
        cells = []
        for broker in matrix.brokers:
            cell = matrix.cells.get((broker, case_id))
            if cell is None:
                cells.append("<td></td>")
                continue
            verdict = cell["verdict"]
            colour = DIFFERS_COLOUR if verdict == DIFFERS else COLOURS.get(verdict, "#000")
            title = esc(f"{cell.get('reason', '')} ({cell.get('duration', 0):.3f} s)", quote=True)
            href = esc(_link(matrix, broker, cell, out_dir), quote=True)
            cells.append(
                f'<td class="v" style="background:{colour}" '
                f'title="{title}"><a href="{href}">{esc(verdict)}</a></td>'
            )
        sentence = esc(matrix.sentences.get(case_id, ""), quote=True)
        level = matrix.levels.get(case_id, "")
        if case_id in matrix.models:
            level += f" ({matrix.models[case_id]})"
        rows.append(
            f'<tr><td class="id" title="{sentence}">{esc(case_id)}</td>'
            f"<td>{esc(level)}</td>{''.join(cells)}</tr>"
        )
    head = "".join(f"<th>{esc(b)}</th>" for b in matrix.brokers)
    return f"<table><tr><th>case</th><th>level</th>{head}</tr>{''.join(rows)}</table>"


def render_html(matrix: Matrix, out_dir: Path) -> str:
    esc = html.escape
    totals = "".join(
        f"<tr><td>{esc(b)}</td>"
        + "".join(f"<td>{matrix.totals(b).get(v, 0)}</td>" for v in (*COLOURS, DIFFERS))
        + "</tr>"
        for b in matrix.brokers
    )
    verdict_heads = "".join(f"<th>{v}</th>" for v in COLOURS) + f"<th>{DIFFERS} (model)</th>"
    models = matrix.model_cases()
    apart = (
        "<h2>Model behaviour (not required by the spec)</h2>"
        "<p>Behaviour of a model a profile may claim (e.g. RabbitMQ 4's requeue on detach): "
        "OK when the broker behaves so, DIFFERS when not; never non-conformance.</p>"
        + _html_rows(matrix, models, out_dir)
        if models
        else ""
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>AMQP 1.0 conformance matrix</title><style>{_STYLE}</style></head><body>"
        "<h1>AMQP 1.0 conformance matrix</h1>"
        f"<table><tr><th>broker</th>{verdict_heads}</tr>{totals}</table>"
        "<p>Hover a case for its spec sentence, a verdict for its reason; click for the trace.</p>"
        f"{_html_rows(matrix, matrix.spec_cases(), out_dir)}{apart}"
        "</body></html>\n"
    )
