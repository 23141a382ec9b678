"""`amqpspec report DIR...`: render results directories as a brokers x cases matrix.

Owns: the `report` subcommand; writes `conformance-matrix.md` and `conformance-matrix.html`
into `--out` (default reports/), and with `--statement` a conformance statement per broker
(`conformance-statement-<broker>.md|.html`, `statement`). Reads index.json of each DIR, the
expectations files (`--expect BROKER=FILE`, else the one the run used, else
conformance/expectations/<broker>.toml) and the reviewed ledgers; touches nothing else.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from amqpspec.conformance.report.case_page import page_path, render_case_page
from amqpspec.conformance.report.history import History
from amqpspec.conformance.report.html import render_html
from amqpspec.conformance.report.markdown import render_markdown
from amqpspec.conformance.report.matrix import SEVERITY, Matrix
from amqpspec.conformance.report.statement import (
    Statement,
    render_statement_html,
    render_statement_markdown,
)
from amqpspec.conformance.run.results import case_file_stem


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", help="results directories (each with an index.json)")
    parser.add_argument("--out", default="reports", help="output directory (default reports/)")
    parser.add_argument("--name", default="conformance-matrix", help="output file stem")
    parser.add_argument(
        "--statement",
        action="store_true",
        help="also write a conformance statement per broker (conformance-statement-<broker>"
        ".md and .html: deviations section by section, with the reviewed ledger's rationale)",
    )
    parser.add_argument(
        "--since",
        action="append",
        default=[],
        metavar="OLD_DIR",
        help="an earlier run's results; the report opens with what changed since (new "
        "failures, fixed, newly flaky). Repeat for a longer history, newest first",
    )
    parser.add_argument(
        "--pages",
        choices=("failures", "all", "none"),
        default="failures",
        help="a page per case (cases/<broker>/<case>.html: expected vs observed, the "
        "exchange with the offending frame marked, the tshark command): for the FAILED, "
        "ERROR, NON-STRICT and DIFFERS verdicts (default), every verdict, or none",
    )
    parser.add_argument(
        "--links",
        choices=("files", "none"),
        default="files",
        help="none: the Markdown names no trace, pcap or page (a report committed without "
        "its traces); implies --pages none (default files)",
    )
    parser.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="BROKER=FILE",
        help="the expectations file a broker's verdicts are compared with (default: the one "
        "its run used, else conformance/expectations/<broker>.toml)",
    )


def run(args: argparse.Namespace) -> int:
    missing = [d for d in args.dirs if not (Path(d) / "index.json").exists()]
    if missing:
        print(f"amqpspec report: no index.json in {', '.join(missing)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    expect = dict(item.split("=", 1) for item in args.expect if "=" in item)
    matrix = Matrix.load(args.dirs, expect)
    since = getattr(args, "since", [])
    missing = [d for d in since if not (Path(d) / "index.json").exists()]
    if missing:
        print(f"amqpspec report: no index.json in {', '.join(missing)}", file=sys.stderr)
        return 2
    if since:
        matrix.history = History.load(since)
    links = getattr(args, "links", "files")
    which = "none" if links == "none" else getattr(args, "pages", "failures")
    pages = write_pages(matrix, out.resolve(), which)
    md_path = out / f"{args.name}.md"
    html_path = out / f"{args.name}.html"
    markdown = render_markdown(matrix, out.resolve())
    md_path.write_text(without_file_links(markdown) if links == "none" else markdown, "utf-8")
    html_path.write_text(render_html(matrix, out.resolve()), encoding="utf-8")
    print(
        f"{len(matrix.brokers)} brokers x {len(matrix.cases)} cases: {md_path}, {html_path}"
        + (f", {pages} case pages in {out / 'cases'}" if pages else "")
    )
    if getattr(args, "statement", False):
        for broker in matrix.brokers:
            statement = Statement.build(matrix, broker, out.resolve())
            stem = out / f"conformance-statement-{case_file_stem(broker)}"
            stem.with_suffix(".md").write_text(render_statement_markdown(statement), "utf-8")
            stem.with_suffix(".html").write_text(render_statement_html(statement), "utf-8")
            print(f"statement for {broker}: {stem}.md, {stem}.html")
    return 0


_FILE_LINK = re.compile(r"\[([^\]]*)\]\((?!#)[^)\s]+\)")


def without_file_links(markdown: str) -> str:
    """The Markdown with every link to a file reduced to its text, and the lists of links
    left empty ("(trace, pcap)") gone."""
    text = _FILE_LINK.sub(lambda m: m.group(1), markdown)
    text = re.sub(r" \((page, )?trace(, pcap)?\)", "", text)
    return text


def write_pages(matrix: Matrix, out: Path, which: str) -> int:
    """A page per cell (`case_page`): the non-OK verdicts, every one, or none."""
    count = 0
    for (broker, case_id), cell in matrix.cells.items():
        if which == "none" or (which == "failures" and cell["verdict"] not in SEVERITY):
            continue
        page = page_path(out, broker, case_id)
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(render_case_page(matrix, broker, case_id, page), encoding="utf-8")
        matrix.pages[(broker, case_id)] = page
        count += 1
    return count
