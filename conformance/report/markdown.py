"""The brokers x cases matrix in Markdown (`amqpspec report DIR...`: conformance-matrix.md).

Owns: `render_markdown(matrix, out_dir)`: a summary block first, for a PR comment; then the
run header (`run_header_markdown`), what changed since older runs (`history`), the failures
with their reasons and links, the cases section by section, and the cases of a model's
behaviour apart. A pure function of the `matrix.Matrix` it is given; `cli` writes the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amqpspec.conformance.report.history import render_history_markdown
from amqpspec.conformance.report.matrix import (
    COLOURS,
    DIFFERS,
    FAILURE_HEADINGS,
    SEVERITY,
    Matrix,
    is_flaky,
    is_opted_out,
    section_title,
)


def _md(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def run_header_markdown(matrix: Matrix) -> list[str]:
    lines = [
        "| broker | product (its open frame) | profile | amqpspec | started (UTC) | command "
        "| expectations |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for broker in matrix.brokers:
        info = matrix.runs[broker]
        version = info.amqpspec_version + (f" ({info.commit})" if info.commit else "")
        command = f"`{_md(info.command)}`" if info.command else "(not recorded)"
        lines.append(
            f"| {broker} | {_md(info.announced)} | {info.profile or '?'} | "
            f"{version or '?'} | {info.started or '?'} | {command} | "
            f"{_md(matrix.expectation_files.get(broker, '')) or '(none)'} |"
        )
    return lines


def _cell_md(matrix: Matrix, broker: str, case_id: str, out_dir: Path) -> str:
    cell = matrix.cells.get((broker, case_id))
    if cell is None:
        return ""
    text = f"[{cell['verdict']}]({matrix.cell_link(broker, case_id, out_dir)})"
    if is_opted_out(cell):
        text += " (opted out)"
    if is_flaky(cell):
        text += " ⟳flaky"
    if matrix.regression(broker, case_id):
        text += " ≠expected"
    twin = matrix.twin(case_id)
    twin_cell = matrix.cells.get((broker, twin)) if twin else None
    if twin_cell is not None and twin_cell["verdict"] != cell["verdict"]:
        link = matrix.cell_link(broker, twin, out_dir)  # type: ignore[arg-type]
        text += f" · [pipelined: {twin_cell['verdict']}]({link})"
    return text


def _case_rows(matrix: Matrix, cases: list[str], out_dir: Path) -> list[str]:
    lines = ["| case | level | " + " | ".join(matrix.brokers) + " |"]
    lines.append("| --- | --- |" + " --- |" * len(matrix.brokers))
    for case_id in matrix.row_cases(cases):
        cells = [_cell_md(matrix, broker, case_id, out_dir) for broker in matrix.brokers]
        level = matrix.levels.get(case_id, "")
        if case_id in matrix.models:
            level += f" ({matrix.models[case_id]})"
        lines.append(f"| `{case_id}` | {level} | " + " | ".join(cells) + " |")
    return lines


def _failure_md(matrix: Matrix, broker: str, case_id: str, cell: dict[str, Any], out: Path) -> str:
    links = f"[trace]({matrix.link(broker, cell['trace'], out)})"
    if (broker, case_id) in matrix.pages:
        links = f"[page]({matrix.cell_link(broker, case_id, out)}), " + links
    if cell.get("pcap"):
        links += f", [pcap]({matrix.link(broker, cell['pcap'], out)})"
    marks = ""
    if (regression := matrix.regression(broker, case_id)) != "":
        marks += f" **≠ {regression}**"
    if is_flaky(cell):
        marks += f" **flaky** (attempts {', '.join(cell['attempts'])})"
    level = cell.get("level") or matrix.levels.get(case_id, "")
    return (
        f"- **{broker}** `{case_id}` {cell['verdict']} [{level}]{marks}: "
        f"{_md(cell.get('reason', ''))} ({links})"
    )


def render_markdown(matrix: Matrix, out_dir: Path) -> str:
    lines = ["# AMQP 1.0 conformance matrix", ""]
    for broker in matrix.brokers:
        lines.append(f"> {matrix.summary_line(broker)}  ")
    if matrix.history is not None:
        lines += ["", *render_history_markdown(matrix.history, matrix)]
    lines += ["", "## Run", "", *run_header_markdown(matrix), ""]
    verdicts = sorted(COLOURS)
    lines.append("| broker | " + " | ".join(verdicts) + f" | {DIFFERS} (model) |")
    lines.append("| --- |" + " --- |" * (len(verdicts) + 1))
    for broker in matrix.brokers:
        totals = matrix.totals(broker)
        counts = [str(totals.get(v, 0)) for v in (*verdicts, DIFFERS)]
        lines.append(f"| {broker} | " + " | ".join(counts) + " |")
    failures = matrix.failures()
    if failures:
        lines += ["", "## Failures first", ""]
        for verdict in SEVERITY:
            listed = [f for f in failures if f[2]["verdict"] == verdict]
            if listed:
                lines += [f"### {FAILURE_HEADINGS[verdict]} ({len(listed)})", ""]
                lines += [_failure_md(matrix, b, c, cell, out_dir) for b, c, cell in listed]
                lines.append("")
    lines += ["", "## Cases by section", ""]
    lines.append(
        "Verdicts link to the case's trace; `(opted out)`: UNSUPPORTED because the profile "
        "lacks a capability, never run; `⟳flaky`: retried attempts differed; `≠expected`: "
        "differs from the broker's expectations file; `pipelined: X`: the pipelined variant "
        "of the case differs."
    )
    for section, cases in matrix.sections(matrix.spec_cases()).items():
        title = "Checker rows" if section == "checker" else section_title(section)
        lines += ["", f"### {title}", "", *_case_rows(matrix, cases, out_dir)]
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
    return "\n".join(lines) + "\n"
