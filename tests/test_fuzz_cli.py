"""`amqpspec fuzz` over real sockets: exit codes, a clean campaign, replay (free ports,
short fixed-seed campaigns, every wait bounded)."""

from __future__ import annotations

import json
import socket

import pytest
from fuzz_support import run_campaign, run_fuzz

from amqpspec.cli import main
from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.reference_broker.runtime.process import free_port


@pytest.fixture(scope="module")
def broker():
    running = reference_broker()
    yield running
    running.stop()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--out", "x", "--cases", "1"], "--broker"),
        (["--broker", "amqp://127.0.0.1:1", "--cases", "1"], "--out"),
        (["--broker", "amqp://127.0.0.1:1", "--out", "x"], "--duration"),
        (["--broker", "http://h:1", "--out", "x", "--cases", "1"], "scheme"),
        (
            ["--broker", "amqp://127.0.0.1:1", "--out", "x", "--cases", "1", "--strategy", "nope"],
            "strategy",
        ),
        (
            [
                "--broker",
                "amqp://127.0.0.1:1",
                "--out",
                "x",
                "--cases",
                "1",
                "--profile",
                "no-such-profile",
            ],
            "profile",
        ),
        (["replay", "--broker", "amqp://127.0.0.1:1"], "replay needs"),
    ],
)
def test_usage_errors_exit_2_with_one_clear_line(argv, message, capsys):
    assert main(["fuzz", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unreachable_broker_exits_2(tmp_path):
    port = free_port()
    with socket.socket() as probe:  # nothing listens there
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    result = run_fuzz(
        "--broker", f"amqp://127.0.0.1:{port}", "--out", str(tmp_path), "--cases", "5", timeout=60
    )
    assert result.returncode == 2
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr


def test_clean_reference_broker_short_campaign_has_no_finding(broker, tmp_path):
    """The CI campaign: about a minute against the clean reference broker, fixed seed,
    every strategy, the memory oracle on: no finding (a false positive fails it)."""
    out = tmp_path / "campaign"
    result = run_campaign(
        broker,
        out,
        "--duration",
        "45",
        "--seed",
        "1",
        "--workers",
        "2",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 new finding(s)" in result.stdout
    cases = int(result.stdout.split("amqpspec fuzz: ")[1].split(" cases")[0])
    assert cases >= 300, result.stdout  # the whole budget was spent fuzzing
    assert json.loads((out / "findings.json").read_text()) == []


def test_trace_replay_compares_the_brokers_answers(broker, tmp_path):
    """`amqpspec trace replay`: a recorded conversation re-sent to the same broker is
    answered the same (exit 0); an unreadable file exits 2."""
    from amqpspec.fuzz.findings import write_pcap
    from amqpspec.fuzz.model import Conversation, Handshake
    from amqpspec.fuzz.oracle import Target, run_case

    conv = Conversation(Handshake(source="/queues/q", target="/queues/q")).open()
    conv.begin()
    outcome = run_case(Target("127.0.0.1", broker.port, conv.handshake), conv.steps(), pace=0.05)
    assert outcome.verdict is None
    pcap = tmp_path / "recorded.pcap"
    write_pcap(str(pcap), outcome.recording)
    ok = main(["trace", "replay", str(pcap), "--broker", broker.url, "--profile", "reference"])
    assert ok == 0
    (tmp_path / "junk").write_bytes(b"not a trace")
    junk = main(["trace", "replay", str(tmp_path / "junk"), "--broker", broker.url])
    assert junk == 2
