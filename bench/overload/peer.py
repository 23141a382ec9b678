"""What the overload measurements share: amqp10 engine peers over non-blocking loopback
sockets driven by one selector loop, the broker's RSS, the load average and the report file.

Owns: client sockets it opens (closed by `Peer.close` / `Pump.close`), reports/bench/
overload-<name>.json. May touch: the amqp10 engine (a client `Connection` per peer) and
/proc/<pid>; nothing of the broker but its socket and its process id. Every wait is bounded
(`Pump.run_until` raises TimeoutError when its deadline passes).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.engine import Connection, Event, TransportClosed

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
REPORTS = ROOT / "reports" / "bench"
WAIT = 15.0  # seconds: the default bound on one wait


class Peer:
    """One client connection: a non-blocking socket and an amqp10 engine `Connection`.
    `on_event(event)` is called for every engine event (default: kept in `events`)."""

    def __init__(
        self,
        port: int,
        name: str = "overload-client",
        *,
        on_event: Callable[[Event], None] | None = None,
        **options: Any,
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.conn = Connection("client", name, **options)
        self.events: list[Event] = []
        self.on_event = on_event if on_event is not None else self.events.append
        self.out = bytearray()
        self.closed = False  # the socket ended (EOF or error)

    def flush(self, now: float) -> None:
        """Queue what the engine has to send and write as much as the socket takes."""
        if self.closed:
            return
        self.out += self.conn.data_to_send(now)
        if self.out:
            try:
                sent = self.sock.send(self.out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._ended(now)
                return
            del self.out[:sent]

    def read(self, now: float) -> None:
        try:
            chunk = self.sock.recv(1 << 18)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._ended(now)
            return
        self.conn.receive_data(chunk, now)
        self._dispatch()

    def _ended(self, now: float) -> None:
        if not self.closed:
            self.closed = True
            self.conn.receive_data(b"", now)
            self._dispatch()

    def _dispatch(self) -> None:
        on_event = self.on_event
        for event in self.conn.events():
            on_event(event)

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class Pump:
    """A selector loop over many peers. `run_until(done, timeout)` flushes every peer,
    reads what arrived and calls `tick()` (if given) until `done()` is true."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.peers: list[Peer] = []

    def add(self, peer: Peer) -> Peer:
        self.selector.register(peer.sock, selectors.EVENT_READ, peer)
        self.peers.append(peer)
        return peer

    def release(self, peer: Peer) -> None:
        """Stop pumping `peer`; its socket stays open (the caller closes it)."""
        self.peers.remove(peer)
        self.selector.unregister(peer.sock)

    def remove(self, peer: Peer) -> None:
        if peer in self.peers:
            self.peers.remove(peer)
            self.selector.unregister(peer.sock)
        peer.close()

    def step(self, wait: float = 0.01) -> None:
        now = time.monotonic()
        for peer in self.peers:
            peer.flush(now)
        for key, _ in self.selector.select(wait):
            key.data.read(time.monotonic())
        now = time.monotonic()
        for peer in self.peers:
            peer.flush(now)
            timer = peer.conn.get_timer()
            if timer is not None and now >= timer and not peer.closed:
                peer.conn.handle_timer(now)

    def run_until(
        self,
        done: Callable[[], bool],
        timeout: float = WAIT,
        what: str = "the broker",
        tick: Callable[[], None] | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not done within {timeout} s")
            if tick is not None:
                tick()
            self.step()

    def close(self) -> None:
        for peer in list(self.peers):
            self.remove(peer)
        self.selector.close()


def ended(peer: Peer) -> bool:
    return peer.closed or any(isinstance(e, TransportClosed) for e in peer.events)


def rss(pid: int) -> int:
    """Resident set size of process `pid` in bytes (/proc/PID/statm, field 2 * page size)."""
    with open(f"/proc/{pid}/statm", "rb") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def machine() -> dict[str, Any]:
    """Where and when: for the report, with the 1-minute load average (figures under load)."""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def write_report(name: str, result: dict[str, Any], out: str | os.PathLike[str] | None) -> str:
    """reports/bench/overload-<name>.json (or `out`, a directory); returns its path."""
    directory = pathlib.Path(out) if out is not None else REPORTS
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"overload-{name}.json"
    path.write_text(json.dumps({**machine(), **result}, indent=2, default=str) + "\n")
    return str(path)


def exit_status(ok: bool, failed: str = "FAILED") -> int:
    """Prints the run's verdict line ("OK", or `failed`) and returns its exit status (0 or 1)."""
    print("OK" if ok else failed)
    return 0 if ok else 1
