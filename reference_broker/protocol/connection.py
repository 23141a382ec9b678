"""The reference broker's protocol logic, sans-IO: the `amqp10` engine of each connection
and the broker logic that answers its events. No socket, no clock, no event loop: bytes
and `now` come in, bytes go out through a `write` callable, and every deadline and
deferred step goes through the injected `scheduler.Scheduler` (runtime/pump.py implements it on
asyncio; scheduler.ManualScheduler in memory, see runtime/memory.py).

Owns: `BrokerContext` (what every connection shares: vhost, config, alarms, group commit,
scheduler, the connections with bytes to write, the periodic housekeeping) and
`BrokerConnection` (SASL judging, open negotiation with the configured limits, sessions
and links, routing publishes, confirms, consumer settlement, requeue on
detach/end/close/loss, alarm windows, its deadlines: engine timer, handshake, close
grace). May touch: the engine objects it creates, the vhost and queues through their
APIs, sessions.py, links.py and features/transactions.py (Part 4: control links, transactional
transfers, dispositions and flows go there).

Entry points (each ends the turn: dispatch of every queue with work, then one write per
connection with bytes): `BrokerConnection.receive_data(data, now)`, `.transport_lost(now)`,
the timers it arms itself, and the context's callbacks (durable confirms, alarms, queue
deletion, housekeeping). A turn's writes reach other connections too (a publish wakes a
consumer elsewhere), which is why output is pushed to each connection's `write` at the
end of the turn rather than pulled by one transport.

Hot path per read: engine.receive_data (at most MAX_FRAMES_PER_STEP frames at a time);
events; vhost.dispatch_pending (deliveries of every connection); confirms batched per
session; one write per dirty connection.

Echo (2.7.4): the engine's policy has auto_echo off, so every echo is answered here from
the broker's own state (a consumer's by its queue, credit API v2), and the `no-echo`
fault can suppress them all. The faults that must break an engine rule to reach the wire
(skip-window-check, the credit faults) relax it in that policy (Faults.endpoint_policy).
The wire-layer faults (faults/wire.py) edit the engine's outgoing session frames
(`Connection.edit_outgoing`), only while one is on.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.composites import (
    Attach,
    Coordinator,
    Error,
    Rejected,
    SaslInit,
    SaslResponse,
)
from amqpspec.amqp10.engine import Connection, ConnState, ServerSasl, UsageError
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.transitions import LinkState, SessState
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import PROTOCOL_HEADER_SIZE, ProtocolHeader, ProtocolId
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.serial import serial_add
from amqpspec.amqp10.spec import Cond, RcvSettleMode, Role
from amqpspec.amqp10.types import symbol

from ..admin.management import MANAGEMENT_ADDRESS
from ..admin.management import answer as management_answer
from ..admin.management_links import ManagementPair
from ..config import BrokerConfig
from ..faults import wire as wire_faults
from ..faults.catalog import Faults
from ..faults.parser import DIE, FaultTriggeredError, inspect
from ..features import relay
from ..features.alarms import ResourceAlarms, alarms_from_config
from ..features.dynamic_nodes import DynamicNodes
from ..features.filters import in_place
from ..features.recovery import (
    CLOSED,
    CONNECTION_ENDED,
    SESSION_ENDED,
    SUSPENDED,
    Recovery,
    map_room,
    reported_source,
)
from ..features.sole_connection import SoleConnections
from ..features.transactions import CoordinatorLink, Transactions, is_transactional
from ..queues.addressing import (
    Address,
    AddressError,
    AddressKind,
    parse_source,
    parse_target,
    parse_to,
)
from ..queues.classic import CreditReply, Delivery
from ..queues.store import GroupCommit
from ..queues.streams import OffsetSpecError, StreamQueue, offset_spec_from_filter
from ..queues.vhost import BrokerError, ConnectionSummary, VirtualHost
from ..runtime.scheduler import Scheduler, Timer
from .links import ConsumerLink, PublisherLink
from .permissions import CONFIGURE, FULL, READ, WRITE, Permissions
from .sessions import RELEASED_STATE, BrokerSession

log = logging.getLogger("reference_broker.connection")

MAX_FRAMES_PER_STEP = 128  # frames the engine handles before we act on them (receive())
CLOSE_GRACE_S = 5.0  # after our close, wait this long for the peer's before dropping it
HOUSEKEEPING_INTERVAL_S = 0.2  # alarm readings, store flush / compaction
_GONE_LINK = frozenset({LinkState.DETACHED, LinkState.DETACH_SENT})
_LIVE_SESSION = frozenset({SessState.MAPPED, SessState.BEGIN_RCVD})


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class BrokerContext:
    """What all connections of one broker share."""

    def __init__(
        self,
        vhost: VirtualHost,
        config: BrokerConfig,
        scheduler: Scheduler,
        alarms: ResourceAlarms | None = None,
    ) -> None:
        self.vhost = vhost
        self.config = config
        self.scheduler = scheduler
        self.alarms = alarms
        store = vhost.store
        self.commit = GroupCommit(store, scheduler) if store is not None else None
        self.faults: Faults = config.faults
        self.dynamic = DynamicNodes(vhost, self.faults)  # features/dynamic_nodes.py (3.5.10)
        self.sole = SoleConnections(self.faults)  # features/sole_connection.py (soleconn)
        self.recovery = Recovery(vhost, self.faults, scheduler.now)  # features/recovery.py (2.6.13)
        self.connections: set[BrokerConnection] = set()
        self.dirty: list[BrokerConnection] = []
        self.alarm_active = bool(alarms and alarms.any_active)
        self.failures: list[BaseException] = []  # internal errors (the last 100), for tests
        self._durable_waiters: deque[tuple[int, BrokerSession, int, PublisherLink]] = deque()
        # 2.6.1: a link is named uniquely per container pair and direction; the attached
        # ones by (client container-id, link name, broker role) -> (connection, engine link)
        self.attached_links: dict[tuple[str | None, str, bool], tuple[BrokerConnection, Any]] = {}
        self._ids = itertools.count(1)
        self._continuation = False
        self._housekeeping: Timer | None = None
        self._compacting = False
        # RabbitMQ's max_queue_credit: deliveries a queue hands one consumer link per turn
        self.dispatch_batch = config.limits.max_queue_credit
        if alarms is not None:
            alarms.add_observer(self._on_alarm)
        if self.commit is not None:
            self.commit.on_durable.append(self._on_durable)
            self.commit.on_failed.append(self._on_commit_failed)
        vhost.listeners.append(self._on_vhost_event)

    @classmethod
    def from_config(
        cls,
        config: BrokerConfig,
        scheduler: Scheduler,
        alarms: ResourceAlarms | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> BrokerContext:
        """A broker's shared state from its config: the vhost (with its durable store when
        config.data_dir is set) and the resource alarms (from config.alarms unless given).
        `wall_clock` (seconds since the epoch) stamps stream entries (timestamp offsets)."""
        vhost = VirtualHost(
            faults=config.faults,
            data_dir=config.data_dir,
            fsync=config.fsync,
            clock=wall_clock,
        )
        if alarms is None:
            alarms = alarms_from_config(
                **dataclasses.asdict(config.alarms), data_dir=config.data_dir
            )
        return cls(vhost, config, scheduler, alarms)

    def next_id(self) -> int:
        return next(self._ids)

    # ------------------------------------------------------------------ turn end
    def run_dispatch(self) -> None:
        """Queue events of every queue with work -> transfers and flows, at most
        `dispatch_batch` deliveries per queue per turn: the rest follows after a write, so
        the consumer starts on the first batch while we encode the next. Echo and drain
        replies (CreditReply) carry the queue's `available` (2.6.7)."""
        for event in self.vhost.dispatch_pending(self.dispatch_batch):
            if type(event) is Delivery:
                event.consumer.owner.deliver(event)
            elif type(event) is CreditReply:
                event.consumer.owner.credit_reply(event)

    def flush(self, now: float) -> None:
        dirty = self.dirty
        while dirty:
            connection = dirty.pop()
            connection.flush(now)

    def end_turn(self, now: float) -> None:
        self.run_dispatch()
        self.flush(now)
        if self.vhost.dispatch_due and not self._continuation:
            self._continuation = True
            self.scheduler.call_soon(self._continue_dispatch)

    def _continue_dispatch(self, now: float) -> None:
        self._continuation = False
        try:
            self.end_turn(now)
        except Exception as exc:
            self.failed(exc, "dispatch failed")

    def failed(self, exc: BaseException, what: str) -> None:
        log.error("%s", what, exc_info=exc)
        self.failures.append(exc)
        del self.failures[:-100]

    # ------------------------------------------------------------------ housekeeping
    def start_housekeeping(self, interval: float = HOUSEKEEPING_INTERVAL_S) -> None:
        """Every `interval`: alarm readings, flushing acks/purges of durable queues, log
        compaction (as blocking work), then a turn end."""

        def tick(now: float) -> None:
            self._housekeeping = self.scheduler.call_at(now + interval, tick)
            try:
                self.housekeep(now)
            except Exception as exc:
                self.failed(exc, "housekeeping failed")

        self._housekeeping = self.scheduler.call_at(self.scheduler.now() + interval, tick)

    def stop_housekeeping(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            self._housekeeping = None

    def housekeep(self, now: float) -> None:
        if self.alarms is not None:
            self.alarms.check(now)
        self.recovery.expire(now)  # 3.5.3 timeout of kept termini (features/recovery.py)
        store = self.vhost.store
        if store is not None and self.commit is not None:
            if store.has_pending:
                self.commit.kick()
            elif not self._compacting and store.should_compact():
                self._compacting = True
                self.scheduler.run_blocking(store.compact, self._compacted)
        self.end_turn(now)

    def _compacted(self, now: float, result: Any) -> None:
        self._compacting = False
        if isinstance(result, BaseException):
            self.failed(result, "compaction failed")

    # ------------------------------------------------------------------ durable confirms
    def wait_durable(
        self, token: int, session: BrokerSession, delivery_id: int, link: PublisherLink
    ) -> None:
        assert self.commit is not None
        self._durable_waiters.append((token, session, delivery_id, link))
        self.commit.kick()

    def _on_durable(self, now: float, durable_through: int) -> None:
        """The store fsynced every record up to `durable_through`: confirm those publishes
        (tokens grow with every append, so the waiters are in token order)."""
        waiters = self._durable_waiters
        if not self.vhost.commit_streams(durable_through) and not waiters:
            return
        while waiters and waiters[0][0] <= durable_through:
            _, session, delivery_id, link = waiters.popleft()
            link.confirmed()
            if session.connection.open:
                session.confirm(delivery_id)
                session.connection.mark_dirty()
        self.end_turn(now)

    def _on_commit_failed(self, now: float, exc: BaseException) -> None:
        """The store could not fsync: those publishes stay unconfirmed (the publisher's
        unsettled deliveries tell it so); the next kick tries again."""
        self.failed(exc, "group commit failed")

    def forget_connection_waiters(self, connection: BrokerConnection) -> None:
        self._durable_waiters = deque(
            w for w in self._durable_waiters if w[1].connection is not connection
        )

    def _on_vhost_event(self, event: str, queue: Any) -> None:
        """A queue was deleted (admin API, auto-delete): its consumers are detached with
        amqp:resource-deleted (RabbitMQ 4 does the same)."""
        if event != "queue.deleted":
            return
        for consumer in queue.consumers:
            owner = consumer.owner
            if isinstance(owner, ConsumerLink):
                owner.session.connection.queue_deleted(owner)
        self.flush(self.scheduler.now())

    # ------------------------------------------------------------------ alarms
    def _on_alarm(self, kind: str, active: bool, any_active: bool) -> None:
        if any_active == self.alarm_active:
            return
        self.alarm_active = any_active
        log.warning("resource alarm %s %s", kind, "raised" if active else "cleared")
        if self.faults.ignore_alarm:
            return  # fault (PR #9953): publishers are never blocked
        window = 0 if any_active else self.config.limits.max_incoming_window
        for connection in list(self.connections):
            connection.set_windows(window)
        self.flush(self.scheduler.now())


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
        self._credit_checks: list[PublisherLink] = []  # publishers to consider re-granting
        # fault session-scoped-delivery-tags: the tags each session's publishers used
        self._fault_session_tags: dict[BrokerSession, set[bytes]] = {}
        self.transactions = Transactions(self)  # Part 4: coordinators, transactions
        self.sessions_with_confirms: list[BrokerSession] = []
        self._dirty = False
        limits = self.config.limits
        self.name = f"{peer[0]}:{peer[1]} -> {local[0]}:{local[1]}"
        self._limits = limits
        self._head = b""  # the first bytes, until the protocol header is complete
        self.engine: Connection | None = None  # made once the client's header says SASL or not
        self.summary = ConnectionSummary(
            self.name, peer[0], peer[1], local[0], local[1], connected_at=connected_at
        )
        self.summary.close_forced = self.close_by_operator
        self.failure: BaseException | None = None  # the internal error that closed it
        self._parser_faults = self.faults.parser  # parser_faults sees every engine event
        self.hung = False  # a parser fault stopped this connection (no reads, no writes)
        # deadlines besides the engine's timer (2.4.5 heartbeats, idle time-out)
        bound = limits.handshake_timeout
        self._handshake_due: float | None = self.scheduler.now() + bound if bound else None
        self._hard_close_due: float | None = None
        self._timer: Timer | None = None
        self._timer_at: float | None = None
        context.connections.add(self)
        self._handlers: dict[type, Callable[[Any], None]] = {
            ev.TransferReceived: self._on_transfer,
            ev.FlowReceived: self._on_flow,
            ev.DispositionReceived: self._on_disposition,
            ev.RemoteOpen: self._on_open,
            ev.RemoteBegin: self._on_begin,
            ev.RemoteAttach: self._on_attach,
            ev.RemoteDetach: self._on_detach,
            ev.RemoteEnd: self._on_end,
            ev.RemoteClose: self._on_close,
            ev.SaslAuthenticated: self._on_sasl,
            ev.ProtocolErrorRaised: self._on_protocol_error,
            ev.IdleTimeout: self._on_idle_timeout,
            ev.DeliveryAborted: self._ignore,
            ev.TransportClosed: self._ignore,
        }
        self._arm_timer()  # the handshake deadline

    # ------------------------------------------------------------------ SASL (5.3)
    def _anonymous_allowed(self) -> bool:
        mode = self.config.sasl_anonymous
        return mode == "always" or (mode == "loopback" and is_loopback(self.peer[0]))

    def _make_engine(self, first_bytes: bytes) -> Connection:
        """5.3.1: a client that sends the AMQP header (id 0) skips SASL; it is let in only
        where ANONYMOUS would be (like RabbitMQ's anonymous login). Anything else gets
        the SASL layer, whose engine answers an unsupported header (2.2)."""
        try:
            header = ProtocolHeader.decode(first_bytes)
        except DecodeError:
            header = None
        sasl = None
        if header is None or header.protocol_id != ProtocolId.AMQP or not self._anonymous_allowed():
            sasl = self._sasl()
        limits = self._limits
        engine = Connection(
            "server",
            f"amqpspec-reference-broker-{self.context.next_id()}",
            max_frame_size=limits.max_frame_size,
            channel_max=limits.channel_max - 1,
            idle_timeout_ms=limits.idle_time_out_ms or None,
            # 2.4.5: advertise T, close a peer silent for 2T (resource-limit-exceeded)
            idle_threshold_ms=2 * limits.idle_time_out_ms or None,
            sasl=sasl,
            # echo answered from the queue's state (see _on_flow); faults relax the rest
            policy=self.faults.endpoint_policy(auto_echo=False),
        )
        if self.faults.wire:  # fault injection: our frames as the buggy broker sent them
            engine.edit_outgoing(wire_faults.editor(self.faults, engine))
        return engine

    def _sasl(self) -> ServerSasl:
        config = self.config
        loopback = is_loopback(self.peer[0])
        mechanisms = ["PLAIN"]
        if self._anonymous_allowed():
            mechanisms.append("ANONYMOUS")
        loopback_users = set(config.loopback_users)

        def verify(authzid: str, username: str, password: str) -> bool:
            user = config.user(username)
            if user is None or user.password != password:
                return False
            return loopback or username not in loopback_users

        if self.tls_identity is not None:  # RabbitMQ's rabbitmq_auth_mechanism_ssl
            mechanisms.insert(0, "EXTERNAL")
        return ServerSasl(
            tuple(mechanisms),
            verify_plain=verify,
            external_identity=self.tls_identity,
            verify_external=lambda name: (
                config.user(name) is not None and (loopback or name not in loopback_users)
            ),
        )

    def _on_sasl(self, event: ev.SaslAuthenticated) -> None:
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
            self._cancel_timer()
        try:
            self.context.end_turn(now)
        except Exception as more:
            self.context.failed(more, "dispatch failed after a fault")

    def transport_lost(self, now: float) -> None:
        """The peer's byte stream ended or broke: release everything, end the turn."""
        self._cancel_timer()
        try:
            self.connection_lost(now)
            self.context.end_turn(now)
        except Exception as exc:
            self.context.failed(exc, f"{self.name}: error on transport loss")

    def _on_timer(self, now: float) -> None:
        self._timer = None
        self._timer_at = None
        if not self.open or self.hung:
            return
        try:
            self.handle_timer(now)
            self.context.end_turn(now)
        except Exception as exc:
            self._internal_error(exc, now)
            return
        if self.open:
            self._arm_timer()

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
            engine = self.engine = self._make_engine(data[:PROTOCOL_HEADER_SIZE])
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
        self.reopen_windows()

    def reopen_windows(self) -> None:
        """2.5.6: re-open a session's incoming window once less than half is left, once
        per read (one flow per read at most, where the engine's auto_window would send
        one per half window). The engine enforces a grant from the moment it is written
        out, so a burst beyond the window we advertised ends the session with
        window-violation."""
        for session in self.sessions.values():  # a handful: checked after every read
            engine_session = session.engine
            limit = engine_session.incoming_window_max
            if engine_session.incoming_window * 2 < limit and engine_session.state is (
                SessState.MAPPED
            ):
                session.set_window(limit)

    def _after_step(self, now: float) -> None:
        """The events of one step of input, then publisher credit and confirms."""
        self._drain_events()
        if self._credit_checks:
            checks, self._credit_checks = self._credit_checks, []
            regranted = False
            for publisher in checks:
                regranted |= publisher.maybe_regrant()
            if regranted and self.open:
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
            self._arm_timer()

    # ------------------------------------------------------------------ deadlines
    def get_timer(self) -> float | None:
        """The earliest deadline: the engine's (heartbeat, idle time-out), the handshake's
        and the close grace's."""
        due = None if self.engine is None else self.engine.get_timer()
        for deadline in (self._handshake_due, self._hard_close_due):
            if deadline is not None and (due is None or deadline < due):
                due = deadline
        return due

    def handle_timer(self, now: float) -> None:
        """Whatever is due at `now` (no turn end)."""
        engine = self.engine
        if self._hard_close_due is not None and now >= self._hard_close_due:
            self.flush(now)  # the peer had CLOSE_GRACE_S to answer our close
            self.shutdown()
            return
        if self._handshake_due is not None and now >= self._handshake_due:
            self._handshake_due = None
            if engine is None or engine.remote_open is None:
                self._handshake_timed_out(engine)
                return
        if engine is not None:
            engine.handle_timer(now)
            self._drain_events()
        self.mark_dirty()

    def _handshake_timed_out(self, engine: Connection | None) -> None:
        """RabbitMQ's handshake_timeout: no open within the bound of the TCP accept. Once
        the AMQP protocol headers were exchanged (after SASL, if any) a frame can say why:
        our open, then close with amqp:resource-limit-exceeded (2.4.1: open comes first;
        2.7.9), and the peer gets CLOSE_GRACE_S to answer; before that, a TCP close."""
        bound = self._limits.handshake_timeout
        reason = f"no open within {bound:g} s of the TCP accept (handshake timeout)"
        log.info("%s: %s", self.name, reason)
        if engine is None or engine.state is not ConnState.HDR_EXCH:
            self.shutdown()
            return
        engine.close(Cond.RESOURCE_LIMIT_EXCEEDED, reason)
        self._schedule_hard_close()
        self.mark_dirty()  # flushed at the turn's end; the timer re-arms for the grace

    def _arm_timer(self) -> None:
        due = self.get_timer()
        if due is None:
            return
        if self._timer_at is not None and self._timer_at <= due:
            return  # an earlier (or equal) wake-up is already set; it re-arms itself
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        self._timer = self.scheduler.call_at(due, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = None

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
        for session in list(self.sessions.values()):
            self._release_session(session, CONNECTION_ENDED)
        self.sessions.clear()
        self.vhost.release_owner(self)
        self.context.dynamic.connection_gone(self)
        self.context.sole.gone(self, self.summary.container_id)
        self.context.recovery.connection_gone(self)
        self.vhost.unregister_connection(self.name)
        self.context.forget_connection_waiters(self)
        self.context.connections.discard(self)
        self._cancel_timer()
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
    def _on_open(self, event: ev.RemoteOpen) -> None:
        self._handshake_due = None
        self.summary.container_id = event.open.container_id
        props = event.open.properties
        if isinstance(props, dict):
            self.summary.client_properties = {str(k): str(v) for k, v in props.items()}
        engine = self.engine
        refusal = self._connection_limit_refusal()
        # features/sole_connection.py (soleconn): refuse this one, or close the container's others
        admission = self.context.sole.admit(self, event.open) if refusal is None else None
        properties: dict[Any, Any] = {"product": "amqpspec reference broker"}
        properties.update(admission.properties if admission is not None else {})
        engine.open(
            properties=properties,
            offered_capabilities=relay.offered_capabilities()  # features/relay.py (anonterm)
            + SoleConnections.offered_capabilities(),
        )
        if refusal is not None:  # open, then close at once with the reason (2.4.1)
            log.info("%s: %s", self.name, refusal)
            engine.close(Cond.RESOURCE_LIMIT_EXCEEDED, refusal)
            self._schedule_hard_close()
            return
        assert admission is not None
        if admission.refuse:  # open, then close at once with the reason (2.4.1)
            log.info("%s: %s", self.name, admission.error)
            engine.close(admission.error)
            self._schedule_hard_close()
            return
        for other in admission.close:
            other.close_with(admission.error)
        self.vhost.register_connection(self.summary)

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
        self._schedule_hard_close()
        self.mark_dirty()

    def _connection_limit_refusal(self) -> str | None:
        """Limits max_connections (in all) and max_connections_per_user (0 = none, as
        RabbitMQ's connection_max and per-user max-connections): the reason to refuse this
        connection, counted among those already open."""
        limits = self.config.limits
        opened = self.vhost.connections.values()
        if limits.max_connections and len(opened) >= limits.max_connections:
            return f"connection limit ({limits.max_connections}) reached"
        user = self.summary.user
        if limits.max_connections_per_user:
            mine = sum(1 for c in opened if c.user == user)
            if mine >= limits.max_connections_per_user:
                return (
                    f"connection limit ({limits.max_connections_per_user}) of user '{user}' reached"
                )
        return None

    def _on_close(self, event: ev.RemoteClose) -> None:
        for session in list(self.sessions.values()):
            self._release_session(session, CONNECTION_ENDED)
        self.sessions.clear()

    def _on_idle_timeout(self, event: ev.IdleTimeout) -> None:
        """2.4.5: nothing received for twice our idle-time-out: the engine has sent close
        with amqp:resource-limit-exceeded; the peer gets CLOSE_GRACE_S to answer it."""
        log.info("%s: nothing received for %d ms; closing", self.name, event.timeout_ms)
        self._schedule_hard_close()

    def _on_protocol_error(self, event: ev.ProtocolErrorRaised) -> None:
        log.info("%s: %s %s: %s", self.name, event.scope, event.condition, event.description)
        if self.faults.sasl_answers_as_client:
            self._answer_as_sasl_client(event.description)
        if event.scope == "connection":
            self._schedule_hard_close()
            return
        # the engine ended the session or detached the link: release what went with it
        engine_session = event.session
        session = self.sessions.get(engine_session)
        if session is None:
            return
        if engine_session.state not in _LIVE_SESSION:
            self._release_session(session, SESSION_ENDED)
            del self.sessions[engine_session]
            self.summary.channels = len(self.sessions)
        elif event.link is not None and event.link.state in _GONE_LINK:
            self._release_link(session, event.link)

    def _answer_as_sasl_client(self, description: str) -> None:
        """Fault sasl-answers-as-client: the server-only frame the engine refused (5.3.2)
        answered as a SASL client would, written past the engine's tables."""
        answer: SaslInit | SaslResponse | None = None
        if description.startswith("RECV_MECHANISMS"):
            answer = SaslInit(mechanism=symbol("ANONYMOUS"))
        elif description.startswith("RECV_CHALLENGE"):
            answer = SaslResponse(response=b"")
        if answer is not None and self.engine is not None:
            self.engine.send_performative(answer, 0, strict=False)

    def _schedule_hard_close(self) -> None:
        if self._hard_close_due is None:
            self._hard_close_due = self.scheduler.now() + CLOSE_GRACE_S

    # ------------------------------------------------------------------ sessions (2.5)
    def _on_begin(self, event: ev.RemoteBegin) -> None:
        limits = self.config.limits
        engine_session = event.session
        if engine_session.state is not SessState.BEGIN_RCVD:
            return  # the engine already answered it: begin+end, or begin+end with an error
        window = limits.max_incoming_window
        if self.context.alarm_active and not self.faults.ignore_alarm:
            window = 0
        try:
            engine_session.accept(
                incoming_window=window,
                outgoing_window=0xFFFFFFFF,
                handle_max=limits.handle_max - 1,
                auto_window=False,  # re-opened per read in reopen_windows(), see there
            )
        except UsageError as exc:  # e.g. no free channel
            log.info("%s: begin refused: %s", self.name, exc)
            engine_session.end(Cond.RESOURCE_LIMIT_EXCEEDED, str(exc))
            return
        self.sessions[engine_session] = BrokerSession(self, engine_session)
        self.summary.channels = len(self.sessions)

    def _on_end(self, event: ev.RemoteEnd) -> None:
        session = self.sessions.pop(event.session, None)
        if session is not None:
            self._release_session(session, SESSION_ENDED)
        self.summary.channels = len(self.sessions)

    def _release_session(self, session: BrokerSession, why: str = CLOSED) -> None:
        for link in list(session.links):
            self._release_link(session, link, why=why)
        self.context.recovery.session_gone(session)  # 3.5.3 session-end (features/recovery.py)
        session.pending_accepts = []

    def set_windows(self, window: int) -> None:
        """Alarm raised (window 0) or cleared (configured window) on every session."""
        for session in self.sessions.values():
            session.alarm_overshoot = 0
            session.set_window(window)
        self.mark_dirty()

    # ------------------------------------------------------------------ links (2.6)
    def _on_attach(self, event: ev.RemoteAttach) -> None:
        session = self.sessions.get(event.link.session)
        link = event.link
        if session is None or link.state is not LinkState.ATTACH_RCVD:
            return
        try:
            if link.is_sender:
                self._attach_consumer(session, link, event.attach)
            else:
                self._attach_publisher(session, link, event.attach)
            self._take_link_name(link)
        except (BrokerError, AddressError) as exc:
            condition = getattr(exc, "condition", Cond.INVALID_FIELD)
            reason = getattr(exc, "reason", str(exc))
            self._reject(link, condition, reason)
        except UsageError as exc:
            self._reject(link, Cond.RESOURCE_LIMIT_EXCEEDED, str(exc))

    def _take_link_name(self, link: Any) -> None:
        """2.6.1: the same link (container-id, name, direction) attached again from another
        connection steals it: the older attachment is detached with amqp:link:stolen."""
        key = (self.summary.container_id, link.name, link.is_sender)
        older = self.context.attached_links.get(key)
        self.context.attached_links[key] = (self, link)
        if older is None or older[0] is self:
            return
        owner, old_link = older
        session = owner.sessions.get(old_link.session)
        if session is not None:
            owner._release_link(session, old_link)
        owner._detach_with(old_link, Cond.STOLEN, "attached again from another connection")

    def _reject(self, link: Any, condition: str, reason: str) -> None:
        try:
            link.reject(Error(condition=condition, description=reason))
        except UsageError as exc:
            log.debug("cannot refuse attach: %s", exc)

    def _attach_consumer(self, session: BrokerSession, link: Any, attach: Any) -> None:
        source = attach.source  # a Source or None: the engine refuses anything else
        if source is not None and source.address == MANAGEMENT_ADDRESS:
            self._attach_management(session, link)
            return
        if source is not None and source.dynamic:  # 3.5.3, 3.5.10: features/dynamic_nodes.py
            queue, source = self.context.dynamic.create(self, link, source)
        elif self._resume_consumer(session, link, attach):  # 2.6.13: features/recovery.py
            return
        else:
            # 3.5.3 expiry-policy as applied (features/recovery.py)
            source = reported_source(source)
            address = source.address if source is not None else None
            queue = self.context.dynamic.subscribe(self, link, address)  # a temporary topic
            if queue is None:
                self._check_address(parse_source(address), declare_only=True)
                queue = self.vhost.resolve_source(address)
                self._permit(READ, "queue", queue.name)
                self.vhost.check_exclusive(queue.name, self)  # RabbitMQ 4: resource-locked
                self.context.dynamic.attached(link, queue.name)
        offset = None
        stream = isinstance(queue, StreamQueue)
        if stream:  # where the consumer starts reading the log
            try:
                offset = offset_spec_from_filter(source.filter if source is not None else None)
            except OffsetSpecError as exc:
                raise AddressError(queue.name, str(exc), Cond.INVALID_FIELD) from None
        filters = in_place(source, stream=stream, faults=self.faults)  # 3.5.3: features/filters.py
        link.accept(
            source=filters.source, rcv_settle_mode=RcvSettleMode.FIRST, initial_delivery_count=0
        )
        tag = f"{self.context.next_id()}"
        consumer = ConsumerLink(session, link, queue, tag)
        consumer.resume_only = bool(attach.incomplete_unsettled)  # 2.7.3: nothing new
        if offset is None:
            queue.add_consumer(tag, consumer, settled=consumer.settled, initial_delivery_count=0)
        else:
            queue.add_consumer(
                tag, consumer, settled=consumer.settled, offset=offset, accepts=filters.accepts
            )
        session.links[link] = consumer
        session.consumers[link] = consumer

    def _resume_consumer(self, session: BrokerSession, link: Any, attach: Any) -> bool:
        """A consumer link attached again whose terminus was kept (features/recovery.py): resumed on
        its queue consumer record, the broker's unsettled map in the attach, the
        receiver's compared with it (2.6.13). False when there is no such terminus."""
        recovery = self.context.recovery
        kept = recovery.take((self.summary.container_id, link.name, True))
        if kept is None:
            return False
        queue = kept.queue
        self._permit(READ, "queue", queue.name)
        answer = Attach(  # ours with an empty map: what room its entries have (2.7.1)
            name=link.name,
            handle=0xFFFFFFFF,
            role=Role.SENDER,
            snd_settle_mode=link.snd_settle_mode,
            rcv_settle_mode=RcvSettleMode.FIRST,
            source=kept.source,
            target=attach.target,
            unsettled={},
            incomplete_unsettled=True,
            initial_delivery_count=0,
        )
        room = map_room(answer, self.engine.remote_max_frame_size)
        ours, ours_incomplete = recovery.unsettled_map(kept, room)
        link.accept(
            source=kept.source,  # 2.6.3: the sender holds the authoritative source
            rcv_settle_mode=RcvSettleMode.FIRST,
            initial_delivery_count=0,
            unsettled=ours,
            incomplete_unsettled=True if ours_incomplete else None,
        )
        consumer = ConsumerLink(session, link, queue, kept.tag)
        record = queue.consumer(kept.tag)
        record.owner = consumer
        record.settled = consumer.settled
        record.delivery_count = record.initial_delivery_count = 0
        incomplete = bool(attach.incomplete_unsettled)
        consumer.resume_only = incomplete or ours_incomplete  # 2.7.3, 2.6.13
        consumer.resumes = recovery.plan(kept, attach.unsettled, incomplete, ours)
        session.links[link] = consumer
        session.consumers[link] = consumer
        self.mark_dirty()
        return True

    def _attach_publisher(self, session: BrokerSession, link: Any, attach: Any) -> None:
        target = attach.target  # a Target, a Coordinator or None (checked by the engine)
        if isinstance(target, Coordinator):  # 4.5.1: a control link (features/transactions.py)
            self.transactions.attach(session, link, target)
            return
        if target is not None and target.address == MANAGEMENT_ADDRESS:
            self._attach_management(session, link)
            return
        if target is not None and target.dynamic:  # 3.5.4, 3.5.10: features/dynamic_nodes.py
            target = self.context.dynamic.create(self, link, target)[1]
        recovery = self.context.recovery
        kept = None
        if target is None or not target.dynamic:
            kept = recovery.take_target((self.summary.container_id, link.name, False))
            if kept is not None:
                target = kept.target  # 2.6.3: the receiver holds the authoritative target
        self._check_address(parse_target(target.address if target is not None else None))
        address = self.vhost.resolve_target(target.address if target is not None else None)
        if address.kind is not AddressKind.ANONYMOUS:  # a dynamic node's links are counted
            self.context.dynamic.attached(link, address.queue or address.exchange or "")
        link.accept(
            target=target,
            rcv_settle_mode=RcvSettleMode.FIRST,
            max_message_size=self.config.limits.max_message_size,
            unsettled=recovery.target_unsettled_map() if kept is not None else None,  # 2.6.3
        )
        publisher = PublisherLink(session, link, address)
        session.links[link] = publisher
        self.publishers[link] = publisher
        publisher.grant_initial()

    # ------------------------------------------------------------------ permissions
    @property
    def permissions(self) -> Permissions:
        """The authenticated user's (RabbitMQ-style configure / write / read)."""
        return self.config.permissions_of(self.summary.user)

    def _permit(self, kind: str, what: str, name: str) -> None:
        """UnauthorizedError (amqp:unauthorized-access) unless the user may do it."""
        permissions = self.permissions
        if permissions is not FULL:
            permissions.check(self.summary.user, kind, what, name)

    def check_anonymous_to(self, to: Any) -> None:
        """A message on the anonymous terminus: write permission on where its `to`
        publishes (raises as _check_address)."""
        if self.permissions is not FULL:
            self._check_address(parse_to(to))

    def _check_address(self, parsed: Address, *, declare_only: bool = False) -> None:
        """The permissions an address needs: configure to declare a v1 queue; to publish,
        write on its exchange (the default exchange for a queue address). The anonymous
        terminus is checked per message (its `to`)."""
        if parsed.declare and parsed.queue is not None and not self.vhost.has_queue(parsed.queue):
            self._permit(CONFIGURE, "queue", parsed.queue)
        if declare_only or parsed.kind is AddressKind.ANONYMOUS:
            return
        exchange = parsed.exchange if parsed.kind is AddressKind.EXCHANGE else ""
        self._permit(WRITE, "exchange", exchange or "")

    def _attach_management(self, session: BrokerSession, link: Any) -> None:
        """One link of a /management client's pair (admin/management_links.py): the broker
        receives requests on the client's sender and answers on its receiver of the same
        name; replies and requests are settled (RabbitMQ 4's at-most-once pair)."""
        if link.is_sender:
            link.accept(rcv_settle_mode=RcvSettleMode.FIRST, initial_delivery_count=0)
        else:
            link.accept(rcv_settle_mode=RcvSettleMode.FIRST)
        pair = self.management_pairs.get((session, link.name))
        if pair is None:
            pair = self.management_pairs[(session, link.name)] = ManagementPair(session)
        if link.is_sender:
            pair.replies = link
            pair.send_replies()
        else:
            pair.attach_requests(link)
        self.management_links[link] = pair
        session.links[link] = pair
        self.mark_dirty()

    def _management_request(self, pair: ManagementPair, event: ev.TransferReceived) -> None:
        vhost = self.vhost
        permit = None if self.permissions is FULL else self._permit
        pair.request(
            event.link,
            event.delivery_id,
            event.settled,
            event.payload,
            lambda payload: management_answer(vhost, payload, permit, self),
        )
        self.mark_dirty()

    def queue_deleted(self, consumer: ConsumerLink) -> None:
        session = consumer.session
        link = consumer.link
        session.links.pop(link, None)
        session.consumers.pop(link, None)
        session.forget_consumer(consumer)
        self._detach_with(link, Cond.RESOURCE_DELETED, f"queue '{consumer.queue.name}' deleted")

    def consumer_failed(self, consumer: ConsumerLink, condition: str, description: str) -> None:
        """The consumer link cannot go on (e.g. a message above its max-message-size):
        requeue what it holds and detach it with `condition` (RabbitMQ 4 does the same)."""
        self._release_link(consumer.session, consumer.link)
        self._detach_with(consumer.link, condition, description)

    def detach_with(
        self, session: BrokerSession, link: Any, condition: str, description: str
    ) -> None:
        """Release `link` (requeue, roll back what it owned) and detach it with an error."""
        self._release_link(session, link)
        self._detach_with(link, condition, description)

    def _detach_with(self, link: Any, condition: str, description: str) -> None:
        try:
            link.detach(closed=True, error=Error(condition=condition, description=description))
        except UsageError as exc:
            log.debug("no detach with %s: %s", condition, exc)
        self.mark_dirty()

    def _on_detach(self, event: ev.RemoteDetach) -> None:
        session = self.sessions.get(event.link.session)
        if session is not None:
            self._release_link(session, event.link, suspended=not event.closed)

    def _release_link(
        self, session: BrokerSession, link: Any, *, suspended: bool = False, why: str = CLOSED
    ) -> None:
        """Detach/end/close/loss: requeue every delivery still unsettled (2.6.6, RabbitMQ
        PR #9022 item 27) unless the link's terminus outlives it (features/recovery.py, `why` the
        link goes: 3.5.3 expiry-policy), and drop the dynamic nodes whose lifetime policy
        ends with the link (features/dynamic_nodes.py; `suspended`: detached with closed=false, not
        gone)."""
        key = (self.summary.container_id, link.name, link.is_sender)
        if self.context.attached_links.get(key, (None, None))[1] is link:
            del self.context.attached_links[key]
        self.context.dynamic.detached(link, suspended=suspended)
        state = session.links.pop(link, None)
        if state is None:
            return
        if isinstance(state, ManagementPair):
            self.management_links.pop(link, None)
            if state.forget(link):
                self.management_pairs.pop((session, link.name), None)
            return
        if isinstance(state, CoordinatorLink):  # 4.1: its open transactions roll back
            self.transactions.release(state)
            return
        self.publishers.pop(link, None)
        if isinstance(state, PublisherLink):  # its target may outlive it (features/recovery.py)
            why = SUSPENDED if suspended else why
            self.context.recovery.release_target(key, link.target, why, self, session)
        if isinstance(state, ConsumerLink):
            session.consumers.pop(link, None)
            queue = state.queue
            kept = self.context.recovery.release(key, state, SUSPENDED if suspended else why)
            if not kept and queue.has_consumer(state.tag):
                self.vhost.cancel_consumer(queue, state.tag)
            session.forget_consumer(state)
        self.vhost.release_owner(link)

    # ------------------------------------------------------------------ hot path
    def _on_transfer(self, event: ev.TransferReceived) -> None:
        link = event.link
        publisher = self.publishers.get(link)
        if publisher is None:
            if self.transactions.control_transfer(event):
                return
            pair = self.management_links.get(link)
            if pair is not None:
                self._management_request(pair, event)
            return
        session = publisher.session
        if event.resume:
            # 2.7.5 resume / 2.6.13: "The receiver MUST ignore resumed deliveries that are
            # not in its local unsettled map" - this broker keeps none across attaches
            return
        if self.faults.session_scoped_delivery_tags and self._seen_tag(session, event):
            return  # fault: a tag seen on the session taken for a duplicate, never settled
        if self.context.alarm_active:
            self._transfer_during_alarm(session)
        to = subject = headers = None
        if publisher.decode_needed:
            try:
                message = Message.decode(event.payload)
            except Exception:
                self._refuse_publish(session, event, Cond.DECODE_ERROR, "undecodable message")
                return
            props = message.properties
            if props is not None:
                to, subject = props.to, props.subject
            headers = message.application_properties
        if event.state is not None and is_transactional(event.state):  # 4.4.1
            self.transactions.post(publisher, event, to, subject, headers)
            if publisher not in self._credit_checks:
                self._credit_checks.append(publisher)
            return
        try:
            if publisher.anonymous:
                self.check_anonymous_to(to)
            result = self.vhost.publish(
                publisher.target, event.payload, to=to, subject=subject, headers=headers
            )
        except (BrokerError, AddressError) as exc:
            condition = getattr(exc, "condition", Cond.INVALID_FIELD)
            reason = getattr(exc, "reason", str(exc))
            if publisher.anonymous and condition in relay.ROUTING_ERRORS:
                error = relay.routing_error(event.delivery_tag, condition, reason, self.faults)
                if event.settled or not relay.rejects(link):
                    self.anonymous_routing_error(publisher, event, error)
                    return
                session.settle_publish(event.delivery_id, Rejected(error=error))
                if publisher not in self._credit_checks:
                    self._credit_checks.append(publisher)
                return
            self._refuse_publish(session, event, condition, reason)
            if publisher not in self._credit_checks:
                self._credit_checks.append(publisher)
            return
        if not event.settled:
            if result.released:
                session.settle_publish(event.delivery_id, RELEASED_STATE)
            elif result.tokens:
                publisher.unconfirmed += 1
                self.context.wait_durable(max(result.tokens), session, event.delivery_id, publisher)
            else:
                session.confirm(event.delivery_id)
        if link.link_credit < publisher.regrant_below and publisher not in self._credit_checks:
            # decided after the whole read: the engine has already counted every transfer
            # of it against the credit, and the unconfirmed count must include them too
            self._credit_checks.append(publisher)

    def _seen_tag(self, session: BrokerSession, event: ev.TransferReceived) -> bool:
        """Fault session-scoped-delivery-tags: has a publisher of `session` used this tag
        before (on any link, settled or not)? 2.6.12 makes a tag unique only among the
        unsettled deliveries of one link; the fault keeps every tag of the session."""
        seen = self._fault_session_tags.setdefault(session, set())
        tag = bytes(event.delivery_tag)
        if tag in seen:
            return True
        seen.add(tag)
        return False

    def anonymous_routing_error(
        self, publisher: PublisherLink, event: ev.TransferReceived, error: Error
    ) -> None:
        """A message on the anonymous terminus that cannot be routed (no or a bad `to`,
        nothing at it) and cannot be rejected (settled, or the source does not support
        rejected): the link is detached with the error, the delivery-tag in its info
        (features/relay.py: the anonymous terminus spec's routing errors; RabbitMQ 4 does the
        same)."""
        link = event.link
        self._release_link(publisher.session, link)
        try:
            link.detach(closed=True, error=error)
        except UsageError as exc:
            log.debug("no detach with %s: %s", error.condition, exc)
        self.mark_dirty()

    def _refuse_publish(
        self, session: BrokerSession, event: ev.TransferReceived, condition: str, reason: str
    ) -> None:
        if not event.settled:
            error = Error(condition=condition, description=reason)
            session.settle_publish(event.delivery_id, Rejected(error=error))

    def _transfer_during_alarm(self, session: BrokerSession) -> None:
        """A transfer while publishers are blocked (in flight, or a peer ignoring the
        window: the engine ends the session with window-violation beyond the horizon it
        granted before the alarm)."""
        session.alarm_overshoot += 1
        if self.faults.negative_window_after_alarm:
            # fault (RabbitMQ #12904): window = 0 - overshoot, not clamped, so it wraps
            session.set_window(serial_add(0, -session.alarm_overshoot))

    def _on_flow(self, event: ev.FlowReceived) -> None:
        link = event.link
        session = self.sessions.get(event.session)
        if session is None:
            return
        if link is None:  # a session flow: echo answered with our session state (2.7.4)
            if event.flow.echo and not self.faults.no_echo:
                event.session.flow()
                self.mark_dirty()
            return
        consumer = session.consumers.get(link)
        if consumer is not None:  # the queue applies it and answers echo / drain
            if event.flow.properties and self.transactions.acquisition(consumer, event.flow):
                return  # 4.4.3: the link detached (it sends settled, or an unknown txn-id)
            consumer.receiver_flow(event.flow)
        elif link in self.management_links:  # replies wait for the client's credit
            self.management_links[link].send_replies()
            self.mark_dirty()
        elif event.flow.echo and not self.faults.no_echo and link in self.publishers:
            link.send_flow_state()  # our grant as it stands (2.6.7, 2.7.4)
            self.mark_dirty()

    def _on_disposition(self, event: ev.DispositionReceived) -> None:
        if event.role != Role.RECEIVER:
            return  # the peer as sender settling its publishes: we forget them anyway
        session = self.sessions.get(event.session)
        if session is not None:
            session.on_disposition(event.first, event.last, event.settled, event.state)
            self.context.dynamic.sweep()  # delete-on-no-messages: a settled delivery

    def _ignore(self, event: Any) -> None:
        return None
