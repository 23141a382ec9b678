"""pytest plugin: the conformance suite as pytest items (`-p amqpspec.conformance.plugin`).

Owns: the command-line options, each with an `--amqp-` prefix so that they cannot clash with
another plugin's (--amqp-broker, --amqp-profile, --amqp-admin, --amqp-results, --amqp-expect,
--amqp-broker-name, --amqp-write-expect, --amqp-expect-retries, --amqp-pipelined, --amqp-jobs,
--amqp-strict: NON-STRICT fails too; --amqp-gate-differs: DIFFERS of a model the profile
claims fails too; --amqp-junit PATH: the run's JUnit XML, `junit.render_junit`, a suite per
section, the case id as the test's name; `amqpspec run` maps its own options onto these). The
plugin is never loaded by itself: `amqpspec run` passes it, a pytest user names it with `-p`.
Also the `must` / `should` markers, one parametrized item per case and per pipelined
variant (`conformance/suite.py::test_case[<case id>]`, `...[<case id>/pipelined]`,
selectable with `-k` by its id or by an old id it had before a rename,
conformance/aliases.toml), running the cases N at a time (--jobs N, default
`jobs.DEFAULT_JOBS`: `jobs.CaseScheduler` runs them ahead of pytest's loop, serial ones
alone, and each item takes its case's result in order; --jobs 1 runs each case inside its
item), the health probe between cases (after a FAILED or ERROR case,
`preflight.BrokerHealth`: a broker that died or hung makes the next cases ERROR within
seconds, and the summary says when it stopped answering), the fixtures
(`amqp_profile`, `amqp_target`, `amqp_admin`, `probe`, `conformance_run`), allure
attachments (text trace + pcap; the case id as the plain parameter `case`, so that allure's
history id is stable from run to run; suites broker > section; `environment.properties`
with the run's header), index.json (rewritten at most once a second while the
run goes, and at its end), the run's `facts.RunFacts` (what earlier cases learned about
the broker, shared by the case threads), and the end-of-session work: expectations
comparison and the exit status. The verdict -> pytest outcome map: OK pass, NON-STRICT pass
(fail with --amqp-strict), DIFFERS pass with a `DIFFERS: <reason>` line on the test's
stdout (JUnit system-out; fail with --amqp-gate-differs when the profile claims the case's
model), UNSUPPORTED skip, FAILED and ERROR fail; every test carries its verdict as the
user property `verdict` (in pytest's own --junitxml; the run's JUnit, --amqp-junit, is
`junit.render_junit`'s). With --expect the exit
status is decided by the expectations alone; --expect-retries N reruns a case whose verdict
differs from its expectation up to N times (for third-party brokers whose bugs show only in
some runs): a case that matches on a retry is reported as UNSTABLE with every attempt's
verdict, keeps its first verdict in index.json, and does not fail the run. May touch: the
results DIR, stdout.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from amqpspec.conformance.admin import Admin, make_admin
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.profile import Profile, load_profile
from amqpspec.conformance.report.junit import render_junit, run_properties
from amqpspec.conformance.report.matrix import section_title
from amqpspec.conformance.run.checker_rows import checker_rows
from amqpspec.conformance.run.context import BrokerTarget, CaseResult
from amqpspec.conformance.run.facts import RunFacts
from amqpspec.conformance.run.jobs import DEFAULT_JOBS, CaseScheduler
from amqpspec.conformance.run.preflight import HEALTH_TIMEOUT_S, BrokerHealth
from amqpspec.conformance.run.registry import (
    Case,
    beside_others,
    beside_serial,
    old_ids,
    suite_cases,
)
from amqpspec.conformance.run.results import (
    Expectation,
    ResultsDir,
    compare,
    format_expectations,
    load_expectations,
)
from amqpspec.conformance.run.run_info import RunInfo, broker_identity, iso_now, start_info
from amqpspec.conformance.run.runner import run_case
from amqpspec.conformance.run.ws_bridge import WebSocketBridge
from amqpspec.conformance.verdicts import PASSING, Verdict

DEFAULT_RESULTS = "reports/_conformance"  # reports/_*/ is git-ignored


@dataclass
class RunState:
    """What one pytest session ran; `amqpspec run` reads it after pytest returns."""

    broker: str = ""
    results: list[CaseResult] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    # case id -> report line, for cases that matched the expectations only on a retry
    unstable: dict[str, str] = field(default_factory=dict)
    expect_file: str | None = None
    strict: bool = False
    # --gate-differs: the DIFFERS cases whose model the profile claims (they fail the run)
    gated: set[str] = field(default_factory=set)
    index_path: Path | None = None
    # the broker stopped answering: when (wall clock), before which case, and why
    dead: tuple[float, str, str] | None = None

    @property
    def verdicts(self) -> dict[str, str]:
        return {r.case_id: r.verdict.value for r in self.results}

    def exit_status(self) -> int:
        if self.expect_file is not None:
            return 1 if self.differences else 0
        for result in self.results:
            if result.verdict not in PASSING:
                return 1
            if self.strict and result.verdict == Verdict.NON_STRICT:
                return 1
            if result.verdict == Verdict.DIFFERS and result.case_id in self.gated:
                return 1
        return 0


LAST_RUN = RunState()
_STATE = pytest.StashKey["_Session"]()
# index.json is rewritten whole: at most once a second during a run (a run stopped midway
# keeps what it had a second before) and at its end, instead of after every case
INDEX_EVERY_S = 1.0
_DURATION = pytest.StashKey[float]()  # an item's case's own run time


class _Session:
    def __init__(self, config: pytest.Config) -> None:
        option = config.getoption
        self.target = BrokerTarget.parse(option("amqp_broker"))
        # ws:// or wss://: every case connects to a loopback TCP <-> WebSocket bridge
        # (ws_bridge.py), so the suite runs over WebSocket unchanged
        self.bridge: WebSocketBridge | None = None
        if self.target.websocket:
            self.bridge = WebSocketBridge(self.target.websocket).start()
            self.target = self.target.bridged(self.bridge.port)
        self.profile: Profile = load_profile(option("amqp_profile"))
        self.admin_url: str | None = option("amqp_admin")
        # one admin adapter per thread (an HTTP admin holds one connection)
        self._admins: list[Admin] = []
        self._thread_admin = threading.local()
        self.broker = option("amqp_broker_name") or self.profile.name
        self.results_dir = ResultsDir(option("amqp_results"), self.broker)
        # the run header of a report (DIR/runs/<broker>.json): the broker's identity comes from
        # the first open it sends (run())
        self.run_info = start_info(
            self.broker, self.profile.name, option("amqp_broker"), option("amqp_expect")
        )
        self.results_dir.run_info = self.run_info.to_dict()
        self.expect_file: str | None = option("amqp_expect")
        self.write_expect: str | None = option("amqp_write_expect")
        self.expect_retries: int = int(option("amqp_expect_retries") or 0)
        self.expected = load_expectations(self.expect_file) if self.expect_file else {}
        # --amqp-strict: NON-STRICT verdicts fail too
        self.strict: bool = bool(option("amqp_strict", False))
        # --amqp-gate-differs: DIFFERS fails when the profile claims the case's model
        self.gate_differs: bool = bool(option("amqp_gate_differs", False))
        self.junit: str | None = option("amqp_junit", None)
        self.allure_dir: str | None = option("allure_report_dir", None)
        self.jobs: int = int(option("amqp_jobs") or DEFAULT_JOBS)
        if self.jobs < 1:
            raise pytest.UsageError(f"--jobs must be 1 or more, got {self.jobs}")
        self.scheduler: CaseScheduler[tuple[CaseResult, list[Verdict]]] | None = None
        self.health = BrokerHealth(self.target, self.profile, HEALTH_TIMEOUT_S)
        self._index_written = 0.0  # index.json: rewritten at most every INDEX_EVERY_S
        self.facts = RunFacts()  # what the run's cases learn about the broker (facts.py)
        global LAST_RUN
        LAST_RUN = RunState(self.broker, expect_file=self.expect_file, strict=self.strict)
        self.state = LAST_RUN

    @property
    def admin(self) -> Admin:
        """This thread's admin adapter (the management-node adapter connects to the broker
        under test with the profile's credentials)."""
        admin: Admin | None = getattr(self._thread_admin, "admin", None)
        if admin is None:
            profile, target = self.profile, self.target
            credentials = ""
            if profile.username is not None:
                credentials = f"{quote(profile.username, safe='')}:"
                credentials += f"{quote(profile.password or '', safe='')}@"
            broker_url = f"amqp://{credentials}{target.host}:{target.port}"
            admin = make_admin(profile.admin, self.admin_url, broker_url)
            self._thread_admin.admin = admin
            self._admins.append(admin)
        return admin

    def start(self, cases: list[Case]) -> None:
        """--jobs N > 1: start running the session's cases N at a time."""
        if self.jobs > 1 and cases:
            self.scheduler = CaseScheduler(self._execute, self.jobs)
            self.scheduler.start(cases)

    def stop(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()

    def _execute(self, case: Case) -> tuple[CaseResult, list[Verdict]]:
        """One case with the health probe before it and --expect-retries after it (in a
        scheduler thread under --jobs N); the result and every attempt's verdict."""
        result = self._unreachable(case) or self._run_case(case)
        attempts = [result.verdict]
        expectation = self.expected.get(case.case_id)
        if expectation is not None and result.verdict not in expectation.accepted:
            result, attempts = self._retry(case, result, expectation)
        self.health.finished(result.verdict)
        return result, attempts

    def run(self, case: Case) -> CaseResult:
        """The case's result (run here, or taken from the scheduler), recorded."""
        if self.scheduler is not None and self.scheduler.scheduled(case):
            result, attempts = self.scheduler.result(case)
        else:
            result, attempts = self._execute(case)
        entry = self.results_dir.add(result)
        if not self.run_info.identity and result.recordings:
            self.run_info.identity = broker_identity(result.recordings)
            self.results_dir.run_info = self.run_info.to_dict()
        if self.gates(case, result):
            self.state.gated.add(case.case_id)
        if len(attempts) > 1:
            entry["attempts"] = [v.value for v in attempts]
        self.state.results.append(result)
        if time.monotonic() - self._index_written >= INDEX_EVERY_S:
            self._write_index()
        _attach_to_allure(case, result, self.results_dir.root / entry["trace"], entry, self)
        result.recordings = []  # in the pcap and transitions now; the run holds no frames
        return result

    def gates(self, case: Case, result: CaseResult) -> bool:
        """--gate-differs: this DIFFERS fails the run (the profile claims the case's model,
        its broker's documentation promises the behaviour)."""
        return (
            self.gate_differs
            and result.verdict == Verdict.DIFFERS
            and self.profile.claims(case.model)
        )

    def _write_index(self) -> None:
        self.state.index_path = self.results_dir.write_index()
        self._index_written = time.monotonic()

    def _run_case(self, case: Case) -> CaseResult:
        return run_case(case, self.target, self.profile, self.admin, facts=self.facts)

    def _unreachable(self, case: Case) -> CaseResult | None:
        """The health probe between cases: after a case that did not end well
        (FAILED, ERROR: the broker may have died or hung in it), one short handshake; if the
        broker does not answer, this case is ERROR at once (within HEALTH_TIMEOUT_S) instead
        of waiting out its own time-outs, and the run remembers when the broker went."""
        started = time.monotonic()
        reason = self.health.check(case.case_id)
        if reason is None:
            return None
        self.state.dead = self.health.dead
        assert self.state.dead is not None
        since = time.strftime("%H:%M:%S", time.localtime(self.state.dead[0]))
        text = f"broker not answering since {since} (health probe): {reason}"
        return CaseResult(case.case_id, case.level, Verdict.ERROR, time.monotonic() - started, text)

    def _retry(
        self, case: Case, first: CaseResult, expectation: Expectation
    ) -> tuple[CaseResult, list[Verdict]]:
        """--expect-retries: run a differing case again until it matches or the retries are
        spent. A match keeps the first result (the finding) and lists the case as unstable;
        otherwise the last attempt is the result that gets compared."""
        attempts, last = [first.verdict], first
        while last.verdict not in expectation.accepted and len(attempts) <= self.expect_retries:
            last = self._run_case(case)
            attempts.append(last.verdict)
        if len(attempts) == 1:
            return first, attempts
        seen = ", ".join(v.value for v in attempts)
        if last.verdict not in expectation.accepted:
            last.notes.append(f"attempts against the expectations: {seen}")
            return last, attempts
        first.notes.append(f"attempts against the expectations: {seen}")
        self.state.unstable[case.case_id] = (
            f"{case.case_id}: expected {expectation.text}, attempts {seen} ({first.reason[:200]})"
        )
        return first, attempts

    def add_checker_rows(self) -> None:
        """The run's checker rows (`checker_rows`) among its results: in index.json (the
        pcap of the first case the rule fired in), the expectations and the exit status."""
        for row in checker_rows(self.state.results):
            entry = self.results_dir.add(row)
            first = row.notes[0].removeprefix("first seen in ") if row.notes else ""
            pcap = self.results_dir.entries.get(first, {}).get("pcap")
            if pcap:
                entry["pcap"] = pcap
            self.state.results.append(row)

    def finish(self) -> None:
        self.add_checker_rows()
        self.run_info.finished = iso_now()
        self.results_dir.run_info = self.run_info.to_dict()
        if self.state.results:
            self._write_index()
        if self.expect_file:
            unstable = self.state.unstable
            verdicts = {k: v for k, v in self.state.verdicts.items() if k not in unstable}
            self.state.differences = compare(self.expected, verdicts)
        if self.write_expect:
            issues: dict[str, str] = {}
            also: dict[str, str] = {}
            if Path(self.write_expect).exists():
                old = load_expectations(self.write_expect)
                issues = {k: v.issue for k, v in old.items()}
                also = {k: v.text for k, v in old.items() if v.also}
            Path(self.write_expect).write_text(
                format_expectations(self.broker, self.state.verdicts, issues, also),
                encoding="utf-8",
            )
        if self.junit:
            Path(self.junit).parent.mkdir(parents=True, exist_ok=True)
            Path(self.junit).write_text(
                render_junit(
                    self.broker,
                    self.results_dir.entries,
                    self.run_info,
                    self.results_dir.root,
                    strict=self.strict,
                    gated=self.state.gated,
                ),
                encoding="utf-8",
            )
        if self.allure_dir:
            _allure_environment(Path(self.allure_dir), self.run_info)
        for admin in self._admins:
            admin.close()
        if self.bridge is not None:
            self.bridge.stop()


def _allure_environment(directory: Path, info: RunInfo) -> None:
    """allure's `environment.properties`: the run's header (allure shows it on the report's
    front page)."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [
        f"{name}={' '.join(value.split())}".replace("\\", "\\\\")
        for name, value in run_properties(info)
    ]
    (directory / "environment.properties").write_text("\n".join(lines) + "\n", "utf-8")


def _attach_to_allure(
    case: Case, result: CaseResult, text_path: Path, entry: dict[str, Any], session: _Session
) -> None:
    try:
        import allure
    except ImportError:  # allure-pytest not installed: nothing to attach to
        return
    with contextlib.suppress(Exception):
        allure.dynamic.title(f"{case.case_id} [{case.level}]")
        allure.dynamic.description(f"{case.sentence}\n\n{case.description}")
        allure.dynamic.label("broker", session.broker)
        # the case id as a plain parameter: the history id is computed from the parameters'
        # reprs, and a Case's is its id (registry.Case.__repr__), so it is the same each run
        allure.dynamic.parameter("conformance_case", case.case_id)
        allure.dynamic.parent_suite(session.broker)
        allure.dynamic.suite(section_title(case.section))
        allure.dynamic.sub_suite(case.case_id.removeprefix(case.section + "/"))
        allure.dynamic.tag(case.level, result.verdict.value)
        allure.dynamic.severity(
            allure.severity_level.CRITICAL if case.level == "MUST" else allure.severity_level.NORMAL
        )
        allure.attach(result.trace_text, "frame trace", allure.attachment_type.TEXT)
        if "pcap" in entry:
            allure.attach.file(
                str(session.results_dir.root / entry["pcap"]), "trace.pcap", None, "pcap"
            )


# --- pytest hooks ------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("amqpspec", "AMQP 1.0 conformance suite")
    group.addoption("--amqp-broker", dest="amqp_broker", help="amqp://[user:pass@]HOST:PORT")
    group.addoption(
        "--amqp-profile", dest="amqp_profile", default="generic", help="NAME or PATH.toml"
    )
    group.addoption(
        "--amqp-admin", dest="amqp_admin", help="admin endpoint URL (overrides profile)"
    )
    group.addoption(
        "--amqp-results", dest="amqp_results", default=DEFAULT_RESULTS, help="results DIR"
    )
    group.addoption(
        "--amqp-expect", dest="amqp_expect", help="expectations TOML to compare against"
    )
    group.addoption("--amqp-write-expect", dest="amqp_write_expect", help="write verdicts as TOML")
    group.addoption(
        "--amqp-expect-retries",
        dest="amqp_expect_retries",
        type=int,
        default=0,
        help="rerun a case that differs from its expectation up to N times (default 0)",
    )
    group.addoption("--amqp-broker-name", dest="amqp_broker_name", help="name in index.json")
    group.addoption(
        "--amqp-jobs",
        dest="amqp_jobs",
        type=int,
        default=DEFAULT_JOBS,
        help=f"cases run at once (serial ones alone); 1: one after the other "
        f"(default {DEFAULT_JOBS})",
    )
    group.addoption(
        "--amqp-strict",
        dest="amqp_strict",
        action="store_true",
        help="NON-STRICT (a SHOULD not met) fails its test too",
    )
    group.addoption(
        "--amqp-gate-differs",
        dest="amqp_gate_differs",
        action="store_true",
        help="DIFFERS (differs from the model the profile declares) fails its test and the "
        "run when the profile claims the case's model",
    )
    group.addoption(
        "--amqp-junit",
        dest="amqp_junit",
        help="write the run's JUnit XML here (a suite per spec section, the case id as the "
        "test's name, valid against the JUnit schema CI servers read)",
    )
    group.addoption(
        "--amqp-pipelined",
        dest="amqp_pipelined",
        choices=("only", "also", "never"),
        default="also",
        help="run each case's pipelined variant (<case id>/pipelined): also (default), only, never",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "must: a MUST-level conformance case")
    config.addinivalue_line("markers", "should: a SHOULD-level conformance case")
    config.addinivalue_line("markers", "may: a case where no sentence binds the broker")
    config.addinivalue_line("markers", "model: a case of a model's behaviour (DIFFERS)")
    if config.getoption("amqp_broker", None):
        config.stash[_STATE] = _Session(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "conformance_case" in metafunc.fixturenames:
        mode = metafunc.config.getoption("amqp_pipelined", "also") or "also"
        cases = suite_cases(mode)
        state = metafunc.config.stash.get(_STATE, None)
        if state is not None:
            try:
                cases = beside_others(cases, state.profile.concurrent)
                cases = beside_serial(cases, state.profile.beside_serial)
            except ValueError as exc:
                raise pytest.UsageError(f"profile {state.profile.name!r} [jobs]: {exc}") from exc
        params = [
            pytest.param(case, id=case.case_id, marks=[getattr(pytest.mark, case.level.lower())])
            for case in cases
        ]  # markers must / should / may / model select by level (-m must)
        metafunc.parametrize("conformance_case", params)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A renamed case keeps its old ids as keywords, so `-k <old id>` still selects it.
    Under --jobs N the cases the profile runs beside the serial ones come first, then the
    serial cases: they run alone (but for those) while nothing else has started, instead of
    each waiting for every case before it to finish; the cases nothing may run beside (a
    restart, registry.ALONE) come last, after every other case ended."""
    for item in items:
        case = _case_of(item)
        if case is not None:
            item.extra_keyword_matches.update(old_ids(case.case_id))
    state = config.stash.get(_STATE, None)
    if state is not None and state.jobs > 1:
        items.sort(key=lambda item: _phase(_case_of(item)))


def _phase(case: Case | None) -> int:
    """Where a case starts under --jobs N: 0 beside the serial cases, 1 serial, 2 after, 3
    alone at the end (the `beside_serial` cases would wait for it in phase 1)."""
    if case is None:
        return 2
    if case.alone:
        return 3
    return 0 if case.beside_serial else 1 if case.serial else 2


def _case_of(item: pytest.Item) -> Case | None:
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("conformance_case") if callspec is not None else None
    return case if isinstance(case, Case) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    """--jobs N: the scheduler runs the selected cases ahead of pytest's loop, in its order;
    whatever pytest does not get to (-x, Ctrl-C) is cancelled once the loop ends."""
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return (yield)
    if session.config.option.collectonly or session.testsfailed:
        return (yield)  # nothing runs (or pytest stops on collection errors)
    state.start([case for item in session.items if (case := _case_of(item)) is not None])
    try:
        return (yield)
    finally:
        state.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """An item's duration (JUnit, the progress lines) is its case's own run time: under
    --jobs N the item only waits for a case that may have finished long before."""
    report = yield
    if report.when == "call" and _DURATION in item.stash:
        report.duration = item.stash[_DURATION]
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return
    state.finish()
    if state.expect_file is not None:
        session.exitstatus = state.state.exit_status()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One screen: the tally, each FAILED and ERROR case with its reason on one line
    (NON-STRICT ones too with -v), where the results are, then the expectations' verdict."""
    state = config.stash.get(_STATE, None)
    if state is None or not state.state.results:
        return
    counts: dict[str, int] = {}
    for result in state.state.results:
        counts[result.verdict.value] = counts.get(result.verdict.value, 0) + 1
    summary = ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
    terminalreporter.write_sep("=", f"amqpspec verdicts ({state.broker}): {summary}")
    shown = {Verdict.FAILED, Verdict.ERROR}
    if config.get_verbosity() > 0:
        shown.add(Verdict.NON_STRICT)
    width = max(100, shutil.get_terminal_size((160, 24)).columns)  # one line per case

    def show(result: CaseResult) -> None:
        line = f"{result.verdict.value:11} {result.case_id}: {' '.join(result.reason.split())}"
        terminalreporter.write_line(line if len(line) <= width else line[: width - 1] + "…")

    for result in state.state.results:
        if result.verdict in shown:
            show(result)
    differs = [r for r in state.state.results if r.verdict == Verdict.DIFFERS]
    if differs:  # apart: the spec requires none of it (docs/conformance.md, "Verdicts")
        gate = "fail the run (--gate-differs)" if state.gate_differs else "never fail the run"
        terminalreporter.write_line(
            f"DIFFERS: {len(differs)} case(s) differ from the model the profile declares "
            f"(behaviour the spec does not require; they {gate}"
            + (", for a model the profile claims)" if state.gate_differs else ")")
        )
        if config.get_verbosity() > 0 or state.state.gated:
            for result in differs:
                show(result)
    index = state.state.index_path
    if index is not None:
        root = index.parent
        terminalreporter.write_line(
            f"results: {index} | traces: {state.results_dir.trace_dir} | "
            f"matrix: amqpspec report {root}"
        )
    if state.state.dead is not None:
        when, case_id, reason = state.state.dead
        since = time.strftime("%H:%M:%S", time.localtime(when))
        terminalreporter.write_line(
            f"broker stopped answering at {since} (before {case_id}): {reason}"
        )
    if state.expect_file is not None:
        if state.state.differences:
            terminalreporter.write_sep("-", f"differences from {state.expect_file}")
            for line in state.state.differences:
                terminalreporter.write_line(line)
        else:
            terminalreporter.write_line(f"every verdict matches {state.expect_file}")
        if state.state.unstable:
            terminalreporter.write_sep("-", "UNSTABLE: matched the expectations only on a retry")
            for line in state.state.unstable.values():
                terminalreporter.write_line(line)


# --- fixtures ------------------------------------------------------------------------------


def _state(request: pytest.FixtureRequest) -> _Session:
    state = request.config.stash.get(_STATE, None)
    if state is None:
        pytest.skip("no --broker given: the conformance suite needs a broker")
    return state


@pytest.fixture
def conformance_run(request: pytest.FixtureRequest) -> Callable[[Case], CaseResult]:
    """Run a case, record it, and turn its verdict into the pytest outcome."""
    state = _state(request)

    def run(case: Case) -> CaseResult:
        result = state.run(case)
        request.node.user_properties.append(("verdict", result.verdict.value))
        request.node.stash[_DURATION] = result.duration
        if result.verdict == Verdict.UNSUPPORTED:
            pytest.skip(f"UNSUPPORTED: {result.reason}")
        if result.verdict == Verdict.FAILED:
            pytest.fail(f"FAILED: {result.reason}", pytrace=False)
        if result.verdict == Verdict.ERROR:
            pytest.fail(f"ERROR: {result.reason}", pytrace=False)
        if result.verdict == Verdict.NON_STRICT and state.strict:
            pytest.fail(f"NON-STRICT (--strict): {result.reason}", pytrace=False)
        if result.verdict == Verdict.DIFFERS:
            if state.gates(case, result):
                pytest.fail(f"DIFFERS (--gate-differs): {result.reason}", pytrace=False)
            print(f"DIFFERS: {result.reason}")  # JUnit system-out: a passed test with a remark
        elif result.verdict == Verdict.NON_STRICT:
            print(f"NON-STRICT: {result.reason}")
        return result

    return run


@pytest.fixture
def amqp_profile(request: pytest.FixtureRequest) -> Profile:
    return _state(request).profile


@pytest.fixture
def amqp_target(request: pytest.FixtureRequest) -> BrokerTarget:
    return _state(request).target


@pytest.fixture
def amqp_admin(request: pytest.FixtureRequest) -> Admin:
    return _state(request).admin


@pytest.fixture
def probe(request: pytest.FixtureRequest) -> Iterator[Probe]:
    """A connected (not yet opened) probe client for your own tests; closed afterwards."""
    state = _state(request)
    profile, target = state.profile, state.target
    client = Probe(
        target.host,
        target.port,
        username=target.username or profile.username,
        password=target.password or profile.password,
        sasl_mechanism=None if profile.sasl == "none" else profile.sasl,
        hostname=profile.hostname or target.open_hostname,
        wait=profile.wait,
    )
    yield client
    client.close()
