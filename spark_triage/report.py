"""The triage report: `report.md` and `report.html`, from the job's results.

Owns: `write(out, clusters, violations, summary)`. A run header (amqpspec's version and
commit, when the report was made, every input file with its kind, broker and size), the
brokers, the violations per rule and broker as a table, the clusters with links: the known
upstream issue to its URL, the reproducer's pcap and text to the files, and one violation's
text (the checker's, from the violations). Plots (matplotlib, Agg backend, PNG under
`plots/`) only where a plot says more than the table: violations per rule and broker once
there are more than PLOT_MIN_ROWS rules (a log axis only when the counts span two orders of
magnitude), violations over time once there are PLOT_MIN_TIMES distinct times, cluster sizes
once there are more than PLOT_MIN_ROWS clusters. The HTML embeds the PNGs (one
self-contained file); the Markdown links them. Writes only under `out`.
"""

from __future__ import annotations

import base64
import html
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

PLOT_MIN_ROWS = 12  # fewer rules or clusters: the table says it all
PLOT_MIN_TIMES = 20  # distinct violation times before a histogram over time says anything
LOG_SPAN = 100  # counts spanning this factor get a log axis


def _plots(out: Path, clusters: list[dict], violations: pd.DataFrame) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = out / "plots"
    plots.mkdir(exist_ok=True)
    made: list[tuple[str, str]] = []
    if violations.empty:
        return made
    frame = violations.assign(
        broker=(
            violations["broker_product"].fillna("unknown")
            + " "
            + violations["broker_version"].fillna("")
        ).str.strip()
    )
    # violations per rule and broker
    table = frame.pivot_table(
        index="rule", columns="broker", values="signature", aggfunc="count", fill_value=0
    )
    if len(table) > PLOT_MIN_ROWS:
        figure, axes = plt.subplots(figsize=(9, 0.45 * len(table) + 1.8))
        table.plot.barh(stacked=True, ax=axes)
        totals = table.sum(axis=1)
        if totals.max() >= LOG_SPAN * max(totals.min(), 1):
            # one overrun repeats per transfer: keep rare rules visible
            axes.set_xscale("log")
            axes.set_xlabel("violations (log scale)")
        else:
            axes.set_xlabel("violations")
        axes.set_title("Violations per rule and broker")
        made.append(_save(figure, plots, "per-rule-broker", "Violations per rule and broker"))
    # over time, top signatures
    timed = frame.dropna(subset=["time"])
    if timed["time"].nunique() >= PLOT_MIN_TIMES:
        top = [c["signature"] for c in clusters[:6]]
        start = timed["time"].min()
        figure, axes = plt.subplots(figsize=(9, 3.5))
        for sig in top:
            times = timed.loc[timed["signature"] == sig, "time"] - start
            if len(times):
                bins = 40 if times.nunique() > 1 else 1
                axes.hist(times, bins=bins, histtype="step", label=sig.split("+")[1])
        axes.set_xlabel(f"seconds after {pd.to_datetime(start, unit='s')} UTC")
        axes.set_ylabel("violations")
        axes.set_title("Violations over time (largest clusters)")
        axes.legend(fontsize="small")
        made.append(_save(figure, plots, "over-time", "Violations over time"))
    # cluster sizes
    if len(clusters) <= PLOT_MIN_ROWS:
        return made
    figure, axes = plt.subplots(figsize=(9, 0.35 * len(clusters) + 1.8))
    labels = [c["signature"].split("+", 1)[1] for c in clusters][::-1]
    axes.barh(labels, [c["connections"] for c in clusters][::-1])
    axes.set_xlabel("connections")
    axes.set_title("Cluster sizes (connections per signature)")
    made.append(_save(figure, plots, "cluster-sizes", "Cluster sizes"))
    return made


def _save(figure: Any, plots: Path, stem: str, title: str) -> tuple[str, str]:
    """Lay out, write `plots/<stem>.png` and close one figure: (title, relative path)."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.savefig(plots / f"{stem}.png", dpi=90)
    plt.close(figure)
    return title, f"plots/{stem}.png"


def _rows(clusters: list[dict], texts: dict[str, str]) -> list[list[tuple[str, str]]]:
    """Per cluster, its cells as (text, link) pairs ("" when the cell links nowhere)."""
    rows = []
    for c in clusters:
        issue = c.get("known_issue")
        repro = c.get("reproducer")
        frames = ""
        if repro:
            frames = f"{repro['frames']} frames{' (re-checked)' if repro['rechecked'] else ''}"
        rows.append(
            [
                (c["signature"], ""),
                (c["level"], ""),
                (c["section"], ""),
                (str(c["count"]), ""),
                (str(c["connections"]), ""),
                (", ".join(c["brokers"]), ""),
                (issue["issue"], issue.get("url", "")) if issue else ("", ""),
                (frames, repro.get("text", "")) if repro else ("", ""),
                (repro["pcap"], repro["pcap"]) if repro else ("", ""),
                (texts.get(c["signature"], ""), ""),
            ]
        )
    return rows


_HEAD = [
    "signature",
    "level",
    "section",
    "violations",
    "connections",
    "brokers",
    "known issue",
    "reproducer",
    "file",
    "a violation, as the checker says it",
]


def _violation_texts(violations: pd.DataFrame) -> dict[str, str]:
    """signature -> the first violation's text (the checker's reason)."""
    if violations.empty or "reason" not in violations:
        return {}
    first = violations.dropna(subset=["reason"]).groupby("signature")["reason"].first()
    return {str(k): " ".join(str(v).split()) for k, v in first.items()}


def _per_rule_rows(violations: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    if violations.empty:
        return ["rule"], []
    broker = (
        violations["broker_product"].fillna("unknown")
        + " "
        + violations["broker_version"].fillna("")
    ).str.strip()
    table = violations.assign(broker=broker).pivot_table(
        index="rule", columns="broker", values="signature", aggfunc="count", fill_value=0
    )
    head = ["rule", *map(str, table.columns)]
    return head, [[str(rule), *(str(int(v)) for v in row)] for rule, row in table.iterrows()]


def _header(summary: dict) -> tuple[list[tuple[str, str]], list[list[str]]]:
    from amqpspec import __version__
    from amqpspec.conformance.run.run_info import current_commit

    commit = current_commit()
    header = [
        ("amqpspec", __version__ + (f" ({commit})" if commit else "")),
        ("made", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
    ]
    inputs = [
        [str(i["path"]), str(i["kind"]), str(i.get("broker") or ""), str(i.get("size", ""))]
        for i in summary.get("inputs", [])
    ]
    return header, inputs


def _md_cell(text: str, link: str = "") -> str:
    text = text.replace("|", "\\|")
    return f"[{text}]({link})" if link and text else text


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    return lines + ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]


def _html_cell(text: str, link: str = "") -> str:
    if link and text:
        return f"<td><a href='{html.escape(link, quote=True)}'>{html.escape(text)}</a></td>"
    return f"<td>{html.escape(text)}</td>"


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


BROKER_HEAD = [
    "broker",
    "connections",
    "frames",
    "with MUST violations",
    "SHOULD only",
    "not checkable",
]
INPUT_HEAD = ["input", "kind", "broker", "bytes"]


@dataclass
class _Report:
    """What report.md and report.html both say, in the order they say it."""

    header: list[tuple[str, str]]
    totals: str
    brokers: list[list[str]]
    defects: str
    rows: list
    rule_head: list[str]
    rule_rows: list[list[str]]
    plots: list[tuple[str, str]]
    inputs: list[list[str]]


def write(out: Path, clusters: list[dict], violations: pd.DataFrame, summary: dict) -> None:
    report = _report(out, clusters, violations, summary)
    _write_markdown(out, report)
    _write_html(out, report)


def _report(out: Path, clusters: list[dict], violations: pd.DataFrame, summary: dict) -> _Report:
    plots = _plots(out, clusters, violations)
    totals = (
        f"{summary['connections']} connections, {summary['frames']} frames; "
        f"{summary['must_connections']} connections with MUST violations "
        f"({summary['must_violations']} MUST, {summary['should_violations']} SHOULD "
        f"violations); {len(clusters)} clusters; {summary['defect_connections']} "
        f"connections with capture defects, {summary['unchecked']} not checkable."
    )
    rows = _rows(clusters, _violation_texts(violations))
    brokers = [
        [
            b["broker"],
            str(b["connections"]),
            str(b["frames"] or 0),
            str(b["must_connections"]),
            str(b["should_only"]),
            str(b["unchecked"]),
        ]
        for b in summary.get("brokers", [])
    ]
    defects = ", ".join(
        f"{name} {count}" for name, count in sorted(summary.get("defects", {}).items())
    )
    header, inputs = _header(summary)
    rule_head, rule_rows = _per_rule_rows(violations)
    return _Report(header, totals, brokers, defects, rows, rule_head, rule_rows, plots, inputs)


def _write_markdown(out: Path, r: _Report) -> None:
    md = ["# AMQP 1.0 triage report", ""]
    md += [f"- {name}: {value}" for name, value in r.header]
    md += ["", r.totals, ""]
    md += _md_table(BROKER_HEAD, r.brokers)
    md += ["", f"Capture defects (counted, never dropped): {r.defects or 'none'}.", ""]
    md += ["## Clusters", ""]
    md += ["| " + " | ".join(_HEAD) + " |", "|" + " --- |" * len(_HEAD)]
    md += ["| " + " | ".join(_md_cell(t, link) for t, link in row) + " |" for row in r.rows]
    md += ["", "## Violations per rule and broker", ""]
    md += _md_table(r.rule_head, r.rule_rows)
    md.append("")
    md += [f"![{title}]({path})" for title, path in r.plots]
    if r.inputs:
        md += ["", "## Inputs", "", *_md_table(INPUT_HEAD, r.inputs)]
    (out / "report.md").write_text("\n".join(md) + "\n")


def _write_html(out: Path, r: _Report) -> None:
    broker_table = _html_table(BROKER_HEAD, r.brokers)
    cluster_cells = "".join(f"<th>{html.escape(h)}</th>" for h in _HEAD)
    cluster_table = (
        f"<table><tr>{cluster_cells}</tr>"
        + "".join(
            "<tr>" + "".join(_html_cell(t, link) for t, link in row) + "</tr>" for row in r.rows
        )
        + "</table>"
    )
    images = "".join(
        f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' "
        f"src='data:image/png;base64,{base64.b64encode((out / path).read_bytes()).decode()}'>"
        for title, path in r.plots
    )
    head_list = "".join(
        f"<li>{html.escape(name)}: {html.escape(value)}</li>" for name, value in r.header
    )
    input_table = f"<h2>Inputs</h2>{_html_table(INPUT_HEAD, r.inputs)}" if r.inputs else ""
    (out / "report.html").write_text(
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>AMQP 1.0 triage"
        "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:90%}a{color:#0b5394}</style>"
        f"</head><body><h1>AMQP 1.0 triage report</h1><ul>{head_list}</ul>"
        f"<p>{html.escape(r.totals)}</p>{broker_table}"
        f"<p>Capture defects (counted, never dropped): {html.escape(r.defects or 'none')}.</p>"
        f"<h2>Clusters</h2>{cluster_table}<h2>Violations per rule and broker</h2>"
        f"{_html_table(r.rule_head, r.rule_rows)}{images}{input_table}</body></html>\n"
    )
