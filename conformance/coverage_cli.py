"""`amqpspec coverage [RESULTS_DIR]`: how much of the spec a conformance run covered.

Owns the `coverage` subcommand: reads RESULTS_DIR (default reports/_conformance, as
`amqpspec run` writes it) through `conformance.coverage.measure` and writes
`spec-coverage.md` and `spec-coverage.html` into `--out` (default reports/). Touches
nothing else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from amqpspec.conformance.coverage import measure, render_html, render_markdown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        nargs="?",
        default="reports/_conformance",
        help="results directory of an `amqpspec run` (default reports/_conformance)",
    )
    parser.add_argument("--broker", help="which broker of the directory (when it has several)")
    parser.add_argument("--out", default="reports", help="output directory (default reports/)")


def run(args: argparse.Namespace) -> int:
    if not (Path(args.results) / "index.json").exists():
        print(f"amqpspec coverage: no index.json in {args.results}", file=sys.stderr)
        return 2
    try:
        coverage = measure(args.results, args.broker)
    except (ValueError, KeyError) as exc:
        print(f"amqpspec coverage: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec-coverage.md").write_text(render_markdown(coverage), encoding="utf-8")
    (out / "spec-coverage.html").write_text(render_html(coverage), encoding="utf-8")
    summary = ", ".join(f"{c.title.split(' ')[0].lower()} {c.covered}/{len(c.items)}"
                        for c in coverage.categories)  # fmt: skip
    print(f"{coverage.broker}: {summary}: {out / 'spec-coverage.md'}, .html")
    return 0
