"""The reference broker as a subprocess (`python -m amqpspec.reference_broker`), and the tree's one
`free_port`.

Owns: starting the broker exactly as users do (command-line options), on ports it binds
itself (`--port 0`, `--admin-port 0`: no race for a port) and reads back from its one
ready line within a bounded wait; draining its log (to a file, or keeping the last lines
for error messages) so a full pipe never blocks it; with `temp_data_dir`, a `--data-dir`
of its own (a temporary directory removed when it ends: what a restart reloads); stopping
it (SIGTERM, then SIGKILL, both bounded) or killing it outright. Used by the tests, the
conformance fault matrix and the benchmarks. May touch: nothing of the broker but its command line.

    with BrokerProcess(faults=["no-echo"], admin=True, idle_timeout=10) as broker:
        broker.url, broker.admin_url, broker.port, broker.admin_port
"""

from __future__ import annotations

import collections
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Collection, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # where the `reference_broker` package is
# server.py's ready line: "... ready on HOST:PORT (admin HOST:PORT)" or "(no admin)"
_READY = re.compile(r"ready on (?P<host>\S+):(?P<port>\d+) \((?:admin \S+:(?P<admin>\d+))?")
# with --ws-port (wss:// with --ws-tls)
_WS_READY = re.compile(r"(?P<scheme>wss?)://[^\s:]+:(?P<port>\d+)(?P<path>/[^\s,)]*)")


def free_port(avoid: Collection[int] = (), host: str = "127.0.0.1") -> int:
    """A TCP port nothing is bound to right now (bound, then released: another process may
    still take it first, so prefer letting a program bind port 0 and report it)."""
    while True:
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
        if port not in avoid:
            return port


class BrokerProcess:
    """`python -m amqpspec.reference_broker` with `options`, `faults`, the admin API if `admin`,
    `--idle-timeout` if given; ready (both ports known) when the constructor returns, or
    killed and AssertionError within `wait` seconds. `log`: a file for its output. It logs
    at info (the ready line is an info line): leave --log-level out of `options`."""

    def __init__(
        self,
        *options: str,
        faults: Iterable[str] = (),
        admin: bool = False,
        idle_timeout: float | None = None,
        log: str | os.PathLike[str] | None = None,
        wait: float = 60.0,  # a bound for a loaded 2-core machine; it starts in ~1 s when quiet
        python_options: Iterable[str] = (),
        temp_data_dir: bool = False,
    ) -> None:
        self.wait = wait
        self._data = tempfile.TemporaryDirectory(prefix="amqpspec-") if temp_data_dir else None
        # python_options: e.g. ("-m", "cProfile", "-o", PATH) to profile the broker
        argv = [sys.executable, *python_options, "-m", "amqpspec.reference_broker", "--port", "0"]
        argv += ["--admin-port", "0" if admin else "-1", "--log-level", "info"]
        if idle_timeout is not None:
            argv += ["--idle-timeout", str(idle_timeout)]
        for fault in faults:
            argv += ["--fault", fault]
        if self._data is not None:
            argv += ["--data-dir", self._data.name]
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
        self.proc = subprocess.Popen(
            [*argv, *options], stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT
        )
        self.tail: collections.deque[str] = collections.deque(maxlen=50)  # its last lines
        self._log = open(log, "w", encoding="utf-8") if log is not None else None  # noqa: SIM115
        self._ready = threading.Event()
        self._ports: tuple[int, int | None] | None = None
        self.ws_port: int | None = None  # with --ws-port in `options` (websocket.py)
        self.ws_path = "/"
        self.ws_scheme = "ws"
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        self.port, self.admin_port = self._wait_ready()

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        """AMQP over WebSocket (started with `--ws-port 0`; wss:// with `--ws-tls`)."""
        assert self.ws_port is not None, "the broker was started without --ws-port"
        return f"{self.ws_scheme}://127.0.0.1:{self.ws_port}{self.ws_path}"

    @property
    def admin_url(self) -> str:
        """The admin API with the default user (guest:guest)."""
        return f"http://guest:guest@127.0.0.1:{self.admin_port}"

    def _line(self, line: str) -> None:
        self.tail.append(line)
        if self._log is not None:
            self._log.write(line)
            self._log.flush()

    def _wait_ready(self) -> tuple[int, int | None]:
        """The ports of the ready line, which the drainer reads (one reader: a select on
        the pipe after a buffered readline misses lines already in the buffer, e.g. the
        ready line written together with the faults' warning)."""
        if self._ready.wait(self.wait) and self._ports is not None:
            return self._ports
        self.kill()
        lines = "".join(self.tail)[-2000:]
        raise AssertionError(f"the reference broker did not start within {self.wait} s:\n{lines}")

    def _drain(self) -> None:
        stderr = self.proc.stderr
        if stderr is not None:
            for line in stderr:
                self._line(line)
                found = _READY.search(line) if self._ports is None else None
                if found:
                    admin = found.group("admin")
                    self._ports = int(found.group("port")), int(admin) if admin else None
                    ws = _WS_READY.search(line)
                    if ws is not None:
                        self.ws_port, self.ws_path = int(ws.group("port")), ws.group("path")
                        self.ws_scheme = ws.group("scheme")
                    self._ready.set()
        self._ready.set()  # the end of its output: it will not get ready

    def _finish(self) -> int:
        drainer = getattr(self, "_drainer", None)  # None: it never got ready
        if drainer is not None:
            drainer.join(self.wait)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._data is not None:
            self._data.cleanup()
            self._data = None
        return self.proc.returncode

    def stop(self) -> int:
        """SIGTERM (a clean shutdown), SIGKILL if it does not exit in time; its exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(self.wait)
        return self._finish()

    def kill(self) -> int:
        """SIGKILL: no shutdown work at all (what `kill -9` does)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(self.wait)
        return self._finish()

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
