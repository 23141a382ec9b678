"""docs/ci.md's examples and the script they call (scripts/amqpspec-ci.sh), run here against the
bundled reference broker: with the expectations held it passes and writes every report (JUnit
valid against the schema, allure, the matrix, the statement, the job summary); with an
expectation the broker does not meet it fails and still writes them. The YAML examples parse
and call the script with the settings it reads.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.run.results import format_expectations
from amqpspec.reference_broker.runtime.process import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "amqpspec-ci.sh"
DOC = REPO / "docs" / "ci.md"
SELECTION = "2.6.7/credit-single-grant or 2.2/header-amqp-answered"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = reference_broker()
    yield running
    running.stop()


def _script(broker: BrokerProcess, tmp_path: Path, expect: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "AMQPSPEC_BROKER": broker.url,
        "AMQPSPEC_PROFILE": "reference",
        "AMQPSPEC_ADMIN": broker.admin_url,
        "AMQPSPEC_EXPECT": str(expect),
        "AMQPSPEC_RESULTS": str(tmp_path / "results"),
        "AMQPSPEC_ARGS": f"-k '{SELECTION}' --pipelined never -q",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "AMQPSPEC": "python3 -m amqpspec.cli",
    }
    return subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_ci_script_passes_on_the_known_state(broker: BrokerProcess, tmp_path: Path) -> None:
    xmlschema = pytest.importorskip("xmlschema", reason="pip install xmlschema (test extra)")
    done = _script(broker, tmp_path, REPO / "conformance" / "expectations" / "reference.toml")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = tmp_path / "results"
    xmlschema.XMLSchema(str(REPO / "tests" / "data" / "junit.xsd")).validate(
        str(results / "junit-reference.xml")
    )
    for name in (
        "conformance-matrix.html",
        "conformance-matrix.md",
        "conformance-statement-reference.html",
        "conformance-statement-reference.md",
    ):
        assert (results / "report" / name).stat().st_size > 0, name
    assert (results / "allure" / "environment.properties").exists()
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# AMQP 1.0 conformance matrix")
    assert "> **reference** (amqpspec reference broker)" in summary


def test_the_ci_script_fails_on_a_difference_and_still_reports(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    expect = tmp_path / "expect.toml"
    expect.write_text(
        format_expectations(
            "reference",
            {"2.6.7/credit-single-grant": "FAILED", "2.2/header-amqp-answered": "OK"},
        )
    )
    done = _script(broker, tmp_path, expect)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "expected FAILED, got OK" in done.stdout
    matrix = (tmp_path / "results" / "report" / "conformance-matrix.md").read_text()
    assert "1 differ from the expectations" in matrix and "≠expected" in matrix


def test_the_docs_examples_call_the_script_with_its_settings() -> None:
    yaml = pytest.importorskip("yaml", reason="pip install pyyaml (test extra)")
    text = DOC.read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    github, gitlab = (yaml.safe_load(block) for block in blocks)
    steps = github["jobs"]["amqpspec"]["steps"]
    conformance = next(step for step in steps if step.get("name") == "conformance")
    assert "amqpspec-ci.sh" in conformance["run"]
    assert set(conformance["env"]) <= set(re.findall(r"AMQPSPEC_[A-Z_]+", SCRIPT.read_text()))
    job = gitlab["amqpspec"]
    assert any("amqpspec-ci.sh" in line for line in job["script"])
    assert job["artifacts"]["reports"]["junit"] == "amqpspec-results/junit-*.xml"
    assert set(job["variables"]) <= set(re.findall(r"AMQPSPEC_[A-Z_]+", SCRIPT.read_text()))
