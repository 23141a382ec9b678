"""The triage report: `report.md` and `report.html` with plots, from the job's results.

Owns: `write(out, clusters, violations, summary)`. Plots (matplotlib, Agg backend, PNG under
`plots/`): violations per rule and broker, violations over time per top signature, cluster
sizes. The HTML embeds the PNGs (one self-contained file); the Markdown links them. Writes
only under `out`.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd


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
    figure, axes = plt.subplots(figsize=(9, 0.45 * len(table) + 1.8))
    table.plot.barh(stacked=True, ax=axes)
    axes.set_xscale("symlog")  # one overrun repeats per transfer: keep rare rules visible
    axes.set_xlabel("violations (log scale)")
    axes.set_title("Violations per rule and broker")
    figure.tight_layout()
    figure.savefig(plots / "per-rule-broker.png", dpi=90)
    plt.close(figure)
    made.append(("Violations per rule and broker", "plots/per-rule-broker.png"))
    # over time, top signatures
    timed = frame.dropna(subset=["time"])
    if not timed.empty:
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
        figure.tight_layout()
        figure.savefig(plots / "over-time.png", dpi=90)
        plt.close(figure)
        made.append(("Violations over time", "plots/over-time.png"))
    # cluster sizes
    figure, axes = plt.subplots(figsize=(9, 0.35 * len(clusters) + 1.8))
    labels = [c["signature"].split("+", 1)[1] for c in clusters][::-1]
    axes.barh(labels, [c["connections"] for c in clusters][::-1])
    axes.set_xlabel("connections")
    axes.set_title("Cluster sizes (connections per signature)")
    figure.tight_layout()
    figure.savefig(plots / "cluster-sizes.png", dpi=90)
    plt.close(figure)
    made.append(("Cluster sizes", "plots/cluster-sizes.png"))
    return made


def _rows(clusters: list[dict]) -> list[list[str]]:
    rows = []
    for c in clusters:
        issue = c.get("known_issue")
        repro = c.get("reproducer")
        rows.append(
            [
                c["signature"],
                c["level"],
                c["section"],
                str(c["count"]),
                str(c["connections"]),
                ", ".join(c["brokers"]),
                issue["issue"] if issue else "",
                f"{repro['frames']} frames{' (re-checked)' if repro['rechecked'] else ''}"
                if repro
                else "",
                repro["pcap"] if repro else "",
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
]


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{cells}</tr>{body}</table>"


def write(out: Path, clusters: list[dict], violations: pd.DataFrame, summary: dict) -> None:
    plots = _plots(out, clusters, violations)
    totals = (
        f"{summary['connections']} connections, {summary['frames']} frames; "
        f"{summary['must_connections']} connections with MUST violations "
        f"({summary['must_violations']} MUST, {summary['should_violations']} SHOULD "
        f"violations); {len(clusters)} clusters; {summary['defect_connections']} "
        f"connections with capture defects, {summary['unchecked']} not checkable."
    )
    rows = _rows(clusters)
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
    broker_head = [
        "broker",
        "connections",
        "frames",
        "with MUST violations",
        "SHOULD only",
        "not checkable",
    ]
    defects = ", ".join(
        f"{name} {count}" for name, count in sorted(summary.get("defects", {}).items())
    )
    md = ["# AMQP 1.0 triage report", "", totals, ""]
    md += _md_table(broker_head, brokers)
    md += ["", f"Capture defects (counted, never dropped): {defects or 'none'}.", ""]
    md += _md_table(_HEAD, rows)
    md.append("")
    md += [f"![{title}]({path})" for title, path in plots]
    (out / "report.md").write_text("\n".join(md) + "\n")
    broker_table = _html_table(broker_head, brokers)
    cluster_table = _html_table(_HEAD, rows)
    images = "".join(
        f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' "
        f"src='data:image/png;base64,{base64.b64encode((out / path).read_bytes()).decode()}'>"
        for title, path in plots
    )
    (out / "report.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>AMQP 1.0 triage</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:90%}</style></head><body>"
        f"<h1>AMQP 1.0 triage report</h1><p>{html.escape(totals)}</p>{broker_table}"
        f"<p>Capture defects (counted, never dropped): {html.escape(defects or 'none')}.</p>"
        f"<h2>Clusters</h2>{cluster_table}{images}</body></html>\n"
    )
