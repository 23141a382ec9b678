"""The connection endpoint (2.4): bytes in, events out, bytes to send, time passed in.

Owns: the input loop (decoder, `max_frames` steps, the pause for an answer), the output
buffer, frame dispatch (connection performatives, SASL, channel -> Session, the fast lane
for a received transfer), the channel maps and `begin()`, crafted traffic
(`send_performative`, `send_raw`, through crafted.py). The hub composes its parts, each in
a module of its own that states what it owns: handshake.py (headers, open/close,
connection errors), sasl_layer.py (5.3), idle.py (2.4.5 timers), eventqueue.py (events,
observers, replies waiting their turn). May touch: its Sessions through their documented
engine methods (`receive`, `receive_begin`, `fast_transfer`, `grant_sent`). Every state
change goes through CONNECTION_TABLE / SASL_TABLE (transitions.py).

The per-frame path (`_handle_input`, `_on_frame`, `write_frame`, `emit`) is hot: local
bindings, plain constants for the states it compares, no call layer added (docs/engine.md,
"Changing a rule").

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
from collections.abc import Callable
from typing import Any, Unpack

from amqpspec.amqp10.composites import Begin, Close, Open, Transfer
from amqpspec.amqp10.engine import crafted
from amqpspec.amqp10.engine.eventqueue import EventQueue
from amqpspec.amqp10.engine.handshake import Handshake
from amqpspec.amqp10.engine.idle import IdleTimers
from amqpspec.amqp10.engine.link import Link
from amqpspec.amqp10.engine.policy import STRICT, EndpointPolicy
from amqpspec.amqp10.engine.sasl import ClientSasl, ServerSasl
from amqpspec.amqp10.engine.sasl_layer import SaslLayer
from amqpspec.amqp10.engine.session import Session, SessionOptions
from amqpspec.amqp10.engine.transitions import (
    DISCARD,
    ConnInput,
    ConnState,
    SaslState,
    UsageError,
    connection_machine,
)
from amqpspec.amqp10.errors import DecodeError, ErrorKind, ProtocolError
from amqpspec.amqp10.frames import Frame, FrameDecoder, FrameType, ProtocolHeader, encode_frame
from amqpspec.amqp10.spec import MIN_MAX_FRAME_SIZE, Cond

# the fast lane's checks as plain constants (an Enum member lookup costs several times more)
_OPENED = ConnState.OPENED
_ENDED = ConnState.END
_SASL_DONE = SaslState.DONE
_AMQP_FRAME = int(FrameType.AMQP)


class Connection(Handshake, SaslLayer, IdleTimers, EventQueue):
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
        self.auto_reply = auto_reply
        self.policy = policy  # rules bent on purpose (window, credit, echo): see policy.py
        # record_transitions: every (machine, state, input) its tables applied, for
        # coverage of the transition tables (this connection's sessions and links too)
        self.transitions: set[tuple[str, str, str]] | None = set() if record_transitions else None
        self.machine = connection_machine()
        self.machine.visited = self.transitions
        # the fast lanes (Session.fast_transfer, Link.send): the common one-frame transfer
        # in and out without the table lookups, which in the states they admit are
        # self-loops; off while transitions are recorded (they apply no table)
        self.fast_lanes = not record_transitions
        self._init_handshake(
            container_id or f"amqp10-{uuid.uuid4()}",
            hostname,
            max_frame_size,
            channel_max,
            properties,
            offered_capabilities,
            desired_capabilities,
        )
        self._init_sasl(sasl, self.transitions)
        self._init_idle(idle_timeout_ms, idle_threshold_ms)
        self._init_events()
        self._init_io()

    def _init_io(self) -> None:
        self._decoder = FrameDecoder(expect_header=True, max_frame_size=MIN_MAX_FRAME_SIZE)
        self._awaiting_header = True  # the decoder reads the next bytes as a header
        self._out = bytearray()
        # frames (not protocol headers) handled from the peer / queued for it, heartbeats
        # included: plain counters for statistics (e.g. a broker's connection list)
        self.frames_received = 0
        self.frames_sent = 0
        # an event the application must answer was raised (a new open, begin or attach):
        # with `max_frames` the input pauses after that frame (see _handle_input)
        self.answer_due = False
        self.paused_for_answer = False  # the last _handle_input stopped for such an answer
        self.grants_pending: list[Session] = []  # window grants not yet handed out (2.5.6)
        self.sessions_by_channel: dict[int, Session] = {}  # our channel -> session
        self.sessions_by_remote_channel: dict[int, Session] = {}  # peer channel -> session
        self._handlers = {Open: self._on_open, Close: self._on_close}

    # --- public state -----------------------------------------------------------------

    @property
    def state(self) -> ConnState:
        return self.machine.state

    @property
    def finished(self) -> bool:
        """Nothing more will be exchanged: flush data_to_send() and close the socket."""
        return self.machine.state is ConnState.END or self._sasl_failed or self._input_broken

    @property
    def can_begin(self) -> bool:
        """Our open is out (pipelined or answered): sessions may be begun. With SASL
        that is after a successful outcome (5.3.2), so wait for it first."""
        return self.machine.allows(ConnInput.SEND_FRAME)

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

    # --- actions ----------------------------------------------------------------------

    def begin(
        self,
        incoming_window: int = 2048,
        outgoing_window: int = 2048,
        handle_max: int = 0xFFFFFFFF,
        **options: Unpack[SessionOptions],
    ) -> Session:
        """Begin a new session (2.5.2) on the lowest free channel; `options` are Session's
        (SessionOptions): its first transfer-id (our begin's next-outgoing-id) is
        `initial_outgoing_id`."""
        self.machine.refuse_unless(ConnInput.SEND_FRAME)  # before a channel is taken
        session = Session(
            self,
            incoming_window=incoming_window,
            outgoing_window=outgoing_window,
            handle_max=handle_max,
            **options,
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

    # --- engine-internal: for this connection's Sessions and Links, and crafted.py ---

    def allocate_channel(self, session: Session) -> int:
        limit = self.remote_channel_max if self.remote_open is not None else self.channel_max
        for channel in range(limit + 1):
            if channel not in self.sessions_by_channel:
                self.sessions_by_channel[channel] = session
                return channel
        raise UsageError(f"no free channel <= channel-max {limit} (2.7.1)")

    def can_send(self) -> bool:
        """A session frame may be written now (SEND_FRAME is allowed: our open is out)."""
        return self.machine.allows(ConnInput.SEND_FRAME)

    def check_can_send(self) -> None:
        """Apply SEND_FRAME (UsageError when the connection cannot send one)."""
        self.machine.process(ConnInput.SEND_FRAME)

    def write_frame(self, frame_bytes: bytes) -> None:
        """Queue one whole frame of a session, link or crafted performative for the peer."""
        self._out += frame_bytes
        self.frames_sent += 1

    def edit_outgoing(self, edit: Callable[[bytes], bytes]) -> None:
        """From now on, pass every session frame this endpoint writes (begin, attach, flow,
        transfer, disposition, detach, end: the bytes of one whole frame each) through
        `edit` before it is queued: deliberate misbehaviour, for fault injection (a broker
        that breaks a field rule on purpose). The endpoint's own state is not told of the
        change. Free until called: it replaces `write_frame` on this instance only."""
        plain = Connection.write_frame.__get__(self)

        def write(frame_bytes: bytes) -> None:
            plain(edit(frame_bytes))

        self.write_frame = write  # type: ignore[method-assign]

    def session_unmapped(self, session: Session) -> None:
        """`session` ended both ways: its channel of ours is free again."""
        if self.sessions_by_channel.get(session.channel) is session:
            del self.sessions_by_channel[session.channel]

    def remote_channel_ended(self, session: Session) -> None:
        """The peer ended `session`: its incoming channel is free again (2.5.1)."""
        if self.sessions_by_remote_channel.get(session.remote_channel) is session:
            del self.sessions_by_remote_channel[session.remote_channel]

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
