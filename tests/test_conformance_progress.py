"""What a person sees during `amqpspec run` (docs/conformance.md), against the real reference
broker: plain lines per case with the verdict when stdout is not a terminal (CI logs), a rich
progress bar with the tally on a terminal (a pty), pytest's own lines with -v; in every mode the
one-screen summary: counts, FAILED/ERROR cases with one-line reasons, where results are."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.reference_broker.runtime.process import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
SELECTION = "2.6.2/unattached or credit-single-grant"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = reference_broker("credit-per-frame")  # one MUST case FAILS: a summary with a reason
    yield running
    running.stop()


def _args(broker: BrokerProcess, results: Path, keyword: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "amqpspec.cli", "run", "--broker", broker.url,
            "--profile", "reference", "--admin", broker.admin_url, "--results", str(results),
            "-k", keyword, *extra]  # fmt: skip


def test_plain_lines_and_a_one_screen_summary_when_stdout_is_no_terminal(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    run = subprocess.run(
        _args(broker, tmp_path, f"{SELECTION} or credit-multi-frame-counts-once"),
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = run.stdout
    lines = re.findall(r"^\[\s*(\d+)/(\d+)\] (\S+)\s+(\S+) \(", out, re.M)
    assert len(lines) >= 7, out[-3000:]
    assert {total for _, total, _, _ in lines} == {str(len(lines))}
    verdicts = {case: verdict for _, _, verdict, case in lines}
    assert verdicts["2.6.2/unattached-handle-flow/pipelined"] == "OK"
    assert verdicts["2.6.7/credit-multi-frame-counts-once"] == "FAILED"
    assert "PASSED" not in out and "::test_case[" not in out  # no pytest lines
    summary = out[out.index("amqpspec verdicts (reference):") :]
    assert re.search(r"^FAILED\s+2\.6\.7/credit-multi-frame-counts-once: \S", summary, re.M)
    assert "OK " in summary.splitlines()[0] and "FAILED " in summary.splitlines()[0]
    assert f"results: {tmp_path / 'index.json'}" in summary and "amqpspec report" in summary
    assert len(summary.splitlines()) < 25


def test_verbose_gives_pytests_lines_back(broker: BrokerProcess, tmp_path: Path) -> None:
    run = subprocess.run(
        _args(broker, tmp_path, "credit-single-grant", "-v"),
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "test_case[2.6.7/credit-single-grant] PASSED" in run.stdout, run.stdout[-2000:]
    assert not re.search(r"^\[\s*\d+/\d+\] ", run.stdout, re.M)


def test_a_terminal_gets_a_live_progress_bar_with_the_tally(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    leader, follower = os.openpty()
    process = subprocess.Popen(
        _args(broker, tmp_path, SELECTION),
        cwd=REPO, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "160", "TERM": "xterm"},
    )  # fmt: skip
    os.close(follower)
    output = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    os.close(leader)
    assert process.wait(timeout=30) == 0
    text = output.decode("utf-8", "replace")
    assert "━" in text and "OK " in text  # rich's bar and the live tally
    assert not re.search(r"^\[\s*\d+/\d+\] ", text, re.M)  # no plain lines on a terminal
    assert "amqpspec verdicts (reference): OK" in text
