"""The probe's connection and sessions: SASL, open, begin, end, close, a TCP drop.

Owns: `ProbeConnection` (raw_handshake: headers and SASL without an engine, for a crafted
open; open, pipelined or not; begin, open_session, end, close, disconnect).
"""

from __future__ import annotations

import os
from typing import Any

from amqpspec.amqp10.composites import Error
from amqpspec.amqp10.engine import (
    ClientSasl,
    Connection,
    Event,
    RemoteBegin,
    RemoteClose,
    RemoteEnd,
    RemoteOpen,
    SaslOutcomeReceived,
    Session,
)
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER
from amqpspec.conformance.probe.waits import ProbeWaits
from amqpspec.conformance.probe.wire import WaitTimeout
from amqpspec.conformance.verdicts import CaseFailed, HarnessError


class ProbeConnection(ProbeWaits):
    """The AMQP connection and its sessions on the probe's wire."""

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

    def end(self, session: Session, wait: bool = True) -> None:
        session.end()
        self.flush()
        if wait:
            self._answer(lambda e: isinstance(e, RemoteEnd) and e.session is session, None, "end")
