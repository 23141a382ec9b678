"""Broker-side session state on top of the engine's `Session` (2.5).

Owns: the deliveries this session sent unsettled (delivery-id -> consumer link, queue
message id), the publisher confirms waiting to go out (batched per event-loop turn into
one disposition per contiguous delivery-id range, PR #9022 item 7), the session's links
(engine Link -> ConsumerLink / PublisherLink), the publishes of links in rcv-settle-mode
second whose outcome goes out unsettled and which the sender settles (delivery-id ->
publisher, tag: features/publisher_recovery.py), and the window policy around resource
alarms (incoming-window 0 on alarm, restored on clear). Dispositions carrying a
transactional-state go to the connection's transactions (features/transactions.py, 4.4.2).
May touch: its engine Session (flow, disposition, end), the queues of its consumer links
(settle, through the vhost).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import (
    Accepted,
    Modified,
    Rejected,
    Released,
    TransactionalState,
)
from amqpspec.amqp10.engine import Link, Session, UsageError
from amqpspec.amqp10.serial import MASK as SERIAL_MASK
from amqpspec.amqp10.serial import serial_add, serial_count, serial_offset
from amqpspec.amqp10.spec import Role

from ..admin.management_links import ManagementPair
from ..queues.classic import outcome_of
from .links import ConsumerLink, PublisherLink

if TYPE_CHECKING:
    from .connection import BrokerConnection

log = logging.getLogger("reference_broker.sessions")

ACCEPTED = Accepted()
RELEASED_STATE = Released()
_TERMINAL = (Accepted, Rejected, Released, Modified)


class BrokerSession:
    __slots__ = (
        "alarm_overshoot",
        "connection",
        "consumers",
        "engine",
        "links",
        "pending_accepts",
        "second",
        "unsettled",
    )

    def __init__(self, connection: BrokerConnection, engine: Session) -> None:
        self.connection = connection
        self.engine = engine
        self.links: dict[Link, ConsumerLink | PublisherLink | ManagementPair] = {}
        self.consumers: dict[Link, ConsumerLink] = {}
        self.unsettled: dict[int, tuple[ConsumerLink, int]] = {}  # delivery-id -> (link, msg)
        self.pending_accepts: list[int] = []  # publisher delivery-ids to confirm (accepted)
        self.alarm_overshoot = 0  # transfers received while our window was 0
        # publishes in rcv-settle-mode second: delivery-id -> (publisher, delivery-tag)
        self.second: dict[int, tuple[PublisherLink, bytes]] = {}

    # ------------------------------------------------------------------ confirms
    def confirm(self, delivery_id: int) -> None:
        """Accept (and settle) one publish; sent with the others at the end of the turn."""
        if not self.pending_accepts:
            self.connection.sessions_with_confirms.append(self)
        self.pending_accepts.append(delivery_id)

    def flush_confirms(self) -> None:
        """One settled disposition per contiguous range of confirmed delivery-ids (those
        of links in rcv-settle-mode second: unsettled, one each)."""
        ids = self.pending_accepts
        self.pending_accepts = []
        if not ids:
            return
        if self.second:
            ids = [i for i in ids if not self._outcome_unsettled(i, ACCEPTED)]
            if not ids:
                return
        if len(ids) > 1:
            ids.sort()  # confirms of durable and transient queues may interleave
        disposition = self.engine.disposition
        try:
            first = last = ids[0]
            for delivery_id in ids[1:]:
                if delivery_id == (last + 1) & SERIAL_MASK:  # serial_add(last, 1), per confirm
                    last = delivery_id
                    continue
                disposition(Role.RECEIVER, first, last, True, ACCEPTED)
                first = last = delivery_id
            disposition(Role.RECEIVER, first, last, True, ACCEPTED)
        except UsageError as exc:  # the session ended meanwhile
            log.debug("confirms dropped on %r: %s", self.engine, exc)

    def settle_publish(self, delivery_id: int, state: Any) -> None:
        """A non-accepted outcome for one publish (released when unroutable, 3.4.4)."""
        if self.second and self._outcome_unsettled(delivery_id, state):
            return
        try:
            self.engine.disposition(Role.RECEIVER, delivery_id, delivery_id, True, state)
        except UsageError as exc:
            log.debug("disposition dropped on %r: %s", self.engine, exc)

    # ------------------------------------------------------------------ rcv-settle-mode second
    def hold_publish(self, publisher: PublisherLink, delivery_id: int, tag: bytes) -> None:
        """An unsettled publish on a link in rcv-settle-mode second: its outcome goes out
        unsettled and the broker settles once the sender has (2.8.3)."""
        self.second[delivery_id] = (publisher, tag)
        publisher.held.outcomes[tag] = None

    def _outcome_unsettled(self, delivery_id: int, state: Any) -> bool:
        """Send `state` unsettled for a held publish (True), or False when it is not one."""
        entry = self.second.get(delivery_id)
        if entry is None:
            return False
        publisher, tag = entry
        if tag in publisher.held.outcomes:
            publisher.held.outcomes[tag] = state
        try:
            self.engine.disposition(Role.RECEIVER, delivery_id, delivery_id, False, state)
        except UsageError as exc:
            log.debug("disposition dropped on %r: %s", self.engine, exc)
        return True

    def sender_settled(self, first: int, last: int) -> None:
        """The sender settled deliveries first..last: held publishes among them are
        settled here too (2.8.3), with no disposition of ours (the sender has forgotten
        them)."""
        if not self.second:
            return
        count = serial_count(first, last)
        for did in [d for d in self.second if serial_offset(first, d) < count]:
            publisher, tag = self.second.pop(did)
            publisher.held.outcomes.pop(tag, None)

    def forget_publisher(self, publisher: PublisherLink) -> None:
        """Its link went: the delivery-ids of its held publishes settle nothing here any
        more (a kept target took what it holds: features/recovery.py)."""
        stale = [d for d, (owner, _) in self.second.items() if owner is publisher]
        for delivery_id in stale:
            del self.second[delivery_id]

    # ------------------------------------------------------------------ consumer settlement
    def on_disposition(self, first: int, last: int, settled: bool, state: Any) -> None:
        """The receiver's outcome for deliveries first..last we sent (2.7.6, 3.4)."""
        if type(state) is TransactionalState:  # 4.4.2: applied when the transaction commits
            self.connection.transactions.retire(self, first, last, settled, state)
            return
        if not settled and not isinstance(state, _TERMINAL):
            return  # a non-terminal state (received): nothing to settle yet
        unsettled = self.unsettled
        groups: dict[ConsumerLink, list[int]] = {}
        delivery_id = first
        count = serial_count(first, last)
        if count > len(unsettled):  # a huge range: walk what we have instead
            for did in [d for d in unsettled if serial_offset(first, d) < count]:
                owner, msg_id = unsettled.pop(did)
                groups.setdefault(owner, []).append(msg_id)
        else:
            for _ in range(count):
                entry = unsettled.pop(delivery_id, None)
                if entry is not None:
                    groups.setdefault(entry[0], []).append(entry[1])
                delivery_id = serial_add(delivery_id, 1)
        if not groups:
            return
        outcome, kwargs = outcome_of(state)
        for owner, msg_ids in groups.items():
            if owner.queue.has_consumer(owner.tag):
                owner.queue.settle(owner.tag, msg_ids, outcome, **kwargs)
        if not settled:  # rcv-settle-mode first: the sender settles on the outcome
            try:
                self.engine.disposition(Role.SENDER, first, last, True, state)
            except UsageError:
                pass

    def forget_consumer(self, consumer: ConsumerLink) -> None:
        """Its unsettled deliveries were requeued: their ids no longer settle anything."""
        stale = [d for d, (owner, _) in self.unsettled.items() if owner is consumer]
        for delivery_id in stale:
            del self.unsettled[delivery_id]

    # ------------------------------------------------------------------ alarms (2.5.6)
    def set_window(self, incoming_window: int) -> None:
        try:
            self.engine.flow(incoming_window=incoming_window)
        except UsageError as exc:
            log.debug("no window flow on %r: %s", self.engine, exc)
