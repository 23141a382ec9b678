"""A connection's handshake and its end: protocol headers (2.2), open (2.4.1, 2.7.1),
close (2.4.3, 2.7.9), the transport's end, and the connection errors.

Owns: what we say in our open (container-id, hostname, max-frame-size, channel-max,
capabilities, properties), what the peer said in its (`remote_open`, `remote_max_frame_size`,
`remote_channel_max`, `remote_idle_timeout_ms`) and in its close, whether our open was asked
for and is out (`open_requested`, `open_sent`), and `fail()`: a connection rule broken by the
peer, reported and answered with a close. A part of `Connection` (connection.py composes
it); every state change through CONNECTION_TABLE (the hub's `machine`). Reads and writes the
hub's output buffer, decoder and event queue; SASL (sasl_layer.py) hands over to
`_send_header_and_open()` after a successful outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqpspec.amqp10.composites import Close, Open
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.conditions import as_error
from amqpspec.amqp10.engine.transitions import (
    DISCARD,
    HEADER_THEN_END,
    OPEN_THEN_CLOSE,
    ConnInput,
    ConnState,
    SaslInput,
    SaslState,
    UsageError,
)
from amqpspec.amqp10.errors import DecodeError, ErrorKind, ProtocolError
from amqpspec.amqp10.frames import (
    AMQP_HEADER,
    SASL_HEADER,
    ProtocolHeader,
    ProtocolId,
    encode_frame,
)
from amqpspec.amqp10.spec import MIN_MAX_FRAME_SIZE, Cond

if TYPE_CHECKING:
    from amqpspec.amqp10.composites import Error

# states in which our close is out: nothing more may be sent (2.4.6)
CLOSE_SENT = frozenset(
    {
        ConnState.OC_PIPE,
        ConnState.CLOSE_PIPE,
        ConnState.CLOSE_SENT,
        ConnState.DISCARDING,
        ConnState.END,
    }
)


class Handshake:
    """Headers, open and close, connection errors (a part of Connection)."""

    def _init_handshake(
        self,
        container_id: str,
        hostname: str | None,
        max_frame_size: int,
        channel_max: int,
        properties: dict | None,
        offered_capabilities: list[str] | None,
        desired_capabilities: list[str] | None,
    ) -> None:
        self.container_id = container_id
        self.hostname = hostname
        self.max_frame_size = max_frame_size
        self.channel_max = channel_max
        self.properties = properties
        self.offered_capabilities = offered_capabilities
        self.desired_capabilities = desired_capabilities
        self.open_requested = False  # open() was called (or a crafted open sent)
        self.open_sent = False  # our open frame is written
        self._input_broken = False  # frame boundaries lost / header refused: no more input
        self.remote_open: Open | None = None
        self.remote_close: Close | None = None
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE  # 2.4.1: before open, 512
        self.remote_channel_max = 0
        self.remote_idle_timeout_ms: int | None = None

    # --- headers (2.2, 5.3.1) --------------------------------------------------------

    def _undecodable(self, exc: DecodeError) -> None:
        if self._awaiting_header:
            self._on_bad_header(None)
        else:
            self.fail(ProtocolError.of_decode(exc, "connection"))
            if exc.condition == Cond.FRAMING_ERROR:
                self._input_broken = True  # frame boundaries are lost

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

    def _on_transport_closed(self) -> None:
        clean = self.state is ConnState.END or self._sasl_failed
        self.machine.process(ConnInput.TRANSPORT_CLOSED)
        self.emit(ev.TransportClosed(clean))

    def fail(self, exc: ProtocolError) -> None:
        """The peer broke a connection rule: report it and close with its condition."""
        self.emit(ev.ProtocolErrorRaised.of(exc, "connection"))
        if self.in_sasl:
            self._sasl_failed = True  # SASL has no close: the exchange just ends (5.3.2)
            return
        if self.state in CLOSE_SENT:
            return  # 2.4.6: nothing more may be sent after close
        if self.machine.allows(ConnInput.SEND_CLOSE_ERROR):
            self.close(exc.condition, exc.description)
