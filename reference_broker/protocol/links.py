"""Broker-side link state: consumer links (the broker sends) and publisher links (the broker
receives), on top of the engine's `Link`.

Owns: per-link broker state only: which queue a consumer reads (the queue holds its
delivery-count and credit, credit API v2), which target a publisher writes to, the
publisher's unconfirmed count and credit re-grant (credit.py), and the header rewrite of
redelivered messages (3.2.1). May touch: the engine Link given to it (send, flow,
set_flow_state / send_flow_state for the queue's replies to drain and echo,
disposition), the queue of a consumer, the session state (sessions.py) to record
unsettled deliveries and confirms (a publisher's held ones in rcv-settle-mode second:
features/publisher_recovery.py), and the connection's transactions (features/transactions.py) to
send a consumer's deliveries in the transaction it acquires in (4.4.3). A consumer link
that resumes a kept terminus (features/recovery.py, 2.6.13) sends its resumed deliveries first, as
credit allows, and nothing new while the receiver's unsettled map was incomplete.

Credit of a consumer link lives twice: in the queue (credit API v2, authoritative for
what to dispatch) and in the engine Link, which applies the same 2.6.7 rules to the same
flows and refuses a send beyond the receiver's grant (our guard against RabbitMQ #2597).
Only the faults that over-deliver on purpose send past it: they relax the engine policy's
check_credit (faults.CATALOG `relaxes`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import Header, Transfer
from amqpspec.amqp10.engine import Link, UsageError
from amqpspec.amqp10.message import Message, transfer_frame_count
from amqpspec.amqp10.serial import serial_add
from amqpspec.amqp10.spec import Cond, SndSettleMode

from ..faults import wire as wire_faults
from ..features.publisher_recovery import Held, Resumed
from ..features.recovery import Resume, delivery_tag, recoverable
from ..features.volatile_nodes import is_volatile
from ..queues.addressing import Address, AddressKind
from ..queues.classic import RELEASED, ClassicQueue, CreditReply, Delivery, QueuedMessage
from .credit import initial_publisher_credit, publisher_regrant

if TYPE_CHECKING:
    from .sessions import BrokerSession

log = logging.getLogger("reference_broker.links")


def redelivered_payload(msg: QueuedMessage) -> bytes:
    """The payload with its header section saying what the queue knows (3.2.1):
    first-acquirer false after a requeue, delivery-count raised by delivery-failed, plus
    the message-annotations merged by a `modified` outcome (3.4.5). Decoded and encoded
    with amqp10.message, never by hand; an undecodable payload goes out unchanged."""
    try:
        message = Message.decode(msg.payload)
    except Exception:
        return msg.payload
    header = message.header or Header()
    message.header = header.replace(
        first_acquirer=msg.first_acquirer, delivery_count=msg.delivery_count
    )
    if msg.annotations:
        message.message_annotations = {**(message.message_annotations or {}), **msg.annotations}
    return message.encode()


class ConsumerLink:
    """A link on which the broker is the sender: the queue's consumer (3.5.3 source)."""

    __slots__ = (
        "connection",
        "faults",
        "link",
        "queue",
        "recoverable",
        "resume_only",
        "resumes",
        "session",
        "settled",
        "source",
        "tag",
        "unsettled",
    )

    def __init__(self, session: BrokerSession, link: Link, queue: ClassicQueue, tag: str) -> None:
        self.session = session
        self.connection = session.connection
        self.unsettled = session.unsettled  # delivery-id -> (link, msg id), per session
        self.link = link
        self.queue = queue
        self.tag = tag
        self.settled = link.snd_settle_mode == SndSettleMode.SETTLED
        self.faults = session.connection.faults
        self.source = link.source  # as the broker reported it (recovery.reported_source)
        self.recoverable = recoverable(link.source)  # its terminus can outlive the link
        self.resumes: list[Resume] = []  # 2.6.13: to send before anything new
        self.resume_only = False  # 2.7.3: the receiver's unsettled map was incomplete

    def _payload(self, msg: QueuedMessage) -> bytes:
        if msg.first_acquirer and not msg.delivery_count and not msg.annotations:
            payload = msg.payload
        else:  # redelivered (3.2.1) or modified with annotations (3.4.5)
            payload = redelivered_payload(msg)
        if self.faults.insert_properties:
            payload = wire_faults.insert_properties(payload)  # fault (RabbitMQ 3.10), 3.2
        return payload

    def deliver(self, event: Delivery) -> None:
        """Send one Delivery from the queue as a transfer (split by the engine at the
        peer's max-frame-size). The queue already counted it against the link credit."""
        link = self.link
        msg = event.message
        payload = self._payload(msg)
        acquiring = self.connection.transactions.acquiring  # 4.4.3 (features/transactions.py)
        txn = acquiring.get(self) if acquiring else None
        tag = delivery_tag(msg.msg_id) if self.recoverable else None
        try:
            if txn is None:
                delivery_id = link.send(payload, tag, settled=event.settled)
            else:
                delivery_id = link.send(payload, tag, settled=event.settled, state=txn.state)
        except UsageError as exc:  # too big for the peer, or the link is going away
            log.debug("cannot send on %r: %s", link, exc)
            if not event.settled and self.queue.has_consumer(self.tag):
                self.queue.settle(self.tag, [msg.msg_id], RELEASED)
            limit = link.remote_attach.max_message_size if link.remote_attach else None
            if limit and len(payload) > limit:  # 2.7.3: the receiver's max-message-size
                condition, reason = Cond.MESSAGE_SIZE_EXCEEDED, f"{len(payload)} bytes > {limit}"
            else:  # the link cannot send any more: stop dispatching to it
                condition, reason = Cond.DETACH_FORCED, str(exc)
            self.connection.link_handler.consumer_failed(self, condition, reason)
            return
        if not event.settled:
            self.unsettled[delivery_id] = (self, msg.msg_id)
        if txn is not None:
            self.connection.transactions.acquired(self, delivery_id, msg.msg_id)
        if self.faults.credit_per_frame:
            self._count_frames_as_credit(event, delivery_id, len(payload))
        self.connection.mark_dirty()

    def _count_frames_as_credit(self, event: Delivery, delivery_id: int, size: int) -> None:
        """Fault credit-per-frame (azure-uamqp-c PR #383): every transfer frame of a
        multi-frame delivery takes one credit and advances delivery-count. The frames are
        counted as the engine splits them (amqp10.message.transfer_frame_count, 2.6.14)."""
        link = self.link
        first = Transfer(
            handle=link.handle,
            delivery_id=delivery_id,
            delivery_tag=bytes(4),  # the engine's default tags are 4 bytes
            message_format=0,
            settled=event.settled,
        )
        engine = self.session.connection.engine
        frames = transfer_frame_count(
            first, size, engine.remote_max_frame_size, self.session.engine.channel
        )
        extra = frames - 1
        if extra:
            consumer = event.consumer
            consumer.delivery_count = serial_add(consumer.delivery_count, extra)
            consumer.credit = max(0, consumer.credit - extra)

    def credit_reply(self, reply: CreditReply) -> None:
        """The queue's flow state after a drain (2.6.7) or an echo request."""
        faults = self.faults
        if reply.drain and faults.no_drain_reply:
            return  # fault (go-amqp#255): the drain is applied, its flow never sent
        if reply.echo and not reply.drain and faults.no_echo:
            return  # fault (no-echo): the echo is never answered
        link = self.link
        try:
            link.set_flow_state(
                delivery_count=reply.delivery_count,
                link_credit=reply.link_credit,
                drain=reply.drain,
                available=reply.available,
            )
            link.send_flow_state()
        except UsageError as exc:
            log.debug("no flow on %r: %s", link, exc)
            return
        self.session.connection.mark_dirty()

    def send_resumes(self) -> None:
        """2.6.13: the deliveries of a resumed link, as far as the link-credit goes (the
        engine has the receiver's flow): each a resuming transfer under its old tag, the
        message again or the receiver's outcome restated (features/recovery.py). They advance the
        queue's delivery-count as any delivery does (2.6.7)."""
        record = self.queue.find_consumer(self.tag)
        link = self.link
        while self.resumes and record is not None and link.link_credit > 0:
            resume = self.resumes.pop(0)
            try:
                if resume.state is not None:  # applied at the queue: restated
                    settled = self.link.snd_settle_mode != SndSettleMode.UNSETTLED
                    delivery_id = link.send(
                        b"", resume.tag, settled=settled, state=resume.state, resume=True
                    )
                    if not settled:
                        self.unsettled[delivery_id] = (self, resume.msg_id)
                else:
                    msg = record.unacked.get(resume.msg_id)
                    if msg is None:
                        continue
                    delivery_id = link.send(
                        self._payload(msg), resume.tag, settled=False, resume=True
                    )
                    self.unsettled[delivery_id] = (self, resume.msg_id)
            except UsageError as exc:
                log.debug("cannot resume on %r: %s", link, exc)
                self.resumes.insert(0, resume)
                return
            record.delivery_count = serial_add(record.delivery_count, 1)
            self.connection.mark_dirty()

    def receiver_flow(self, flow: Any) -> None:
        """The receiver's flow for this link: hand it to the queue (credit API v2), which
        answers drain and echo with a CreditReply (the engine has auto_echo off). Resumed
        deliveries go first (2.6.13); while resume-only, the queue gets no credit."""
        consumer = self.queue.find_consumer(self.tag)
        if consumer is None:
            return
        if self.resumes:
            self.send_resumes()
        if self.resume_only:  # 2.7.3 incomplete-unsettled: no new deliveries
            if flow.echo and not self.faults.no_echo:
                self.link.send_flow_state()
                self.connection.mark_dirty()
            return
        link_credit = flow.link_credit
        delivery_count = flow.delivery_count
        if link_credit is None:  # no new grant: keep the current one
            link_credit = consumer.credit
            delivery_count = consumer.delivery_count
        self.queue.flow(
            self.tag,
            delivery_count=delivery_count,
            link_credit=link_credit,
            drain=bool(flow.drain),
            echo=bool(flow.echo),
        )


class PublisherLink:
    """A link on which the broker is the receiver: messages to a target (3.5.4)."""

    __slots__ = (
        "anonymous",
        "decode_needed",
        "held",
        "link",
        "max_link_credit",
        "max_unconfirmed",
        "regrant_below",
        "resumed",
        "second",
        "session",
        "target",
        "unconfirmed",
        "volatile",
    )

    def __init__(
        self, session: BrokerSession, link: Link, target: Address, *, second: bool = False
    ) -> None:
        self.session = session
        self.link = link
        self.target = target
        # rcv-settle-mode second: outcomes go out unsettled, held until the sender settles
        # (features/publisher_recovery.py); a resumed link's memory of its kept target
        self.second = second
        self.held = Held()
        self.resumed: Resumed | None = None
        limits = session.connection.config.limits
        self.max_link_credit = limits.max_link_credit
        self.max_unconfirmed = limits.max_unconfirmed
        self.regrant_below = limits.max_link_credit // 2
        self.unconfirmed = 0
        self.anonymous = target.kind is AddressKind.ANONYMOUS  # each message's `to` routes it
        vhost = session.connection.vhost
        # a queue that refuses durable messages (features/volatile_nodes.py, 3.2.1)
        self.volatile = (
            target.kind is AddressKind.QUEUE
            and not target.queue_from_subject
            and is_volatile(vhost.queues.get(target.queue or ""))
        )
        # the message must be decoded only when routing reads its to / subject / headers
        self.decode_needed = (
            target.kind is AddressKind.ANONYMOUS
            or target.queue_from_subject
            or (target.kind is AddressKind.EXCHANGE and target.routing_key is None)
            or (
                target.kind is AddressKind.EXCHANGE
                and vhost.exchanges.get(target.exchange or "") is not None
                and vhost.exchanges[target.exchange or ""].type == "headers"
            )
        )

    def grant_initial(self) -> None:
        self.link.flow(link_credit=initial_publisher_credit(self.max_link_credit))

    def maybe_regrant(self) -> bool:
        """RabbitMQ 4 (PR #9022 items 18, 20): top the link up to max-link-credit when it
        fell below half, unless too many of its messages await a confirm. True if a flow
        was sent."""
        link = self.link
        if link.link_credit >= self.regrant_below:
            return False
        credit = publisher_regrant(
            link.link_credit,
            self.unconfirmed,
            max_link_credit=self.max_link_credit,
            max_unconfirmed=self.max_unconfirmed,
        )
        if credit is None:
            return False
        try:
            link.flow(link_credit=credit)
        except UsageError:
            return False
        self.session.connection.mark_dirty()
        return True

    def confirmed(self) -> None:
        """One of this link's durable publishes is on disk."""
        self.unconfirmed -= 1
        self.maybe_regrant()
