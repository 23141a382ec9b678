"""`amqpspec report DIR...`: render results directories as a brokers x cases matrix.

Owns: the `report` subcommand; writes `conformance-matrix.md` and `conformance-matrix.html`
into `--out` (default reports/). Reads index.json of each DIR; touches nothing else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from amqpspec.conformance.report import Matrix, render_html, render_markdown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", help="results directories (each with an index.json)")
    parser.add_argument("--out", default="reports", help="output directory (default reports/)")
    parser.add_argument("--name", default="conformance-matrix", help="output file stem")


def run(args: argparse.Namespace) -> int:
    missing = [d for d in args.dirs if not (Path(d) / "index.json").exists()]
    if missing:
        print(f"amqpspec report: no index.json in {', '.join(missing)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    matrix = Matrix.load(args.dirs)
    md_path = out / f"{args.name}.md"
    html_path = out / f"{args.name}.html"
    md_path.write_text(render_markdown(matrix, out.resolve()), encoding="utf-8")
    html_path.write_text(render_html(matrix, out.resolve()), encoding="utf-8")
    print(f"{len(matrix.brokers)} brokers x {len(matrix.cases)} cases: {md_path}, {html_path}")
    return 0
