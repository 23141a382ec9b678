"""`amqpspec coverage [RESULTS_DIR]`: how much of the spec a conformance run covered.

Owns the `coverage` subcommand: reads RESULTS_DIR (default reports/_conformance, as
`amqpspec run` writes it) through `conformance.coverage.measure` and writes
`spec-coverage.md` and `spec-coverage.html` into `--out` (default reports/), the normative
manifest's coverage included. `--manifest` needs no run: it writes the manifest's coverage
alone (`spec-manifest.md`, `.html`) and prints its summary per part. Touches nothing else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from amqpspec.conformance.manifest.report import (
    ManifestCoverage,
    measure_manifest,
    render_manifest_html,
    render_manifest_markdown,
)
from amqpspec.conformance.manifest.spec import PART_TITLES
from amqpspec.conformance.report.coverage import measure, render_html, render_markdown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        nargs="?",
        default="reports/_conformance",
        help="results directory of an `amqpspec run` (default reports/_conformance)",
    )
    parser.add_argument("--broker", help="which broker of the directory (when it has several)")
    parser.add_argument("--out", default="reports", help="output directory (default reports/)")
    parser.add_argument(
        "--manifest",
        action="store_true",
        help="the normative manifest's coverage alone (no run needed): spec-manifest.md, .html",
    )


def manifest_summary(coverage: ManifestCoverage) -> list[str]:
    """One line per part and one for all: sentences, by case, by rule, untestable, not yet."""
    lines = []
    parts = coverage.by_part()
    for part, entries in [*parts.items(), (0, coverage.entries)]:
        counts = coverage.counts(entries)
        name = f"Part {part} {PART_TITLES[part]}" if part else "all"
        lines.append(
            f"{name}: {counts['sentences']} sentences, {counts['case']} tested by case, "
            f"{counts['rule']} by rule, {counts['untestable']} untestable, "
            f"{counts['not yet']} not yet tested"
        )
    return lines


def _manifest_only(out: Path) -> int:
    coverage = measure_manifest()
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec-manifest.md").write_text(render_manifest_markdown(coverage), encoding="utf-8")
    page = "<!doctype html><meta charset='utf-8'><title>Normative manifest</title>\n"
    (out / "spec-manifest.html").write_text(page + render_manifest_html(coverage), "utf-8")
    for line in manifest_summary(coverage):
        print(line)
    print(f"{out / 'spec-manifest.md'}, .html")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.manifest:
        return _manifest_only(Path(args.out))
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
    if coverage.manifest is not None:
        print(f"manifest: {manifest_summary(coverage.manifest)[-1]}")
    return 0
