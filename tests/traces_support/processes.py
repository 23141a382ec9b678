"""Start and stop the processes the traces tests need, with bounded waits: the proton
peer broker, `amqpspec capture`, and proton clients."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from amqpspec.reference_broker.runtime.process import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable


def wait_for_line(process: subprocess.Popen, prefix: str, timeout: float) -> list[str]:
    """Read stdout lines until one starts with `prefix`; fail after `timeout` seconds."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    buffer = b""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    try:
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                text = line.decode(errors="replace")
                lines.append(text)
                if text.startswith(prefix):
                    return lines
    finally:
        selector.close()
    stop(process)
    raise AssertionError(f"no line starting with {prefix!r} within {timeout}s; got {lines!r}")


def stop(process: subprocess.Popen, signum: int = signal.SIGTERM, timeout: float = 15) -> int:
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    return process.returncode


def start_proton_broker(port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [PYTHON, os.path.join(HERE, "proton_broker.py"), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    wait_for_line(process, "ready", 20)
    return process


@dataclass
class Capture:
    process: subprocess.Popen
    port: int
    out: str
    trace_id: str
    lines: list[str] = field(default_factory=list)

    @property
    def pcap(self) -> str:
        return os.path.join(self.out, f"{self.trace_id}.pcap")

    @property
    def parquet(self) -> str:
        return os.path.join(self.out, f"{self.trace_id}.parquet")

    @property
    def index(self) -> str:
        return os.path.join(self.out, f"{self.trace_id}.connections.json")

    def stop(self, signum: int = signal.SIGTERM) -> int:
        return stop(self.process, signum)


def start_capture(upstream_port: int, out: str, trace_id: str = "t") -> Capture:
    port = free_port()
    process = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "amqpspec.cli",
            "capture",
            "--listen",
            f"127.0.0.1:{port}",
            "--upstream",
            f"127.0.0.1:{upstream_port}",
            "--out",
            out,
            "--trace-id",
            trace_id,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines = wait_for_line(process, "listening on", 20)
    return Capture(process, port, out, trace_id, lines)


def run_proton_client(
    role: str, port: int, address: str, count: int, *extra: str, timeout: float = 60
) -> tuple[str, str]:
    """Run a proton client with PN_TRACE_FRM=1; returns (stdout, stderr frame log)."""
    env = dict(os.environ, PN_TRACE_FRM="1")
    result = subprocess.run(
        [
            PYTHON,
            os.path.join(HERE, "proton_clients.py"),
            role,
            f"127.0.0.1:{port}",
            address,
            str(count),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    return result.stdout, result.stderr
