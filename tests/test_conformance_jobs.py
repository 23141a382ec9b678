"""`amqpspec run --jobs N` (docs/conformance.md "Concurrent cases"): the scheduler runs cases N at a
time in order with serial cases alone (fake cases, measured overlaps), and a real run against the
reference broker gives every case the same verdict with --jobs 1 and --jobs N, serial alarm cases
included, with the serial cases first and every trace written."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.profile import load_profile
from amqpspec.conformance.run.jobs import CaseScheduler
from amqpspec.conformance.run.registry import (
    BROKER_GLOBAL,
    Case,
    beside_others,
    beside_serial,
    load_cases,
    suite_cases,
)
from amqpspec.reference_broker.runtime.process import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = load_cases()[0]


def _fake(case_id: str, serial: bool = False) -> Case:
    return dataclasses.replace(TEMPLATE, case_id=f"9.9/{case_id}", serial=serial)


class Recorder:
    """An `execute` that sleeps `hold` seconds per case (`long` for a case named `long*`)
    and records when each ran."""

    def __init__(self, hold: float = 0.05, long: float | None = None) -> None:
        self.hold = hold
        self.long = hold if long is None else long
        self.lock = threading.Lock()
        self.intervals: dict[str, tuple[float, float]] = {}
        self.running = 0
        self.most = 0

    def __call__(self, case: Case) -> str:
        started = time.monotonic()
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.long if "/long" in case.case_id else self.hold)
        with self.lock:
            self.running -= 1
        self.intervals[case.case_id] = (started, time.monotonic())
        if case.case_id.endswith("boom"):
            raise RuntimeError("boom")
        return case.case_id.upper()


def _overlaps(recorder: Recorder, case_id: str) -> list[str]:
    start, end = recorder.intervals[case_id]
    return [
        other
        for other, (s, e) in recorder.intervals.items()
        if other != case_id and s < end and start < e
    ]


def test_cases_run_n_at_a_time_in_order_and_serial_ones_alone() -> None:
    cases = [_fake(f"c{i}", serial=i in (5, 6, 13)) for i in range(20)]
    recorder = Recorder()
    scheduler = CaseScheduler(recorder, jobs=4)
    started = time.monotonic()
    scheduler.start(cases)
    try:
        assert [scheduler.result(case) for case in cases] == [c.case_id.upper() for c in cases]
    finally:
        scheduler.stop()
    elapsed = time.monotonic() - started
    assert recorder.most == 4  # N at once, never more
    assert elapsed < 20 * recorder.hold * 0.6  # not one after the other
    for case in cases:
        if case.serial:
            assert _overlaps(recorder, case.case_id) == [], case.case_id
    # a serial case starts after every earlier case ended; no later case starts before it ends
    start5, end5 = recorder.intervals["9.9/c5"]
    assert all(recorder.intervals[c.case_id][1] <= start5 for c in cases[:5])
    assert all(recorder.intervals[c.case_id][0] >= end5 for c in cases[6:])


def _run_all(recorder: Recorder, cases: list[Case], jobs: int) -> None:
    """Run `cases` on a CaseScheduler of `jobs`; every result comes back, in order."""
    scheduler = CaseScheduler(recorder, jobs=jobs)
    scheduler.start(cases)
    try:
        assert [scheduler.result(case) for case in cases] == [c.case_id.upper() for c in cases]
    finally:
        scheduler.stop()


def test_cases_beside_serial_ones_run_through_the_serial_phase() -> None:
    """`beside_serial` cases (first in order) run while the serial cases do, within the N
    slots; every other case still waits for the serial ones to end."""
    beside = [dataclasses.replace(_fake(f"long{i}"), beside_serial=True) for i in range(2)]
    serial = [_fake(f"s{i}", serial=True) for i in range(3)]
    rest = [_fake(f"c{i}") for i in range(6)]
    cases = [*beside, *serial, *rest]
    recorder = Recorder(hold=0.1, long=0.5)
    _run_all(recorder, cases, jobs=3)
    assert recorder.most == 3  # the two beside cases and one serial case: never more than N
    first_serial = recorder.intervals["9.9/s0"][0]
    assert all(recorder.intervals[c.case_id][0] < first_serial for c in beside)
    assert set(_overlaps(recorder, "9.9/s0")) == {c.case_id for c in beside}
    for case in serial:  # beside each other never: only with the beside cases
        assert not set(_overlaps(recorder, case.case_id)) - {c.case_id for c in beside}
    end_serial = recorder.intervals["9.9/s2"][1]
    assert all(recorder.intervals[c.case_id][0] >= end_serial for c in rest)


def test_a_case_that_must_run_alone_waits_for_the_beside_serial_cases_too() -> None:
    """A restart case (registry.ALONE) drops every connection: it starts only after every
    earlier case ended, the `beside_serial` ones included, and nothing runs beside it."""
    beside = [dataclasses.replace(_fake(f"long{i}"), beside_serial=True) for i in range(2)]
    alone = dataclasses.replace(_fake("restart", serial=True), requires=frozenset({"restart"}))
    assert alone.alone and not _fake("s", serial=True).alone
    cases = [*beside, _fake("c0"), alone, _fake("c1")]
    recorder = Recorder(hold=0.05, long=0.3)
    _run_all(recorder, cases, jobs=4)
    assert _overlaps(recorder, alone.case_id) == []
    start = recorder.intervals[alone.case_id][0]
    assert all(recorder.intervals[c.case_id][1] <= start for c in cases[:3])


def test_a_result_asked_for_before_its_case_was_dispatched_arrives() -> None:
    recorder = Recorder(hold=0.2)
    cases = [_fake("first", serial=True), _fake("second", serial=True), _fake("third")]
    scheduler = CaseScheduler(recorder, jobs=2)
    scheduler.start(cases)
    try:  # asked while the dispatcher still runs the first, serial case
        assert scheduler.result(cases[2]) == "9.9/THIRD"
        assert scheduler.result(cases[1]) == "9.9/SECOND"
    finally:
        scheduler.stop()


def test_an_exception_reaches_the_caller_and_stop_cancels_what_has_not_started() -> None:
    recorder = Recorder(hold=0.2)
    cases = [_fake("boom"), *(_fake(f"c{i}") for i in range(10))]
    scheduler = CaseScheduler(recorder, jobs=2)
    scheduler.start(cases)
    with pytest.raises(RuntimeError, match="boom"):
        scheduler.result(cases[0])
    scheduler.stop()  # waits for the running ones only
    assert 2 <= len(recorder.intervals) <= 4
    with pytest.raises(ValueError):
        CaseScheduler(recorder, jobs=0)


def test_cases_on_broker_global_state_are_serial_in_both_variants() -> None:
    cases = suite_cases("also")
    serial = [case for case in cases if case.serial]
    assert serial and all(case.serial for case in cases if case.requires & BROKER_GLOBAL)
    assert {case.base_id for case in serial if case.variant} <= {c.case_id for c in serial}
    assert any(c.case_id == "2.5.6/window-violation-closed-window/pipelined" for c in serial)


def test_a_profile_runs_the_serial_cases_it_names_beside_others() -> None:
    """`[jobs] concurrent`: the reference broker has none of the races that make
    credit-hypothesis-grants serial; the third-party profiles keep it alone."""
    cases = beside_others(suite_cases("also"), load_profile("reference").concurrent)
    grants = [case for case in cases if case.base_id == "2.6.7/credit-hypothesis-grants"]
    assert len(grants) == 2 and not any(case.serial for case in grants)
    assert all(case.serial for case in cases if case.requires & BROKER_GLOBAL)
    assert any(case.serial for case in cases)
    with pytest.raises(ValueError, match="broker-global"):
        beside_others(cases, ["2.5.6/alarm-closes-window"])
    with pytest.raises(ValueError, match="not a serial case"):
        beside_others(cases, ["2.6.7/credit-hypothesis-drain-echo"])
    for name in ("rabbitmq3", "proton-example", "proton-python"):
        assert "2.6.7/credit-hypothesis-grants" not in load_profile(name).concurrent


def test_a_profile_names_cases_to_run_beside_the_serial_ones() -> None:
    """`[jobs] beside_serial`: the reference profile's cases open no session (its alarm
    changes only sessions' windows); a serial or unknown case cannot be named."""
    names = load_profile("reference").beside_serial
    cases = beside_serial(suite_cases("also"), names)
    marked = {case.base_id for case in cases if case.beside_serial}
    assert marked == names and not any(c.serial for c in cases if c.beside_serial)
    with pytest.raises(ValueError, match="serial case"):
        beside_serial(cases, ["2.5.6/alarm-closes-window"])
    with pytest.raises(ValueError, match="not a registered case"):
        beside_serial(cases, ["9.9/no-such-case"])
    for name in ("rabbitmq3", "proton-example", "proton-python"):
        assert not load_profile(name).beside_serial


# --- a real run: --jobs 1 and --jobs N give the same verdicts ------------------------------

# the serial alarm cases, cases that FAIL on this broker and fast and slow parallel ones
SELECTION = (
    "alarm-closes-window or alarm-publish-after-clear or window-violation or 2.6.7/drain "
    "or 3.4.4 or 2.2/ or 2.7.4 or 2.6.2 or credit-regrant"
)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = reference_broker("overdeliver-on-regrant")  # the regrant cases FAIL
    yield running
    running.stop()


def _run(broker: BrokerProcess, results: Path, jobs: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "run", "--broker", broker.url,
         "--profile", "reference", "--admin", broker.admin_url, "--results", str(results),
         "-k", SELECTION, "--jobs", str(jobs)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_jobs_n_gives_the_verdicts_of_a_sequential_run(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    sequential = _run(broker, tmp_path / "one", 1)
    concurrent = _run(broker, tmp_path / "six", 6)
    one = json.loads((tmp_path / "one" / "index.json").read_text())["reference"]
    six = json.loads((tmp_path / "six" / "index.json").read_text())["reference"]
    assert len(one) >= 60 and set(one) == set(six), concurrent.stdout[-3000:]
    assert {k: v["verdict"] for k, v in six.items()} == {k: v["verdict"] for k, v in one.items()}
    verdicts = {entry["verdict"] for entry in one.values()}
    assert {"OK", "FAILED"} <= verdicts  # the comparison covers failures too
    assert concurrent.returncode == sequential.returncode == 1
    for entry in six.values():
        assert (tmp_path / "six" / entry["trace"]).stat().st_size > 0
    assert "(--jobs 6)" in concurrent.stdout
    serial_ids = {case.case_id for case in suite_cases("also") if case.serial}
    ran = [  # "[ 7/85] OK          2.2/header-wrong-major (0.01 s)"
        line.split("]", 1)[1].split()[1]
        for line in concurrent.stdout.splitlines()
        if line.startswith("[")
    ]
    serial = [i for i, case_id in enumerate(ran) if case_id in serial_ids]
    assert serial == list(range(6)), ran  # the serial cases first
    assert "checker: " in concurrent.stdout  # the summary's FAILED lines with their reasons
    # an item's duration is its case's run time, not how long pytest waited for the result
    shown = {
        line.split("]", 1)[1].split()[1]: float(line.rsplit("(", 1)[1].split()[0])
        for line in concurrent.stdout.splitlines()
        if line.startswith("[")
    }
    junit = ET.parse(tmp_path / "six" / "junit-reference.xml").getroot()
    for testcase in junit.iter("testcase"):
        case_id = testcase.get("name", "")  # the case id (conformance/report/junit.py)
        spent = float(testcase.get("time", "-1")) - six[case_id]["duration"]  # + setup, teardown
        assert -0.001 <= spent < 0.5, case_id
        if case_id.startswith("checker/"):  # a checker row: in JUnit, not a progress line
            continue
        assert abs(shown[case_id] - six[case_id]["duration"]) < 0.011, case_id
