"""One HTML page per case of a report (`amqpspec report DIR... --pages failures|all|none`).

Owns: `page_path()` (where a cell's page goes: `<out>/cases/<broker>/<case>.html`) and
`render_case_page()`: at the top the verdict, expected against observed (the case's own
expectation and the run's reason), the spec sentences quoted with their manifest ids and
the section's title; then the exchange, every frame of every connection of the case as the
trace has it (both directions decoded, the probe's own frames too, numbers in decimal:
the checker's hex ones with their decimal value first), each frame anchored
(`#c<conn>-f<n>`) and the ones the reason or the checker's findings name highlighted and
linked from the top; then the exact tshark command that dissects the case's pcap. Reads
the trace file it is given (a trace longer than MAX_LINES is cut, with a link to the whole
of it); otherwise pure.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

from amqpspec.conformance.report.matrix import (
    OPTED_OUT,
    PALETTE,
    Matrix,
    anchor,
    is_opted_out,
    section_of,
    section_title,
)
from amqpspec.conformance.run.registry import quote
from amqpspec.conformance.run.results import case_file_stem

MAX_LINES = 4000  # frame lines shown on a page; the whole trace is one link away
_FRAME = re.compile(r"\[conn (?P<conn>\d+)\] #(?P<n>\d+) ")
_CONNECTION = re.compile(r"^== connection (?P<conn>\d+) \S+ -> \S+:(?P<port>\d+)")
# what a reason or a finding says of a frame: "(frame #38)", "[conn 42] #3101", "frame 13 ("
_NAMED = re.compile(r"\[conn (?P<conn>\d+)\] #(?P<a>\d+)|frame #(?P<b>\d+)|frame (?P<c>\d+) \(")

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:120em;color:#1a1a1a}
table{border-collapse:collapse}th,td{border:1px solid #bbb;padding:3px 8px;font-size:13px;
vertical-align:top;text-align:left}th{background:#eee;width:9em}
.pill{display:inline-block;border-radius:3px;padding:0 6px;font-weight:600}
pre{font-size:12px;line-height:1.35;overflow-x:auto}pre span{display:block}
span.hit{background:#fff3b0;outline:2px solid #c62828}span.probe{color:#1a1a1a}
span.broker{color:#0b3d91}span.finding{color:#b71c1c;font-weight:600}
span:target{background:#ffe082}a{color:#0b5394}code{font-size:12px}
"""


_HEX = re.compile(r"\b0x([0-9a-fA-F]+)\b")


def decimal(text: str) -> str:
    """The checker's hex numbers with their decimal value first: "0x6" -> "6 (0x6)"."""
    return _HEX.sub(lambda m: f"{int(m.group(1), 16)} (0x{m.group(1)})", text)


def page_path(out_dir: Path, broker: str, case_id: str) -> Path:
    return out_dir / "cases" / case_file_stem(broker) / f"{case_file_stem(case_id)}.html"


def named_frames(text: str) -> tuple[set[tuple[str, str]], set[str]]:
    """The frames a reason or finding names: (connection, number) pairs where it says the
    connection, numbers alone where it does not."""
    pairs: set[tuple[str, str]] = set()
    numbers: set[str] = set()
    for found in _NAMED.finditer(text):
        if found.group("conn"):
            pairs.add((found.group("conn"), found.group("a")))
        else:
            numbers.add(found.group("b") or found.group("c"))
    return pairs, numbers


def _header(lines: list[str]) -> dict[str, str]:
    """The trace's lines before its first connection: `key: value`."""
    fields: dict[str, str] = {}
    for line in lines:
        if line.startswith("== connection"):
            break
        key, sep, value = line.partition(": ")
        if sep and key.isidentifier():
            fields.setdefault(key, value)
    return fields


def _exchange(
    lines: list[str], pairs: set[tuple[str, str]], numbers: set[str], trace_link: str
) -> tuple[list[str], list[str], str]:
    """The trace's lines as HTML (connections bold, findings marked, the frames the reason
    names highlighted, at most MAX_LINES frames), the links to those frames, and the
    broker's port as the trace names it ("" when it does not)."""
    esc = html.escape
    body: list[str] = []
    hits: list[str] = []
    port = ""
    shown = 0
    for line in lines:
        connection = _CONNECTION.match(line)
        if connection:
            port = port or connection.group("port")
            body.append(f"<span><b>{esc(line)}</b></span>")
            continue
        frame = _FRAME.search(line)
        if frame is None:
            if line.startswith("!!"):
                body.append(f'<span class="finding">{esc(decimal(line))}</span>')
            continue
        shown += 1
        if shown > MAX_LINES:
            continue
        conn, number = frame.group("conn"), frame.group("n")
        ident = f"c{conn}-f{number}"
        hit = (conn, number) in pairs or number in numbers
        side = "broker" if " <- " in line else "probe"
        css = f"{side} hit" if hit else side
        body.append(f'<span id="{ident}" class="{css}">{esc(line)}</span>')
        if hit:
            hits.append(f'<a href="#{ident}">conn {conn} #{number}</a>')
    if shown > MAX_LINES:
        body.append(
            f'<span>... {shown - MAX_LINES} more frames: <a href="{esc(trace_link)}">the whole '
            "trace</a></span>"
        )
    return body, hits, port


def _facts(matrix: Matrix, broker: str, case_id: str, *, expected: str) -> str:
    """The table at the top of a case's page: the broker, what was expected and observed,
    the expectations file's entry on a regression, the attempts of a retried case."""
    esc = html.escape
    cell: dict[str, Any] = matrix.cells[(broker, case_id)]
    reason = cell.get("reason", "")
    regression = matrix.regression(broker, case_id)
    rows = [
        ("broker", f"{broker}: {matrix.runs[broker].announced}"),
        ("expected", expected),
        ("observed", decimal(reason) or "(as expected)"),
    ]
    if regression:
        rows.append(("expectations file", regression))
    if cell.get("attempts"):
        rows.append(("attempts", ", ".join(cell["attempts"])))
    return "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)


def render_case_page(
    matrix: Matrix, broker: str, case_id: str, page: Path, known_expectation: str = ""
) -> str:
    esc = html.escape
    cell: dict[str, Any] = matrix.cells[(broker, case_id)]
    trace_path = matrix.roots[broker] / cell["trace"]
    try:
        text = trace_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    lines = text.splitlines()
    fields = _header(lines)
    reason = cell.get("reason", "")
    findings = "\n".join(line for line in lines if line.startswith("!!"))
    pairs, numbers = named_frames(reason + "\n" + findings)
    here = page.parent
    trace_link = os.path.relpath(trace_path, here)
    pcap = matrix.roots[broker] / cell["pcap"] if cell.get("pcap") else None
    body, hits, port = _exchange(lines, pairs, numbers, trace_link)
    verdict = cell["verdict"]
    bg, fg = OPTED_OUT if is_opted_out(cell) else PALETTE.get(verdict, ("#000", "#fff"))
    ids = matrix.sentence_ids.get(case_id, ())
    sentences = "".join(f"<li>{esc(quote(s))}</li>" for s in ids) or (
        f"<li>{esc(fields.get('spec', matrix.sentences.get(case_id, '')))}</li>"
    )
    section = section_of(case_id)
    table = _facts(matrix, broker, case_id, expected=fields.get("expects", "") or known_expectation)
    tshark = ""
    if pcap is not None:
        rel = os.path.relpath(pcap, here)
        command = f"tshark -r '{rel}' -d tcp.port=={port or 5672},amqp -V"
        tshark = (
            f'<h2 id="pcap">The pcap</h2><p><a href="{esc(rel)}">{esc(pcap.name)}</a>, in '
            f"Wireshark or, from this page's folder:</p><pre>{esc(command)}</pre>"
        )
    matrix_page = os.path.relpath(here.parent.parent / "conformance-matrix.html", here)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{esc(case_id)} on {esc(broker)}: {esc(verdict)}</title><style>{STYLE}</style>"
        "</head><body>"
        f'<p><a href="{esc(matrix_page)}#c-{esc(anchor(matrix.row_of(case_id)))}">'
        "the matrix</a></p>"
        f'<h1><span class="pill" style="background:{bg};color:{fg}">{esc(verdict)}</span> '
        f"<code>{esc(case_id)}</code> [{esc(cell.get('level', ''))}]</h1>"
        f"<table>{table}</table>"
        + (f"<p>The offending frame(s): {' · '.join(hits)}</p>" if hits else "")
        + f"<h2>The spec: {esc(section_title(section))}</h2><ul>{sentences}</ul>"
        f'<h2 id="exchange">The exchange</h2><p>&rarr; the probe to the broker, &larr; the '
        f"broker to the probe (<code>-&gt;</code>, <code>&lt;-</code>); time in seconds from the "
        f'connection\'s start; <a href="{esc(trace_link)}">the trace as text</a>.</p>'
        f"<pre>{''.join(body)}</pre>{tshark}</body></html>\n"
    )
