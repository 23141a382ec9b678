"""The matrix as one self-contained HTML page (`amqpspec report DIR...`).

Owns: `render_html(matrix, out_dir)`: the run header (amqpspec version and commit, date,
command, each broker's product and version from its open frame, profile, expectations
file), a summary per broker, the failures first (FAILED and ERROR, then NON-STRICT, then
DIFFERS) each with its reason as text and links to its trace and pcap, then the cases
section by section as collapsible groups (`<details id="s-2.6.7">`, a row `id="c-<case>"`)
with the pipelined twins folded into their base row (a badge where they differ), per cell
the regression against the expectations, flaky and the two kinds of UNSUPPORTED; filters by
verdict, section and broker (a few lines of script; without it every row shows). Colours
are `report.PALETTE`'s, each text / background pair at least 4.5:1. Pure: a string.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from amqpspec.conformance.report.matrix import (
    DIFFERS,
    FAILURE_HEADINGS,
    OPTED_OUT,
    PALETTE,
    SEVERITY,
    Matrix,
    anchor,
    is_flaky,
    is_opted_out,
    section_of,
    section_title,
)

esc = html.escape

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#1a1a1a;max-width:110em}
table{border-collapse:collapse;margin:.4em 0}
th,td{border:1px solid #bbb;padding:3px 8px;font-size:13px;vertical-align:top}
th{background:#eee;text-align:left}td.id{font-family:monospace;white-space:nowrap}
td.v{text-align:center;font-weight:600;white-space:nowrap}td.v a{color:inherit}
.badge{display:inline-block;border:1px solid currentColor;border-radius:3px;padding:0 3px;
margin-left:3px;font-size:11px;font-weight:600}
.pill{display:inline-block;border-radius:3px;padding:0 5px;font-weight:600;font-size:12px}
li.fail{margin:.5em 0}li.fail p{margin:.2em 0 .2em 1em;font-size:13px}
.reason{white-space:pre-wrap;word-break:break-word}
details{margin:.3em 0}summary{cursor:pointer;font-weight:600;padding:2px 0}
summary .n{font-weight:400;font-size:13px;margin-left:.5em}
nav.filters{position:sticky;top:0;background:#fff;border-bottom:1px solid #bbb;padding:.4em 0}
nav.filters label{margin-right:1em}
a{color:#0b5394}code{font-size:12px}
.sentence{font-size:12px;color:#333;white-space:normal;font-family:system-ui,sans-serif}
"""

SCRIPT = """
const $=s=>document.getElementById(s);
function apply(){
 const v=$('f-verdict').value,s=$('f-section').value,b=$('f-broker').value,o=$('f-nonok').checked;
 document.querySelectorAll('tr.case').forEach(tr=>{
  const tags=b?(tr.dataset['b'+b]||'').split(' '):tr.dataset.all.split(' ');
  let ok=(!s||tr.dataset.section===s)&&(!v||tags.includes(v));
  if(o)ok=ok&&tags.some(t=>t&&t!=='OK');
  tr.hidden=!ok;});
 document.querySelectorAll('details.sec').forEach(d=>{
  d.hidden=!d.querySelector('tr.case:not([hidden])');});
 document.querySelectorAll('li.fail').forEach(li=>{
  li.hidden=!((!s||li.dataset.section===s)&&(!v||li.dataset.tags.split(' ').includes(v))
   &&(!b||li.dataset.b===b));});
 document.querySelectorAll('[data-col]').forEach(c=>{c.hidden=!!b&&c.dataset.col!==b;});
}
function reveal(){const t=document.getElementById(decodeURIComponent(location.hash.slice(1)));
 if(!t)return;for(let d=t.closest('details');d;d=d.parentElement.closest('details'))d.open=true;
 t.scrollIntoView();}
document.querySelectorAll('nav.filters select,nav.filters input')
 .forEach(e=>e.addEventListener('change',apply));
window.addEventListener('hashchange',reveal);reveal();
"""

FILTER_TAGS = {
    "FAILED": "FAILED",
    "ERROR": "ERROR",
    "NON-STRICT": "NON-STRICT",
    DIFFERS: "DIFFERS (model)",
    "UNSUPPORTED-broker": "UNSUPPORTED: broker lacks it",
    "UNSUPPORTED-profile": "UNSUPPORTED: profile opted out",
    "OK": "OK",
    "regression": "differs from expectations",
    "flaky": "flaky",
}


def _colours(cell: dict[str, Any]) -> tuple[str, str]:
    if is_opted_out(cell):
        return OPTED_OUT
    return PALETTE.get(cell["verdict"], ("#000000", "#ffffff"))


def _tags(matrix: Matrix, broker: str, case_id: str) -> list[str]:
    """What a filter may select a cell by: its verdict (UNSUPPORTED split), regression,
    flaky; the folded pipelined twin's verdict too."""
    tags: list[str] = []
    for cid in (case_id, matrix.twin(case_id)):
        cell = matrix.cells.get((broker, cid)) if cid else None
        if cell is None:
            continue
        verdict = cell["verdict"]
        if verdict == "UNSUPPORTED":
            verdict += "-profile" if is_opted_out(cell) else "-broker"
        tags.append(verdict)
        if is_flaky(cell):
            tags.append("flaky")
        if matrix.regression(broker, cid):
            tags.append("regression")
    return list(dict.fromkeys(tags))


def _pill(verdict: str, cell: dict[str, Any] | None = None) -> str:
    bg, fg = _colours(cell) if cell is not None else PALETTE.get(verdict, ("#000", "#fff"))
    return f'<span class="pill" style="background:{bg};color:{fg}">{esc(verdict)}</span>'


def _cell(matrix: Matrix, broker: str, index: int, case_id: str, out_dir: Path) -> str:
    cell = matrix.cells.get((broker, case_id))
    twin_id = matrix.twin(case_id)
    twin = matrix.cells.get((broker, twin_id)) if twin_id else None
    if cell is None:
        return f'<td data-col="{index}"></td>'
    bg, fg = _colours(cell)
    reason = cell.get("reason", "")
    title = f"{reason} ({cell.get('duration', 0):.3f} s)" if reason else ""
    badges = []
    if is_opted_out(cell):
        badges.append(
            '<span class="badge" title="the profile says the broker lacks this; '
            'never run">opted out</span>'
        )
    if is_flaky(cell):
        attempts = ", ".join(cell["attempts"])
        badges.append(f'<span class="badge" title="attempts {esc(attempts)}">flaky</span>')
    regression = matrix.regression(broker, case_id)
    if regression:
        badges.append(f'<span class="badge" title="{esc(regression)}">≠ expected</span>')
    if twin is not None and twin["verdict"] != cell["verdict"]:
        href = esc(matrix.cell_link(broker, twin_id, out_dir), quote=True)  # type: ignore[arg-type]
        badges.append(
            f'<a class="badge" href="{href}" title="{esc(twin.get("reason", ""), quote=True)}">'
            f"pipelined: {esc(twin['verdict'])}</a>"
        )
    elif twin is not None:
        badges.append('<span class="badge" title="the pipelined variant: same verdict">P</span>')
    href = esc(matrix.cell_link(broker, case_id, out_dir), quote=True)
    return (
        f'<td class="v" data-col="{index}" style="background:{bg};color:{fg}" '
        f'title="{esc(title, quote=True)}"><a href="{href}">{esc(cell["verdict"])}</a>'
        f"{''.join(badges)}</td>"
    )


def _rows(matrix: Matrix, cases: list[str], out_dir: Path) -> str:
    head = "".join(f'<th data-col="{i}">{esc(b)}</th>' for i, b in enumerate(matrix.brokers))
    rows = []
    for case_id in matrix.row_cases(cases):
        per_broker = {i: _tags(matrix, b, case_id) for i, b in enumerate(matrix.brokers)}
        every = sorted({t for tags in per_broker.values() for t in tags})
        data = "".join(f' data-b{i}="{" ".join(t)}"' for i, t in per_broker.items())
        level = matrix.levels.get(case_id, "")
        if case_id in matrix.models:
            level += f" ({matrix.models[case_id]})"
        sentence = matrix.sentences.get(case_id, "")
        cells = "".join(_cell(matrix, b, i, case_id, out_dir) for i, b in enumerate(matrix.brokers))
        section = section_of(case_id)
        rows.append(
            f'<tr class="case" id="c-{anchor(case_id)}" data-section="{esc(section)}" '
            f'data-all="{" ".join(every)}"{data}>'
            f'<td class="id"><a href="#c-{anchor(case_id)}">{esc(case_id)}</a>'
            + (f'<div class="sentence">{esc(sentence)}</div>' if sentence else "")
            + f"</td><td>{esc(level)}</td>{cells}</tr>"
        )
    return f"<table><tr><th>case</th><th>level</th>{head}</tr>{''.join(rows)}</table>"


def _counts(matrix: Matrix, cases: list[str]) -> str:
    bad = {v: 0 for v in SEVERITY}
    for case_id in cases:
        for broker in matrix.brokers:
            verdict = matrix.cells.get((broker, case_id), {}).get("verdict")
            if verdict in bad:
                bad[verdict] += 1
    shown = [f"{n} {v}" for v, n in bad.items() if n]
    return f'<span class="n">{len(cases)} cases' + (
        f" · {', '.join(shown)}</span>" if shown else "</span>"
    )


def _sections(matrix: Matrix, cases: list[str], out_dir: Path) -> str:
    out = []
    for section, members in matrix.sections(cases).items():
        title = (
            "Checker rows (a rule broken anywhere in the run)"
            if section == "checker"
            else (section_title(section))
        )
        open_ = any(
            matrix.cells.get((b, c), {}).get("verdict") in SEVERITY
            for c in members
            for b in matrix.brokers
        )
        out.append(
            f'<details class="sec" id="s-{anchor(section)}"{" open" if open_ else ""}>'
            f'<summary><a href="#s-{anchor(section)}">{esc(title)}</a>'
            f"{_counts(matrix, members)}</summary>{_rows(matrix, members, out_dir)}</details>"
        )
    return "".join(out)


def _failures(matrix: Matrix, out_dir: Path) -> str:
    failures = matrix.failures()
    if not failures:
        return "<p>No FAILED, ERROR, NON-STRICT or DIFFERS verdict.</p>"
    index = {b: i for i, b in enumerate(matrix.brokers)}
    out = []
    for verdict in SEVERITY:
        listed = [f for f in failures if f[2]["verdict"] == verdict]
        if not listed:
            continue
        items = []
        for broker, case_id, cell in listed:
            links = [
                f'<a href="{esc(matrix.link(broker, cell["trace"], out_dir), quote=True)}"'
                ">trace</a>"
            ]
            if (broker, case_id) in matrix.pages:
                page = esc(matrix.cell_link(broker, case_id, out_dir), quote=True)
                links.insert(0, f'<a href="{page}">page (the exchange, its frame marked)</a>')
            if cell.get("pcap"):
                pcap = esc(matrix.link(broker, cell["pcap"], out_dir), quote=True)
                links.append(f'<a href="{pcap}">pcap</a>')
            links.append(f'<a href="#c-{anchor(matrix.row_of(case_id))}">row</a>')
            marks = ""
            regression = matrix.regression(broker, case_id)
            if regression:
                marks += f' <span class="badge">≠ {esc(regression)}</span>'
            if is_flaky(cell):
                marks += f' <span class="badge">flaky: {esc(", ".join(cell["attempts"]))}</span>'
            tags = " ".join(_tags(matrix, broker, case_id))
            level = cell.get("level") or matrix.levels.get(case_id, "")
            items.append(
                f'<li class="fail" data-b="{index[broker]}" '
                f'data-section="{esc(section_of(case_id))}" data-tags="{tags}">'
                f"{_pill(verdict)} <b>{esc(broker)}</b> <code>{esc(case_id)}</code> "
                f"[{esc(level)}]{marks} · {' · '.join(links)}"
                f'<p class="reason">{esc(cell.get("reason", ""))}</p></li>'
            )
        out.append(
            f'<h3 id="f-{anchor(verdict)}">{esc(FAILURE_HEADINGS[verdict])} ({len(listed)})</h3>'
            f"<ol>{''.join(items)}</ol>"
        )
    return "".join(out)


def _header(matrix: Matrix) -> str:
    rows = []
    for broker in matrix.brokers:
        info = matrix.runs[broker]
        version = info.amqpspec_version + (f" ({info.commit})" if info.commit else "")
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{esc(x)}</td>"
                for x in (
                    broker,
                    info.announced,
                    info.profile or "?",
                    version or "?",
                    info.started or "?",
                    info.finished or "?",
                    (info.broker_url or "?") + f" ({info.transport})",
                    matrix.expectation_files.get(broker, "") or "(none)",
                )
            )
            + f"<td><code>{esc(info.command or '(not recorded)')}</code></td></tr>"
        )
    heads = (
        "broker", "product (its open frame)", "profile", "amqpspec", "started (UTC)",
        "finished", "broker URL", "expectations", "command",
    )  # fmt: skip
    return _table(heads, rows)


def _table(heads: tuple[str, ...] | list[str], rows: list[str]) -> str:
    """A plain table: its header cells, then its rows (already `<tr>...</tr>`)."""
    return (
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in heads)
        + "</tr>"
        + "".join(rows)
        + "</table>"
    )


def _totals(matrix: Matrix) -> str:
    heads = ["broker", "FAILED", "ERROR", "NON-STRICT", "DIFFERS (model)",
             "UNSUPPORTED: broker lacks it", "UNSUPPORTED: profile opted out", "OK",
             "checker rows", "≠ expectations", "flaky"]  # fmt: skip
    rows = []
    for broker in matrix.brokers:
        totals = matrix.totals(broker)
        opted, lacks = matrix.unsupported_split(broker)
        rows_n = matrix.checker_rows(broker)
        regressions = str(len(matrix.regressions(broker))) if broker in matrix.expectations else "-"
        values = [
            totals.get("FAILED", 0), totals.get("ERROR", 0), totals.get("NON-STRICT", 0),
            totals.get(DIFFERS, 0), lacks, opted, totals.get("OK", 0), rows_n, regressions,
            len(matrix.flaky(broker)),
        ]  # fmt: skip
        rows.append(
            f"<tr><td>{esc(broker)}</td>" + "".join(f"<td>{v}</td>" for v in values) + "</tr>"
        )
    return _table(heads, rows)


def _filters(matrix: Matrix) -> str:
    verdicts = "".join(f'<option value="{v}">{esc(t)}</option>' for v, t in FILTER_TAGS.items())
    sections = "".join(
        f'<option value="{esc(s)}">{esc(s)}</option>'
        for s in dict.fromkeys(section_of(c) for c in matrix.cases)
    )
    brokers = "".join(
        f'<option value="{i}">{esc(b)}</option>' for i, b in enumerate(matrix.brokers)
    )
    return (
        '<nav class="filters">'
        f'<label>verdict <select id="f-verdict"><option value="">any</option>{verdicts}'
        "</select></label>"
        f'<label>section <select id="f-section"><option value="">any</option>{sections}'
        "</select></label>"
        f'<label>broker <select id="f-broker"><option value="">every</option>{brokers}'
        "</select></label>"
        '<label><input type="checkbox" id="f-nonok"> hide rows with only OK</label>'
        '<a href="#failures">failures</a> · <a href="#cases">cases</a>'
        "</nav>"
    )


def _history(matrix: Matrix) -> str:
    if matrix.history is None:
        return ""
    from amqpspec.conformance.report.history import render_history_html

    return render_history_html(matrix.history, matrix)


def render_html(matrix: Matrix, out_dir: Path) -> str:
    summary = "".join(
        f"<li>{esc(matrix.summary_line(b)).replace('**', '')}</li>" for b in matrix.brokers
    )
    models = matrix.model_cases()
    apart = (
        '<h2 id="model">Model behaviour (not required by the spec)</h2>'
        "<p>Behaviour of a model a profile may claim (e.g. RabbitMQ 4's requeue on detach): "
        "OK when the broker behaves so, DIFFERS when not; never non-conformance.</p>"
        + _sections(matrix, models, out_dir)
        if models
        else ""
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'>"
        f"<title>AMQP 1.0 conformance matrix</title><style>{STYLE}</style></head><body>"
        "<h1>AMQP 1.0 conformance matrix</h1>"
        f'<ul class="summary">{summary}</ul>{_history(matrix)}'
        f'<h2 id="run">Run</h2>{_header(matrix)}{_totals(matrix)}'
        f"{_filters(matrix)}"
        f'<h2 id="failures">Failures first</h2>{_failures(matrix, out_dir)}'
        '<h2 id="cases">Cases by section</h2>'
        "<p>A verdict links to the case's trace (its reason on hover); badges: "
        "<i>opted out</i> (UNSUPPORTED because the profile lacks a capability: never run), "
        "<i>flaky</i> (retried attempts differed), <i>≠ expected</i> (differs from the "
        "expectations file), <i>pipelined: X</i> (the pipelined variant differs; <i>P</i>: "
        "the same verdict).</p>"
        f"{_sections(matrix, matrix.spec_cases(), out_dir)}{apart}"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
