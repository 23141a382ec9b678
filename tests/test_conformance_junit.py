"""CI dashboards: the JUnit XML of a run (a suite per section, the case id as the name, the
verdict and the run's header as properties, the trace path in a failure, NON-STRICT and
DIFFERS failing only under --strict / --gate-differs), valid against the JUnit schema CI
servers read (tests/data/junit.xsd, with xmlschema); allure's results with the case id as a
plain parameter, history ids the same in two runs, suites broker > section and
environment.properties.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_support import BROKER, CELLS, synthetic_results

from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.report.junit import render_junit
from amqpspec.conformance.run.results import load_index, load_runs
from amqpspec.conformance.run.run_info import RunInfo
from amqpspec.reference_broker.runtime.process import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "tests" / "data" / "junit.xsd"
xmlschema = pytest.importorskip("xmlschema", reason="pip install xmlschema (the test extra)")


def _junit(root: Path, **options) -> ET.Element:
    entries = load_index(root)[BROKER]
    info = RunInfo.from_dict(load_runs(root)[BROKER])
    text = render_junit(BROKER, entries, info, root, **options)
    xmlschema.XMLSchema(str(SCHEMA)).validate(text)  # raises on any invalid element
    return ET.fromstring(text)


def test_junit_suites_per_section_case_ids_and_valid(tmp_path: Path) -> None:
    root = synthetic_results(tmp_path / "r")
    junit = _junit(root)
    suites = {s.get("name"): s for s in junit.iter("testsuite")}
    assert "acme 2.6.7 Flow Control" in suites and "acme checker rows" in suites
    flow = suites["acme 2.6.7 Flow Control"]
    cases = {c.get("name"): c for c in flow.iter("testcase")}
    drain = cases["2.6.7/drain-exact"]
    assert drain.get("classname") == "acme.2_6_7"
    failure = drain.find("failure")
    assert failure is not None and failure.get("type") == "FAILED"
    assert failure.get("message", "").startswith("FAILED: expected a flow with link-credit 0")
    assert f"trace: {root / 'traces/acme/2_6_7_drain-exact.txt'}" in (failure.text or "")
    assert cases["2.6.7/drain-empty-queue"].find("skipped") is not None
    props = {p.get("name"): p.get("value") for p in flow.find("properties") or []}
    assert props["verdict:2.6.7/drain-exact"] == "FAILED"
    assert props["broker.product"] == "AcmeMQ" and props["broker.version"] == "9.1.2"
    assert props["amqpspec.commit"] == "abc123" and props["profile"] == "acme"
    assert flow.get("failures") == "3" and flow.get("skipped") == "2"
    assert junit.get("tests") == str(len(CELLS))
    # NON-STRICT and DIFFERS pass, their reason in system-out
    header = {c.get("name"): c for c in junit.iter("testcase")}["2.2/header-not-amqp"]
    assert header.find("failure") is None
    assert "NON-STRICT: the broker closed at once" in (header.findtext("system-out") or "")


def test_strict_and_gated_verdicts_fail(tmp_path: Path) -> None:
    root = synthetic_results(tmp_path / "r")
    junit = _junit(root, strict=True, gated={"2.6.6/requeue-after-detach-closed"})
    cases = {c.get("name"): c for c in junit.iter("testcase")}
    strict = cases["2.2/header-not-amqp"].find("failure")
    assert strict is not None and strict.get("message", "").startswith("NON-STRICT (--strict):")
    gated = cases["2.6.6/requeue-after-detach-closed"].find("failure")
    assert gated is not None and gated.get("type") == "DIFFERS"


def test_the_schema_rejects_what_ci_servers_do_not_read() -> None:
    """Properties inside a test case (pytest's record_property) and times with more than
    three decimals: the schema says no, so the test above can fail."""
    schema = xmlschema.XMLSchema(str(SCHEMA))
    base = (
        '<testsuites><testsuite name="s" tests="1" failures="0" errors="0">'
        '<testcase name="c" time="{time}">{inner}</testcase></testsuite></testsuites>'
    )
    assert schema.is_valid(base.format(time="0.123", inner=""))
    props = '<properties><property name="verdict" value="OK"/></properties>'
    assert not schema.is_valid(base.format(time="0.123", inner=props))
    assert not schema.is_valid(base.format(time="0.12345", inner=""))


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = reference_broker("flow-without-delivery-count")  # a checker row FAILED
    yield running
    running.stop()


def _run(broker: BrokerProcess, results: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "amqpspec.cli", "run", "--broker", broker.url,
        "--profile", "reference", "--admin", broker.admin_url, "--results", str(results),
        "-k", "3.2/message-properties-all-fields or 2.6.7/credit-single-grant",
        "--pipelined", "never", "-q",
    ]  # fmt: skip
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240)


def _allure(results: Path) -> dict[str, dict]:
    found = {}
    for path in (results / "allure").glob("*-result.json"):
        data = json.loads(path.read_text())
        found[data["name"]] = data
    return found


def test_a_real_run_junit_and_allure_history(broker: BrokerProcess, tmp_path: Path) -> None:
    first = _run(broker, tmp_path / "one")
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-2000:]  # the row
    junit_path = tmp_path / "one" / "junit-reference.xml"
    xmlschema.XMLSchema(str(SCHEMA)).validate(str(junit_path))
    junit = ET.parse(junit_path).getroot()
    names = {c.get("name"): c for c in junit.iter("testcase")}
    assert set(names) == {
        "3.2/message-properties-all-fields",
        "2.6.7/credit-single-grant",
        "checker/2.7.4/link.flow.receiver-delivery-count-missing",
    }
    row = names["checker/2.7.4/link.flow.receiver-delivery-count-missing"]
    assert row.find("failure") is not None and "trace: " in (row.find("failure").text or "")
    assert names["2.6.7/credit-single-grant"].get("classname") == "reference.2_6_7"
    suite_props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert suite_props["broker.product"] == "amqpspec reference broker"

    second = _run(broker, tmp_path / "two")
    assert second.returncode == 1
    one, two = _allure(tmp_path / "one"), _allure(tmp_path / "two")
    assert set(one) == set(two) and one
    for name, result in one.items():
        assert result["historyId"] == two[name]["historyId"], name
        params = {p["name"]: p["value"] for p in result["parameters"]}
        assert params["conformance_case"].strip("'") in name, params  # the case id, plainly
        labels = {(lb["name"], lb["value"]) for lb in result["labels"]}
        assert ("parentSuite", "reference") in labels, labels
        assert any(k == "suite" and v.split()[0] in name for k, v in labels), labels
    environment = (tmp_path / "one" / "allure" / "environment.properties").read_text()
    assert "broker.product=amqpspec reference broker" in environment
    assert "profile=reference" in environment
