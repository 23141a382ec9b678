"""The link handler of a broker connection (2.6): the engine's attach and detach, answered
with the broker's links (links.py), the `/management` node's link pairs and the control
links of transactions.

Owns: which link an attach makes (a consumer on a queue, a stream or a dynamic node; a
publisher to an address or the anonymous terminus; one link of a /management pair; a
coordinator, 4.5.1), the permissions it needs (permissions.py), the link name's uniqueness
per container pair (2.6.1: a second attachment steals it), refusing an attach with the
error, detaching with an error (the publishers of a deleted node:
features/deleted_targets.py), and the release of a link when it goes: requeue, kept
termini (features/recovery.py, 3.5.3), dynamic nodes (features/dynamic_nodes.py). The
connection's `publishers`, `management_links` and `management_pairs` dicts are filled here.
May touch: the engine Links of its connection, the vhost and queues through their APIs,
the features' registries on the context, the connection's transactions.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import Attach, Coordinator, Error
from amqpspec.amqp10.engine import UsageError
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.transitions import LinkState
from amqpspec.amqp10.spec import Cond, RcvSettleMode, Role

from ..admin.management import MANAGEMENT_ADDRESS
from ..admin.management import answer as management_answer
from ..admin.management_links import ManagementPair
from ..features.deleted_targets import deleted_error, stranded
from ..features.filters import in_place
from ..features.publisher_recovery import Resumed, with_partial
from ..features.recovery import CLOSED, SUSPENDED, map_room, reported_source, target_map_room
from ..features.transactions import CoordinatorLink
from ..queues.addressing import AddressError, AddressKind, parse_source, parse_target
from ..queues.errors import BrokerError
from ..queues.streams import OffsetSpecError, StreamQueue, offset_spec_from_filter
from .links import ConsumerLink, PublisherLink
from .parts import ConnectionPart
from .permissions import FULL, READ
from .sessions import BrokerSession

if TYPE_CHECKING:
    from .connection import BrokerConnection

log = logging.getLogger("reference_broker.connection")


class LinkHandler(ConnectionPart):
    """Attach, detach and the release of the links of one connection."""

    SHARED = (
        "access",
        "config",
        "context",
        "faults",
        "management_links",
        "management_pairs",
        "mark_dirty",
        "publishers",
        "sessions",
        "summary",
        "vhost",
    )
    __slots__ = (*SHARED, "watching_closes")

    def __init__(self, connection: BrokerConnection) -> None:
        super().__init__(connection)
        self.watching_closes = False  # _watch_closes

    def on_attach(self, event: ev.RemoteAttach) -> None:
        session = self.sessions.get(event.link.session)
        link = event.link
        if session is None or link.state is not LinkState.ATTACH_RCVD:
            return
        try:
            if link.is_sender:
                self._attach_consumer(session, link, event.attach)
            else:
                self._attach_publisher(session, link, event.attach)
            self.take_link_name(link)
        except (BrokerError, AddressError) as exc:
            condition = getattr(exc, "condition", Cond.INVALID_FIELD)
            reason = getattr(exc, "reason", str(exc))
            self.reject(link, condition, reason)
        except UsageError as exc:
            self.reject(link, Cond.RESOURCE_LIMIT_EXCEEDED, str(exc))

    def take_link_name(self, link: Any) -> None:
        """2.6.1: the same link (container-id, name, direction) attached again from another
        connection steals it: the older attachment is detached with amqp:link:stolen."""
        key = (self.summary.container_id, link.name, link.is_sender)
        older = self.context.attached_links.get(key)
        self.context.attached_links[key] = (self.connection, link)
        if older is None or older[0] is self.connection:
            return
        owner, old_link = older
        session = owner.sessions.get(old_link.session)
        if session is not None:
            owner.link_handler.release_link(session, old_link)
        reason = "attached again from another connection"
        owner.link_handler.detach_error(old_link, Cond.STOLEN, reason)

    def reject(self, link: Any, condition: str, reason: str) -> None:
        try:
            link.reject(Error(condition=condition, description=reason))
        except UsageError as exc:
            log.debug("cannot refuse attach: %s", exc)

    def _attach_consumer(self, session: BrokerSession, link: Any, attach: Any) -> None:
        source = attach.source  # a Source or None: the engine refuses anything else
        if source is not None and source.address == MANAGEMENT_ADDRESS:
            self._attach_management(session, link)
            return
        topic = self.context.topics.attach(self.summary.container_id, link, source)
        if topic is not None:  # the JMS mapping's subscriptions: features/topic_subscriptions.py
            queue, source = topic
            self._watch_closes()
        elif source is not None and source.dynamic:  # 3.5.3, 3.5.10: features/dynamic_nodes.py
            queue, source = self.context.dynamic.create(self.connection, link, source)
        elif self._resume_consumer(session, link, attach):  # 2.6.13: features/recovery.py
            return
        else:
            # 3.5.3 expiry-policy as applied (features/recovery.py)
            source = reported_source(source)
            address = source.address if source is not None else None
            # a temporary topic (features/dynamic_nodes.py), else a queue or an exchange
            queue = self.context.dynamic.subscribe(self.connection, link, address)
            if queue is None:
                self.access.check_address(parse_source(address), declare_only=True)
                queue = self.vhost.resolve_source(address)
                self.access.permit(READ, "queue", queue.name)
                # RabbitMQ 4: resource-locked
                self.vhost.owners.check_exclusive(queue.name, self.connection)
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
            queue.add_consumer(
                tag,
                consumer,
                settled=consumer.settled,
                initial_delivery_count=0,
                accepts=filters.accepts,
            )
        else:
            queue.add_consumer(
                tag, consumer, settled=consumer.settled, offset=offset, accepts=filters.accepts
            )
        session.links[link] = consumer
        session.consumers[link] = consumer

    def _watch_closes(self) -> None:
        """From this connection's first topic subscription on: see each detach as the
        engine raises it, before its automatic answer, so that a refused close
        (features/topic_subscriptions.py) is answered with its error instead."""
        if not self.watching_closes:
            self.connection.engine.add_observer(self._before_detach)
            self.watching_closes = True

    def _before_detach(self, event: ev.Event) -> None:
        if isinstance(event, ev.RemoteDetach) and event.closed:
            reason = self.context.topics.refuse_close(event.link)
            if reason is not None:  # the JMS mapping's subscription in use by other links
                self.detach_error(event.link, Cond.RESOURCE_LOCKED, reason)

    def _resume_consumer(self, session: BrokerSession, link: Any, attach: Any) -> bool:
        """A consumer link attached again whose terminus was kept (features/recovery.py): resumed on
        its queue consumer record, the broker's unsettled map in the attach, the
        receiver's compared with it (2.6.13). False when there is no such terminus."""
        recovery = self.context.recovery
        kept = recovery.take((self.summary.container_id, link.name, True))
        if kept is None:
            return False
        queue = kept.queue
        self.access.permit(READ, "queue", queue.name)
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
        room = map_room(answer, self.connection.engine.remote_max_frame_size)
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
            self.connection.transactions.attach(session, link, target)
            return
        if target is not None and target.address == MANAGEMENT_ADDRESS:
            self._attach_management(session, link)
            return
        if target is not None and target.dynamic:  # 3.5.4, 3.5.10: features/dynamic_nodes.py
            target = self.context.dynamic.create(self.connection, link, target)[1]
        recovery = self.context.recovery
        kept = None
        if target is None or not target.dynamic:
            kept = recovery.take_target((self.summary.container_id, link.name, False))
            if kept is not None:
                target = kept.target  # 2.6.3: the receiver holds the authoritative target
        self.access.check_address(parse_target(target.address if target is not None else None))
        address = self.vhost.resolve_target(target.address if target is not None else None)
        if address.kind is not AddressKind.ANONYMOUS:  # a dynamic node's links are counted
            self.context.dynamic.attached(link, address.queue or address.exchange or "")
        # 2.8.3: second when asked for (config settle_second; features/publisher_recovery.py)
        second = self.config.settle_second and attach.rcv_settle_mode == RcvSettleMode.SECOND
        fields: dict[str, Any] = {
            "target": target,
            "rcv_settle_mode": RcvSettleMode.SECOND if second else RcvSettleMode.FIRST,
            "max_message_size": self.config.limits.max_message_size,
        }
        ours_incomplete = False
        if kept is not None:  # 2.6.3: the broker's unsettled map, as much as fits (2.7.3)
            room = target_map_room(link, fields, self.connection.engine.remote_max_frame_size)
            fields["unsettled"], ours_incomplete = recovery.target_unsettled_map(kept, room)
            fields["incomplete_unsettled"] = True if ours_incomplete else None
        link.accept(**fields)
        publisher = PublisherLink(session, link, address, second=second)
        if kept is not None:
            publisher.held = kept.held
            strict = ours_incomplete or bool(attach.incomplete_unsettled)
            publisher.resumed = Resumed(kept.held, strict, ours_incomplete)
        session.links[link] = publisher
        self.publishers[link] = publisher
        publisher.grant_initial()

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

    def management_request(self, pair: ManagementPair, event: ev.TransferReceived) -> None:
        vhost, owner = self.vhost, self.connection
        permit = None if self.access.permissions is FULL else self.access.permit
        pair.request(
            event.link,
            event.delivery_id,
            event.settled,
            event.payload,
            lambda payload: management_answer(vhost, payload, permit, owner),
        )
        self.mark_dirty()

    def queue_deleted(self, consumer: ConsumerLink) -> None:
        session = consumer.session
        link = consumer.link
        session.links.pop(link, None)
        session.consumers.pop(link, None)
        session.forget_consumer(consumer)
        self.detach_error(link, Cond.RESOURCE_DELETED, f"queue '{consumer.queue.name}' deleted")

    def target_deleted(self, event: str, name: str) -> None:
        """The queue or exchange `name` was deleted (vhost `event`): detach the publishers
        whose target it was with amqp:resource-deleted (features/deleted_targets.py). A link
        the peer is detaching (its dynamic node deleted as it goes) or a connection that is
        closing is left to its own ending."""
        if not self.connection.open:
            return
        error = deleted_error(event, name)
        for publisher in stranded(list(self.publishers.values()), event, name):
            if publisher.link.state is LinkState.ATTACHED:
                self.connection.delivery_handler.detach_publisher(publisher, error)

    def consumer_failed(self, consumer: ConsumerLink, condition: str, description: str) -> None:
        """The consumer link cannot go on (e.g. a message above its max-message-size):
        requeue what it holds and detach it with `condition` (RabbitMQ 4 does the same)."""
        self.release_link(consumer.session, consumer.link)
        self.detach_error(consumer.link, condition, description)

    def detach_with(
        self, session: BrokerSession, link: Any, condition: str, description: str
    ) -> None:
        """Release `link` (requeue, roll back what it owned) and detach it with an error."""
        self.release_link(session, link)
        self.detach_error(link, condition, description)

    def detach_error(self, link: Any, condition: str, description: str) -> None:
        try:
            link.detach(closed=True, error=Error(condition=condition, description=description))
        except UsageError as exc:
            log.debug("no detach with %s: %s", condition, exc)
        self.mark_dirty()

    def on_detach(self, event: ev.RemoteDetach) -> None:
        session = self.sessions.get(event.link.session)
        if session is not None:
            self.release_link(session, event.link, suspended=not event.closed)

    def release_link(
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
        self.context.dynamic.detached(link, suspended=suspended, kept=why != CLOSED)
        # features/topic_subscriptions.py
        self.context.topics.detached(link, closed=why == CLOSED and not suspended)
        state = session.links.pop(link, None)
        if state is None:
            return
        if isinstance(state, ManagementPair):
            self.management_links.pop(link, None)
            if state.forget(link):
                self.management_pairs.pop((session, link.name), None)
            return
        if isinstance(state, CoordinatorLink):  # 4.1: its open transactions roll back
            self.connection.transactions.release(state)
            return
        self.publishers.pop(link, None)
        if isinstance(state, PublisherLink):  # its target may outlive it (features/recovery.py)
            why = SUSPENDED if suspended else why
            session.forget_publisher(state)
            held = with_partial(state.held, link.assembler.pending())
            recovery = self.context.recovery
            recovery.release_target(key, link.target, why, self.connection, session, held)
        if isinstance(state, ConsumerLink):
            session.consumers.pop(link, None)
            queue = state.queue
            kept = self.context.recovery.release(key, state, SUSPENDED if suspended else why)
            if not kept and queue.has_consumer(state.tag):
                self.vhost.cancel_consumer(queue, state.tag)
            session.forget_consumer(state)
        self.vhost.owners.release_owner(link)
