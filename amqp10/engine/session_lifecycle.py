"""A session's begin and end (2.5.2, 2.5.3, 2.7.2, 2.7.8) and its errors.

Owns: our begin (sent, or answering the peer's: `send_begin`, `accept`, `write_begin`), the
peer's begin (`receive_begin`: remote channel, next-incoming-id, windows, handle-max), our
end and the peer's (`end`, auto-reply), unmapping, and `fail()`: a session rule broken by
the peer, reported and answered with an end. A part of `Session` (session.py composes it);
every state change through SESSION_TABLE (the hub's `machine`). May touch: its Connection
through the documented engine methods (`check_can_send`, `allocate_channel`, `write_frame`,
`emit`, `reply_when_sendable`, `remote_channel_ended`, `session_unmapped`); the hub's window
state (`grant_window`, `drop_queued`, the remote horizon).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqpspec.amqp10.composites import Begin, End
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.conditions import as_error
from amqpspec.amqp10.engine.flowcontrol import remote_incoming_horizon
from amqpspec.amqp10.engine.transitions import (
    BEGIN_THEN_END,
    ConnInput,
    SessInput,
    SessState,
    UsageError,
)
from amqpspec.amqp10.errors import ProtocolError
from amqpspec.amqp10.frames import Frame, encode_frame

if TYPE_CHECKING:
    from amqpspec.amqp10.composites import Error


class SessionLifecycle:
    """Begin, end and session errors (a part of Session)."""

    def _configure(
        self, incoming_window: int, outgoing_window: int, handle_max: int, auto_window: bool
    ) -> None:
        self.incoming_window_max = incoming_window
        self.outgoing_window = outgoing_window
        self.handle_max = handle_max
        self.auto_window = auto_window

    def send_begin(self) -> None:
        """Send our begin (2.5.2) for a session made with `Session(connection, ...)`
        (Connection.begin() does this itself); the session becomes BEGIN_SENT. A session
        that already sent its begin refuses (UsageError): to put a second begin on the
        wire on purpose, use Connection.send_performative(..., strict=False)."""
        self.connection.check_can_send()
        self.machine.process(SessInput.SEND_BEGIN)
        self.write_begin()

    def write_begin(self) -> None:
        begin = Begin(
            remote_channel=self.remote_channel,
            next_outgoing_id=self.next_outgoing_id,
            incoming_window=self.incoming_window,
            outgoing_window=self.outgoing_window,
            handle_max=self.handle_max,
            offered_capabilities=self.offered_capabilities,
            desired_capabilities=self.desired_capabilities,
            properties=self.properties,
        )
        self.connection.write_frame(encode_frame(begin, self.channel))

    def accept(
        self,
        incoming_window: int | None = None,
        outgoing_window: int | None = None,
        handle_max: int | None = None,
        *,
        auto_window: bool | None = None,
        properties: dict | None = None,
    ) -> None:
        """Answer a peer's begin (BEGIN_RCVD) with ours (2.5.2). A session the peer has
        already ended (its begin and end arrived together: the engine answered both) is
        no longer answerable: UsageError, not a second begin on the channel."""
        if self.state is not SessState.BEGIN_RCVD:
            raise UsageError(f"accept() answers a peer's begin; session is {self.state.value}")
        self.connection.machine.refuse_unless(ConnInput.SEND_FRAME)
        self.machine.refuse_unless(SessInput.SEND_BEGIN)
        # a channel of our own first: with none free under the peer's channel-max (2.7.1)
        # the UsageError leaves the session as it was (not MAPPED with no channel)
        self._map_local_channel()
        self._configure(
            self.incoming_window_max if incoming_window is None else incoming_window,
            self.outgoing_window if outgoing_window is None else outgoing_window,
            self.handle_max if handle_max is None else handle_max,
            self.auto_window if auto_window is None else auto_window,
        )
        self.incoming_window = self.incoming_window_max
        self.properties = properties or self.properties
        self.connection.check_can_send()
        self.machine.process(SessInput.SEND_BEGIN)
        self.grant_window()
        self.write_begin()

    def _map_local_channel(self) -> None:
        if self.channel is None:
            self.channel = self.connection.allocate_channel(self)

    def end(self, error: Error | str | None = None, description: str | None = None) -> None:
        """Send end (2.7.8). Pending transfer frames are dropped; with an error, frames
        from the peer are discarded until its end (2.5.5 DISCARDING)."""
        err = as_error(error, description)
        self.connection.check_can_send()
        action = self.machine.process(
            SessInput.SEND_END if err is None else SessInput.SEND_END_ERROR
        )
        if action == BEGIN_THEN_END or self.channel is None:
            # the peer began (and maybe ended) before we answered: our begin goes
            # first, an end alone would name no channel of ours (2.5.2)
            self._map_local_channel()
            self.write_begin()
        self.drop_queued()
        self.connection.write_frame(encode_frame(End(error=err), self.channel))
        self.maybe_unmapped()

    def receive_begin(self, channel: int, begin: Begin) -> None:
        self.machine.process(SessInput.RECV_BEGIN)
        self.remote_channel = channel
        self.remote_begin = begin
        self.next_incoming_id = begin.next_outgoing_id
        self.remote_outgoing_window = begin.outgoing_window
        self.remote_handle_max = begin.handle_max
        # 2.5.6: the peer's incoming-window counts from our initial-outgoing-id
        self.remote_horizon = remote_incoming_horizon(
            None, begin.incoming_window, self.initial_outgoing_id
        )
        if self.state is SessState.MAPPED:
            self.grant_window(seen=True)  # the peer answers our begin: it has our window
        if self.state is SessState.BEGIN_RCVD:
            self.connection.answer_due = True  # accept() or end() before what follows
        self.connection.emit(ev.RemoteBegin(self, begin))

    def _on_end(self, frame: Frame) -> None:
        end: End = frame.performative
        self.remote_end_error = end.error
        self.connection.remote_channel_ended(self)
        self.connection.emit(ev.RemoteEnd(self, end.error))
        if self.connection.auto_reply and self.state is SessState.END_RCVD:
            self.connection.reply_when_sendable(self._answer_end)
        self.maybe_unmapped()

    def _answer_end(self) -> None:
        if self.state is SessState.END_RCVD:
            self.end()  # 2.5.3: answer the peer's end with ours

    def maybe_unmapped(self) -> None:
        if self.state is SessState.UNMAPPED:
            self.connection.session_unmapped(self)

    def fail(self, exc: ProtocolError) -> None:
        """The peer broke a session rule: report it and end the session with it."""
        error = ev.ProtocolErrorRaised.of(exc, "session", self)
        self.connection.emit(error)
        self.connection.reply_when_sendable(lambda: self._send_error(exc))

    def _send_error(self, exc: ProtocolError) -> None:
        """End with `exc` (after our begin if it is still due, 2.5.2) unless already ending."""
        if self.machine.allows(SessInput.SEND_END_ERROR):
            self.end(exc.condition, exc.description)
