"""`amqpspec fuzz` over real sockets: exit codes, a clean campaign, replay (free ports,
short fixed-seed campaigns, every wait bounded)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from amqpspec.cli import main
from conformance.fault_matrix import reference_broker
from reference_broker.process import free_port

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fuzz(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "fuzz", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
    )


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
    result = _fuzz(
        "--broker", f"amqp://127.0.0.1:{port}", "--out", str(tmp_path), "--cases", "5", timeout=60
    )
    assert result.returncode == 2
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr


def test_clean_reference_broker_short_campaign_has_no_finding(broker, tmp_path):
    out = tmp_path / "campaign"
    result = _fuzz(
        "--broker",
        broker.url,
        "--profile",
        "reference",
        "--admin",
        broker.admin_url,
        "--out",
        str(out),
        "--cases",
        "150",
        "--seed",
        "1",
        "--workers",
        "2",
        "--quiet",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "150 cases" in result.stdout and "0 new finding(s)" in result.stdout
    assert json.loads((out / "findings.json").read_text()) == []
