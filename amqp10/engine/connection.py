"""The connection endpoint (2.4) and the SASL layer in front of it (5.3): bytes in,
events out, bytes to send, time passed in.

Owns: protocol-header exchange, SASL frames, open/close negotiation (max-frame-size,
channel-max, idle-time-out with heartbeats and expiry), channel -> Session dispatch,
the output buffer and the event queue. May touch: its Sessions (through their public
and `_`-prefixed engine methods). Every state change goes through CONNECTION_TABLE /
SASL_TABLE (transitions.py); the handlers here are one small function per performative.

    conn = Connection(role="client", container_id="c1", idle_timeout_ms=30000,
                      sasl=ClientSasl("PLAIN", "user", "pw"))
    conn.open()
    sock.sendall(conn.data_to_send(now))
    conn.receive_data(sock.recv(65536), now)   # b"" = the peer closed the socket
    for event in conn.events(): ...
    conn.get_timer() -> deadline or None; conn.handle_timer(now) when it passes
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from amqpspec.amqp10.composites import (
    Begin,
    Close,
    Error,
    Open,
    SaslChallenge,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    SaslResponse,
    Transfer,
)
from amqpspec.amqp10.engine import crafted
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.conditions import as_error
from amqpspec.amqp10.engine.link import Link
from amqpspec.amqp10.engine.policy import STRICT, EndpointPolicy
from amqpspec.amqp10.engine.sasl import ClientSasl, ServerSasl
from amqpspec.amqp10.engine.scram import SCRAM_SHA_256, ScramServer
from amqpspec.amqp10.engine.session import Session
from amqpspec.amqp10.engine.transitions import (
    DISCARD,
    HEADER_THEN_END,
    OPEN_THEN_CLOSE,
    ConnInput,
    ConnState,
    SaslInput,
    SaslState,
    SessState,
    UsageError,
    connection_machine,
    sasl_machine,
)
from amqpspec.amqp10.errors import DecodeError, ErrorKind, ProtocolError
from amqpspec.amqp10.frames import (
    AMQP_HEADER,
    EMPTY_FRAME,
    SASL_HEADER,
    Frame,
    FrameDecoder,
    FrameType,
    ProtocolHeader,
    ProtocolId,
    encode_frame,
)
from amqpspec.amqp10.spec import MIN_MAX_FRAME_SIZE, Cond, SaslCode

# states in which our idle-time-out is watched / heartbeats are sent (2.4.5)
_LIVE = frozenset(
    {
        ConnState.OPEN_PIPE,
        ConnState.OPEN_SENT,
        ConnState.OPEN_RCVD,
        ConnState.OPENED,
    }
)
_CLOSE_SENT = frozenset(
    {
        ConnState.OC_PIPE,
        ConnState.CLOSE_PIPE,
        ConnState.CLOSE_SENT,
        ConnState.DISCARDING,
        ConnState.END,
    }
)


# the fast lane's checks as plain constants (an Enum member lookup costs several times more)
_OPENED = ConnState.OPENED
_ENDED = ConnState.END
_SASL_DONE = SaslState.DONE
_AMQP_FRAME = int(FrameType.AMQP)


class Connection:
    """One AMQP connection endpoint, client or server (2.4)."""

    def __init__(
        self,
        role: str = "client",
        container_id: str | None = None,
        *,
        hostname: str | None = None,
        max_frame_size: int = 65536,
        channel_max: int = 65535,
        idle_timeout_ms: int | None = None,
        idle_threshold_ms: int | None = None,
        sasl: ClientSasl | ServerSasl | None = None,
        properties: dict | None = None,
        offered_capabilities: list[str] | None = None,
        desired_capabilities: list[str] | None = None,
        auto_reply: bool = True,
        policy: EndpointPolicy = STRICT,
        record_transitions: bool = False,
    ) -> None:
        if role not in ("client", "server"):
            raise ValueError("role is 'client' or 'server'")
        if max_frame_size < MIN_MAX_FRAME_SIZE:
            raise ValueError(f"max_frame_size must be >= {MIN_MAX_FRAME_SIZE} (2.7.1)")
        self._check_sasl_role(role, sasl)
        self.role = role
        self.container_id = container_id or f"amqp10-{uuid.uuid4()}"
        self.hostname = hostname
        self.max_frame_size = max_frame_size
        self.channel_max = channel_max
        self.idle_timeout_ms = idle_timeout_ms  # advertised in our open
        # 2.4.5: how long silence is tolerated before we close; the advertised value
        # "SHOULD be half the peer's actual timeout threshold" (default: the advertised one)
        self.idle_threshold_ms = idle_threshold_ms or idle_timeout_ms
        self.properties = properties
        self.offered_capabilities = offered_capabilities
        self.desired_capabilities = desired_capabilities
        self.auto_reply = auto_reply
        self.policy = policy  # rules bent on purpose (window, credit, echo): see policy.py
        self.sasl = sasl
        # record_transitions: every (machine, state, input) its tables applied, for
        # coverage of the transition tables (this connection's sessions and links too)
        self.transitions: set[tuple[str, str, str]] | None = set() if record_transitions else None
        self.machine = connection_machine()
        self.machine.visited = self.transitions
        # the fast lanes (Session.fast_transfer, Link.send): the common one-frame transfer
        # in and out without the table lookups, which in the states they admit are
        # self-loops; off while transitions are recorded (they apply no table)
        self.fast_lanes = not record_transitions
        self.sasl_machine = sasl_machine() if sasl is not None else None
        if self.sasl_machine is not None:
            self.sasl_machine.visited = self.transitions
        self._decoder = FrameDecoder(expect_header=True, max_frame_size=MIN_MAX_FRAME_SIZE)
        self._awaiting_header = True  # the decoder reads the next bytes as a header
        self._out = bytearray()
        # frames (not protocol headers) handled from the peer / queued for it, heartbeats
        # included: plain counters for statistics (e.g. a broker's connection list)
        self.frames_received = 0
        self.frames_sent = 0
        self._events: deque[ev.Event] = deque()
        self._observers: list[Callable[[ev.Event], bool | None]] = []
        self.open_requested = False
        self.open_sent = False
        self._input_broken = False
        self._sasl_failed = False
        # an event the application must answer was raised (a new open, begin or attach):
        # with `max_frames` the input pauses after that frame (see _handle_input)
        self.answer_due = False
        self.paused_for_answer = False  # the last _handle_input stopped for such an answer
        self.sasl_outcome: int | None = None
        self.sasl_username: str | None = None
        self._sasl_exchange: ScramServer | None = None  # a challenge/response under way
        self.remote_open: Open | None = None
        self.remote_close: Close | None = None
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE  # 2.4.1: before open, 512
        self.remote_channel_max = 0
        self.remote_idle_timeout_ms: int | None = None
        self.grants_pending: list[Session] = []  # window grants not yet handed out (2.5.6)
        # answers (errors, end and detach replies) due while what must precede them is not
        # out yet (our open, the session's begin: the peer pipelined), sent once it is
        self._unsent_replies: list[tuple[Callable[[], None], Session | None, int]] = []
        self._events_queued = 0  # events queued and taken so far: a reply waits its turn
        self._events_taken = 0
        self.sessions_by_channel: dict[int, Session] = {}  # our channel -> session
        self.sessions_by_remote_channel: dict[int, Session] = {}  # peer channel -> session
        self._now: float | None = None
        self._last_received: float | None = None
        self._last_sent: float | None = None
        self._open_sent_at: float | None = None  # our idle clock runs from here (2.4.5)
        self._handlers = {Open: self._on_open, Close: self._on_close}
        self._sasl_handlers = {
            SaslMechanisms: self._on_sasl_mechanisms,
            SaslInit: self._on_sasl_init,
            SaslOutcome: self._on_sasl_outcome,
            SaslChallenge: self._on_sasl_challenge,
            SaslResponse: self._on_sasl_response,
        }

    @staticmethod
    def _check_sasl_role(role: str, sasl: Any) -> None:
        wanted = ClientSasl if role == "client" else ServerSasl
        if sasl is not None and not isinstance(sasl, wanted):
            raise ValueError(f"a {role} takes sasl={wanted.__name__}(...)")

    # --- public state -----------------------------------------------------------------

    @property
    def state(self) -> ConnState:
        return self.machine.state

    @property
    def sasl_state(self) -> SaslState | None:
        return None if self.sasl_machine is None else self.sasl_machine.state

    @property
    def finished(self) -> bool:
        """Nothing more will be exchanged: flush data_to_send() and close the socket."""
        return self.machine.state is ConnState.END or self._sasl_failed or self._input_broken

    @property
    def can_begin(self) -> bool:
        """Our open is out (pipelined or answered): sessions may be begun. With SASL
        that is after a successful outcome (5.3.2), so wait for it first."""
        return self.machine.allows(ConnInput.SEND_FRAME)

    @property
    def in_sasl(self) -> bool:
        return self.sasl_machine is not None and self.sasl_machine.state is not SaslState.DONE

    # --- I/O ------------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float, max_frames: int | None = None) -> bool:
        """Feed bytes from the peer; b"" means the peer closed the byte stream.

        With `max_frames` at most that many frames (and headers) are handled; the rest
        stays buffered and True is returned: take the events, act on them (e.g. send a
        credit re-grant), then call `receive_buffered(now, max_frames)` until it returns
        False. With it, handling also stops (True) right after a frame whose event waits
        for the application's answer (RemoteOpen before our open, RemoteBegin in
        BEGIN_RCVD, RemoteAttach in ATTACH_RCVD): the frames behind it are handled after
        the answer, however the bytes were split into reads (`paused_for_answer` says so:
        write the answer out before going on, as a peer reading one frame at a time
        would have). Without it the whole buffer is handled (returns False)."""
        self._now = now
        if not data:
            self._on_transport_closed()
            return False
        self._last_received = now
        if self.finished:
            return False
        self._decoder.feed(data)
        return self._handle_input(max_frames)

    def receive_buffered(self, now: float, max_frames: int | None = None) -> bool:
        """Go on with input left buffered by receive_data(..., max_frames); True while
        frames may remain."""
        self._now = now
        if self.finished:
            return False
        return self._handle_input(max_frames)

    def _handle_input(self, max_frames: int | None) -> bool:
        budget = -1 if max_frames is None else max_frames
        self.paused_for_answer = False
        next_item, on_frame, machine = self._decoder.next_item, self._on_frame, self.machine
        # `finished`, inlined: handling a frame may end the connection
        while not (machine.state is _ENDED or self._sasl_failed or self._input_broken):
            if budget == 0:
                return True
            budget -= 1
            try:
                item = next_item()
            except DecodeError as exc:
                self._undecodable(exc)
                return False
            if item is None:
                return False
            if isinstance(item, ProtocolHeader):
                self._awaiting_header = False
                self._on_header(item)
            else:
                on_frame(item)
            if self.answer_due:
                # h11's pause: the frames after a new open, begin or attach wait until the
                # application has answered it, so that what they meet (the session's
                # handle-max, the link's credit) never depends on where the reads split
                self.answer_due = False
                if max_frames is not None:
                    self.paused_for_answer = True
                    return True
        return False

    def _undecodable(self, exc: DecodeError) -> None:
        if self._awaiting_header:
            self._on_bad_header(None)
        else:
            self.fail(ProtocolError.of_decode(exc, "connection"))
            if exc.condition == Cond.FRAMING_ERROR:
                self._input_broken = True  # frame boundaries are lost

    def data_to_send(self, now: float | None = None) -> bytes:
        """Bytes to write to the peer (and clear them)."""
        if now is not None:
            self._now = now
        if self._unsent_replies:
            self._send_unsent_replies(everything=True)
        if not self._out:
            return b""
        data = bytes(self._out)
        self._out.clear()
        if self.grants_pending:  # 2.5.6: the peer may now see these windows
            for session in self.grants_pending:
                session.grant_sent()
            self.grants_pending.clear()
        self._last_sent = self._now
        if self._open_sent_at is None and self.open_sent:
            self._open_sent_at = self._now
        return data

    def add_observer(self, observer: Callable[[ev.Event], bool | None]) -> None:
        """Call `observer(event)` for every event as the engine raises it, before it is
        queued; an observer that returns True consumes the event (events() never yields
        it). E.g. record the outcome of every DispositionReceived, or drop them."""
        self._observers.append(observer)

    def remove_observer(self, observer: Callable[[ev.Event], bool | None]) -> None:
        self._observers.remove(observer)

    def next_event(self) -> ev.Event | None:
        if not self._events:
            return None
        event = self._events.popleft()
        self._events_taken += 1
        if self._unsent_replies:
            self._send_unsent_replies()
        return event

    def events(self) -> Iterator[ev.Event]:
        """Every pending event, oldest first."""
        while self._events:
            yield self.next_event()  # type: ignore[misc]

    # --- timers (2.4.5) ----------------------------------------------------------------

    def get_timer(self) -> float | None:
        """When handle_timer() must next be called (same clock as `now`), or None."""
        times = [t for t in (self._idle_deadline(), self._heartbeat_due()) if t is not None]
        return min(times) if times else None

    def _idle_deadline(self) -> float | None:
        if not self.idle_timeout_ms or self.state not in _LIVE:
            return None
        base = self._last_received
        if base is None or (self._open_sent_at is not None and self._open_sent_at > base):
            base = self._open_sent_at
        threshold = self.idle_threshold_ms or self.idle_timeout_ms
        return None if base is None else base + threshold / 1000

    def _heartbeat_due(self) -> float | None:
        if not self.remote_idle_timeout_ms or self.state not in _LIVE:
            return None
        last = self._last_sent if self._last_sent is not None else self._now
        if last is None:
            return None
        # 2.4.5: send frames well within the peer's idle timeout: at half of it
        return last + self.remote_idle_timeout_ms / 2000

    def handle_timer(self, now: float) -> None:
        self._now = now
        deadline = self._idle_deadline()
        if deadline is not None and now >= deadline:
            self.emit(ev.IdleTimeout(self.idle_threshold_ms or self.idle_timeout_ms or 0))
            self.close(Cond.RESOURCE_LIMIT_EXCEEDED, "local idle-time-out expired")
            return
        due = self._heartbeat_due()
        if due is not None and now >= due and not self._out:
            self._out += EMPTY_FRAME
            self.frames_sent += 1
            self._last_sent = now

    # --- actions ----------------------------------------------------------------------

    def open(
        self,
        hostname: str | None = None,
        properties: dict | None = None,
        offered_capabilities: list[str] | None = None,
        desired_capabilities: list[str] | None = None,
    ) -> None:
        """Send our open (after the headers, and after SASL when configured)."""
        if self.open_requested:
            raise UsageError("open() was already called")
        if not self.in_sasl and self.state is not ConnState.START:
            self.machine.refuse_unless(ConnInput.SEND_OPEN)
        self.open_requested = True
        self.hostname = hostname or self.hostname
        self.properties = properties or self.properties
        self.offered_capabilities = offered_capabilities or self.offered_capabilities
        self.desired_capabilities = desired_capabilities or self.desired_capabilities
        if self.in_sasl:
            if self.role == "client" and self.sasl_machine.state is SaslState.START:
                self.sasl_machine.process(SaslInput.SEND_HEADER)
                self._out += SASL_HEADER.encode()
            return  # the open goes out after a successful sasl-outcome (5.3.2)
        self._send_header_and_open()

    def _send_header_and_open(self) -> None:
        if self.machine.allows(ConnInput.SEND_HEADER):
            self.machine.process(ConnInput.SEND_HEADER)
            self._out += AMQP_HEADER.encode()
        if self.open_requested and self.machine.allows(ConnInput.SEND_OPEN):
            self.machine.process(ConnInput.SEND_OPEN)
            self.write_open()

    def write_open(self, frame: bytes | None = None) -> None:
        """Write our open: `frame` as given (a crafted open, through write_frame: the
        caller has set the fields it carries) or encoded from our fields."""
        self.open_sent = True
        if frame is not None:
            self.write_frame(frame)
            self._decoder.max_frame_size = self.max_frame_size  # 2.7.1, as below
            return
        self._out += encode_frame(
            Open(
                container_id=self.container_id,
                hostname=self.hostname,
                max_frame_size=self.max_frame_size,
                channel_max=self.channel_max,
                idle_time_out=self.idle_timeout_ms,
                offered_capabilities=self.offered_capabilities,
                desired_capabilities=self.desired_capabilities,
                properties=self.properties,
            )
        )
        self.frames_sent += 1
        # once the peer has our open it may use our max-frame-size (2.7.1)
        self._decoder.max_frame_size = self.max_frame_size

    def close(self, error: Error | str | None = None, description: str | None = None) -> None:
        """Send close (2.7.9); with an error the connection discards input until the
        peer's close (2.4.6 DISCARDING). Before the AMQP layer runs (SASL), it only ends."""
        err = as_error(error, description)
        if self.in_sasl:
            self._sasl_failed = True
            return
        inp = ConnInput.SEND_CLOSE if err is None else ConnInput.SEND_CLOSE_ERROR
        action = self.machine.process(inp)
        if action == OPEN_THEN_CLOSE or not self.open_sent:
            # 2.4.1/2.4.6: open is always the first frame, also when the peer's open and
            # close arrived together (OPEN_RCVD -> CLOSE_RCVD) and we answer its close
            self.write_open()
        self._out += encode_frame(Close(error=err))
        self.frames_sent += 1

    def begin(
        self,
        incoming_window: int = 2048,
        outgoing_window: int = 2048,
        handle_max: int = 0xFFFFFFFF,
        *,
        auto_window: bool = True,
        properties: dict | None = None,
        offered_capabilities: list[str] | None = None,
        desired_capabilities: list[str] | None = None,
        initial_outgoing_id: int = 0,
    ) -> Session:
        """Begin a new session (2.5.2) on the lowest free channel; its first transfer-id
        (our begin's next-outgoing-id) is `initial_outgoing_id`."""
        self.machine.refuse_unless(ConnInput.SEND_FRAME)  # before a channel is taken
        session = Session(
            self,
            incoming_window=incoming_window,
            outgoing_window=outgoing_window,
            handle_max=handle_max,
            auto_window=auto_window,
            properties=properties,
            offered_capabilities=offered_capabilities,
            desired_capabilities=desired_capabilities,
            initial_outgoing_id=initial_outgoing_id,
        )
        session.send_begin()
        return session

    # --- crafted traffic (conformance cases, fuzzers) ----------------------------------

    def send_performative(
        self,
        performative: Any,
        channel: int = 0,
        payload: bytes = b"",
        *,
        raw: bytes | None = None,
        strict: bool = True,
    ) -> Session | Link | None:
        """Send `performative` on `channel` through the engine's output, recording it as
        if the application had asked for it, so the engine's state follows the wire: a
        begin makes (or answers) a session, an attach maps its handle, a flow grants, a
        transfer takes a transfer-id and credit, end/detach/close end their endpoint (see
        amqp10.engine.crafted). Returns the Session or Link it was recorded on.

        `raw` replaces the frame's bytes (e.g. `amqp10.builder.mutate(p).frame(channel)`,
        a wrong encoding of the same performative); otherwise the frame is encoded from
        `performative` and `payload` (SASL bodies as SASL frames). With strict=True what
        the state tables refuse raises UsageError; with strict=False it is sent anyway
        and changes no state (a deliberate violation, e.g. a second begin on a channel).
        Written at once: ahead of transfers still waiting for the peer's window."""
        if raw is None:
            spec = getattr(performative, "SPEC", None)
            sasl = spec is not None and "sasl-frame" in spec.provides
            frame_type = FrameType.SASL if sasl else FrameType.AMQP
            raw = encode_frame(performative, channel, payload, frame_type)
        return crafted.record_sent(self, performative, channel, raw, strict)

    def send_raw(self, data: bytes) -> None:
        """Bytes written as they are, in order with the engine's own output (after what
        is queued, before what comes next); no state changes. For what is not a frame of
        a performative (protocol headers, garbage, half frames): a crafted performative
        goes through send_performative(..., raw=...) so the engine records it."""
        self._out += data

    # --- engine-internal, used by Session -----------------------------------------

    def allocate_channel(self, session: Session) -> int:
        limit = self.remote_channel_max if self.remote_open is not None else self.channel_max
        for channel in range(limit + 1):
            if channel not in self.sessions_by_channel:
                self.sessions_by_channel[channel] = session
                return channel
        raise UsageError(f"no free channel <= channel-max {limit} (2.7.1)")

    def _can_send(self) -> bool:
        return self.machine.allows(ConnInput.SEND_FRAME)

    def check_can_send(self) -> None:
        self.machine.process(ConnInput.SEND_FRAME)

    def reply_when_sendable(
        self, reply: Callable[[], None], session: Session | None = None
    ) -> None:
        """Call `reply()` (it writes an end, a detach, an error) now if our open is out, and
        `session`'s begin when given (a link's frame). Otherwise it waits: a peer may
        pipeline open, begin, attach and more in one write without waiting for ours (2.4.1,
        2.5.1), and what the engine must answer to those frames still reaches it, where a
        peer sending one frame at a time would see it: once the application has taken the
        events raised up to here (it answered the open, begin and attach before them) and
        it can go out, or at the latest at data_to_send(). `reply` checks again that it is
        still due when called."""
        if self._sendable(session):
            reply()
        else:
            self._unsent_replies.append((reply, session, self._events_queued))

    def _sendable(self, session: Session | None) -> bool:
        return self._can_send() and (session is None or session.state is not SessState.BEGIN_RCVD)

    def _send_unsent_replies(self, everything: bool = False) -> None:
        """The waiting replies whose turn came (`everything`: all) and that can go out now."""
        waiting, self._unsent_replies = self._unsent_replies, []
        for reply, session, due in waiting:
            if (everything or due <= self._events_taken) and self._sendable(session):
                reply()
            else:
                self._unsent_replies.append((reply, session, due))

    def write_frame(self, frame_bytes: bytes) -> None:
        self._out += frame_bytes
        self.frames_sent += 1

    def edit_outgoing(self, edit: Callable[[bytes], bytes]) -> None:
        """From now on, pass every session frame this endpoint writes (begin, attach, flow,
        transfer, disposition, detach, end: the bytes of one whole frame each) through
        `edit` before it is queued: deliberate misbehaviour, for fault injection (a broker
        that breaks a field rule on purpose). The endpoint's own state is not told of the
        change. Free until called: it replaces `_write` on this instance only."""
        plain = Connection.write_frame.__get__(self)

        def write(frame_bytes: bytes) -> None:
            plain(edit(frame_bytes))

        self.write_frame = write  # type: ignore[method-assign]

    def emit(self, event: ev.Event) -> None:
        for observer in self._observers:
            if observer(event):
                return  # consumed: not queued for events()/next_event()
        self._events.append(event)
        self._events_queued += 1

    def session_unmapped(self, session: Session) -> None:
        if self.sessions_by_channel.get(session.channel) is session:
            del self.sessions_by_channel[session.channel]

    def remote_channel_ended(self, session: Session) -> None:
        if self.sessions_by_remote_channel.get(session.remote_channel) is session:
            del self.sessions_by_remote_channel[session.remote_channel]

    # --- headers (2.2, 5.3.1) --------------------------------------------------------

    def _on_header(self, header: ProtocolHeader) -> None:
        self.emit(ev.ProtocolHeaderReceived(header.protocol_id, header.is_supported))
        wanted = ProtocolId.SASL if self.in_sasl else ProtocolId.AMQP
        if header.protocol_id != wanted or not header.is_supported:
            self._on_bad_header(header)
        elif self.in_sasl:
            self._on_sasl_header()
        else:
            self.machine.process(ConnInput.RECV_HEADER)
            if self.state is ConnState.HDR_RCVD:
                self._send_header_and_open()

    def _on_bad_header(self, header: ProtocolHeader | None) -> None:
        """2.2: answer with the header we support, then end the connection."""
        ours = SASL_HEADER if self.in_sasl else AMQP_HEADER
        sasl_sent = self.sasl_machine is not None and self.sasl_machine.state is not (
            SaslState.START
        )
        try:
            action = self.machine.process(ConnInput.RECV_BAD_HEADER)
        except ProtocolError as exc:
            self.fail(exc)
            self._input_broken = True
            return
        if action == HEADER_THEN_END and not (self.in_sasl and sasl_sent):
            self._out += ours.encode()
        self._input_broken = True
        what = "unreadable" if header is None else f"protocol id {header.protocol_id}"
        error = ProtocolError(
            Cond.FRAMING_ERROR, f"unsupported header: {what}", kind=ErrorKind.UNSUPPORTED_HEADER
        )
        self.emit(ev.ProtocolErrorRaised.of(error, "connection"))

    # --- SASL (5.3) -----------------------------------------------------------------

    def _sasl_step(self, inp: SaslInput) -> bool:
        """Apply a SASL input; a refused RECV ends the connection (there is no close)."""
        try:
            self.sasl_machine.process(inp)
        except ProtocolError as exc:
            self.emit(ev.ProtocolErrorRaised.of(exc, "connection"))
            self._sasl_failed = True
            return False
        return True

    def _on_sasl_header(self) -> None:
        if not self._sasl_step(SaslInput.RECV_HEADER):
            return
        if self.role == "server":
            self.sasl_machine.process(SaslInput.SEND_HEADER)
            self.sasl_machine.process(SaslInput.SEND_MECHANISMS)
            self._out += SASL_HEADER.encode()
            mechanisms = self.sasl.mechanisms_frame()
            self._out += encode_frame(mechanisms, frame_type=FrameType.SASL)
            self.frames_sent += 1

    def _on_sasl_frame(self, frame: Frame) -> None:
        if frame.type != FrameType.SASL:
            error = ProtocolError(
                Cond.ILLEGAL_STATE,
                "AMQP frame during SASL",
                kind=ErrorKind.AMQP_FRAME_DURING_SASL,
            )
            # the description is the error's whole text (condition: description), as sent
            self.emit(
                ev.ProtocolErrorRaised(error.condition, str(error), "connection", error=error)
            )
            self._sasl_failed = True
            return
        if frame.performative is None:  # 5.3.1: receipt of an empty frame is an
            # irrecoverable error (SASL has no heartbeats: 2.4.5's empty frames come after open)
            error = ProtocolError(
                Cond.FRAMING_ERROR,
                "empty frame during SASL",
                kind=ErrorKind.EMPTY_FRAME_DURING_SASL,
            )
            self.emit(ev.ProtocolErrorRaised.of(error, "connection"))
            self._sasl_failed = True
            return
        self._sasl_handlers[type(frame.performative)](frame.performative)

    def _on_sasl_mechanisms(self, mechanisms: SaslMechanisms) -> None:
        if not self._sasl_step(SaslInput.RECV_MECHANISMS):
            return
        offered = tuple(str(m) for m in mechanisms.sasl_server_mechanisms or ())
        self.emit(ev.SaslMechanismsOffered(offered))
        try:
            init = self.sasl.init_for(offered)
        except ProtocolError as exc:
            self.emit(ev.ProtocolErrorRaised.of(exc, "connection"))
            self._sasl_failed = True
            return
        self.sasl_machine.process(SaslInput.SEND_INIT)
        self._out += encode_frame(init, frame_type=FrameType.SASL)
        self.frames_sent += 1

    def _on_sasl_init(self, init: SaslInit) -> None:
        if self._sasl_exchange is not None:  # MECHS_SENT again after our challenge: a
            self._on_sasl_unsupported(SaslInput.RECV_INIT)  # second init, not a response
            return
        if not self._sasl_step(SaslInput.RECV_INIT):
            return
        exchange = self.sasl.exchange_for(init)
        if exchange is None:
            code, username = self.sasl.judge(init)
            self._send_sasl_outcome(str(init.mechanism), code, username)
            return
        challenge = exchange.first(init.initial_response or b"")
        if challenge is None:
            self._send_sasl_outcome(str(init.mechanism), SaslCode.AUTH, None)
            return
        self._sasl_exchange = exchange  # 5.3.2: challenge, response, then the outcome
        self.sasl_machine.process(SaslInput.SEND_CHALLENGE)
        self._out += encode_frame(SaslChallenge(challenge=challenge), frame_type=FrameType.SASL)
        self.frames_sent += 1

    def _send_sasl_outcome(
        self, mechanism: str, code: int, username: str | None, data: bytes | None = None
    ) -> None:
        """The server's sasl-outcome (5.3.3.6; `data`: its additional-data on success)."""
        self.sasl_machine.process(SaslInput.SEND_OUTCOME)
        outcome = SaslOutcome(code=code, additional_data=data)
        self._out += encode_frame(outcome, frame_type=FrameType.SASL)
        self.frames_sent += 1
        self.sasl_outcome, self.sasl_username = code, username
        self.emit(ev.SaslAuthenticated(mechanism, username, code))
        self.finish_sasl(code)

    def _on_sasl_outcome(self, outcome: SaslOutcome) -> None:
        if not self._sasl_step(SaslInput.RECV_OUTCOME):
            return
        self.sasl_outcome = outcome.code
        self.emit(ev.SaslOutcomeReceived(outcome.code, outcome.additional_data))
        self.finish_sasl(outcome.code)

    def _on_sasl_challenge(self, challenge: SaslChallenge) -> None:
        self._on_sasl_unsupported(SaslInput.RECV_CHALLENGE)

    def _on_sasl_response(self, response: SaslResponse) -> None:
        exchange = self._sasl_exchange
        if exchange is None:
            self._on_sasl_unsupported(SaslInput.RECV_RESPONSE)
            return
        if not self._sasl_step(SaslInput.RECV_RESPONSE):
            return
        self._sasl_exchange = None
        accepted, server_final = exchange.final(response.response or b"")
        code = SaslCode.OK if accepted else SaslCode.AUTH
        self._send_sasl_outcome(SCRAM_SHA_256, code, exchange.username, server_final)

    def _on_sasl_unsupported(self, inp: SaslInput) -> None:
        """ANONYMOUS and PLAIN never challenge (RFC 4505, 4616) and the client speaks no
        SCRAM: a legal challenge, or a response without our challenge, is still one our
        mechanisms cannot answer, so the exchange fails."""
        if self._sasl_step(inp):
            error = ProtocolError(
                Cond.NOT_IMPLEMENTED, f"{inp.value} unsupported", kind=ErrorKind.SASL_UNSUPPORTED
            )
            self.emit(ev.ProtocolErrorRaised.of(error, "connection"))
            self._sasl_failed = True

    def finish_sasl(self, code: int) -> None:
        if code != SaslCode.OK:
            self._sasl_failed = True  # 5.3.3.6: the connection is not established
            return
        self._decoder.expect_protocol_header()  # 5.3.2: the AMQP header follows
        self._awaiting_header = True
        if self.role == "client":
            self._send_header_and_open()

    # --- frames ----------------------------------------------------------------------

    def _on_frame(self, frame: Frame) -> None:
        self.frames_received += 1
        if (
            type(frame.performative) is Transfer
            and self.fast_lanes
            and self.machine.state is _OPENED  # RECV_FRAME: a self-loop here
            and frame.type == _AMQP_FRAME
            and (self.sasl_machine is None or self.sasl_machine.state is _SASL_DONE)
        ):
            session = self.sessions_by_remote_channel.get(frame.channel)
            if session is not None and session.fast_transfer(frame):
                return
        if self.in_sasl:
            self._on_sasl_frame(frame)
            return
        performative = frame.performative
        if performative is None:
            return  # empty frame: a heartbeat (2.4.5); receiving it reset the idle clock
        try:
            if frame.type != FrameType.AMQP:
                raise ProtocolError(
                    Cond.ILLEGAL_STATE,
                    f"{frame.name} after SASL",
                    kind=ErrorKind.SASL_FRAME_AFTER_SASL,
                    performative=frame.name,
                )
            handler = self._handlers.get(type(performative))
            if handler is not None:
                handler(performative)
            else:
                self._on_session_frame(frame)
        except ProtocolError as exc:
            self.fail(exc)

    def _on_open(self, open_: Open) -> None:
        action = self.machine.process(ConnInput.RECV_OPEN)
        if action == DISCARD:
            return
        self.remote_open = open_
        self.remote_max_frame_size = open_.max_frame_size
        self.remote_channel_max = open_.channel_max
        self.remote_idle_timeout_ms = open_.idle_time_out or None
        if open_.max_frame_size < MIN_MAX_FRAME_SIZE:  # 2.7.1: at least 512
            raise ProtocolError(
                Cond.FRAME_SIZE_TOO_SMALL,
                f"max-frame-size {open_.max_frame_size} < {MIN_MAX_FRAME_SIZE}",
                "connection",
                ErrorKind.MAX_FRAME_SIZE_TOO_SMALL,
                declared=open_.max_frame_size,
                allowed=MIN_MAX_FRAME_SIZE,
            )
        if not self.open_sent:
            self.answer_due = True  # the application opens (or refuses) first
        self.emit(ev.RemoteOpen(open_))

    def _on_close(self, close: Close) -> None:
        self.machine.process(ConnInput.RECV_CLOSE)
        self.remote_close = close
        self.emit(ev.RemoteClose(close.error))
        if self.auto_reply and self.machine.allows(ConnInput.SEND_CLOSE):
            self.close()  # 2.4.3: answer the peer's close with ours

    def _on_session_frame(self, frame: Frame) -> None:
        if self.machine.process(ConnInput.RECV_FRAME) == DISCARD:
            return
        if isinstance(frame.performative, Begin):
            self._on_begin(frame.channel, frame.performative)
            return
        session = self.sessions_by_remote_channel.get(frame.channel)
        if session is None:  # 2.5.1: no session is mapped to this incoming channel
            raise ProtocolError(
                Cond.ILLEGAL_STATE,
                f"{frame.name} on unmapped channel {frame.channel}",
                kind=ErrorKind.UNMAPPED_CHANNEL,
                performative=frame.name,
                channel=frame.channel,
            )
        session.receive(frame)

    def _on_begin(self, channel: int, begin: Begin) -> None:
        if channel > self.channel_max:  # 2.7.1: outside our channel-max
            raise ProtocolError(
                Cond.FRAMING_ERROR,
                f"channel {channel} > channel-max {self.channel_max}",
                kind=ErrorKind.CHANNEL_OVER_MAX,
                performative="begin",
                channel=channel,
                allowed=self.channel_max,
            )
        session = self.sessions_by_remote_channel.get(channel)
        if session is not None:  # 2.5.1: the channel is in use by a session
            raise ProtocolError(
                Cond.ILLEGAL_STATE,
                f"begin on channel {channel} in use",
                kind=ErrorKind.CHANNEL_IN_USE,
                performative="begin",
                channel=channel,
            )
        if begin.remote_channel is not None:
            session = self.sessions_by_channel.get(begin.remote_channel)
            if session is None or session.remote_channel is not None:
                raise ProtocolError(
                    Cond.ILLEGAL_STATE,
                    f"begin answers channel {begin.remote_channel} (2.5.2)",
                    kind=ErrorKind.BEGIN_UNKNOWN_CHANNEL,
                    performative="begin",
                    channel=begin.remote_channel,
                )
        if session is None:
            session = Session(self, incoming=True)
        self.sessions_by_remote_channel[channel] = session
        session.receive_begin(channel, begin)

    def _on_transport_closed(self) -> None:
        clean = self.state is ConnState.END or self._sasl_failed
        self.machine.process(ConnInput.TRANSPORT_CLOSED)
        self.emit(ev.TransportClosed(clean))

    # --- errors -------------------------------------------------------------------------

    def fail(self, exc: ProtocolError) -> None:
        """The peer broke a connection rule: report it and close with its condition."""
        self.emit(ev.ProtocolErrorRaised.of(exc, "connection"))
        if self.in_sasl:
            self._sasl_failed = True  # SASL has no close: the exchange just ends (5.3.2)
            return
        if self.state in _CLOSE_SENT:
            return  # 2.4.6: nothing more may be sent after close
        if self.machine.allows(ConnInput.SEND_CLOSE_ERROR):
            self.close(exc.condition, exc.description)
