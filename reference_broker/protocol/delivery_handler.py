"""The delivery handler of a broker connection: the engine's transfers, flows and
dispositions (2.6.7, 2.7.4-2.7.6), the broker's hot path.

Owns: routing a publish into the vhost (after the checks its link and the alarms ask for:
2.7.5 resumed deliveries ignored or, on a resumed link, completed, restated or refused as
features/publisher_recovery.py judges them, anonymous terminus permissions, undecodable
messages and messages whose sections break 3.2's order or run past its end rejected with
amqp:decode-error, then the message-level checks of features/message_checks.py on the
message's head: reserved annotation keys, 3.2.10, and user-id, 3.2.4; a durable message to a
volatile queue refused: features/volatile_nodes.py, 3.2.1), its confirm
(accepted at once, after the store's group commit for a durable queue, or
released/rejected), the publishers whose credit to consider
re-granting after each step (`credit_checks`, credit.py's rule in links.py), transfers on
the control links (Part 4) and /management links handed on, echo of session and link flows
answered from the broker's own state (the engine's auto_echo is off), a consumer's flow to
its queue, and a receiver's disposition to its session (settlement, sessions.py). Per frame
it does what the connection did before the split: one dict lookup and one bound call.
May touch: the sessions and links of its connection, the vhost's publish, the context's
durable waiters and dynamic-node sweep, the connection's transactions.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from amqpspec.amqp10.composites import Error, Rejected
from amqpspec.amqp10.engine import UsageError
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.message_head import EMPTY_HEAD, MessageHead, message_head, publish_head
from amqpspec.amqp10.serial import serial_add
from amqpspec.amqp10.spec import Cond, Role

from ..features import message_checks, relay
from ..features.publisher_recovery import ROUTE_AS_SENT, Verdict
from ..features.transactions import is_transactional
from ..features.volatile_nodes import asks_durability, durable_refused
from ..queues.addressing import AddressError
from ..queues.errors import BrokerError
from .links import PublisherLink
from .parts import ConnectionPart
from .sessions import RELEASED_STATE, BrokerSession

if TYPE_CHECKING:
    from .connection import BrokerConnection

log = logging.getLogger("reference_broker.connection")


class DeliveryHandler(ConnectionPart):
    """Transfers, flows and dispositions of one connection."""

    SHARED = (
        "access",
        "context",
        "faults",
        "management_links",
        "mark_dirty",
        "publishers",
        "sessions",
        "summary",  # its user, once SASL authenticated one
        "transactions",
        "vhost",
    )
    __slots__ = (*SHARED, "_fault_session_tags", "credit_checks", "read_head")

    def __init__(self, connection: BrokerConnection) -> None:
        super().__init__(connection)
        self.credit_checks: list[PublisherLink] = []  # publishers to consider re-granting
        # fault session-scoped-delivery-tags: the tags each session's publishers used
        self._fault_session_tags: dict[BrokerSession, set[bytes]] = {}
        # a publish's head, with 3.2's section order checked in the same walk (unchecked
        # under the fault accept-misordered-sections)
        self.read_head = message_head if self.faults.accept_misordered_sections else publish_head

    def regrant(self) -> bool:
        """After a step: re-grant credit to the publishers that may need it (credit.py's
        rule); True when one was granted."""
        checks, self.credit_checks = self.credit_checks, []
        regranted = False
        for publisher in checks:
            regranted |= publisher.maybe_regrant()
        return regranted

    def on_transfer(self, event: ev.TransferReceived) -> None:
        link = event.link
        publisher = self.publishers.get(link)
        if publisher is None:
            self._control_transfer(event)
            return
        session = publisher.session
        if event.resume or publisher.resumed is not None:
            # a resumed link or delivery (2.6.13, features/publisher_recovery.py)
            resumed = self._resumed(publisher, event)
            if resumed is None:
                return
            event = resumed
        if self.faults.session_scoped_delivery_tags and self._seen_tag(session, event):
            return  # fault: a tag seen on the session taken for a duplicate, never settled
        if self.context.alarm_active:
            self._transfer_during_alarm(session)
        head = self._judged(publisher, event)
        if head is None:
            return  # refused
        to = subject = headers = None
        if publisher.decode_needed:  # a decoded Message (routing reads its properties)
            props = head.properties
            if props is not None:
                to, subject = props.to, props.subject
            headers = head.application_properties
        if publisher.volatile and self._refused_durable(publisher, event):
            return
        if event.state is not None and is_transactional(event.state):  # 4.4.1
            self.transactions.post(publisher, event, to, subject, headers)
            if publisher not in self.credit_checks:
                self.credit_checks.append(publisher)
            return
        if publisher.second and not event.settled:  # 2.8.3: settled once the sender has
            session.hold_publish(publisher, event.delivery_id, bytes(event.delivery_tag))
        try:
            if publisher.anonymous:
                self.access.check_anonymous_to(to)
            result = self.vhost.publish(
                publisher.target, event.payload, to=to, subject=subject, headers=headers
            )
        except (BrokerError, AddressError) as exc:
            self._publish_refused(publisher, event, exc)
            return
        if not event.settled:
            if result.released:
                session.settle_publish(event.delivery_id, RELEASED_STATE)
            elif result.tokens:
                publisher.unconfirmed += 1
                self.context.wait_durable(max(result.tokens), session, event.delivery_id, publisher)
            else:
                session.confirm(event.delivery_id)
        if link.link_credit < publisher.regrant_below and publisher not in self.credit_checks:
            # decided after the whole read: the engine has already counted every transfer
            # of it against the credit, and the unconfirmed count must include them too
            self.credit_checks.append(publisher)

    def _resumed(
        self, publisher: PublisherLink, event: ev.TransferReceived
    ) -> ev.TransferReceived | None:
        """A transfer of a resumed publisher link, or a resumed transfer: the delivery to
        route, or None when it is answered here (features/publisher_recovery.py)."""
        resumed = publisher.resumed
        if resumed is None:
            # 2.7.5 resume / 2.6.13: "The receiver MUST ignore resumed deliveries that are
            # not in its local unsettled map" - nothing was kept for this link
            return None
        tag = bytes(event.delivery_tag)
        judged = resumed.judge(tag, event.resume, event.settled, event.state, event.payload)
        verdict = judged.verdict
        if verdict is Verdict.DETACH:
            if not event.resume and self.faults.accept_new_after_incomplete_map:
                return event  # fault: a new delivery taken after an incomplete map
            self.connection.link_handler.detach_with(
                publisher.session, event.link, Cond.ILLEGAL_STATE, judged.reason
            )
            return None
        if verdict is Verdict.ROUTE:
            if judged is ROUTE_AS_SENT:
                return event
            return dataclasses.replace(event, payload=judged.payload, resume=False)
        if verdict is Verdict.RESTATE:  # held: its outcome again, the message not routed twice
            if publisher.second:
                publisher.session.hold_publish(publisher, event.delivery_id, tag)
            publisher.session.settle_publish(event.delivery_id, judged.state)
        if publisher not in self.credit_checks:
            self.credit_checks.append(publisher)
        return None

    def _judged(
        self, publisher: PublisherLink, event: ev.TransferReceived
    ) -> MessageHead | Message | None:
        """The publish's message as far as routing reads it, once it passed the checks: the
        whole message decoded when routing needs it, else its section order (3.2) and its
        head in one walk (amqp10.message_head.publish_head); then features/message_checks.py
        unless the head is empty. None: refused here (amqp:decode-error: a section out of
        order or malformed first, then an undecodable head; or the check's refusal)."""
        session = publisher.session
        head: MessageHead | Message | str
        if publisher.decode_needed:
            try:
                head = Message.decode(event.payload)
            except Exception:
                self._refuse_publish(session, event, Cond.DECODE_ERROR, "undecodable message")
                return None
        else:
            try:
                head = self.read_head(event.payload)
            except Exception:
                self._refuse_publish(session, event, Cond.DECODE_ERROR, "undecodable head")
                return None
            if type(head) is str:  # the sections' fault (3.2)
                self._refuse_publish(session, event, Cond.DECODE_ERROR, f"message: {head} (3.2)")
                return None
            if head is EMPTY_HEAD:
                return head  # nothing for the checks to judge (most publishes)
        refused = message_checks.refusal(head, self.summary.user, self.faults)
        if refused is not None:
            self._message_refused(publisher, event, refused)
            return None
        return head

    def _control_transfer(self, event: ev.TransferReceived) -> None:
        """A transfer on a link that publishes nothing: a transaction coordinator's control
        message (4.5) or a /management request."""
        if self.transactions.control_transfer(event):
            return
        pair = self.management_links.get(event.link)
        if pair is not None:
            self.connection.link_handler.management_request(pair, event)

    def _publish_refused(
        self, publisher: PublisherLink, event: ev.TransferReceived, exc: Exception
    ) -> None:
        """The vhost could not take a publish (unroutable, unauthorised, ...): rejected, or on
        the anonymous terminus the relay's routing error (features/relay.py), rejected or the
        link detached as the sender's source allows."""
        session = publisher.session
        condition = getattr(exc, "condition", Cond.INVALID_FIELD)
        reason = getattr(exc, "reason", str(exc))
        if publisher.anonymous and condition in relay.ROUTING_ERRORS:
            error = relay.routing_error(event.delivery_tag, condition, reason, self.faults)
            if event.settled or not relay.rejects(event.link):
                self.anonymous_routing_error(publisher, event, error)
                return
            session.settle_publish(event.delivery_id, Rejected(error=error))
        else:
            self._refuse_publish(session, event, condition, reason)
        if publisher not in self.credit_checks:
            self.credit_checks.append(publisher)

    def _refused_durable(self, publisher: PublisherLink, event: ev.TransferReceived) -> bool:
        """A message with header durable=true to a volatile queue (features/volatile_nodes.py,
        3.2.1): rejected with amqp:precondition-failed when unsettled and the sender's
        source supports rejected, else the link detached with it. True when refused."""
        if self.faults.accept_durable_on_volatile or not asks_durability(event.payload):
            return False
        error = durable_refused(publisher.target.queue or "")
        if event.settled or not relay.rejects(event.link):
            self.detach_publisher(publisher, error)
            return True
        publisher.session.settle_publish(event.delivery_id, Rejected(error=error))
        if publisher not in self.credit_checks:
            self.credit_checks.append(publisher)
        return True

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
        self.detach_publisher(publisher, error)

    def _message_refused(
        self, publisher: PublisherLink, event: ev.TransferReceived, refused: message_checks.Refusal
    ) -> None:
        """A message features/message_checks.py refuses: the link detached when the
        refusal says so (3.2.10) or the message came settled, the delivery rejected
        otherwise."""
        if refused.detach or event.settled:
            error = Error(condition=refused.condition, description=refused.description)
            self.detach_publisher(publisher, error)
            return
        self._refuse_publish(publisher.session, event, refused.condition, refused.description)
        if publisher not in self.credit_checks:
            self.credit_checks.append(publisher)

    def detach_publisher(self, publisher: PublisherLink, error: Error) -> None:
        """Release the publisher's link and detach it with `error` (2.6.5)."""
        link = publisher.link
        self.connection.link_handler.release_link(publisher.session, link)
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

    def on_flow(self, event: ev.FlowReceived) -> None:
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

    def on_disposition(self, event: ev.DispositionReceived) -> None:
        session = self.sessions.get(event.session)
        if session is None:
            return
        if event.role != Role.RECEIVER:  # the peer as sender settling its publishes
            if event.settled:  # rcv-settle-mode second: ours settle now (2.8.3)
                session.sender_settled(event.first, event.last)
            return
        session.on_disposition(event.first, event.last, event.settled, event.state)
        self.context.dynamic.sweep()  # delete-on-no-messages: a settled delivery
