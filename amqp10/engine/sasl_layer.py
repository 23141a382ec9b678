"""The SASL layer in front of a connection (5.3): the SASL header and frames, the
mechanism exchange through ClientSasl / ServerSasl (sasl.py; a server's SCRAM-SHA-256
challenge and response through scram.py), and the hand-over to the
AMQP header after a successful outcome (5.3.2).

Owns: the SASL state machine (SASL_TABLE, `sasl_machine`), `sasl_outcome`,
`sasl_username`, and whether the exchange failed (then the connection is finished: SASL
has no close). A part of `Connection` (connection.py composes it). Writes SASL frames to
the hub's output buffer, raises events through its queue, and on success resets its
decoder for the AMQP header and calls the handshake's `_send_header_and_open()`
(handshake.py).
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import (
    SaslChallenge,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    SaslResponse,
)
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.sasl import ClientSasl, ServerSasl
from amqpspec.amqp10.engine.scram import SCRAM_SHA_256, ScramServer
from amqpspec.amqp10.engine.transitions import SaslInput, SaslState, sasl_machine
from amqpspec.amqp10.errors import ErrorKind, ProtocolError
from amqpspec.amqp10.frames import SASL_HEADER, Frame, FrameType, encode_frame
from amqpspec.amqp10.spec import Cond, SaslCode


class SaslLayer:
    """SASL frames and outcome (a part of Connection)."""

    def _init_sasl(
        self, sasl: ClientSasl | ServerSasl | None, transitions: set[tuple[str, str, str]] | None
    ) -> None:
        self.sasl = sasl
        self.sasl_machine = sasl_machine() if sasl is not None else None
        if self.sasl_machine is not None:
            self.sasl_machine.visited = transitions
        self._sasl_failed = False
        self.sasl_outcome: int | None = None
        self.sasl_username: str | None = None
        self._sasl_exchange: ScramServer | None = None  # a challenge/response under way
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

    @property
    def sasl_state(self) -> SaslState | None:
        return None if self.sasl_machine is None else self.sasl_machine.state

    @property
    def in_sasl(self) -> bool:
        return self.sasl_machine is not None and self.sasl_machine.state is not SaslState.DONE

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
