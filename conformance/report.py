"""The brokers x cases matrix: Markdown and a self-contained HTML page from index.json files.

Owns: `Matrix` (merged results of one or more results directories), `render_markdown`
and `render_html`. Case metadata (level, spec sentence) comes from the registry. Pure
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


@dataclass
class Matrix:
    brokers: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)
    cells: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    roots: dict[str, Path] = field(default_factory=dict)  # broker -> its results DIR
    levels: dict[str, str] = field(default_factory=dict)
    sentences: dict[str, str] = field(default_factory=dict)

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
                matrix.levels[case_id] = known[case_id].level
                matrix.sentences[case_id] = known[case_id].sentence
        return matrix

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


def render_markdown(matrix: Matrix, out_dir: Path) -> str:
    lines = ["# AMQP 1.0 conformance matrix", ""]
    lines.append("| broker | " + " | ".join(sorted(COLOURS)) + " |")
    lines.append("| --- |" + " --- |" * len(COLOURS))
    for broker in matrix.brokers:
        totals = matrix.totals(broker)
        lines.append(
            f"| {broker} | " + " | ".join(str(totals.get(v, 0)) for v in sorted(COLOURS)) + " |"
        )
    lines += ["", "| case | level | " + " | ".join(matrix.brokers) + " |"]
    lines.append("| --- | --- |" + " --- |" * len(matrix.brokers))
    for case_id in matrix.cases:
        cells = []
        for broker in matrix.brokers:
            cell = matrix.cells.get((broker, case_id))
            if cell is None:
                cells.append("")
            else:
                cells.append(f"[{cell['verdict']}]({_link(matrix, broker, cell, out_dir)})")
        lines.append(
            f"| `{case_id}` | {matrix.levels.get(case_id, '')} | " + " | ".join(cells) + " |"
        )
    failures = [
        (broker, case_id, matrix.cells[(broker, case_id)])
        for case_id in matrix.cases
        for broker in matrix.brokers
        if matrix.cells.get((broker, case_id), {}).get("verdict")
        in ("FAILED", "ERROR", "NON-STRICT")
    ]
    if failures:
        lines += ["", "## Reasons", ""]
        for broker, case_id, cell in failures:
            reason = cell.get("reason", "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"- **{broker}** `{case_id}` {cell['verdict']}: {reason}")
    return "\n".join(lines) + "\n"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#eee}
td.v{color:#fff;text-align:center;font-weight:600}td.v a{color:#fff;text-decoration:none}
td.id{font-family:monospace}tr:hover td{outline:1px solid #888}
"""


def render_html(matrix: Matrix, out_dir: Path) -> str:
    esc = html.escape
    rows = []
    for case_id in matrix.cases:
        cells = []
        for broker in matrix.brokers:
            cell = matrix.cells.get((broker, case_id))
            if cell is None:
                cells.append("<td></td>")
                continue
            verdict = cell["verdict"]
            title = esc(f"{cell.get('reason', '')} ({cell.get('duration', 0):.3f} s)", quote=True)
            href = esc(_link(matrix, broker, cell, out_dir), quote=True)
            cells.append(
                f'<td class="v" style="background:{COLOURS.get(verdict, "#000")}" '
                f'title="{title}"><a href="{href}">{esc(verdict)}</a></td>'
            )
        sentence = esc(matrix.sentences.get(case_id, ""), quote=True)
        rows.append(
            f'<tr><td class="id" title="{sentence}">{esc(case_id)}</td>'
            f"<td>{esc(matrix.levels.get(case_id, ''))}</td>{''.join(cells)}</tr>"
        )
    totals = "".join(
        f"<tr><td>{esc(b)}</td>"
        + "".join(f"<td>{matrix.totals(b).get(v, 0)}</td>" for v in COLOURS)
        + "</tr>"
        for b in matrix.brokers
    )
    head = "".join(f"<th>{esc(b)}</th>" for b in matrix.brokers)
    verdict_heads = "".join(f"<th>{v}</th>" for v in COLOURS)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>AMQP 1.0 conformance matrix</title><style>{_STYLE}</style></head><body>"
        "<h1>AMQP 1.0 conformance matrix</h1>"
        f"<table><tr><th>broker</th>{verdict_heads}</tr>{totals}</table>"
        "<p>Hover a case for its spec sentence, a verdict for its reason; click for the trace.</p>"
        f"<table><tr><th>case</th><th>level</th>{head}</tr>{''.join(rows)}</table>"
        "</body></html>\n"
    )
