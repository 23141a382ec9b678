"""The verdict model: how a case's level (MUST, SHOULD, MAY, MODEL) turns what happened into
a verdict, DIFFERS end to end (index.json, JUnit, the matrix, --gate-differs), reasons that
say what the broker did, checker findings after the probe's own malformed frame, and a
case's budget as a hard limit (a peer that never answers: the case still ends).

Fakes where the broker's behaviour is the point (a socket that accepts, reads and never
writes; synthetic traces), the real reference broker with a fault where a whole run is.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import run_amqpspec
from peer_support import LoopbackPeer, chunks

from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.composites import End, Error, Flow, Open
from amqpspec.amqp10.frames import Frame, FrameType
from amqpspec.amqp10.monitor import TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.conformance.admin import NoAdmin
from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.probe import Recording
from amqpspec.conformance.probe.observed import broker_did
from amqpspec.conformance.profile import ProfileError, load_profile, profile_from_dict
from amqpspec.conformance.run.context import BrokerTarget, CaseResult
from amqpspec.conformance.run.plugin import RunState
from amqpspec.conformance.run.registry import (
    MAY,
    MODEL,
    MUST,
    SHOULD,
    load_cases,
    sentence_problems,
)
from amqpspec.conformance.run.runner import (
    ABORT_GRACE_S,
    OVERRUN_S,
    broker_violations,
    run_case,
    ungraded_violations,
)
from amqpspec.conformance.verdicts import PASSING, CaseFailed, NoDelivery, Verdict
from amqpspec.reference_broker.runtime.process import BrokerProcess

CASES = {case.case_id: case for case in load_cases()}


class SilentPeer(LoopbackPeer):
    """A real socket on 127.0.0.1 that accepts every connection and reads what arrives, but
    never writes a byte (a broker that hangs)."""

    def __init__(self) -> None:
        self.received = 0
        self._conns: list[socket.socket] = []
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        self._conns.append(conn)
        try:
            conn.settimeout(0.2)
        except OSError:  # closed already (the test ended)
            return
        for data in chunks(conn, self.stop):
            self.received += len(data)

    def close(self) -> None:
        super().close()
        for conn in self._conns:
            conn.close()


@pytest.fixture
def silent_peer() -> Iterator[SilentPeer]:
    peer = SilentPeer()
    yield peer
    peer.close()


def _fake(level: str, run, *, model: str | None = None, budget: float | None = None, **kw):
    """A registered case with its level, run function and budget replaced."""
    base = CASES["2.4.1/open-answered"]
    return dataclasses.replace(
        base, level=level, run=run, model=model, budget=budget, sentences=(), **kw
    )


def _run(case, peer: SilentPeer, profile: str = "generic") -> CaseResult:
    loaded = dataclasses.replace(load_profile(profile), wait=0.5)
    return run_case(case, BrokerTarget("127.0.0.1", peer.port), loaded, NoAdmin())


# --- levels -> verdicts --------------------------------------------------------------------


def _fails(probe, ctx) -> None:
    raise CaseFailed("expected X; observed Y")


def _short(probe, ctx) -> None:
    raise NoDelivery("expected a transfer; observed nothing")


def _must_inside(probe, ctx) -> None:
    ctx.must(
        False, "expected no accepted message again; observed one", "3.5.2/distribution-modes.1"
    )


@pytest.mark.parametrize(
    ("level", "run", "verdict", "starts"),
    [
        (MUST, _fails, Verdict.FAILED, "expected X; observed Y"),
        (SHOULD, _fails, Verdict.NON_STRICT, "expected X; observed Y"),
        (MAY, _fails, Verdict.OK, "recorded (no sentence binds the broker here): expected X"),
        (MODEL, _fails, Verdict.DIFFERS, "differs from the rabbitmq4 model (the profile 'generic'"),
        (MUST, _short, Verdict.OK, "recorded (no sentence binds the broker here): expected a"),
        (MODEL, _short, Verdict.DIFFERS, "differs from the rabbitmq4 model"),
        (MODEL, _must_inside, Verdict.FAILED, "expected no accepted message again"),
    ],
)
def test_a_failure_is_graded_by_the_level_it_rests_on(
    silent_peer: SilentPeer, level: str, run, verdict: Verdict, starts: str
) -> None:
    model = "rabbitmq4" if level == MODEL else None
    result = _run(_fake(level, run, model=model), silent_peer)
    assert result.verdict == verdict, result.reason
    assert result.reason.startswith(starts), result.reason


def test_a_must_inside_a_model_case_quotes_its_sentence(silent_peer: SilentPeer) -> None:
    result = _run(_fake(MODEL, _must_inside, model="rabbitmq4"), silent_peer)
    assert '3.5.2/distribution-modes.1: "A Source MUST NOT resend a Message' in result.reason


def test_a_failed_reason_quotes_the_sentence_from_the_manifest(silent_peer: SilentPeer) -> None:
    case = dataclasses.replace(_fake(MUST, _fails), sentences=("2.6.7/flow-control.12",))
    result = _run(case, silent_peer)
    assert result.verdict == Verdict.FAILED
    assert result.reason == (
        "expected X; observed Y (2.6.7/flow-control.12: \"If the Sender's drain flag is set and "
        "there are no available messages, the Sender MUST advance its delivery-count until "
        'link-credit is zero, and send its updated flow state to the Receiver.")'
    )


def test_differs_says_whether_the_profile_claims_the_model(silent_peer: SilentPeer) -> None:
    case = _fake(MODEL, _fails, model="rabbitmq4")
    claimed = _run(case, silent_peer, "rabbitmq4")
    assert claimed.verdict == Verdict.DIFFERS
    assert "(the profile 'rabbitmq4' claims it)" in claimed.reason
    assert Verdict.DIFFERS in PASSING  # never non-conformance by itself


def test_profiles_claim_known_models_only(tmp_path: Path) -> None:
    assert load_profile("reference").claims("rabbitmq4")
    assert load_profile("rabbitmq4").claims("rabbitmq4")
    assert not load_profile("rabbitmq3").claims("rabbitmq4")
    assert profile_from_dict({"name": "x", "model": ["rabbitmq4"]}).models == {"rabbitmq4"}
    with pytest.raises(ProfileError, match="unknown model"):
        profile_from_dict({"name": "x", "model": "artemis9"})


def test_gate_differs_fails_the_run_only_for_a_claimed_model() -> None:
    differs = CaseResult("2.6.6/requeue-after-detach-closed", MODEL, Verdict.DIFFERS, 0.1)
    assert RunState(results=[differs]).exit_status() == 0
    assert RunState(results=[differs], gated={differs.case_id}).exit_status() == 1


# --- what the reasons say ------------------------------------------------------------------


def _frame(index: int, direction: str, at: float, performative) -> TraceItem:
    frame = Frame(FrameType.AMQP, 0, performative)
    return TraceItem(1, direction, index, at, frame, b"")


def test_a_timeout_says_what_the_broker_did_instead() -> None:
    recording = Recording(1, start=100.0, end=105.0)
    drain = Flow(
        next_incoming_id=0, incoming_window=10, next_outgoing_id=0, outgoing_window=10,
        handle=0, delivery_count=0, link_credit=10, drain=True,
    )  # fmt: skip
    ended = End(error=Error(condition="amqp:internal-error", description="function_clause"))
    recording.items = [_frame(11, CLIENT, 100.0, drain), _frame(12, SERVER, 100.01, ended)]
    assert broker_did(recording, 0) == (
        "the broker sent end with amqp:internal-error 'function_clause' (frame #12) 10 ms "
        "after our flow (frame #11)"
    )
    quiet = Recording(1, start=100.0, end=105.0)
    quiet.items = [_frame(3, SERVER, 101.0, drain)]
    assert broker_did(quiet, 0).startswith("the broker's last frame: @flow(19) [")
    assert broker_did(quiet, 0).endswith(
        "(frame #3); no frame after it, and the connection still open"
    )
    later = broker_did(quiet, 1)
    assert later.startswith(
        "the broker sent no frame and kept the connection open (its last frame before: @flow"
    )
    quiet.items.append(_frame(4, CLIENT, 101.5, drain))  # ours after its last: named, no wait
    assert broker_did(quiet, 0).endswith(
        "(frame #3); no frame after it (after our flow (frame #4)), and the connection still open"
    )
    flow = broker_did(quiet, 0).split("last frame: ")[1].split("; no frame")[0]
    assert broker_did(quiet, 4) == (
        "the broker sent no frame after our flow (frame #4) and kept the connection open "
        f"(its last frame before: {flow})"
    )
    assert " ms" not in broker_did(quiet, 0) + broker_did(quiet, 4)
    assert broker_did(quiet, 1, closed=True) == "the broker closed the TCP connection"  # no open
    opened = Recording(1, start=100.0, end=105.0)
    opened.items = [_frame(2, SERVER, 100.5, Open(container_id="broker"))]
    closed = broker_did(opened, 0, closed=True)
    assert closed.startswith("the broker closed the TCP connection without a close frame; its")
    opened.items.append(TraceItem(1, SERVER, 3, 101.0, None, b"\x00\x00\x00\x0c"))
    assert "after bytes we could not decode" in broker_did(opened, 0, closed=True)


def test_a_drain_case_names_the_broker_frame_not_the_wait(tmp_path: Path) -> None:
    broker = reference_broker("ignore-drain")
    try:
        run = run_amqpspec(
            "run", "--broker", broker.url, "--profile", "reference", "--admin", broker.admin_url,
            "--results", str(tmp_path), "-k", "2.6.7/drain-empty-queue", "-q",
            "--pipelined", "never",
        )  # fmt: skip
    finally:
        broker.stop()
    entry = json.loads((tmp_path / "index.json").read_text())["reference"]
    reason = entry["2.6.7/drain-empty-queue"]["reason"]
    assert entry["2.6.7/drain-empty-queue"]["verdict"] == "FAILED", reason
    assert reason.startswith("expected a flow for the link with link-credit 0 answering the drain;")
    assert "observed the broker's last frame" in reason or "observed the broker sent no" in reason
    assert "after our flow (frame #" in reason, reason  # the drain, not a heartbeat after it
    assert "(frame #" in reason and '2.6.7/flow-control.12: "If the Sender' in reason
    assert run.returncode == 1


# --- the checker and the probe's own malformed frame ---------------------------------------


def test_findings_after_the_probes_malformed_frame_are_not_graded() -> None:
    case = CASES["2.3.2/bad-constructor"]
    recording = Recording(1)
    recording.items = [
        TraceItem(1, CLIENT, 9, 0.0, None, b"\x00\x00\x00\x20garbage"),  # undecodable
        _frame(10, SERVER, 0.01, End()),
    ]
    found = Violation("session.remote-channel", "2.7.2", "MUST", 10, SERVER, "begin reply")
    before = Violation("connection.open-first", "2.4.1", "MUST", 4, SERVER, "earlier")
    recording.violations = [before, found]
    assert [v for _, v in broker_violations(case, [recording])] == [before]
    assert ungraded_violations(case, [recording]) == [(9, found)]
    illegal = Recording(2)  # a decodable frame that breaks a rule: the probe's own violation
    illegal.probe_violations = [Violation("x", "2.5.1", "MUST", 5, CLIENT, "begin in use")]
    illegal.violations = [found]
    assert broker_violations(case, [illegal]) == []


# --- the budget is a hard limit ------------------------------------------------------------


def _blocked(probe, ctx) -> None:
    """A library call that never returns (a blocking read from a peer that never writes)."""
    sock = socket.create_connection((ctx.target.host, ctx.target.port))
    sock.recv(1)


def test_a_case_ends_within_its_budget_against_a_peer_that_never_answers(
    silent_peer: SilentPeer,
) -> None:
    case = _fake(MUST, _blocked, budget=1.0)
    started = time.monotonic()
    result = _run(case, silent_peer)
    took = time.monotonic() - started
    assert result.verdict == Verdict.ERROR, result.reason
    assert result.reason.startswith("the case did not end within its budget of 1s")
    assert "it still had not returned" in result.reason
    assert took < 1.0 + OVERRUN_S + ABORT_GRACE_S + 3.0, took


def test_probe_waits_end_at_the_budget(silent_peer: SilentPeer) -> None:
    """A real case (its probe waits for the broker's open) against the silent peer: over
    before its budget, with what was seen."""
    case = dataclasses.replace(CASES["2.4.1/open-answered"], budget=2.0)
    loaded = dataclasses.replace(load_profile("generic"), wait=30.0)  # the budget decides
    started = time.monotonic()
    result = run_case(case, BrokerTarget("127.0.0.1", silent_peer.port), loaded, NoAdmin())
    assert time.monotonic() - started < 2.0 + OVERRUN_S
    assert result.verdict in (Verdict.OK, Verdict.ERROR), result.reason
    assert silent_peer.received > 0  # the probe did send its header


def test_the_proton_loop_stops_at_its_bound(silent_peer: SilentPeer) -> None:
    """2.6.7/proton-prefetch-regrant drives proton step by step: against a peer that never
    answers (Container.run() would wait forever) it stops at the bound it is given."""
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    from amqpspec.conformance.cases.s2_6_7_proton import _drive

    class Connect(MessagingHandler):
        def on_start(self, event) -> None:
            event.container.connect(f"127.0.0.1:{silent_peer.port}", reconnect=False)

    started = time.monotonic()
    stopped = _drive(Container(Connect()), time.monotonic() + 1.5)
    assert stopped is True
    assert time.monotonic() - started < 1.5 + 2.0
    assert silent_peer.received > 0


# --- DIFFERS end to end: index.json, JUnit, the matrix, the gate ---------------------------


@pytest.fixture(scope="module")
def no_requeue() -> Iterator[BrokerProcess]:
    running = reference_broker("no-requeue-on-detach")  # RabbitMQ 4's model broken
    yield running
    running.stop()


def test_differs_end_to_end_and_the_gate(no_requeue: BrokerProcess, tmp_path: Path) -> None:
    results = tmp_path / "r"
    args = [
        "run", "--broker", no_requeue.url, "--profile", "reference",
        "--admin", no_requeue.admin_url, "--results", str(results),
        "-k", "2.6.6/requeue-after-detach-closed or 2.6.7/credit-single-grant",
        "--pipelined", "never",
    ]  # fmt: skip
    run = run_amqpspec(*args)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    entries = json.loads((results / "index.json").read_text())["reference"]
    entry = entries["2.6.6/requeue-after-detach-closed"]
    assert entry["verdict"] == "DIFFERS" and entry["level"] == "MODEL"
    assert entry["reason"].startswith("differs from the rabbitmq4 model (the profile 'reference'")
    assert set(entry) >= {"verdict", "level", "duration", "trace", "pcap", "reason"}
    assert "DIFFERS 1" in run.stdout  # the tally
    assert "DIFFERS: 1 case(s) differ from the model the profile declares" in run.stdout

    junit = ET.parse(results / "junit-reference.xml").getroot()
    (case,) = [t for t in junit.iter("testcase") if "requeue" in t.get("name", "")]
    assert case.find("failure") is None and case.find("skipped") is None
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}  # the suite's
    assert props["verdict:2.6.6/requeue-after-detach-closed"] == "DIFFERS"
    assert "DIFFERS: differs from the rabbitmq4 model" in (case.findtext("system-out") or "")

    report = run_amqpspec("report", str(results), "--out", str(tmp_path / "out"))
    assert report.returncode == 0, report.stderr
    markdown = (tmp_path / "out" / "conformance-matrix.md").read_text()
    assert "| broker | ERROR | FAILED | NON-STRICT | OK | UNSUPPORTED | DIFFERS (model) |" in (
        markdown
    )
    assert "| reference | 0 | 0 | 0 | 1 | 0 | 1 |" in markdown
    first, cases = markdown.split("## Cases by section")
    spec, model = cases.split("## Model behaviour (not required by the spec)")
    assert "`2.6.7/credit-single-grant`" in spec and "requeue-after-detach-closed" not in spec
    assert "| `2.6.6/requeue-after-detach-closed` | MODEL (rabbitmq4) | [DIFFERS](" in model
    # failures first: the DIFFERS with its reason, under its own heading (not a failure)
    assert "### DIFFERS: a model's behaviour, not required by the spec (1)" in first
    assert "**reference** `2.6.6/requeue-after-detach-closed` DIFFERS [MODEL]" in first
    assert "### FAILED" not in first and "## Reasons" not in markdown
    page = (tmp_path / "out" / "conformance-matrix.html").read_text()
    assert "Model behaviour (not required by the spec)" in page and ">DIFFERS<" in page

    gated = run_amqpspec(*args, "--results", str(tmp_path / "g"), "--gate-differs")
    assert gated.returncode == 1, gated.stdout[-2000:]
    junit = ET.parse(tmp_path / "g" / "junit-reference.xml").getroot()
    (case,) = [t for t in junit.iter("testcase") if "requeue" in t.get("name", "")]
    assert "DIFFERS (--gate-differs)" in case.find("failure").get("message", "")


# --- the cases' sentences ------------------------------------------------------------------


def test_every_case_rests_on_manifest_sentences_at_its_level() -> None:
    """Each case's ids are the manifest's, a MUST or SHOULD case names a sentence (or the
    manifest links one to it), and its level is the one its sentences give for the broker
    in its role."""
    assert sentence_problems(load_cases()) == []


# --- checker rows: a rule broken in every case's setup is one row, not every case --------


@pytest.fixture(scope="module")
def flows_without_delivery_count() -> Iterator[BrokerProcess]:
    running = reference_broker("flow-without-delivery-count")  # RabbitMQ 3.10's flows
    yield running
    running.stop()


def test_a_rule_broken_in_setup_traffic_is_its_own_row(
    flows_without_delivery_count: BrokerProcess, tmp_path: Path
) -> None:
    """The broker's flows as a receiver omit delivery-count (2.7.4) in the publishing
    step of a 3.2 case: the case, which checks the bare message, stays OK with a note;
    the rule's row is FAILED with the offending flow, and fails the run."""
    broker = flows_without_delivery_count
    results = tmp_path / "r"
    run = run_amqpspec(
        "run", "--broker", broker.url, "--profile", "reference", "--admin", broker.admin_url,
        "--results", str(results), "-k", "3.2/message-properties-all-fields",
        "--pipelined", "never",
    )  # fmt: skip
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    entries = json.loads((results / "index.json").read_text())["reference"]
    assert entries["3.2/message-properties-all-fields"]["verdict"] == "OK"
    row = entries["checker/2.7.4/link.flow.receiver-delivery-count-missing"]
    assert row["verdict"] == "FAILED" and row["level"] == "MUST"
    assert "offending frame:" in row["reason"] and "@flow" in row["reason"]
    assert "3.2/message-properties-all-fields" in row["reason"]
    assert "2.7.4/flow.delivery-count.3" in row["reason"]
    assert (results / row["pcap"]).exists()
    row_trace = (results / row["trace"]).read_text()
    assert "3.2/message-properties-all-fields (graded here only)" in row_trace
    case_trace = (results / entries["3.2/message-properties-all-fields"]["trace"]).read_text()
    assert "graded in its rule's row checker/2.7.4/" in case_trace


def test_a_rule_enforcing_the_cases_sentence_grades_the_case() -> None:
    """`grades_case`: the 2.7.4 delivery-count rule grades a case that checks that sentence,
    not a 3.2 case whose publishing step happens to carry the flow."""
    from amqpspec.conformance.run.runner import grades_case

    rule = "link.flow.receiver-delivery-count-missing"
    checking = [c for c in CASES.values() if "2.7.4/flow.delivery-count.3" in c.sentences]
    assert checking, "no case names 2.7.4/flow.delivery-count.3"
    assert grades_case(checking[0], rule)
    assert not grades_case(CASES["3.2/message-properties-all-fields"], rule)
