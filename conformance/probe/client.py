"""The probe client: a frame-level AMQP 1.0 client on the `amqp10` engine over a real socket.

Owns: `Probe` (one TCP connection: blocking socket, every wait bounded by a per-wait
timeout and by the case's deadline), its recording (every byte both directions, given to
an `amqp10.monitor.ConnectionMonitor` as it crosses: timestamped TraceItems and the
broker's violations, kept in a `Recording`), and helpers for the cases: open/begin/attach,
grant credit, send and settle messages, wait for events or frames, and send crafted frames
(negative cases) through the engine, which records them as sent so its state follows the
wire (`Connection.send_performative`), or as bytes (`send_raw`: headers, malformed frames,
and every frame of a probe with no engine, after `raw_handshake`). Pipelined
(`pipelined=True`): after SASL, nothing is written until the case's first
wait, so every frame up to the first one that needs a reply goes out in one write (open,
begin, attach and the case's crafted frames), as clients that pipeline do (2.4.1, 2.5.1);
open() and begin() then return without waiting for the broker's open and begin. Builds
frames only through `amqp10` (builder, composites, Message). Touches nothing else; the
runner owns traces on disk.
"""

from __future__ import annotations

import itertools
import os
import select
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from amqpspec.amqp10.builder import build_frame, sasl_frame
from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.composites import Accepted, Attach, Error, Source, Target
from amqpspec.amqp10.engine import (
    ClientSasl,
    Connection,
    DispositionReceived,
    Event,
    FlowReceived,
    Link,
    ProtocolErrorRaised,
    RemoteAttach,
    RemoteBegin,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    RemoteOpen,
    SaslOutcomeReceived,
    Session,
    TransferReceived,
    TransportClosed,
)
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER, Frame, ProtocolHeader
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.monitor import TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.probe.observed import broker_did
from amqpspec.conformance.probe.recording import Chunk, Recording, broker_monitor
from amqpspec.conformance.verdicts import CaseFailed, HarnessError, NoDelivery, Unanswered

DEFAULT_WAIT = 5.0
_connection_ids = itertools.count(1)
_observations = itertools.count(1)  # orders Probe.last_observed across a case's probes


class WaitTimeout(CaseFailed):
    """The broker did not do what we waited for within the bound (the message says what
    it did instead: `Probe.observed`)."""


# engine events by the broker frame behind them (a wait's failure names the frame)
EVENT_NAMES = {
    "RemoteOpen": "open",
    "RemoteBegin": "begin",
    "RemoteAttach": "attach",
    "RemoteDetach": "detach",
    "RemoteEnd": "end",
    "RemoteClose": "close",
    "FlowReceived": "flow",
    "TransferReceived": "transfer",
    "DispositionReceived": "disposition",
    "SaslOutcomeReceived": "sasl-outcome",
}


# 2.7.5 transfer rcv-settle-mode: "If first, this indicates that the Receiver MUST settle
# the delivery once it has arrived without waiting for the Sender to settle first."
SETTLE_FIRST = "2.7.5/transfer.rcv-settle-mode.1"


def _settles_first(link: Link) -> bool:
    """The broker, the receiver of our sender `link`, agreed to rcv-settle-mode first (the
    default)."""
    attach = link.remote_attach
    mode = attach.rcv_settle_mode if attach is not None else None
    return mode is None or int(mode) == 0


def _article(label: str) -> str:
    """`a flow`, `an attach`, `the ...` (a wait's label in its failure)."""
    if label.startswith(("a ", "an ", "the ", "no ")) or label[:1].isupper():
        return label
    return ("an " if label[:1] in "aeiou" else "a ") + label


class Probe:
    """One client connection to the broker under test.

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

    # --- recording ----------------------------------------------------------------------
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

    # --- raw I/O ------------------------------------------------------------------------
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
        readable, _, _ = select.select([self.sock], [], [], timeout)
        got = False
        while readable:
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
            readable, _, _ = select.select([self.sock], [], [], 0)
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

    # --- waits --------------------------------------------------------------------------
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

    def expect(
        self, predicate: Callable[[Event], bool], timeout: float | None = None, what: str = ""
    ) -> Event:
        """Take the first event matching `predicate` (already received or arriving within
        `timeout`); WaitTimeout otherwise."""
        timeout = self.wait if timeout is None else timeout

        def take() -> Event | None:
            for index, event in enumerate(self.inbox):
                if predicate(event):
                    return self.inbox.pop(index)
            return None

        since = self.mark()
        event = self._poll(take, timeout)
        if event is None:
            label = what or getattr(predicate, "__name__", "event")
            raise WaitTimeout(
                f"expected {_article(label)} within {timeout:g}s; {self.observed(since)}"
            )
        return event

    def expect_type(self, event_type: type, timeout: float | None = None, **fields: Any) -> Any:
        def match(event: Event) -> bool:
            return isinstance(event, event_type) and all(
                getattr(event, k) == v for k, v in fields.items()
            )

        return self.expect(
            match, timeout, EVENT_NAMES.get(event_type.__name__, event_type.__name__)
        )

    def _answer(
        self, predicate: Callable[[Event], bool], timeout: float | None, what: str
    ) -> Event:
        """`expect` for an answer a step needs (the broker's open, begin, attach, detach,
        end): without it the case cannot go on (`Unanswered`, UNSUPPORTED)."""
        try:
            return self.expect(predicate, timeout, what)
        except WaitTimeout as exc:
            raise Unanswered(str(exc)) from exc

    def wait_for_frame(
        self,
        name: str,
        timeout: float | None = None,
        predicate: Callable[[Frame], bool] | None = None,
        since: int | None = None,
    ) -> Frame:
        """The next broker frame named `name` (after the last one a wait returned, or
        after trace position `since`) matching `predicate`."""
        timeout = self.wait if timeout is None else timeout
        start = self._frame_cursor if since is None else since

        def take() -> Frame | None:
            items = self.recording.items
            for position in range(start, len(items)):
                trace_item = items[position]
                frame = trace_item.item
                if (
                    trace_item.direction == SERVER
                    and isinstance(frame, Frame)
                    and frame.name == name
                    and (predicate is None or predicate(frame))
                ):
                    self._frame_cursor = position + 1
                    return frame
            return None

        waited_from = self.mark()
        frame = self._poll(take, timeout)
        if frame is None:
            what = f"{_article(name)} frame" + (" of the kind the case needs" if predicate else "")
            raise WaitTimeout(
                f"expected {what} within {timeout:g}s; {self.observed(min(start, waited_from))}"
            )
        return frame

    def first_frame(self, since: int, timeout: float | None = None) -> Frame | None:
        """The broker's first AMQP frame (SASL frames skipped) after trace position `since`
        (waiting up to `timeout`), or None when none came."""
        timeout = self.wait if timeout is None else timeout

        def first() -> Frame | None:
            frames = (t.item for t in self.frames_since(since))
            return next((f for f in frames if not str(f.name).startswith("sasl-")), None)

        return self._poll(first, timeout)

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

    def idle(self, seconds: float) -> None:
        """Keep the connection serviced for `seconds` (bounded by the deadline)."""
        end = time.monotonic() + min(seconds, self._left())
        while not self.closed and (left := end - time.monotonic()) > 0:
            self.pump(min(left, 0.2))

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait for the broker to close the TCP stream; True if it did."""
        timeout = self.wait if timeout is None else timeout
        return self._poll(lambda: True if self.closed else None, timeout) is not None

    def error_outcome(self, timeout: float | None = None, since: int = 0) -> str:
        """Wait for the broker to end something and name it: 'close:<condition>',
        'end:<condition>', 'detach:<condition>' (condition 'none' without error),
        'tcp-close', or 'timeout'. Looks at broker items after position `since`."""
        timeout = self.wait if timeout is None else timeout
        found = self._poll(lambda: self._ending_after(since), timeout)
        self._observation(since)
        return found or self._gone_or_timeout()

    def _ending_after(self, since: int) -> str | None:
        for trace_item in self.recording.items[since:]:
            if trace_item.direction != SERVER:
                continue
            item = trace_item.item
            if isinstance(item, Frame) and item.name in ("close", "end", "detach"):
                error = item.performative.error
                if item.name == "detach" and error is None:
                    continue
                condition = str(error.condition) if error is not None else "none"
                return f"{item.name}:{condition}"
        return None

    def header_answer(self, timeout: float | None = None, since: int = 0) -> str:
        """After sending a protocol header: the broker's header ('header:0.1.0.0'),
        'tcp-close' or 'timeout'."""
        timeout = self.wait if timeout is None else timeout

        def answer() -> str | None:
            for trace_item in self.recording.items[since:]:
                header = trace_item.item
                if trace_item.direction == SERVER and isinstance(header, ProtocolHeader):
                    return (
                        f"header:{header.protocol_id}.{header.major}."
                        f"{header.minor}.{header.revision}"
                    )
            return None

        found = self._poll(answer, timeout)
        self._observation(since)
        return found or self._gone_or_timeout()

    def _gone_or_timeout(self) -> str:
        """What a wait that found nothing saw: 'tcp-close' or 'timeout'."""
        return "tcp-close" if self.closed else "timeout"

    def raw_handshake(self, sasl: bool = True) -> None:
        """Without an engine: protocol headers and SASL (ANONYMOUS or PLAIN) frame by frame,
        up to the point where our open is due; the case then sends its own (crafted) open
        and frames as bytes (`send_frame` builds them, nothing keeps state)."""
        if self.conn is not None:
            raise HarnessError("raw_handshake() on a probe whose engine is running")
        if sasl and self.sasl_mechanism:
            self.send_header(SASL_HEADER)
            self.wait_for_frame("sasl-mechanisms")
            init = ClientSasl(
                self.sasl_mechanism,
                self.username or "",
                self.password or "",
                hostname=self.hostname,
            ).init_for(tuple(str(m) for m in self._offered()))
            self.send_frame(init)
            outcome = self.wait_for_frame("sasl-outcome")
            if outcome.performative.code != 0:
                raise HarnessError(f"SASL refused (code {outcome.performative.code})")
        since = self.mark()
        self._hold()
        self.send_header(AMQP_HEADER)
        if not self.pipelined:
            self.header_answer(since=since)

    def _offered(self) -> list[str]:
        mechanisms = self.server_frames("sasl-mechanisms")[-1].performative.sasl_server_mechanisms
        return list(mechanisms) if isinstance(mechanisms, list | tuple) else [mechanisms]

    # --- connection ---------------------------------------------------------------------
    def open(
        self,
        *,
        max_frame_size: int = 65536,
        channel_max: int = 65535,
        idle_timeout_ms: int | None = None,
        sasl: bool = True,
        container_id: str | None = None,
        wait_open: bool = True,
        desired_capabilities: list[str] | None = None,
        properties: dict[Any, Any] | None = None,
    ) -> RemoteOpen | None:
        """Start the engine: headers, SASL (when `sasl` and the profile says so), open (with
        `desired_capabilities` and connection `properties` when given, 2.7.1); waits for
        the broker's open unless `wait_open` is False."""
        if self.conn is not None:
            raise HarnessError("probe already opened")
        client_sasl = None
        if sasl and self.sasl_mechanism:
            client_sasl = ClientSasl(
                self.sasl_mechanism,
                self.username or "",
                self.password or "",
                hostname=self.hostname,
            )
        self.conn = Connection(
            "client",
            # unique per process too: a broker that steals links by (container-id, link name)
            # (2.6.1) must not see two concurrent runs or --jobs workers as one container
            container_id or f"amqpspec-probe-{os.getpid()}-{self.recording.connection_id}",
            hostname=self.hostname,
            max_frame_size=max_frame_size,
            channel_max=channel_max,
            idle_timeout_ms=idle_timeout_ms,
            sasl=client_sasl,
            record_transitions=True,
            desired_capabilities=desired_capabilities,
            properties=properties,
        )
        assert self.conn.transitions is not None
        self.recording.transitions = self.conn.transitions  # filled as the engine goes
        if self.pipelined:
            return self._open_pipelined()
        self.conn.open()
        self.flush()
        if not wait_open:
            return None
        return self._answer(lambda e: isinstance(e, RemoteOpen), None, "open")

    def _open_pipelined(self) -> None:
        """SASL as usual (its frames depend on the broker's), then hold: header and open
        wait for the case's first wait with whatever the case sends next."""
        assert self.conn is not None
        if self.conn.sasl is None:
            self._hold()
        else:
            self.conn.add_observer(self._hold_after_sasl)
        self.conn.open()
        self.flush()
        if self.conn.sasl is not None:
            done = self._poll(lambda: self.conn.sasl_outcome, self.wait, release=False)
            if done is None:
                raise WaitTimeout(
                    f"expected a sasl-outcome within {self.wait:g}s; {self.observed(0)}"
                )
        return None

    def _hold_after_sasl(self, event: Event) -> None:
        if isinstance(event, SaslOutcomeReceived):
            self._hold()  # before the engine queues the AMQP header and open

    def begin(
        self,
        incoming_window: int = 2048,
        outgoing_window: int = 2048,
        *,
        wait: bool = True,
        **kw: Any,
    ) -> Session:
        """Begin a session (opening the connection first if needed) and wait for the
        broker's begin unless `wait` is False."""
        if self.conn is None:
            self.open()
        assert self.conn is not None
        session = self.conn.begin(incoming_window, outgoing_window, **kw)
        self.flush()
        if not wait or (self.pipelined and self._holding):
            return session  # the broker's begin is taken by the first wait that needs it
        self._answer(lambda e: isinstance(e, RemoteBegin) and e.session is session, None, "begin")
        return session

    def open_session(self, **kw: Any) -> Session:
        """Open the connection if needed and begin a session (waits for the broker's begin)."""
        return self.begin(**kw)

    def close(self, error: Error | str | None = None, wait: bool = True) -> None:
        """Close the connection cleanly (waits for the broker's close, then the socket)."""
        if self.closed:
            return
        if self.conn is None:
            self.disconnect()
            return
        self.conn.close(error)
        self.flush()
        if wait:
            try:
                self.expect_type(RemoteClose, timeout=min(self.wait, 3.0))
            except CaseFailed:
                pass
        self.disconnect()

    def disconnect(self) -> None:
        """Drop the TCP connection at once (no close frame)."""
        if self.closed:
            return
        self.release()  # a pipelined probe's held frames go out first, as written
        self.closed = True
        self._end_recording()
        try:
            self.sock.close()
        except OSError:
            pass

    # --- links --------------------------------------------------------------------------
    def attach_receiver(
        self,
        session: Session,
        address: str | Source | None,
        *,
        credit: int = 0,
        name: str | None = None,
        wait: bool = True,
        **attach_fields: Any,
    ) -> Link:
        """Attach a receiving link from `address`; grant `credit` once attached."""
        source = Source(address=address) if isinstance(address, str) else address
        link = session.attach_receiver(
            name or f"recv-{self._unique()}", source, Target(), **attach_fields
        )
        self.flush()
        if wait:
            self.wait_attached(link)
            if credit:
                self.grant(link, credit)
        return link

    def attach_sender(
        self,
        session: Session,
        address: str | Target | None,
        *,
        name: str | None = None,
        wait: bool = True,
        **attach_fields: Any,
    ) -> Link:
        target = Target(address=address) if isinstance(address, str) else address
        link = session.attach_sender(
            name or f"send-{self._unique()}", Source(), target, **attach_fields
        )
        self.flush()
        if wait:
            self.wait_attached(link)
        return link

    def wait_attached(self, link: Link, timeout: float | None = None) -> Attach:
        event = self._answer(
            lambda e: isinstance(e, RemoteAttach) and e.link is link, timeout, "attach"
        )
        attach: Attach = event.attach
        terminus = attach.target if link.is_sender else attach.source
        if terminus is None:
            # 2.6.3: a refused link is attached with a null terminus and detached at once
            detach = self._answer(
                lambda e: isinstance(e, RemoteDetach) and e.link is link, timeout, "detach"
            )
            condition = detach.error.condition if detach.error is not None else "none"
            raise Unanswered(
                f"expected the link the case needs; the broker refused link {link.name!r} "
                f"(a null terminus, then a detach with {condition})"
            )
        return attach

    def _unique(self) -> int:
        self._counter = getattr(self, "_counter", 0) + 1
        return self._counter

    def grant(self, link: Link, credit: int, *, drain: bool = False, echo: bool = False) -> None:
        """Receiver: a flow granting `credit` (link-credit = credit, 2.6.7)."""
        link.flow(link_credit=credit, drain=drain, echo=echo)
        self.flush()

    def send_message(
        self,
        link: Link,
        body: bytes | Message = b"x",
        *,
        settled: bool | None = None,
        tag: bytes | None = None,
        wait_credit: bool = True,
        timeout: float | None = None,
    ) -> int:
        """Sender: one message (waits for credit); returns its delivery-id."""
        message = body if isinstance(body, Message) else Message.of(body)
        if wait_credit and link.link_credit <= 0:
            try:
                self.expect(
                    lambda e: (
                        isinstance(e, FlowReceived) and e.link is link and link.link_credit > 0
                    ),
                    timeout,
                    "flow granting link credit",
                )
            except WaitTimeout as exc:
                raise NoDelivery(str(exc)) from exc
        delivery_id = link.send(message.encode(), tag or f"t{self._unique()}".encode(), settled)
        self.flush()
        return delivery_id

    def publish(
        self,
        link: Link,
        count: int,
        body: Callable[[int], bytes | Message] | bytes = b"x",
        *,
        settled: bool = False,
        confirm: bool = True,
        timeout: float = 30.0,
    ) -> None:
        """Send `count` messages; with `confirm` wait until every one is settled by the broker."""
        waited_from = self.mark()
        sent: set[int] = set()
        for index in range(count):
            payload = body(index) if callable(body) else body
            sent.add(self.send_message(link, payload, settled=settled, timeout=timeout))
            if len(self.inbox) > 256:
                self._drop_dispositions(sent)
        if confirm and not settled:
            end = time.monotonic() + timeout
            while sent:
                self._drop_dispositions(sent)
                if not sent:
                    break
                if time.monotonic() > end or self.closed or self._left() <= 0:
                    message = (
                        f"expected a settled disposition for each of {count} messages; "
                        f"{len(sent)} unsettled, {self.observed(waited_from)}"
                    )
                    if _settles_first(link) and not self.closed:  # 2.7.5: settle on arrival
                        raise CaseFailed(message, level="MUST", sentences=(SETTLE_FIRST,))
                    raise WaitTimeout(message)
                self.pump(0.2)

    def _drop_dispositions(self, pending: set[int]) -> None:
        keep: list[Event] = []
        for event in self.inbox:
            if isinstance(event, DispositionReceived) and event.role == Role.RECEIVER:
                if event.settled:
                    pending.difference_update(range(event.first, event.last + 1))
                continue
            keep.append(event)
        self.inbox = keep

    def next_transfer(self, link: Link, timeout: float | None = None) -> TransferReceived:
        """The next delivery on `link`; fails at once when the link, session or connection
        ends instead (a broker error, or our engine refusing a broker frame)."""

        def match(event: Event) -> bool:
            return (
                (isinstance(event, TransferReceived | RemoteDetach) and event.link is link)
                or isinstance(event, ProtocolErrorRaised | RemoteClose | TransportClosed)
                or (isinstance(event, RemoteEnd) and event.session is link.session)
            )

        since = self.mark()
        try:
            event = self.expect(match, timeout, "transfer")
        except WaitTimeout as exc:
            raise NoDelivery(str(exc)) from exc
        if isinstance(event, TransferReceived):
            return event
        self.inbox.insert(0, event)
        if isinstance(event, ProtocolErrorRaised):
            raise NoDelivery(
                f"expected a transfer; our engine refused the broker's frame ({event.condition}: "
                f"{event.description}); {self.observed(max(0, since - 1))}"
            )
        raise NoDelivery(f"expected a transfer; {self.observed(self._ended_from(since))}")

    def _ended_from(self, since: int) -> int:
        """A trace position from which `observed` finds the broker's end, detach or close
        that ended a wait (it may have arrived before the wait began)."""
        for position in range(len(self.recording.items) - 1, -1, -1):
            item = self.recording.items[position]
            ended = isinstance(item.item, Frame) and item.item.name in ("close", "end", "detach")
            if item.direction == SERVER and ended:
                return position
        return since

    def transfers(self, link: Link) -> list[TransferReceived]:
        """Take every delivery already received on `link` (no waiting)."""
        taken = [e for e in self.inbox if isinstance(e, TransferReceived) and e.link is link]
        self.inbox = [e for e in self.inbox if e not in taken]
        return taken

    def settle(self, link: Link, delivery: TransferReceived | int, state: Any = None) -> None:
        """Receiver: settle one delivery with `state` (default accepted)."""
        delivery_id = delivery if isinstance(delivery, int) else delivery.delivery_id
        link.disposition(delivery_id, settled=True, state=Accepted() if state is None else state)
        self.flush()

    def receive(
        self,
        link: Link,
        count: int,
        *,
        settle: bool = True,
        regrant: int | None = None,
        timeout: float | None = None,
        on_delivery: Callable[[TransferReceived], None] | None = None,
    ) -> list[TransferReceived]:
        """Receive `count` deliveries; settle each (accepted); with `regrant`, grant
        link-credit=regrant after every delivery (proton's prefetch pattern)."""
        received: list[TransferReceived] = []
        for _ in range(count):
            delivery = self.next_transfer(link, timeout)
            received.append(delivery)
            if on_delivery is not None:
                on_delivery(delivery)
            self.fail_if_gone(link)
            if settle and not delivery.settled:
                link.disposition(delivery.delivery_id, settled=True, state=Accepted())
            if regrant is not None:
                link.flow(link_credit=regrant)
            self.flush()
        return received

    def fail_if_gone(self, link: Link) -> None:
        """NoDelivery naming the broker's end/close/detach when `link` can no longer be used
        (no sentence forbids the broker to end it: a shortfall unless a case says more)."""
        if link.state.name == "ATTACHED" and link.session.state.name == "MAPPED":
            return
        raise NoDelivery(
            f"expected the link to stay attached (link {link.state.name}, session "
            f"{link.session.state.name}); {self.observed(self._ended_from(self.mark()))}"
        )

    def next_link_flow(self, link: Link, since: int, timeout: float | None = None) -> Any:
        """The first flow the broker sent for `link` after trace position `since`."""
        frame = self.wait_for_frame(
            "flow",
            timeout,
            lambda f: (
                link.remote_handle is not None and f.performative.handle == link.remote_handle
            ),
            since=since,
        )
        return frame.performative

    def detach(self, link: Link, closed: bool = True, wait: bool = True) -> RemoteDetach | None:
        link.detach(closed=closed)
        self.flush()
        if not wait:
            return None
        return self._answer(
            lambda e: isinstance(e, RemoteDetach) and e.link is link, None, "detach reply"
        )

    def end(self, session: Session, wait: bool = True) -> None:
        session.end()
        self.flush()
        if wait:
            self._answer(lambda e: isinstance(e, RemoteEnd) and e.session is session, None, "end")

    def link_flows(self, link: Link, since: int = 0) -> list[Any]:
        """Flows the broker sent for `link` (by its handle) after trace position `since`."""
        flows = []
        for trace_item in self.recording.items[since:]:
            frame = trace_item.item
            if (
                trace_item.direction == SERVER
                and isinstance(frame, Frame)
                and frame.name == "flow"
                and frame.performative.handle == link.remote_handle
                and link.remote_handle is not None
            ):
                flows.append(frame.performative)
        return flows

    def frames_since(self, since: int, name: str | None = None) -> Iterable[TraceItem]:
        for trace_item in self.recording.items[since:]:
            frame = trace_item.item
            wanted = isinstance(frame, Frame) and (name is None or frame.name == name)
            if trace_item.direction == SERVER and wanted:
                yield trace_item
