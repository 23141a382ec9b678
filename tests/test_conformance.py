"""The conformance harness against the real reference broker (subprocesses), clean and with
a deliberate fault, plus fakes for the verdicts a healthy broker never produces.

Covers: the #2597 re-grant case FAILED with the offending transfer on
`--fault overdeliver-on-regrant` and OK without; a real `amqpspec run` writing index.json,
JUnit XML, traces (text + pcap) and the report matrix; expectations diffing and the exit
status; profile loading; UNSUPPORTED / ERROR / NON-STRICT grading.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import REPO, run_amqpspec
from peer_support import LoopbackPeer

from amqpspec.amqp10.composites import End
from amqpspec.conformance.admin import NoAdmin, make_admin
from amqpspec.conformance.admin.management_node import ManagementNodeAdmin
from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.profile import ProfileError, available_profiles, load_profile
from amqpspec.conformance.run.context import BrokerTarget
from amqpspec.conformance.run.registry import load_cases, suite_cases
from amqpspec.conformance.run.results import (
    Expectation,
    compare,
    format_expectations,
    load_expectations,
)
from amqpspec.conformance.run.runner import run_case
from amqpspec.conformance.verdicts import Unsupported, Verdict
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.runtime.process import BrokerProcess, free_port

CASES = {case.case_id: case for case in load_cases()}


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = reference_broker()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def overdelivering_broker() -> Iterator[BrokerProcess]:
    running = reference_broker("overdeliver-on-regrant")
    yield running
    running.stop()


def _run(case_id: str, broker: BrokerProcess, profile_name: str = "reference"):
    profile = load_profile(profile_name)
    admin = make_admin(profile.admin, broker.admin_url)
    try:
        return run_case(CASES[case_id], BrokerTarget.parse(broker.url), profile, admin)
    finally:
        admin.close()


# --- the #2597 case against the reference broker, clean and faulty -------------------------


def test_regrant_case_ok_on_the_clean_reference_broker(broker: BrokerProcess) -> None:
    result = _run("2.6.7/credit-regrant-in-flight", broker)
    assert result.verdict == Verdict.OK, result.reason
    transfers = [
        t for t in result.recordings[-1].items if t.name == "transfer" and t.direction == "server"
    ]
    assert len(transfers) == 2000


def test_regrant_case_fails_on_overdeliver_fault(overdelivering_broker: BrokerProcess) -> None:
    result = _run("2.6.7/credit-regrant-in-flight", overdelivering_broker)
    assert result.verdict == Verdict.FAILED
    # the checker's rule and the offending transfer frame itself are in the reason
    assert "link.credit.transfer-beyond-credit" in result.reason
    assert "offending frame" in result.reason and "@transfer" in result.reason
    assert "!! [MUST 2.6.7 link.credit.transfer-beyond-credit]" in result.trace_text


def test_reference_broker_steals_a_link_attached_again(broker: BrokerProcess) -> None:
    """2.6.1: the same link name from another connection of the same container: the older
    attachment is detached with amqp:link:stolen."""
    result = _run("2.6.1/link-stolen", broker)
    assert result.verdict == Verdict.OK, result.reason
    assert "outcome detach:amqp:link:stolen" in result.notes


def test_reference_broker_admin_closes_a_connection_forced(broker: BrokerProcess) -> None:
    """DELETE /api/connections/{name} through the admin adapter: the broker closes that
    connection with amqp:connection:forced (2.8.16)."""
    result = _run("2.8.16/connection-forced", broker)
    assert result.verdict == Verdict.OK, result.reason
    assert "closed with amqp:connection:forced" in result.notes


def test_reference_broker_refuses_a_user_without_rights(broker: BrokerProcess) -> None:
    """A user created with no rights through the admin adapter (PUT /api/users, PUT
    /api/permissions) attaches a receiver: detached with amqp:unauthorized-access (2.8.15);
    the user is deleted afterwards."""
    result = _run("2.8.15/unauthorized-access-attach", broker)
    assert result.verdict == Verdict.OK, result.reason
    assert "outcome detach:amqp:unauthorized-access" in result.notes
    with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as client:
        names = [u["name"] for u in client.call("GET", "/api/users")]
    assert not [n for n in names if n.startswith("amqpspec-norights-")], names


def test_user_admin_is_unsupported_without_an_http_admin(broker: BrokerProcess) -> None:
    """No admin adapter (the proton brokers): the case is UNSUPPORTED, not FAILED."""
    for admin in (NoAdmin(), ManagementNodeAdmin(broker.url)):
        with pytest.raises(Unsupported):
            admin.restricted_user("amqpspec-x")
        with pytest.raises(Unsupported):
            admin.delete_user("amqpspec-x")
    result = _run("2.8.15/unauthorized-access-attach", broker, "proton-example")
    assert result.verdict == Verdict.UNSUPPORTED, result.reason


def test_faulty_broker_still_passes_unrelated_cases(overdelivering_broker: BrokerProcess) -> None:
    result = _run("2.6.7/credit-single-grant", overdelivering_broker)
    assert result.verdict == Verdict.OK, result.reason


# --- a real run: index.json, JUnit, traces, report -----------------------------------------


def _after_broker_close(probe, ctx) -> None:
    """An end on a channel never begun (the reference broker closes), then a begin."""
    probe.open()
    probe.send_frame(End(), 9, strict=False)
    probe.wait_closed()
    probe.begin()


def _engine_misuse(probe, ctx) -> None:
    """A case asking the engine for what its state forbids while the broker closed nothing."""
    session = probe.open_session()
    session.end()
    session.end()


RECORDED = "recorded (no sentence binds the broker here): "


@pytest.mark.parametrize(
    ("run", "level", "verdict", "reason"),
    [
        (_after_broker_close, "MUST", Verdict.OK, f"{RECORDED}the broker closed the connection"),
        (_after_broker_close, "MODEL", Verdict.DIFFERS, "differs from the rabbitmq4 model"),
        (_engine_misuse, "MUST", Verdict.ERROR, "UsageError: "),
    ],
)
def test_step_after_broker_close_is_a_verdict_not_error(
    broker: BrokerProcess, run, level: str, verdict: Verdict, reason: str
) -> None:
    """A step needing a connection the broker closed is the broker's verdict, graded as a
    shortfall (no sentence forbids closing: recorded in a MUST case, DIFFERS in a MODEL
    case); the engine refusing a step the broker did not cause stays a harness ERROR."""
    case = dataclasses.replace(
        CASES["2.7.8/end-with-error-answered"],
        run=run,
        level=level,
        model="rabbitmq4" if level == "MODEL" else None,
    )
    profile = load_profile("reference")
    admin = make_admin(profile.admin, broker.admin_url)
    try:
        result = run_case(case, BrokerTarget.parse(broker.url), profile, admin)
    finally:
        admin.close()
    assert result.verdict == verdict, result.reason
    assert result.reason.startswith(reason), result.reason


SELECTION = "2.2/header-unsupported-version or 2.6.7/credit-single-grant or 2.6.7/drain-empty-queue"


def test_run_writes_index_junit_traces_and_report(broker: BrokerProcess, tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = run_amqpspec(
        "run", "--broker", broker.url, "--profile", "reference", "--admin", broker.admin_url,
        "--results", str(results), "-k", SELECTION, "-q", "--pipelined", "never",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    index = json.loads((results / "index.json").read_text())
    entries = index["reference"]
    run_info = json.loads((results / "runs" / "reference.json").read_text())  # its header
    assert run_info["identity"]["product"] == "amqpspec reference broker", run_info
    assert {e["broker_product"] for e in entries.values()} == {"amqpspec reference broker"}
    assert run_info["profile"] == "reference" and run_info["started"] <= run_info["finished"]
    assert run_info["command"].startswith("amqpspec run --broker amqp://"), run_info
    assert set(entries) == {
        "2.2/header-unsupported-version",
        "2.6.7/credit-single-grant",
        "2.6.7/drain-empty-queue",
    }
    for case_id, entry in entries.items():
        assert entry["verdict"] == "OK", (case_id, entry)
        assert entry["duration"] >= 0
        text = (results / entry["trace"]).read_text()
        assert text.startswith(f"case {case_id} [MUST] verdict OK")
        pcap = (results / entry["pcap"]).read_bytes()
        assert pcap[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")  # nanosecond pcap magic
    drain_trace = (results / entries["2.6.7/drain-empty-queue"]["trace"]).read_text()
    assert "drain=true" in drain_trace and "<- @flow" in drain_trace

    junit = ET.parse(results / "junit-reference.xml").getroot()
    names = [tc.get("name") for tc in junit.iter("testcase")]
    assert "2.6.7/drain-empty-queue" in names and len(names) == 3  # the case id as the name
    assert list(junit.iter("failure")) == []
    assert any((results / "allure").glob("*-attachment.pcap"))

    out = tmp_path / "reports"
    report = run_amqpspec("report", str(results), "--out", str(out))
    assert report.returncode == 0, report.stderr
    markdown = (out / "conformance-matrix.md").read_text()
    assert "| `2.6.7/drain-empty-queue` | MUST | [OK](" in markdown
    assert "| reference | 0 | 0 | 0 | 3 | 0 |" in markdown
    assert "| reference | amqpspec reference broker" in markdown  # the run header
    page = (out / "conformance-matrix.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "2.2/header-unsupported-version" in page


def test_run_with_expectations_fails_on_difference(broker: BrokerProcess, tmp_path: Path) -> None:
    expect = tmp_path / "reference.toml"
    expect.write_text(
        format_expectations(
            "reference",
            {"2.6.7/credit-single-grant": "FAILED"},
            {"2.6.7/credit-single-grant": "example/issue#1"},
        )
    )
    args = [
        "run", "--broker", broker.url, "--profile", "reference", "--admin", broker.admin_url,
        "--results", str(tmp_path / "r"), "-k", "credit-single-grant", "-q",
        "--pipelined", "never",
    ]  # fmt: skip
    differing = run_amqpspec(*args, "--expect", str(expect))
    assert differing.returncode == 1
    assert "expected FAILED (example/issue#1), got OK" in differing.stdout
    expect.write_text(format_expectations("reference", {"2.6.7/credit-single-grant": "OK"}))
    matching = run_amqpspec(*args, "--expect", str(expect))
    assert matching.returncode == 0, matching.stdout[-2000:]
    assert "every verdict matches" in matching.stdout


def test_unreachable_broker_is_error_and_fails_the_run(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    run = run_amqpspec(
        "run", "--broker", f"amqp://127.0.0.1:{port}", "--profile", "proton-example",
        "--results", str(tmp_path), "-k", "2.4.1/open-answered", "-q",
        "--preflight-timeout", "0",  # no preflight: the case itself finds nobody there
    )  # fmt: skip
    assert run.returncode == 1
    entry = json.loads((tmp_path / "index.json").read_text())["proton-example"]
    assert entry["2.4.1/open-answered"]["verdict"] == "ERROR"
    assert "cannot connect" in entry["2.4.1/open-answered"]["reason"]


# --- verdict grading with fakes ------------------------------------------------------------


class FakeServer(LoopbackPeer):
    """Reads a connection's first bytes, answers `reply` once, then stays silent (or closes,
    with `closes`)."""

    def __init__(self, reply: bytes, closes: bool = False) -> None:
        self.reply, self.closes = reply, closes
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(1024)
                conn.sendall(self.reply)
                if not self.closes:
                    time.sleep(3)
            except OSError:
                pass

    def close(self) -> None:
        super().close()
        for thread in self.threads:
            thread.join(6)


@pytest.mark.parametrize(
    ("reply", "close", "verdict"),
    [
        (b"AMQP\x00\x01\x00\x00", True, Verdict.OK),  # 1.0 header, then close
        (b"AMQP\x00\x00\x09\x01", True, Verdict.NON_STRICT),  # 0-9-1 header: lenient
        (b"AMQP\x00\x01\x00\x00", False, Verdict.FAILED),  # header but socket kept open
        (b"", True, Verdict.FAILED),  # no header at all: not acceptable
    ],
)
def test_header_case_grading_against_fakes(reply: bytes, close: bool, verdict: Verdict) -> None:
    server = FakeServer(reply, close)
    profile = load_profile("generic")
    try:
        result = run_case(
            CASES["2.2/header-unsupported-version"],
            BrokerTarget("127.0.0.1", server.port),
            dataclasses.replace(profile, wait=1.0),
            NoAdmin(),
        )
    finally:
        server.close()
    assert result.verdict == verdict, result.reason


def test_missing_capability_is_unsupported_without_connecting() -> None:
    result = run_case(
        CASES["2.6.7/drain-empty-queue"],
        BrokerTarget("127.0.0.1", 1),
        load_profile("proton-example"),
        NoAdmin(),
    )
    assert result.verdict == Verdict.UNSUPPORTED
    assert "drain-reply" in result.reason


# --- profiles, registry, expectations ------------------------------------------------------


def test_shipped_profiles_load() -> None:
    names = available_profiles()
    assert {"reference", "rabbitmq3", "rabbitmq4", "proton-example", "generic"} <= set(names)
    rabbit = load_profile("rabbitmq3")
    assert rabbit.source("my q") == "/amq/queue/my%20q"
    assert rabbit.exchange("amq.direct", "k") == "/exchange/amq.direct/k"
    assert load_profile("reference").target("q") == "/queues/q"
    assert not load_profile("proton-example").has("drain-reply")


def test_profile_from_a_path_and_unknown_capability(tmp_path: Path) -> None:
    good = tmp_path / "mine.toml"
    good.write_text('name = "mine"\n[addresses]\nqueue_source = "queue://{queue}"\n')
    assert load_profile(str(good)).source("a") == "queue://a"
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[capabilities]\nteleport = true\n')
    with pytest.raises(ProfileError, match="teleport"):
        load_profile(str(bad))


def test_case_ids_are_unique_sections_and_documented() -> None:
    assert len(CASES) >= 40
    for case_id, case in CASES.items():
        section, _, slug = case_id.partition("/")
        assert section[0].isdigit() and slug, case_id
        assert case.sentence and case.description, case_id
        assert case.level in ("MUST", "SHOULD", "MAY", "MODEL")


def test_expectations_round_trip_and_compare(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text(
        format_expectations("b", {"2.2/x": "OK", "2.6.7/y": "FAILED"}, {"2.6.7/y": "org/r#2597"})
    )
    loaded = load_expectations(path)
    assert loaded["2.6.7/y"] == Expectation(Verdict.FAILED, "org/r#2597")
    assert compare(loaded, {"2.2/x": "OK", "2.6.7/y": "FAILED"}) == []
    assert compare(loaded, {"2.6.7/y": "OK", "2.9/new": "OK"}) == [
        "2.6.7/y: expected FAILED (org/r#2597), got OK",
        "2.9/new: OK, not in the expectations file",
    ]


def test_expectations_accept_alternative_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text(format_expectations("b", {"2.6.7/p": "OK"}, {}, {"2.6.7/p": "OK|FAILED"}))
    assert '"2.6.7/p" = { verdict = "OK|FAILED" }' in path.read_text()
    loaded = load_expectations(path)
    assert compare(loaded, {"2.6.7/p": "FAILED"}) == []
    assert compare(loaded, {"2.6.7/p": "OK"}) == []
    assert compare(loaded, {"2.6.7/p": "ERROR"}) == ["2.6.7/p: expected OK|FAILED, got ERROR"]


def test_committed_expectations_name_known_cases() -> None:
    """Each line is a case, a pipelined variant or the row of a checker rule in the catalog
    (`checker/<section>/<rule id>`)."""
    from amqpspec.amqp10.checker import RULES
    from amqpspec.conformance.run.checker_rows import row_id

    known = {case.case_id for case in suite_cases("also")}  # the cases and pipelined variants
    known |= {row_id(rule_id) for rule_id in RULES}
    for path in (REPO / "conformance" / "expectations").glob("*.toml"):
        for case_id in load_expectations(path):
            assert case_id in known, (path.name, case_id)


def test_fault_detection_table_names_undetected_faults() -> None:
    from amqpspec.conformance.audit.fault_matrix import detection_table

    index = {
        "reference": {"2.2/a": {"verdict": "OK"}, "2.2/b": {"verdict": "FAILED"}},
        "reference+overdeliver-on-regrant": {
            "2.6.7/credit-regrant-in-flight": {"verdict": "FAILED"},
            "2.2/b": {"verdict": "FAILED"},  # fails on the clean broker too: not credited
        },
        "reference+no-echo": {"2.7.4/echo-link": {"verdict": "OK"}},
        "reference+ignore-alarm": {"2.5.6/alarm-closes-window": {"verdict": "NON-STRICT"}},
        "reference+flow-without-delivery-count": {
            "3.2/message-properties-all-fields": {"verdict": "OK"},
            "checker/2.7.4/link.flow.receiver-delivery-count-missing": {"verdict": "FAILED"},
        },
    }
    faults = ["overdeliver-on-regrant", "no-echo", "ignore-alarm", "flow-without-delivery-count"]
    table, undetected = detection_table(index, faults)
    assert undetected == ["no-echo"]
    rows = {line.split("`")[1]: line for line in table.splitlines() if line.startswith("| `")}
    assert "RabbitMQ #2597" in rows["overdeliver-on-regrant"]
    assert "`2.6.7/credit-regrant-in-flight`" in rows["overdeliver-on-regrant"]
    assert "`2.2/b`" not in rows["overdeliver-on-regrant"]
    assert "**none: undetected**" in rows["no-echo"]
    assert "| - | `2.5.6/alarm-closes-window` | - |" in rows["ignore-alarm"]
    row = rows["flow-without-delivery-count"]  # caught by its checker row alone
    assert "| `checker/2.7.4/link.flow.receiver-delivery-count-missing` | - | - | - |" in row
    assert "Clean broker (2 cases: FAILED 1, OK 1) FAILED/ERROR: 2.2/b." in table


class FlakyRelay(LoopbackPeer):
    """A TCP relay to a real broker that hangs up on the first `drop` connections: a broker
    that fails a case in some runs only, for the --expect-retries tests."""

    def __init__(self, upstream_port: int, drop: int) -> None:
        self.upstream_port, self.drop = upstream_port, drop
        self.accepted = 0
        self.counting = threading.Lock()
        super().__init__()

    def _serve(self, client: socket.socket) -> None:
        with self.counting:
            self.accepted += 1
            dropped = self.accepted <= self.drop
        if dropped:
            client.close()
            return
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(30)
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def test_expect_retries_report_unstable_case_without_failing(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    relay = FlakyRelay(broker.port, drop=1)
    try:
        expect = tmp_path / "flaky.toml"
        expect.write_text(format_expectations("reference", {"2.2/header-amqp-answered": "OK"}))
        results = tmp_path / "r"
        args = [
            "run", "--broker", f"amqp://127.0.0.1:{relay.port}", "--profile", "reference",
            "--results", str(results), "-k", "2.2/header-amqp-answered", "-q",
            "--expect", str(expect), "--preflight-timeout", "0",  # the relay drops the first
        ]  # fmt: skip
        strict = run_amqpspec(*args)
        assert strict.returncode == 1, strict.stdout[-2000:]
        assert "expected OK, got " in strict.stdout
        relay.accepted = 0  # the next run's first connection is dropped again
        retried = run_amqpspec(*args, "--expect-retries", "2")
    finally:
        relay.close()
    assert retried.returncode == 0, retried.stdout[-3000:] + retried.stderr[-2000:]
    assert "UNSTABLE" in retried.stdout and "2.2/header-amqp-answered: expected OK, attempts " in (
        retried.stdout
    )
    entry = json.loads((results / "index.json").read_text())["reference"][
        "2.2/header-amqp-answered"
    ]
    first, *later = entry["attempts"]
    assert first != "OK" and later == ["OK"] and entry["verdict"] == first


def test_expect_retries_still_fail_a_difference_that_repeats(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    expect = tmp_path / "wrong.toml"
    expect.write_text(format_expectations("reference", {"2.6.7/credit-single-grant": "FAILED"}))
    results = tmp_path / "r"
    run = run_amqpspec(
        "run", "--broker", broker.url, "--profile", "reference", "--admin", broker.admin_url,
        "--results", str(results), "-k", "credit-single-grant", "-q",
        "--expect", str(expect), "--expect-retries", "2", "--pipelined", "never",
    )  # fmt: skip
    assert run.returncode == 1
    assert "expected FAILED, got OK" in run.stdout and "UNSTABLE" not in run.stdout
    entry = json.loads((results / "index.json").read_text())["reference"]
    assert entry["2.6.7/credit-single-grant"]["attempts"] == ["OK", "OK", "OK"]


def test_expect_retries_needs_expect(tmp_path: Path) -> None:
    run = run_amqpspec(
        "run", "--broker", "amqp://127.0.0.1:1", "--results", str(tmp_path),
        "--expect-retries", "2",
    )  # fmt: skip
    assert run.returncode == 2 and "--expect-retries needs --expect" in run.stderr
