"""The reference broker as a subprocess (`python -m reference_broker`), for tests that must
kill it (SIGKILL durability) or run it exactly as users do (command-line options).

Owns: starting it on a free port chosen by the broker (`--port 0`, no admin API unless
options say otherwise), reading the port from its one ready line within a bounded wait,
draining its log so a full pipe never blocks it, and stopping it (SIGTERM, then SIGKILL)
or killing it outright.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time

READY = "ready on 127.0.0.1:"


class BrokerProcess:
    def __init__(self, *options: str, wait: float = 15.0) -> None:
        self.wait = wait
        argv = [sys.executable, "-m", "reference_broker", "--port", "0", "--admin-port", "-1"]
        self.proc = subprocess.Popen(
            [*argv, *options],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.port = self._wait_ready()
        threading.Thread(target=self._drain, daemon=True).start()

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def _wait_ready(self) -> int:
        deadline = time.monotonic() + self.wait
        stderr = self.proc.stderr
        assert stderr is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([stderr], [], [], deadline - time.monotonic())
            if not ready:
                break
            line = stderr.readline()
            if not line:
                break
            if READY in line:
                return int(line.rsplit(READY, 1)[1].split()[0])
        self.kill()
        raise AssertionError(f"the broker did not start within {self.wait} s")

    def _drain(self) -> None:
        stderr = self.proc.stderr
        if stderr is not None:
            for _ in stderr:
                pass

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), SIGKILL if it does not exit in time."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.wait)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """SIGKILL: no shutdown work at all (what `kill -9` does)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(self.wait)
