"""Renamed case ids (conformance/aliases.toml) stay usable: an old id still selects its
case with `-k`, an expectations file written with old ids loads under the current ids
(for `--expect` and `--write-expect`), and a results directory whose index.json has old
ids loads in `amqpspec report`, the fault-detection table and a run that adds to it. No
broker needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from amqpspec.conformance.audit.fault_matrix import detection_table
from amqpspec.conformance.report.markdown import render_markdown
from amqpspec.conformance.report.matrix import Matrix
from amqpspec.conformance.run.context import CaseResult
from amqpspec.conformance.run.registry import aliases, current_id, load_cases, old_ids
from amqpspec.conformance.run.results import ResultsDir, compare, load_expectations, load_index
from amqpspec.conformance.verdicts import Verdict

REPO = Path(__file__).resolve().parent.parent
CASES = {case.case_id for case in load_cases()}
OLD, NEW = "2.2/header-more-wrong-minor", "2.2/header-wrong-minor"
OLD_CREDIT, NEW_CREDIT = "2.6.7/credit-more-exact-3", "2.6.7/credit-exact-3"


def test_alias_table_maps_old_ids_to_registered_cases() -> None:
    table = aliases()
    assert len(table) >= 101
    assert set(table.values()) <= CASES  # every alias names a case that exists
    assert not set(table) & CASES  # no old id is reused by another case
    assert current_id(OLD) == NEW and current_id(NEW) == NEW
    assert old_ids(NEW) == [OLD]
    assert not [case_id for case_id in CASES if "-more-" in case_id]


def test_old_id_selects_its_case_with_k() -> None:
    collect = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "conformance" / "suite.py"),
         "-p", "no:cacheprovider", "--collect-only", "-q", "-k", f"{OLD} or {OLD_CREDIT}",
         "-p", "amqpspec.conformance.plugin", "--amqp-pipelined", "never"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    selected = [line for line in collect.stdout.splitlines() if "::test_case[" in line]
    assert selected == [
        f"conformance/suite.py::test_case[{NEW}]",
        f"conformance/suite.py::test_case[{NEW_CREDIT}]",
    ], collect.stdout[-2000:] + collect.stderr[-2000:]


def test_old_expectations_file_loads_under_current_ids(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text(
        'broker = "b"\n[cases]\n'
        f'"{OLD}" = {{ verdict = "FAILED", issue = "org/r#1" }}\n'
        f'"{OLD_CREDIT}" = {{ verdict = "OK" }}\n'
        '"2.6.7/credit-single-grant" = { verdict = "OK" }\n'
    )
    expected = load_expectations(path)
    assert set(expected) == {NEW, NEW_CREDIT, "2.6.7/credit-single-grant"}
    assert expected[NEW].verdict == Verdict.FAILED and expected[NEW].issue == "org/r#1"
    verdicts = {NEW: "FAILED", NEW_CREDIT: "OK", "2.6.7/credit-single-grant": "OK"}
    assert compare(expected, verdicts) == []  # what `--expect` reports: no difference
    assert compare(expected, {NEW: "OK"}) == [f"{NEW}: expected FAILED (org/r#1), got OK"]


def _old_index(root: Path) -> None:
    root.mkdir()
    trace = "traces/b/2_2_header-more-wrong-minor.txt"
    (root / "traces" / "b").mkdir(parents=True)
    (root / trace).write_text("case trace\n")
    entry = {"verdict": "FAILED", "level": "MUST", "duration": 0.1, "trace": trace}
    index = {
        "reference": {OLD: {**entry, "verdict": "OK"}},
        "reference+no-echo": {OLD: entry, "2.2/header-not-amqp": {**entry, "verdict": "OK"}},
    }
    (root / "index.json").write_text(json.dumps(index))


def test_old_results_dir_loads_in_report_and_fault_table(tmp_path: Path) -> None:
    results = tmp_path / "old-results"
    _old_index(results)
    assert set(load_index(results)["reference+no-echo"]) == {NEW, "2.2/header-not-amqp"}
    matrix = Matrix.load([results])
    assert NEW in matrix.cases and OLD not in matrix.cases
    assert f"| `{NEW}` | MUST | [OK](" in render_markdown(matrix, tmp_path)
    table, undetected = detection_table(load_index(results), ["no-echo"])
    assert f"`{NEW}`" in table and not undetected
    report = subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "report", str(results), "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert f"`{NEW}`" in (tmp_path / "conformance-matrix.md").read_text()


def test_a_run_adds_to_an_old_results_dir_under_current_ids(tmp_path: Path) -> None:
    results = tmp_path / "old-results"
    _old_index(results)
    directory = ResultsDir(results, "reference")
    directory.add(CaseResult(NEW, "MUST", Verdict.OK, 0.2))
    directory.write_index()
    index = json.loads((results / "index.json").read_text())
    assert set(index["reference"]) == {NEW}
    assert set(index["reference+no-echo"]) == {NEW, "2.2/header-not-amqp"}
