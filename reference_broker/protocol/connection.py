"""The reference broker's protocol logic, sans-IO: the `amqp10` engine of each connection
and the broker logic that answers its events. No socket, no clock, no event loop: bytes
and `now` come in, bytes go out through a `write` callable, and every deadline and
deferred step goes through the injected `runtime/scheduler.Scheduler` (runtime/pump.py
implements it on asyncio; scheduler.ManualScheduler in memory, see runtime/memory.py).

Split the way the engine splits connection, session and link: this module owns
`BrokerConnection`, the connection level (2.4): the engine made once the protocol header
says SASL or not (engine_setup.py), the event table that hands each engine event to its
handler, close, the idle time-out, connection-scoped protocol errors, its deadlines (engine
timer, handshake, close grace) and the turn's steps. The handlers beside it:
open_handler.py (the peer's open with the configured limits and sole-connection
admission, the handshake time-out), session_handler.py (begin, end, windows),
link_handler.py (attach, detach, release: requeue, recovery, dynamic nodes,
/management pairs, coordinators), delivery_handler.py (the hot path: transfers, flows,
dispositions, publisher credit); permissions.py (`ConnectionAccess`) judges what the user
may do; context.py holds what every connection shares (`BrokerContext`). May touch: the
engine objects it creates, the context, the vhost through its API, its handlers and the
connection's transactions (features/transactions.py, Part 4).

Entry points (each ends the turn: dispatch of every queue with work, then one write per
connection with bytes): `BrokerConnection.receive_data(data, now)`, `.transport_lost(now)`,
the timers it arms itself, and the context's callbacks (durable confirms, alarms, queue
deletion, housekeeping). A turn's writes reach other connections too (a publish wakes a
consumer elsewhere), which is why output is pushed to each connection's `write` at the
end of the turn rather than pulled by one transport.

Hot path per read: engine.receive_data (at most MAX_FRAMES_PER_STEP frames at a time);
events, each one dict lookup and one bound method of a handler (as before the split);
vhost.dispatch_pending (deliveries of every connection); confirms batched per session; one
write per dirty connection.

Echo (2.7.4): the engine's policy has auto_echo off, so every echo is answered by the
delivery handler from the broker's own state (a consumer's by its queue, credit API v2),
and the `no-echo` fault can suppress them all. The faults that must break an engine rule to
reach the wire (skip-window-check, the credit faults) relax it in that policy
(Faults.endpoint_policy). The wire-layer faults (faults/wire.py) edit the engine's outgoing
session frames (`Connection.edit_outgoing`), only while one is on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.engine import Connection, SaslState, UsageError
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.frames import PROTOCOL_HEADER_SIZE
from amqpspec.amqp10.spec import Cond

from ..admin.management_links import ManagementPair
from ..faults.parser import DIE, FaultTriggeredError, inspect
from ..features.recovery import CONNECTION_ENDED
from ..features.transactions import Transactions
from ..queues.vhost import ConnectionSummary
from .context import BrokerContext
from .deadlines import Deadlines
from .delivery_handler import DeliveryHandler
from .engine_setup import new_engine
from .limits import sasl_timeout_reason
from .link_handler import LinkHandler
from .links import PublisherLink
from .open_handler import OpenHandler
from .permissions import ConnectionAccess
from .sasl import answer_as_sasl_client
from .session_handler import SessionHandler
from .sessions import BrokerSession

log = logging.getLogger("reference_broker.connection")

MAX_FRAMES_PER_STEP = 128  # frames the engine handles before we act on them (receive())


class BrokerConnection:
    """The broker side of one AMQP connection (engine + model). `write(data)` sends bytes
    to the peer; `close_transport()` drops it (once `open` is False nothing else is
    written). `connected_at` is the wall-clock time the admin API shows."""

    def __init__(
        self,
        context: BrokerContext,
        write: Callable[[bytes], None],
        close_transport: Callable[[], None],
        peer: tuple[str, int],
        local: tuple[str, int],
        *,
        connected_at: float = 0.0,
        tls_identity: str | None = None,
    ) -> None:
        self.context = context
        self.tls_identity = tls_identity  # a verified client certificate's CN (EXTERNAL)
        self.scheduler = context.scheduler
        self.vhost = context.vhost
        self.config = context.config
        self.faults = context.faults
        self._write = write
        self._close_transport = close_transport
        self.peer = peer
        self.open = True
        self.sessions: dict[Any, BrokerSession] = {}
        self.publishers: dict[Any, PublisherLink] = {}  # engine Link -> publisher (hot path)
        # /management node clients: their link pairs by (session, link name) and by link
        self.management_pairs: dict[tuple[BrokerSession, str], ManagementPair] = {}
        self.management_links: dict[Any, ManagementPair] = {}
        self.transactions = Transactions(self)  # Part 4: coordinators, transactions
        self.sessions_with_confirms: list[BrokerSession] = []
        self._dirty = False
        self.name = f"{peer[0]}:{peer[1]} -> {local[0]}:{local[1]}"
        self._head = b""  # the first bytes, until the protocol header is complete
        self.engine: Connection | None = None  # made once the client's header says SASL or not
        self.summary = ConnectionSummary(
            self.name, peer[0], peer[1], local[0], local[1], connected_at=connected_at
        )
        self.summary.close_forced = self.close_by_operator
        self.summary.set_transaction_timeout = self.transactions.set_timeout
        self.access = ConnectionAccess(
            self.config.permissions_of,
            self.vhost,
            self.summary,
            skip_write=self.faults.publish_without_write_permission,
        )
        self.failure: BaseException | None = None  # the internal error that closed it
        self._parser_faults = self.faults.parser  # faults/parser.py sees every engine event
        self.hung = False  # a parser fault stopped this connection (no reads, no writes)
        # deadlines besides the engine's timer (2.4.5 heartbeats, idle time-out)
        self.deadlines = Deadlines(
            self.scheduler, self.config.limits.handshake_timeout, self._on_timer
        )
        context.connections.add(self)
        self.open_handler = OpenHandler(self)  # open_handler.py: the peer's open, or none
        self.session_handler = SessionHandler(self)
        self.link_handler = LinkHandler(self)
        self.delivery_handler = DeliveryHandler(self)
        self._handlers = self._event_table()
        self.deadlines.arm(self.engine)  # the handshake deadline

    def _event_table(self) -> dict[type, Callable[[Any], None]]:
        """Engine event type -> the bound method that answers it (one lookup per event)."""
        sessions, links, deliveries = self.session_handler, self.link_handler, self.delivery_handler
        return {
            ev.TransferReceived: deliveries.on_transfer,
            ev.FlowReceived: deliveries.on_flow,
            ev.DispositionReceived: deliveries.on_disposition,
            ev.RemoteOpen: self.open_handler.on_open,
            ev.RemoteBegin: sessions.on_begin,
            ev.RemoteAttach: links.on_attach,
            ev.RemoteDetach: links.on_detach,
            ev.RemoteEnd: sessions.on_end,
            ev.RemoteClose: self._on_close,
            ev.SaslAuthenticated: self._on_sasl,
            ev.ProtocolErrorRaised: self._on_protocol_error,
            ev.IdleTimeout: self._on_idle_timeout,
            ev.DeliveryAborted: self._ignore,
            ev.TransportClosed: self._ignore,
        }

    # ------------------------------------------------------------------ SASL (5.3, sasl.py)
    def _on_sasl(self, event: ev.SaslAuthenticated) -> None:
        self.deadlines.sasl_due = None
        if event.code == 0:
            self.summary.user = event.username or "anonymous"
        else:
            log.info("%s: SASL %s refused for %r", self.name, event.mechanism, event.username)

    # ------------------------------------------------------------------ entry points
    def receive_data(self, data: bytes, now: float) -> None:
        """Bytes from the peer (b"" is not end of stream: see transport_lost). Ends the
        turn; an internal error closes this connection with amqp:internal-error."""
        if not self.open or self.hung:
            return
        try:
            self.receive(data, now)
            self.context.end_turn(now)
        except FaultTriggeredError as fault:
            self._fault_fired(fault, now)
        except Exception as exc:
            self._internal_error(exc, now)

    def _fault_fired(self, fault: FaultTriggeredError, now: float) -> None:
        """A parser fault (parser_faults): die (drop the socket, nothing written) or hang
        (keep the socket, never read or write again)."""
        log.warning("%s: %s", self.name, fault)
        if fault.action == DIE:
            self.shutdown()
        else:
            self.hung = True
            self.deadlines.cancel()
        try:
            self.context.end_turn(now)
        except Exception as more:
            self.context.failed(more, "dispatch failed after a fault")

    def transport_lost(self, now: float) -> None:
        """The peer's byte stream ended or broke: release everything, end the turn."""
        self.deadlines.cancel()
        try:
            self.connection_lost(now)
            self.context.end_turn(now)
        except Exception as exc:
            self.context.failed(exc, f"{self.name}: error on transport loss")

    def _on_timer(self, now: float) -> None:
        self.deadlines.fired()
        if not self.open or self.hung:
            return
        try:
            self.handle_timer(now)
            self.context.end_turn(now)
        except Exception as exc:
            self._internal_error(exc, now)
            return
        if self.open:
            self.deadlines.arm(self.engine)

    def _internal_error(self, exc: BaseException, now: float) -> None:
        self.failure = exc
        self.context.failed(exc, f"{self.name}: internal error; closing the connection")
        try:
            if self.engine is not None:
                self.engine.close(Cond.INTERNAL_ERROR, "reference broker internal error")
            self.flush(now)
        except Exception:
            pass
        self.shutdown()
        try:
            self.context.end_turn(now)
        except Exception as more:
            self.context.failed(more, "dispatch failed after an internal error")

    # ------------------------------------------------------------------ steps
    def receive(self, data: bytes, now: float) -> None:
        """One read's input through the engine and its events (no turn end)."""
        summary = self.summary
        summary.bytes_in += len(data)  # admin API recv_oct / recv_cnt: counters, per read
        engine = self.engine
        if engine is None:
            self._head += data
            if len(self._head) < PROTOCOL_HEADER_SIZE:
                return
            data, self._head = self._head, b""
            header = data[:PROTOCOL_HEADER_SIZE]  # SASL first or not (engine_setup.py)
            engine = self.engine = new_engine(self.context, header, self.peer[0], self.tls_identity)
            if engine.sasl is not None and not self.faults.no_sasl_timeout:
                self.deadlines.start_sasl(engine, self.config.limits.sasl_timeout)
        # credit is decided every MAX_FRAMES_PER_STEP frames: a publisher's re-grant goes
        # out while we work on the rest of a large read
        more = engine.receive_data(data, now, MAX_FRAMES_PER_STEP)
        self._after_step(now)
        while more and self.open:
            if engine.paused_for_answer:
                # our open, begin or attach (and a link's first credit) go out before the
                # frames behind the peer's: pipelined input meets what stepwise input meets
                self.flush(now)
            more = engine.receive_buffered(now, MAX_FRAMES_PER_STEP)
            self._after_step(now)
        summary.frames_in = engine.frames_received
        self.session_handler.reopen_windows()

    def _after_step(self, now: float) -> None:
        """The events of one step of input, then publisher credit and confirms."""
        self._drain_events()
        deliveries = self.delivery_handler
        if deliveries.credit_checks and deliveries.regrant() and self.open:
            self.flush(now)  # the publisher resumes now, in parallel with our work
        if self.sessions_with_confirms:
            self.flush_confirms()
        self.mark_dirty()

    def flush_confirms(self) -> None:
        sessions = self.sessions_with_confirms
        self.sessions_with_confirms = []
        for session in sessions:
            session.flush_confirms()

    def mark_dirty(self) -> None:
        if not self._dirty:
            self._dirty = True
            self.context.dirty.append(self)

    @property
    def dirty(self) -> bool:
        """Bytes or confirms wait for the end of the turn (flush)."""
        return self._dirty

    def flush(self, now: float) -> None:
        self._dirty = False
        if self.hung:
            return
        if self.sessions_with_confirms:
            self.flush_confirms()
        engine = self.engine
        if engine is not None:
            data = engine.data_to_send(now)
            if data and self.open:
                self._write(data)
                summary = self.summary  # admin API send_oct / send_cnt
                summary.bytes_out += len(data)
                summary.frames_out = engine.frames_sent
            if engine.finished and self.open:
                self.shutdown()
        if self.open:
            self.deadlines.arm(self.engine)

    # ------------------------------------------------------------------ deadlines
    def get_timer(self) -> float | None:
        """The earliest deadline: the engine's, the handshake's and the close grace's."""
        return self.deadlines.earliest(self.engine)

    def handle_timer(self, now: float) -> None:
        """Whatever is due at `now` (no turn end)."""
        engine = self.engine
        deadlines = self.deadlines
        if deadlines.hard_close_due is not None and now >= deadlines.hard_close_due:
            self.flush(now)  # the peer had CLOSE_GRACE_S to answer our close
            self.shutdown()
            return
        if deadlines.handshake_due is not None and now >= deadlines.handshake_due:
            deadlines.handshake_due = None
            if engine is None or engine.remote_open is None:
                self.open_handler.timed_out(engine)
                return
        if deadlines.sasl_due is not None and now >= deadlines.sasl_due:
            deadlines.sasl_due = None
            if engine is not None and engine.sasl_state is not SaslState.DONE:
                log.info("%s: %s", self.name, sasl_timeout_reason(self.config.limits))
                self.shutdown()  # 5.3: no close frame in the SASL layer
                return
        if engine is not None:
            engine.handle_timer(now)
            self._drain_events()
        self.mark_dirty()

    def _drain_events(self) -> None:
        handlers = self._handlers
        next_event = self.engine.next_event
        ignore = self._ignore
        parser_faults = self._parser_faults
        event = next_event()
        while event is not None:
            if parser_faults:
                inspect(self.faults, self, event)
            try:
                handlers.get(type(event), ignore)(event)
            except UsageError as exc:
                # the engine moved on meanwhile (e.g. it already closed the connection on a
                # later frame of the same read): our answer is no longer possible
                log.debug("%s: %s not answered: %s", self.name, type(event).__name__, exc)
            event = next_event()

    def shutdown(self) -> None:
        """The byte stream is done (finished, lost or dropped): release everything."""
        if not self.open:
            return
        self.open = False
        self.session_handler.release_all(CONNECTION_ENDED)
        self.vhost.owners.release_owner(self)
        self.context.dynamic.connection_gone(self)
        self.context.sole.gone(self, self.summary.container_id)
        self.context.recovery.connection_gone(self)
        self.vhost.unregister_connection(self.name)
        self.context.forget_connection_waiters(self)
        self.context.connections.discard(self)
        self.deadlines.cancel()
        self._close_transport()

    def close_forced(self, now: float, description: str = "broker shutdown") -> None:
        """Broker stop: close with amqp:connection:forced (2.8.16), flush, drop."""
        engine = self.engine
        if self.open and engine is not None and engine.remote_open is not None:
            try:
                engine.close(Cond.CONNECTION_FORCED, description)
            except UsageError:
                pass  # already closing
            self.flush(now)
        self.shutdown()

    def close_by_operator(self, description: str) -> None:
        """The admin API closes this connection (amqp:connection:forced, 2.8.16)."""
        self.close_forced(self.scheduler.now(), description)

    def connection_lost(self, now: float) -> None:
        if self.open and self.engine is None:
            self.shutdown()
        if self.open:
            try:
                self.engine.receive_data(b"", now)
            except Exception:
                log.debug("engine error on transport loss", exc_info=True)
            for _ in self.engine.events():
                pass
            self.shutdown()

    # ------------------------------------------------------------------ connection (2.4)
    def close_with(self, error: Any) -> None:
        """Close this connection with `error` from another connection's turn (written at
        the turn's end); the peer gets CLOSE_GRACE_S to answer."""
        engine = self.engine
        if not self.open or engine is None:
            return
        try:
            engine.close(error)
        except UsageError:
            return  # already closing
        self.deadlines.schedule_hard_close()
        self.mark_dirty()

    def _on_close(self, event: ev.RemoteClose) -> None:
        self.session_handler.release_all(CONNECTION_ENDED)

    def _on_idle_timeout(self, event: ev.IdleTimeout) -> None:
        """2.4.5: nothing received for twice our idle-time-out: the engine has sent close
        with amqp:resource-limit-exceeded; the peer gets CLOSE_GRACE_S to answer it."""
        log.info("%s: nothing received for %d ms; closing", self.name, event.timeout_ms)
        self.deadlines.schedule_hard_close()

    def _on_protocol_error(self, event: ev.ProtocolErrorRaised) -> None:
        log.info("%s: %s %s: %s", self.name, event.scope, event.condition, event.description)
        if self.faults.sasl_answers_as_client and self.engine is not None:
            answer_as_sasl_client(self.engine, event.error)
        if event.scope == "connection":
            self.deadlines.schedule_hard_close()
            return
        self.session_handler.on_protocol_error(event)

    def _ignore(self, event: Any) -> None:
        return None
