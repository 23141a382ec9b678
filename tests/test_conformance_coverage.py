"""`amqpspec coverage` (docs/conformance.md "Spec coverage") on a real run against the reference
broker: what the cases sent, what the broker answered, which engine transitions and checker rules
they reached, and what no case covers, as Markdown and HTML."""

from __future__ import annotations

from pathlib import Path

from cli_support import run_amqpspec

from amqpspec.amqp10.checker import RULES
from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.report.coverage import measure


def test_coverage_of_a_run_names_what_was_and_was_not_covered(tmp_path: Path) -> None:
    results, out = tmp_path / "r", tmp_path / "out"
    broker = reference_broker()
    try:
        run = run_amqpspec(
            "run", "--broker", broker.url, "--profile", "reference", "--admin",
            broker.admin_url, "--results", str(results), "-k", "2.6.2/", "-q", timeout=180
        )  # fmt: skip
    finally:
        broker.stop()
    assert run.returncode == 0, run.stdout[-2000:]
    coverage = measure(results)
    fields, conditions, transitions, rules = coverage.categories
    assert coverage.broker == "reference" and coverage.cases == 12
    assert "2.6.2/unattached-handle-flow" in fields.items["flow.handle"]
    assert fields.items["open.outgoing-locales"] == []  # no case sets it
    assert "2.6.2/unattached-handle-flow" in conditions.items["amqp:session:unattached-handle"]
    assert conditions.items["amqp:connection:redirect"] == []
    assert "amqp:connection:redirect" in conditions.beyond_clients()  # with its reason
    assert "amqp:connection:redirect" not in conditions.gaps()
    assert "amqp:link:transfer-limit-exceeded" in conditions.gaps()  # no 2.6.2 case sends it
    assert "begin.remote-channel" in fields.beyond_clients()
    assert set(conditions.items) >= {"amqp:internal-error", "amqp:link:stolen"}
    assert "2.6.2/unattached-handle-flow" in transitions.items["session:BEGIN_SENT:RECV_BEGIN"]
    assert "2.6.2/handle-in-use" in transitions.items["session:MAPPED:RECV_END"]
    assert len(transitions.uncovered()) > 10
    assert set(rules.items) == set(RULES)
    assert rules.items["link.unattached-handle"]  # the probe's deliberate flow on handle 77
    done = run_amqpspec("coverage", str(results), "--out", str(out), timeout=180)
    assert done.returncode == 0, done.stderr
    markdown = (out / "spec-coverage.md").read_text()
    assert "# Spec coverage: reference" in markdown and "- `open.outgoing-locales`" in markdown
    assert "| `amqp:connection:redirect` | sent by a broker configured" in markdown
    assert "amqp:session:unattached-handle" in (out / "spec-coverage.html").read_text()
    # the report leads with which sentences of the spec are tested, the other measures after
    manifest = markdown.index("## The normative manifest:")
    assert manifest < markdown.index("## Performative fields sent with a non-default value")
    assert manifest < markdown.index("## Checker rules that fired")


def test_coverage_without_results_is_a_usage_error(tmp_path: Path) -> None:
    done = run_amqpspec("coverage", str(tmp_path), timeout=180)
    assert done.returncode == 2 and "no index.json" in done.stderr


def test_coverage_of_the_manifest_needs_no_run(tmp_path: Path) -> None:
    done = run_amqpspec("coverage", "--manifest", "--out", str(tmp_path), timeout=180)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("Part 2 Transport: ") and "not yet tested" in lines[1]
    assert lines[5].startswith("all: ")
    markdown = (tmp_path / "spec-manifest.md").read_text()
    assert "| Part 3 Messaging |" in markdown and "| 2.6.7 Flow Control |" in markdown
    assert "`2.6.5/link-errors.6`" in markdown  # a gap: no case or rule yet
    assert "`link.liveness.stall`" in markdown  # a rule with no normative sentence
    assert "2.6.5/link-errors.6" in (tmp_path / "spec-manifest.html").read_text()
