"""A dead or hostile broker gets a verdict fast (preflight and health probe, docs/conformance.md),
over real sockets: a port that accepts and never answers, a garbage server, a slowloris server (one
byte every 2 s), an HTTP server, a refused port; `amqpspec run` against them stops with exit 2 and
one line within seconds, every case ERROR in index.json; a broker killed mid-run makes the following
cases ERROR at once (the health probe between cases, with --jobs 1 and --jobs 4) and the run says
when it died."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_support import REPO, run_amqpspec

from amqpspec.conformance.profile import load_profile
from amqpspec.conformance.run.context import BrokerTarget
from amqpspec.conformance.run.preflight import check_broker
from amqpspec.conformance.run.registry import suite_cases
from amqpspec.reference_broker.runtime.process import BrokerProcess, free_port

PROFILE = load_profile("reference")


def _silent(conn: socket.socket) -> None:
    conn.recv(64)
    time.sleep(20)


def _garbage(conn: socket.socket) -> None:
    conn.sendall(b"\x17\x03\x03\x00\x10not amqp at all!")
    time.sleep(20)


def _slowloris(conn: socket.socket) -> None:
    for byte in b"AMQP\x03\x01\x00\x00":
        conn.sendall(bytes([byte]))
        time.sleep(2.0)


def _http(conn: socket.socket) -> None:
    conn.recv(64)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def _amqp091(conn: socket.socket) -> None:
    conn.recv(8)
    conn.sendall(b"AMQP\x00\x00\x09\x01")  # an AMQP 0-9-1 broker: its header, then it closes


SERVERS: dict[str, tuple[Callable[[socket.socket], None], str]] = {
    "silent": (_silent, "no protocol header within"),
    "garbage": (_garbage, "header mismatch: not AMQP"),
    "slowloris": (_slowloris, "no protocol header within"),
    "http": (_http, "header mismatch: not AMQP, the server sent b'HTTP/1.1 400"),
    "amqp-0-9-1": (_amqp091, "header mismatch: sent b'AMQP\\x03\\x01\\x00\\x00'"),
}


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[int]:
    """A TCP server on a free port whose every connection is handled by the given kind."""
    handle = SERVERS[request.param][0]
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=_guarded, args=(handle, conn), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(timeout=2)
    listener.close()


def _guarded(handle: Callable[[socket.socket], None], conn: socket.socket) -> None:
    with conn:
        try:
            handle(conn)
        except OSError:
            pass


@pytest.mark.parametrize("server", list(SERVERS), indirect=True)
def test_preflight_names_what_the_server_got_wrong_within_its_bound(
    server: int, request: pytest.FixtureRequest
) -> None:
    kind = request.node.callspec.params["server"]
    started = time.monotonic()
    reason = check_broker(BrokerTarget("127.0.0.1", server), PROFILE, timeout=3.0)
    assert time.monotonic() - started < 4.5
    assert reason is not None and SERVERS[kind][1] in reason, reason


def test_preflight_of_a_refused_port_and_of_a_real_broker() -> None:
    reason = check_broker(BrokerTarget("127.0.0.1", free_port()), PROFILE, timeout=3.0)
    assert reason is not None and reason.endswith("connection refused")
    with BrokerProcess() as broker:
        assert check_broker(BrokerTarget("127.0.0.1", broker.port), PROFILE, 3.0) is None
        wrong = BrokerTarget("127.0.0.1", broker.port, "guest", "wrong password")
        reason = check_broker(wrong, PROFILE, 3.0)
        assert reason is not None and "SASL refused" in reason, reason


@pytest.mark.parametrize("server", ["silent", "slowloris"], indirect=True)
def test_a_run_against_a_hostile_port_stops_at_once_with_every_case_error(
    server: int, tmp_path: Path
) -> None:
    started = time.monotonic()
    run = run_amqpspec(
        "run", "--broker", f"amqp://127.0.0.1:{server}", "--profile", "reference",
        "--results", str(tmp_path), "--preflight-timeout", "3", timeout=120,
    )  # fmt: skip
    assert time.monotonic() - started < 30  # a user knows within 30 s
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "no protocol header within 3 s" in lines[0], run.stderr
    entries = json.loads((tmp_path / "index.json").read_text())["reference"]
    assert set(entries) == {case.case_id for case in suite_cases("also")}
    for entry in entries.values():
        assert entry["verdict"] == "ERROR" and entry["reason"].startswith("preflight: amqp://")


# --jobs 1: cases one after the other; --jobs 4: the cases running when the broker dies end
# on their own, the ones that start after it make the health probe's ERROR (more cases, so
# that some are left to start once four are running)
KILLED_MID_RUN = {1: "2.6.2 or 2.7.4", 4: "2.6.2 or 2.7.4 or 2.7.3 or 2.2/ or 3.2 or 2.7.2"}
# what the health probe finds: a refused port; with four cases running, a probe may also
# reach the broker while SIGKILL takes it down (the kernel completed the TCP handshake, the
# process is gone before it sends a protocol header)
DEAD = {
    1: ("connection refused",),
    4: ("connection refused", "closed the connection before sending a protocol header"),
}


@pytest.mark.parametrize("jobs", sorted(KILLED_MID_RUN))
def test_a_broker_killed_mid_run_makes_the_next_cases_error_at_once(
    tmp_path: Path, jobs: int
) -> None:
    broker = BrokerProcess(admin=True)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "amqpspec.cli", "run", "--broker", broker.url,
             "--profile", "reference", "--admin", broker.admin_url, "--results", str(tmp_path),
             "--pipelined", "never", "-k", KILLED_MID_RUN[jobs], "--jobs", str(jobs)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        lines: list[str] = []  # its output; a finished case's line: "[ 2/31] OK ..."
        second_case_done = threading.Event()

        def read() -> None:
            for line in process.stdout or []:
                lines.append(line)
                if sum(line.startswith("[") for line in lines) == 2:
                    # the next cases run in ms: hold the run still while the broker dies,
                    # so the kill lands after the 2nd case however loaded the machine is
                    os.kill(process.pid, signal.SIGSTOP)
                    second_case_done.set()

        reader = threading.Thread(target=read)
        reader.start()
        second_case_done.wait(timeout=60)
        broker.kill()
        killed = time.time()
        os.kill(process.pid, signal.SIGCONT)
        process.wait(timeout=120)
        reader.join(timeout=10)
        output = "".join(lines)
        index = tmp_path / "index.json"
    finally:
        broker.kill()
    entries = json.loads(index.read_text())["reference"]
    after = [e for e in entries.values() if "health probe" in e["reason"]]
    assert len(entries) >= 8 and len(after) >= 3, output[-3000:]
    for entry in after:
        assert entry["verdict"] == "ERROR" and entry["duration"] < 3.0
        assert entry["reason"].endswith(DEAD[jobs])
    assert "broker stopped answering at" in output
    assert time.time() - killed < 60
