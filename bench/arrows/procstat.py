"""CPU and memory of a process under test, read from /proc (Linux).

Owns: `pid_listening_on(port)` (the process with a TCP socket listening on 127.0.0.1:port
or any address) and `ProcessSampler` (a thread reading /proc/PID/stat and status every
`interval` seconds: CPU seconds used, resident memory). Touches only /proc.
"""

from __future__ import annotations

import os
import pathlib
import threading
import time

TICKS = os.sysconf("SC_CLK_TCK")


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = pathlib.Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def pid_listening_on(port: int) -> int | None:
    """The pid owning a socket that listens on `port`, None if nothing (visible) does."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    return int(entry.name)
        except OSError:
            continue
    return None


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (its threads included), in seconds."""
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_bytes(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class ProcessSampler:
    """Samples (time, cpu seconds, rss bytes) of `pid` from start() to stop()."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        try:
            self.samples.append((time.monotonic(), cpu_seconds(self.pid), rss_bytes(self.pid)))
        except (OSError, ValueError, IndexError):
            pass

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> ProcessSampler:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> dict:
        """{pid, cpu_seconds, wall_seconds, cpu_percent, rss_peak_bytes, rss_end_bytes}."""
        self._stop.set()
        self._thread.join(5)
        self._sample()
        if len(self.samples) < 2:
            return {"pid": self.pid}
        (t0, c0, _), (t1, c1, r1) = self.samples[0], self.samples[-1]
        return {
            "pid": self.pid,
            "cpu_seconds": round(c1 - c0, 3),
            "wall_seconds": round(t1 - t0, 3),
            "cpu_percent": round(100 * (c1 - c0) / (t1 - t0), 1) if t1 > t0 else None,
            "rss_peak_bytes": max(s[2] for s in self.samples),
            "rss_end_bytes": r1,
        }
