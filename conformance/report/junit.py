"""JUnit XML of a conformance run, for CI dashboards (Jenkins, GitLab, GitHub Actions).

Owns: `render_junit()`, one file per broker (`DIR/junit-<broker>.xml`): `<testsuites>` with
one `<testsuite>` per spec section (name "<broker> 2.6.7 Flow Control"; the checker rows in
one of their own), each test case named by its case id with the classname
"<broker>.<section>" (the section's dots as underscores, so that Jenkins, which splits a
classname at its last dot into package and class, shows broker > section), its time the
case's own run time. Verdicts: FAILED and ERROR are failures (type FAILED / ERROR, the
reason as the message, the trace and pcap paths in the text); UNSUPPORTED is skipped;
NON-STRICT is a failure under --strict, DIFFERS under --gate-differs for a model the
profile claims, otherwise both pass with their reason in system-out. Every case's verdict
is a property of its suite (`verdict:<case id>`), and the run's header (amqpspec version,
the broker's product and version from its open, profile, command, dates) is in every
suite's properties: the file stays valid against the JUnit schema Jenkins' xunit plugin and
GitLab read (tests/data/junit.xsd; that schema has no properties inside a test case).
System-out also names the trace as a GitLab attachment (`[[ATTACHMENT|path]]`). Pure.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from amqpspec.conformance.report.matrix import CHECKER, section_of, section_title
from amqpspec.conformance.run.run_info import RunInfo

PASSING_SHOWN = ("NON-STRICT", "DIFFERS")  # passed tests whose remark goes to system-out


def classname(broker: str, case_id: str) -> str:
    section = "checker" if case_id.startswith(CHECKER) else section_of(case_id)
    return f"{broker}.{section.replace('.', '_')}"


def _suite_name(broker: str, section: str) -> str:
    if section == "checker":
        return f"{broker} checker rows"
    return f"{broker} {section_title(section)}"


def run_properties(info: RunInfo) -> list[tuple[str, str]]:
    props = [
        ("amqpspec.version", info.amqpspec_version),
        ("amqpspec.commit", info.commit),
        ("broker", info.broker),
        ("broker.product", info.identity.get("product", "")),
        ("broker.version", info.identity.get("version", "")),
        ("broker.platform", info.identity.get("platform", "")),
        ("broker.container-id", info.identity.get("container-id", "")),
        ("broker.url", info.broker_url),
        ("broker.transport", info.transport),
        ("profile", info.profile),
        ("expectations", info.expectations),
        ("command", info.command),
        ("started", info.started),
        ("finished", info.finished),
    ]
    return [(name, value) for name, value in props if value]


def _time(seconds: float) -> str:
    return f"{max(seconds, 0.0):.3f}"


def render_junit(
    broker: str,
    entries: dict[str, dict[str, Any]],
    info: RunInfo,
    root: Path,
    *,
    strict: bool = False,
    gated: frozenset[str] | set[str] = frozenset(),
) -> str:
    """The JUnit XML of one broker's `entries` (index.json's, in run order); `root` the
    results DIR (trace paths are written absolute, as CI artefact uploaders find them)."""
    sections: dict[str, list[str]] = {}
    for case_id in entries:
        key = "checker" if case_id.startswith(CHECKER) else section_of(case_id)
        sections.setdefault(key, []).append(case_id)
    suites = ET.Element("testsuites", name=f"amqpspec {broker}")
    totals = {"tests": 0, "failures": 0, "time": 0.0}
    host = socket.gethostname()
    for section, case_ids in sections.items():
        suite = ET.SubElement(suites, "testsuite", name=_suite_name(broker, section))
        properties = ET.SubElement(suite, "properties")
        for name, value in [*run_properties(info), ("section", section)]:
            ET.SubElement(properties, "property", name=name, value=value)
        counts = {"tests": 0, "failures": 0, "skipped": 0, "time": 0.0}
        for case_id in case_ids:
            entry = entries[case_id]
            ET.SubElement(properties, "property", name=f"verdict:{case_id}", value=entry["verdict"])
            _testcase(suite, broker, case_id, entry, root, counts, strict=strict, gated=gated)
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failures"]))
        suite.set("errors", "0")
        suite.set("skipped", str(counts["skipped"]))
        suite.set("time", _time(counts["time"]))
        suite.set("timestamp", info.started or "")
        suite.set("hostname", host)
        totals["tests"] += counts["tests"]
        totals["failures"] += counts["failures"]
        totals["time"] += counts["time"]
    suites.set("tests", str(totals["tests"]))
    suites.set("failures", str(totals["failures"]))
    suites.set("errors", "0")
    suites.set("time", _time(float(totals["time"])))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _testcase(
    suite: ET.Element,
    broker: str,
    case_id: str,
    entry: dict[str, Any],
    root: Path,
    counts: dict[str, Any],
    *,
    strict: bool,
    gated: frozenset[str] | set[str],
) -> None:
    """One case's `<testcase>` in `suite` (its failure or skip, its system-out with the
    verdict and the evidence paths); `counts` (tests, failures, skipped, time) adds it."""
    verdict = entry["verdict"]
    duration = float(entry.get("duration", 0.0))
    case = ET.SubElement(
        suite,
        "testcase",
        name=case_id,
        classname=classname(broker, case_id),
        time=_time(duration),
    )
    counts["tests"] += 1
    counts["time"] += duration
    reason = entry.get("reason", "")
    trace = str((root / entry["trace"]).resolve()) if entry.get("trace") else ""
    pcap = str((root / entry["pcap"]).resolve()) if entry.get("pcap") else ""
    evidence = "".join(f"\n{k}: {v}" for k, v in (("trace", trace), ("pcap", pcap)) if v)
    label = _failing_label(verdict, case_id, strict, gated)
    if label is not None:
        failure = ET.SubElement(case, "failure", type=verdict, message=f"{label}: {reason}")
        failure.text = f"{label}: {reason}{evidence}"
        counts["failures"] += 1
    elif verdict == "UNSUPPORTED":
        ET.SubElement(case, "skipped", type="UNSUPPORTED", message=f"UNSUPPORTED: {reason}")
        counts["skipped"] += 1
    out = [f"verdict: {verdict} [{entry.get('level', '')}]"]
    if verdict in PASSING_SHOWN and label is None:
        out.append(f"{verdict}: {reason}")
    if evidence:
        out.append(evidence.strip())
    if trace:
        out.append(f"[[ATTACHMENT|{trace}]]")
    ET.SubElement(case, "system-out").text = "\n".join(out)


def _failing_label(
    verdict: str, case_id: str, strict: bool, gated: frozenset[str] | set[str]
) -> str | None:
    """The failure's label, or None when the verdict passes (docs/conformance.md, Verdicts)."""
    if verdict in ("FAILED", "ERROR"):
        return verdict
    if verdict == "NON-STRICT" and strict:
        return "NON-STRICT (--strict)"
    if verdict == "DIFFERS" and case_id in gated:
        return "DIFFERS (--gate-differs)"
    return None
