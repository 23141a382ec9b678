"""The probe's wire: one TCP connection to the broker, the engine on it, and its recording.

Owns: `ProbeWire` (connect, the byte pump: every byte both ways recorded and given to the
connection monitor, crafted frames through the engine or as raw bytes, pipelined holding,
engine timers, the bounded poll every wait is made of, trace positions and what the broker
did since one), `WaitTimeout` and `DEFAULT_WAIT`. The other probe modules build on it
(`waits.py`, `connection.py`, `links.py`, `transfers.py`; `client.Probe` is all of them).
Builds frames only through `amqp10`; touches its socket and nothing else.
"""

from __future__ import annotations

import itertools
import select
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from amqpspec.amqp10.builder import build_frame, sasl_frame
from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.engine import (
    Connection,
    Event,
    Link,
    Session,
)
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, ProtocolHeader
from amqpspec.amqp10.monitor import TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.conformance.probe.observed import broker_did
from amqpspec.conformance.probe.recording import Chunk, Recording, broker_monitor
from amqpspec.conformance.verdicts import CaseFailed, HarnessError

DEFAULT_WAIT = 5.0
DRAIN_S = 0.01  # a pump with no time to wait still reads what is readable this long
_connection_ids = itertools.count(1)
_observations = itertools.count(1)  # orders Probe.last_observed across a case's probes


class WaitTimeout(CaseFailed):
    """The broker did not do what we waited for within the bound (the message says what
    it did instead: `Probe.observed`)."""


class ProbeWire:
    """One client connection to the broker under test: its socket, engine and recording.

    Created connected (TCP) but not opened; `open()` / `open_session()` start the AMQP
    layer on the engine. `deadline` (monotonic seconds) caps every wait of the case.
    `pipelined`: hold what the case sends after SASL until its first wait (one write).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        username: str | None = None,
        password: str | None = None,
        sasl_mechanism: str | None = "PLAIN",
        hostname: str | None = None,
        wait: float = DEFAULT_WAIT,
        deadline: float | None = None,
        connect_timeout: float = 5.0,
        pipelined: bool = False,
    ) -> None:
        self.host, self.port = host, port
        self.username, self.password = username, password
        self.sasl_mechanism = sasl_mechanism
        self.hostname = hostname or host
        self.wait = wait
        self.deadline = deadline
        self.recording = Recording(next(_connection_ids))
        self.monitor = broker_monitor(self.recording)
        self.conn: Connection | None = None
        self.inbox: list[Event] = []  # engine events not yet taken by a wait
        self.closed = False  # the socket is closed (by either side)
        self.peer_closed = False  # the broker closed the TCP stream
        self._frame_cursor = 0
        self.pipelined = pipelined
        self._holding = False  # pipelined: writes wait in _held for the first wait
        self._held = bytearray()
        # (order, "observed ...") of the last graded outcome (error_outcome, header_answer)
        self.last_observed: tuple[int, str] | None = None
        try:
            self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            raise HarnessError(f"cannot connect to {host}:{port}: {exc}") from exc
        try:  # a broker that exits as it accepts resets the socket before we look at it
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock.setblocking(False)
            local, remote = self.sock.getsockname(), self.sock.getpeername()
        except OSError as exc:
            self.sock.close()
            raise HarnessError(f"{host}:{port} reset the connection at once: {exc}") from exc
        self.recording.client = f"{local[0]}:{local[1]}"
        self.recording.server = f"{remote[0]}:{remote[1]}"
        self.recording.start = time.time()

    def _record(self, direction: str, data: bytes) -> None:
        now = time.time()
        self.recording.chunks.append(Chunk(direction, data, now))
        self.recording.add(self.monitor.feed(direction, data, now))

    def _end_recording(self) -> None:
        """The connection is over: the undecoded tail and the end-of-trace rules (at the
        time of the last bytes, as before the monitor: the wait for EOF is not silence)."""
        self.recording.end = time.time()
        self.recording.add(self.monitor.finish())

    @property
    def violations(self) -> list[Violation]:
        """The checker's findings against the broker so far."""
        return self.recording.violations

    def server_frames(self, name: str | None = None) -> list[Frame]:
        """Every frame the broker sent so far (optionally only those named `name`)."""
        return [
            t.item
            for t in self.recording.items
            if t.direction == SERVER
            and isinstance(t.item, Frame)
            and (name is None or t.item.name == name)
        ]

    def item_index(self, frame: Frame) -> int:
        for trace_item in self.recording.items:
            if trace_item.item is frame:
                return trace_item.index
        return -1

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (after anything the engine has queued), recorded; the
        engine's state does not change (for headers and bytes that are no performative)."""
        if self.conn is not None:
            self.conn.send_raw(data)
            self.flush()
        else:
            self._send_bytes(data)

    def send_frame(
        self, performative: Any, channel: int = 0, payload: bytes = b"", **crafted: Any
    ) -> Session | Link | None:
        """A crafted performative through the engine, which records it as sent (its
        session and link state follow the wire): `crafted` are `send_performative`'s
        `raw=` (the exact bytes, e.g. from `amqp10.builder.mutate`) and `strict=False`
        (what the tables refuse is written anyway, without a state change: a deliberate
        violation), and `flush=False` queues the frame (a burst goes out at the next
        flush). A probe with no engine (`raw_handshake`) sends the frame's bytes, built by
        `amqp10.builder`. Returns the Session or Link the engine recorded it on."""
        flush = crafted.pop("flush", True)
        if self.conn is None:
            raw = crafted.get("raw")
            if raw is None:
                is_sasl = str(getattr(performative, "NAME", "")).startswith("sasl-")
                raw = (
                    sasl_frame(performative)
                    if is_sasl
                    else build_frame(performative, channel, payload=payload)
                )
            self._send_bytes(raw)
            return None
        endpoint = self.conn.send_performative(performative, channel, payload, **crafted)
        if flush:
            self.flush()
        return endpoint

    def send_header(self, header: ProtocolHeader = AMQP_HEADER) -> None:
        self.send_raw(header.encode())

    def _send_bytes(self, data: bytes) -> None:
        if not data or self.closed:
            return
        if self._holding:
            self._held += data
            return
        view = memoryview(data)
        end = time.monotonic() + self.wait
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._on_eof()
                return
            if sent:
                self._record(CLIENT, bytes(view[:sent]))
                view = view[sent:]
            elif time.monotonic() > end:
                raise WaitTimeout(
                    f"expected the broker to read our {len(view)} bytes within {self.wait}s; "
                    f"{self.observed(0)}"
                )
            else:
                select.select([], [self.sock], [], 0.05)

    def flush(self) -> None:
        if self.conn is not None and not self.closed:
            self._send_bytes(self.conn.data_to_send(time.monotonic()))

    def _on_eof(self) -> None:
        if self.closed:
            return
        self.closed = self.peer_closed = True
        self._end_recording()
        if self.conn is not None:
            self.conn.receive_data(b"", time.monotonic())
            self._collect_events()
        try:
            self.sock.close()
        except OSError:
            pass

    def release(self) -> None:
        """Pipelined: write everything held so far in one write and stop holding (the case
        now waits for the broker, so what follows may depend on its replies)."""
        if not self._holding:
            return
        self._holding = False
        if self.conn is not None:
            self._held += self.conn.data_to_send(time.monotonic())
        held, self._held = bytes(self._held), bytearray()
        self._send_bytes(held)

    def _hold(self) -> None:
        """Pipelined: from here on writes wait for the case's first wait."""
        self._holding = self.pipelined

    def pump(self, timeout: float) -> bool:
        """Flush, then read whatever arrives within `timeout`; True if anything did.
        A pump is a wait: a pipelined probe's held frames go out first (`release`)."""
        self.release()
        return self._exchange(timeout)

    def _exchange(self, timeout: float) -> bool:
        self.flush()
        if self.closed:
            return False
        timeout = max(0.0, min(timeout, self._left()))
        if timeout > 0:  # a wait; a pump of 0 only reads what is there (the socket does
            # not block: a read with nothing to read raises at once, one call not two)
            readable, _, _ = select.select([self.sock], [], [], timeout)
            if not readable:
                return self._after_read(False)
        # what is readable is read until `timeout`, or DRAIN_S past it for a timeout of 0:
        # a broker that never stops sending (a storm of frames) ends the read there, not
        # the wait (it read on for minutes and gigabytes, none of the caller's bounds held)
        stop = time.monotonic() + max(timeout, DRAIN_S)
        got = False
        while True:
            try:
                data = self.sock.recv(262144)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                self._on_eof()
                return True
            got = True
            self._record(SERVER, data)
            if self.conn is not None:
                self.conn.receive_data(data, time.monotonic())
            if time.monotonic() >= stop:
                break
        return self._after_read(got)

    def _after_read(self, got: bool) -> bool:
        if self.conn is not None:
            self._run_timer()
            self._collect_events()
            self.flush()
        return got

    def _run_timer(self) -> None:
        assert self.conn is not None
        timer = self.conn.get_timer()
        if timer is not None and time.monotonic() >= timer:
            self.conn.handle_timer(time.monotonic())

    def _collect_events(self) -> None:
        assert self.conn is not None
        self.inbox.extend(self.conn.events())

    def _left(self) -> float:
        if self.deadline is None:
            return 3600.0
        return max(0.0, self.deadline - time.monotonic())

    def _poll(self, find: Callable[[], Any], timeout: float, *, release: bool = True) -> Any:
        """Pump until find() returns something other than None (returned), the connection
        closes or `timeout` (bounded by the deadline) passes (then None). `release=False`:
        a wait inside a pipelined step (SASL) that leaves held frames held."""
        end = time.monotonic() + min(timeout, self._left())
        while True:
            found = find()
            if found is not None:
                return found
            left = end - time.monotonic()
            if left <= 0 or self.closed:
                return None
            if release:
                self.pump(min(left, 0.5))
            else:
                self._exchange(min(left, 0.5))

    def mark(self) -> int:
        """Trace position now: pass as `since=` to look only at later frames."""
        return len(self.recording.items)

    def _observation(self, since: int) -> None:
        """Remember what the broker did after `since` for the outcome just graded (the
        reason of `CaseContext.outcome` quotes the newest of a case's probes)."""
        self.last_observed = (next(_observations), self.observed(since))

    def observed(self, since: int = 0) -> str:
        """What the broker did after trace position `since`, in a line ("observed ...":
        the frame that ended something, the TCP close, or its last frame and the silence
        after it; `observed.broker_did`)."""
        return "observed " + broker_did(self.recording, since, closed=self.peer_closed)

    def frames_since(self, since: int, name: str | None = None) -> Iterable[TraceItem]:
        for trace_item in self.recording.items[since:]:
            frame = trace_item.item
            wanted = isinstance(frame, Frame) and (name is None or frame.name == name)
            if trace_item.direction == SERVER and wanted:
                yield trace_item

    def _ended_from(self, since: int) -> int:
        """A trace position from which `observed` finds the broker's end, detach or close
        that ended a wait (it may have arrived before the wait began)."""
        for position in range(len(self.recording.items) - 1, -1, -1):
            item = self.recording.items[position]
            ended = isinstance(item.item, Frame) and item.item.name in ("close", "end", "detach")
            if item.direction == SERVER and ended:
                return position
        return since

    def _unique(self) -> int:
        self._counter = getattr(self, "_counter", 0) + 1
        return self._counter
