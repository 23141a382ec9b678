"""The report of a fuzz campaign directory: `report.md` and `report.html` from findings.json.

    amqpspec fuzz report DIR      (a campaign also writes it when it ends)

Owns: `write_report(directory)`. A run header (amqpspec's version and commit, when the
report was made, the broker(s) and the seeds of the findings), then one row per finding:
its kind, the rule and spec section, the violation text (the oracle's summary, and what was
expected against what was observed when the oracle said), how often it replayed, the
minimal frames, and links to its reproducer (replayable `reproducer.json`, the text and the
pcap) and to a known upstream issue when the triage's list has one for the rule
(`spark_triage.known_issues`). Reads findings.json and checks which reproducer files exist
(a link only to a file that is there); writes only the two reports under `directory`.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any

from amqpspec.fuzz.findings import FINDINGS_JSON

REPRODUCER_FILES = ("reproducer.json", "reproducer.txt", "reproducer.pcap")


def _known_issue(rule: str, brokers: list[str]) -> dict | None:
    try:
        from amqpspec.spark_triage.known_issues import known_issue
    except ImportError:
        return None
    return known_issue(rule, brokers)


def _header(findings: list[dict[str, Any]]) -> list[tuple[str, str]]:
    from amqpspec import __version__
    from amqpspec.conformance.run.run_info import current_commit, public_url

    commit = current_commit()
    brokers = sorted({public_url(str(f.get("broker", ""))) for f in findings if f.get("broker")})
    seeds = sorted({str(f.get("seed", "")).split(":")[0] for f in findings if f.get("seed")})
    return [
        ("amqpspec", __version__ + (f" ({commit})" if commit else "")),
        ("made", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        ("broker", ", ".join(brokers) or "(none recorded)"),
        ("campaign seed", ", ".join(seeds) or "(none recorded)"),
        ("findings", str(len(findings))),
    ]


def _links(directory: Path, finding: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, path relative to `directory`) for each reproducer file that exists."""
    reproducer = str(finding.get("reproducer", ""))
    folder = Path(reproducer).parent if reproducer else Path("findings") / str(finding["id"])
    found = []
    for name in REPRODUCER_FILES:
        if (directory / folder / name).exists():
            found.append((name.split(".")[1], str(folder / name)))
    return found


def _text(finding: dict[str, Any]) -> str:
    text = str(finding.get("summary", ""))
    if finding.get("observed"):
        text += f" (expected: {finding.get('expected', '')}; observed: {finding['observed']})"
    return " ".join(text.split())


def write_report(directory: str | Path) -> tuple[Path, Path]:
    directory = Path(directory)
    findings: list[dict[str, Any]] = json.loads((directory / FINDINGS_JSON).read_text())
    header = _header(findings)
    md = ["# Fuzz campaign report", ""]
    md += [f"- {name}: {value}" for name, value in header]
    md += [
        "",
        "| finding | kind | rule (section) | what happened | replays | frames | reproducer "
        "| known issue |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows_html = []
    for finding in findings:
        md_row, html_row = _rows(directory, finding)
        md.append(md_row)
        rows_html.append(html_row)
    md += [
        "",
        "Replay a finding: `amqpspec fuzz replay DIR/findings/<id> --broker amqp://HOST:PORT`.",
    ]
    md_path = directory / "report.md"
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    html_path = directory / "report.html"
    html_path.write_text(_page(header, rows_html), encoding="utf-8")
    return md_path, html_path


def _rows(directory: Path, finding: dict[str, Any]) -> tuple[str, str]:
    """One finding's row of report.md and of report.html."""
    esc = html.escape
    links = _links(directory, finding)
    issue = _known_issue(str(finding.get("rule", "")), [str(finding.get("broker", ""))])
    frames = ", ".join(str(f) for f in finding.get("frames", []))
    rule = f"{finding.get('rule', '')} ({finding.get('section', '')})"
    md_links = ", ".join(f"[{label}]({path})" for label, path in links)
    md_issue = f"[{issue['issue']}]({issue['url']})" if issue else ""
    cells = [
        f"`{finding['id']}`",
        str(finding.get("kind", "")),
        rule,
        _text(finding),
        str(finding.get("replays", "")),
        frames,
        md_links,
        md_issue,
    ]
    md_row = "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    html_links = ", ".join(
        f"<a href='{esc(path, quote=True)}'>{label}</a>" for label, path in links
    )
    html_issue = (
        f"<a href='{esc(issue['url'], quote=True)}'>{esc(issue['issue'])}</a>" if issue else ""
    )
    html_row = (
        "<tr>"
        + "".join(
            f"<td>{esc(v)}</td>"
            for v in (
                str(finding["id"]),
                str(finding.get("kind", "")),
                rule,
                _text(finding),
                str(finding.get("replays", "")),
                frames,
            )
        )
        + f"<td>{html_links}</td><td>{html_issue}</td></tr>"
    )
    return md_row, html_row


def _page(header: list, rows_html: list[str]) -> str:
    esc = html.escape
    heads = "".join(
        f"<th>{h}</th>"
        for h in (
            "finding", "kind", "rule (section)", "what happened", "replays", "frames",
            "reproducer", "known issue",
        )
    )  # fmt: skip
    items = "".join(f"<li>{esc(n)}: {esc(v)}</li>" for n, v in header)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<title>Fuzz campaign report</title><style>body{font-family:sans-serif;margin:2em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;"
        "font-size:90%;vertical-align:top}a{color:#0b5394}</style></head><body>"
        f"<h1>Fuzz campaign report</h1><ul>{items}</ul><table><tr>{heads}</tr>"
        f"{''.join(rows_html)}</table></body></html>\n"
    )
