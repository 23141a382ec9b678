"""What all connections of one reference broker share: `BrokerContext`.

Owns: the vhost and config handed to every connection, the scheduler, the resource alarms,
the group commit of the durable store and the publishes waiting for it (durable confirms),
the dynamic nodes, sole-connection and recovery registries (features/), the connections with
bytes to write, the end of a turn (dispatch of every queue with work, then one write per
dirty connection) and the periodic housekeeping (alarm readings, store flush / compaction,
expiry of kept termini). May touch: the connections through their public methods
(`flush`, `mark_dirty`, `close_with`, `set_windows`, `queue_deleted`, `target_deleted`),
the vhost and queues through their APIs; no engine object directly.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import BrokerConfig
from ..faults.catalog import Faults
from ..features.alarms import ResourceAlarms, alarms_from_config
from ..features.deleted_targets import EXCHANGE_DELETED, QUEUE_DELETED
from ..features.dynamic_nodes import DynamicNodes
from ..features.recovery import Recovery
from ..features.sole_connection import SoleConnections
from ..features.topic_subscriptions import TopicSubscriptions
from ..queues.classic import CreditReply, Delivery
from ..queues.store import GroupCommit
from ..queues.vhost import VirtualHost
from ..runtime.scheduler import Scheduler, Timer
from .links import ConsumerLink, PublisherLink
from .sessions import BrokerSession

if TYPE_CHECKING:
    from .connection import BrokerConnection

log = logging.getLogger("reference_broker.connection")

HOUSEKEEPING_INTERVAL_S = 0.2  # alarm readings, store flush / compaction


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
        # features/topic_subscriptions.py (the JMS mapping's topic subscriptions)
        self.topics = TopicSubscriptions(vhost, self.faults)
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

    def _on_vhost_event(self, event: str, node: Any) -> None:
        """A queue or exchange was deleted (admin API, auto-delete): a queue's consumers
        are detached with amqp:resource-deleted (RabbitMQ 4 does the same), and so are the
        publishers whose target it was (features/deleted_targets.py)."""
        if event not in (QUEUE_DELETED, EXCHANGE_DELETED):
            return
        if event == QUEUE_DELETED:
            for consumer in node.consumers:
                owner = consumer.owner
                if isinstance(owner, ConsumerLink):
                    owner.session.connection.link_handler.queue_deleted(owner)
        if not self.faults.keep_publishers_of_deleted_nodes:
            for connection in list(self.connections):
                connection.link_handler.target_deleted(event, node.name)
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
            connection.session_handler.set_windows(window)
        self.flush(self.scheduler.now())
