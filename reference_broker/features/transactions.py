"""AMQP 1.0 local transactions (Part 4) in the reference broker: the transactional resource.

Owns: the coordinator links of one connection (4.5.1: a target `amqp:coordinator:list`,
capability `amqp:local-transactions` offered), the transactions they declared (4.2) and
their work until discharge (4.3): transactional posting (4.4.1, transfers whose state is
a `transactional-state`), transactional retirement (4.4.2, dispositions with one), and
transactional acquisition (4.4.3: a flow whose properties carry a `txn-id` makes the
consumer link send its deliveries in that transaction, until the discharge; a link that
sends settled cannot, and is detached with amqp:not-implemented as 4.4.3 says).
May touch: the engine links and sessions of its connection (dispositions, detach), the
vhost (route / publish at commit), the queues of consumer links (settle at commit or
rollback), the store (a commit's records appended as one batch) and the context's
durable waiters (a commit touching a durable queue is accepted once on disk).

Semantics (each rule next to its code):
- declare -> `declared` with a fresh 4-octet txn-id (4.5.4, up to 32 octets); a declare
  with a global-id is refused (no `amqp:distributed-transactions` capability, 4.5.2).
- discharge fail=true: rollback, accepted (4.3: the coordinator MUST always be able to);
  fail=false: commit, accepted once its durable records are fsynced; a transaction marked
  rollback-only (work it can no longer apply) is rolled back and the discharge rejected
  with amqp:transaction:rollback (4.4.4.1); an unknown or finished txn-id (or one of
  another session: no `amqp:multi-ssns-per-txn`) with amqp:transaction:unknown-id; one
  the timeout rolled back with amqp:transaction:timeout. Rejected when the control link's
  source allows the rejected outcome, else the control link is detached with the error
  (4.2, 4.3).
- timeout (4.5.8 transaction-timeout, "The work represented by this transaction took too
  long"; Part 4 sets no duration): `--transaction-timeout` (limits.transaction_timeout),
  or the connection's own through the admin API (PUT /api/connections/{name}/
  transaction-timeout: the suite's short one). A transaction still live that long after
  its declare is rolled back when the time comes (its work undone as on a rollback) and
  its txn-id remembered: a later discharge is refused with amqp:transaction:timeout.
- a settled declare / discharge detaches the control link (4.2: "it should detach with an
  appropriate error"): amqp:illegal-state.
- posting: the message is routed when it arrives (its presumptive outcome: accepted,
  released when no queue takes it, rejected for a bad address), sent back as a settled
  disposition carrying transactional-state(txn-id, outcome) (4.4.1), and enqueued only at
  commit; a rollback drops it without a trace (nothing reached the store). On the
  anonymous relay (relay.py) a message it cannot route is rejected naming its delivery-tag,
  or its link detached with that error when settled or the source has no rejected outcome.
- retirement: the outcome is applied at commit; on rollback a delivery the controller
  settled gets the default outcome (released, 4.4.4.2), one it left unsettled stays
  acquired and live (4.4.2).
- acquisition: each delivery of an acquiring link carries transactional-state(txn-id)
  (4.4: the txn-ids of our transfers say which transaction the work is in); a commit keeps
  the acquisitions (the deliveries go on as ordinary unsettled ones), a rollback undoes
  them (4.4.4.3: "the acquisition and outcome are rolled back"): the messages return to the
  queue and a delivery still unsettled is settled released. The discharge clears the link's
  txn-id (4.4.3).
- the control link ending (detach, end, close, transport loss) rolls back every
  transaction it declared that is not discharged (4.1).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import (
    Accepted,
    Coordinator,
    Declare,
    Declared,
    Discharge,
    Error,
    Rejected,
    Released,
    TransactionalState,
)
from amqpspec.amqp10.engine import UsageError
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.serial import serial_offset
from amqpspec.amqp10.spec import Cond, RcvSettleMode, Role
from amqpspec.amqp10.types import symbol

from ..queues.addressing import Address
from ..queues.classic import RELEASED, outcome_of
from . import relay

if TYPE_CHECKING:
    from ..protocol.connection import BrokerConnection
    from ..protocol.links import ConsumerLink, PublisherLink
    from ..protocol.sessions import BrokerSession

log = logging.getLogger("reference_broker.transactions")

# 4.5.7 txn-capability, 4.5.8 transaction-error
LOCAL_TRANSACTIONS = symbol("amqp:local-transactions")
MULTI_TXNS_PER_SSN = symbol("amqp:multi-txns-per-ssn")
UNKNOWN_ID = "amqp:transaction:unknown-id"
ROLLBACK = "amqp:transaction:rollback"
TIMEOUT = "amqp:transaction:timeout"
TXN_ID = symbol("txn-id")  # 4.4.3: the flow property naming the acquiring transaction
TRANSACTIONAL_STATE = TransactionalState.NAME


def is_transactional(state: Any) -> bool:
    return getattr(state, "NAME", None) == TRANSACTIONAL_STATE


@dataclass(slots=True)
class Post:
    """A message posted in a transaction: enqueued at commit (4.4.1)."""

    target: Address
    payload: bytes
    to: Any
    subject: Any
    headers: Any


@dataclass(slots=True)
class Retirement:
    """An outcome the controller gave a delivery we sent, applied at commit (4.4.2)."""

    consumer: ConsumerLink
    delivery_id: int
    msg_id: int
    state: Any  # the outcome inside the transactional-state
    settled: bool  # the controller settled it: its delivery-id is gone


@dataclass(slots=True)
class Transaction:
    txn_id: bytes
    controller: CoordinatorLink
    declared_at: float
    posts: list[Post] = field(default_factory=list)
    retirements: list[Retirement] = field(default_factory=list)
    acquisitions: list[tuple[ConsumerLink, int, int]] = field(default_factory=list)
    rollback_only: str | None = None  # why it cannot commit any more
    timer: Any = None  # the scheduler's wake-up that times it out (set_timeout)

    @property
    def state(self) -> TransactionalState:
        """The state of a transfer acquired in this transaction (4.4.3)."""
        return TransactionalState(txn_id=self.txn_id)


class CoordinatorLink:
    """The broker's end of one control link (4.5.1): receives declare and discharge."""

    __slots__ = ("link", "owner", "session", "transactions")

    def __init__(self, owner: Transactions, session: BrokerSession, link: Any) -> None:
        self.owner = owner
        self.session = session
        self.link = link
        self.transactions: dict[bytes, Transaction] = {}

    @property
    def allows_rejected(self) -> bool:
        """4.2 / 4.3: does the control link's source support the rejected outcome (the
        sender's source; its `outcomes` null means the default set, which has it)?"""
        return relay.rejects(self.link)

    def confirmed(self) -> None:
        """A commit's records are durable (the context's durable waiters call this)."""


class Transactions:
    """The transactional resource of one connection: its coordinators and transactions."""

    def __init__(self, connection: BrokerConnection) -> None:
        self.connection = connection
        self.coordinators: dict[Any, CoordinatorLink] = {}  # engine Link -> coordinator
        self.live: dict[bytes, Transaction] = {}
        # consumer links acquiring in a transaction (4.4.3); read by ConsumerLink.deliver
        self.acquiring: dict[ConsumerLink, Transaction] = {}
        self._ids = itertools.count(1)
        self.timeout = connection.config.limits.transaction_timeout  # seconds; 0 = none
        self.timed_out: dict[bytes, float] = {}  # rolled back by the timeout: txn-id -> when

    def set_timeout(self, seconds: float) -> None:
        """The admin API sets this connection's transaction timeout (0: none); it applies
        to the transactions declared from now on."""
        self.timeout = seconds

    # ------------------------------------------------------------------ control link
    def attach(self, session: BrokerSession, link: Any, target: Coordinator) -> None:
        """4.5.1: accept the control link; our target says the capabilities we have."""
        capabilities = [LOCAL_TRANSACTIONS, MULTI_TXNS_PER_SSN]
        link.accept(
            target=Coordinator(capabilities=capabilities),
            rcv_settle_mode=RcvSettleMode.FIRST,
        )
        coordinator = CoordinatorLink(self, session, link)
        self.coordinators[link] = coordinator
        session.links[link] = coordinator  # type: ignore[assignment]
        link.flow(link_credit=100)
        self.connection.mark_dirty()

    def release(self, coordinator: CoordinatorLink) -> None:
        """The control link is gone: 4.1 "If the control link is closed while there exist
        non-discharged transactions it created, then all such transactions are
        immediately rolled back"."""
        self.coordinators.pop(coordinator.link, None)
        for txn in list(coordinator.transactions.values()):
            self._rollback(txn)

    def control_transfer(self, event: Any) -> bool:
        """A transfer on a control link (True), else False (not ours)."""
        coordinator = self.coordinators.get(event.link)
        if coordinator is None:
            return False
        if event.settled:  # 4.2 / 4.3: a declare or discharge MUST NOT be sent settled
            self._detach(coordinator, Cond.ILLEGAL_STATE, "declare / discharge sent settled")
            return True
        try:
            body = Message.decode(event.payload).value
        except Exception:
            self._refuse(coordinator, event.delivery_id, Cond.DECODE_ERROR, "undecodable")
            return True
        if isinstance(body, Declare):
            self._declare(coordinator, event.delivery_id, body)
        elif isinstance(body, Discharge):
            self._discharge(coordinator, event.delivery_id, body)
        else:
            self._refuse(
                coordinator,
                event.delivery_id,
                Cond.DECODE_ERROR,
                "a coordinator message holds one amqp-value: declare or discharge",
            )
        if event.link.link_credit < 50:
            event.link.flow(link_credit=100)
        self.connection.mark_dirty()
        return True

    def _declare(self, coordinator: CoordinatorLink, delivery_id: int, declare: Declare) -> None:
        if declare.global_id is not None:  # 4.5.2: no amqp:distributed-transactions
            self._refuse(
                coordinator, delivery_id, Cond.NOT_IMPLEMENTED, "no distributed transactions"
            )
            return
        txn_id = next(self._ids).to_bytes(4, "big")
        scheduler = self.connection.scheduler
        txn = Transaction(txn_id, coordinator, scheduler.now())
        coordinator.transactions[txn_id] = txn
        self.live[txn_id] = txn
        if self.timeout and not self.connection.faults.txn_timeout_never_fires:
            # fault: the timeout is never applied (4.5.8 transaction-timeout)
            txn.timer = scheduler.call_at(
                txn.declared_at + self.timeout, lambda now: self._expire(txn, now)
            )
        self._settle(coordinator, delivery_id, Declared(txn_id=txn_id))

    def _discharge(
        self, coordinator: CoordinatorLink, delivery_id: int, discharge: Discharge
    ) -> None:
        txn_id = bytes(discharge.txn_id or b"")
        if self.timed_out.pop(txn_id, None) is not None:
            reason = f"rolled back: older than the transaction timeout of {self.timeout:g} s"
            self._refuse(coordinator, delivery_id, TIMEOUT, reason)
            return
        txn = self.live.get(txn_id)
        if txn is None or txn.controller.session is not coordinator.session:
            if self.connection.faults.txn_discharge_unknown_accepted:
                self._settle(coordinator, delivery_id, Accepted())  # fault: 4.3 / 4.5.8
                return
            self._refuse(coordinator, delivery_id, UNKNOWN_ID, "no such transaction")
            return
        if discharge.fail:  # 4.3: "MUST always be able to complete a discharge" with fail
            self._rollback(txn)
            self._settle(coordinator, delivery_id, Accepted())
            return
        if txn.rollback_only is None:
            txn.rollback_only = self._cannot_commit(txn)
        if txn.rollback_only is not None:  # 4.4.4.1 MUST NOT allow the successful discharge
            reason = txn.rollback_only
            self._rollback(txn)
            self._refuse(coordinator, delivery_id, ROLLBACK, reason)
            return
        tokens = self._commit(txn)
        if tokens:  # accepted once the committed work is on disk
            self.connection.context.wait_durable(
                max(tokens),
                coordinator.session,
                delivery_id,
                coordinator,  # type: ignore[arg-type]
            )
        else:
            self._settle(coordinator, delivery_id, Accepted())

    # ------------------------------------------------------------------ work
    def post(
        self, publisher: PublisherLink, event: Any, to: Any, subject: Any, headers: Any
    ) -> None:
        """4.4.1 transactional posting: remembered, its presumptive outcome sent back in a
        transactional-state with the same txn-id (4.4.4.1), enqueued at commit."""
        txn = self._find(event.state.txn_id, publisher.session)
        if txn is None:
            self.connection.link_handler.detach_with(
                publisher.session, event.link, UNKNOWN_ID, "transfer for an unknown txn-id"
            )
            return
        vhost = self.connection.vhost
        outcome: Any = Accepted()
        try:
            if publisher.anonymous:  # write permission where `to` publishes
                self.connection.access.check_anonymous_to(to)
            queues = vhost.route(publisher.target, to=to, subject=subject, headers=headers)
        except Exception as exc:  # a bad `to` / a missing node / no permission: rejected
            condition = getattr(exc, "condition", Cond.INVALID_FIELD)
            reason = getattr(exc, "reason", str(exc))
            if event.settled and txn.rollback_only is None:
                # 4.4.4.1 Delivery Sent Settled By Controller: "Should the resource be
                # unable to process the delivery it MUST NOT allow the successful discharge
                # of the associated transaction"
                txn.rollback_only = f"a settled transactional transfer was refused: {reason}"
            error = Error(condition=condition, description=str(exc))
            if publisher.anonymous and condition in relay.ROUTING_ERRORS:  # relay.py
                error = relay.routing_error(
                    event.delivery_tag, condition, str(exc), self.connection.faults
                )
                if event.settled or not relay.rejects(event.link):  # anonterm 2.2.2: detach
                    self.connection.delivery_handler.anonymous_routing_error(
                        publisher, event, error
                    )
                    return
            outcome = Rejected(error=error)
            queues = None
        if queues == []:
            outcome = Released()  # no queue takes it (as outside a transaction)
        elif queues:
            post = Post(publisher.target, event.payload, to, subject, headers)
            if self.connection.faults.txn_post_immediately:
                # fault: the message is enqueued now, visible before the discharge and
                # kept by a rollback (4.4.1: "the message does not become available at
                # the destination node ... until after the transaction has been
                # (successfully) discharged")
                self._publish(post)
            else:
                txn.posts.append(post)
        if not event.settled:
            state = TransactionalState(txn_id=txn.txn_id, outcome=outcome)
            publisher.session.settle_publish(event.delivery_id, state)

    def retire(
        self, session: BrokerSession, first: int, last: int, settled: bool, state: Any
    ) -> None:
        """4.4.2 transactional retirement: the outcome of deliveries first..last we sent,
        applied when the transaction commits."""
        txn = self._find(state.txn_id, session)
        if txn is None:  # nothing to apply it to: the consumers of the range are detached
            for consumer in {session.unsettled[d][0] for d in _ids(first, last, session)}:
                self.connection.link_handler.detach_with(
                    session, consumer.link, UNKNOWN_ID, "disposition for an unknown txn-id"
                )
            return
        outcome = state.outcome if state.outcome is not None else Accepted()
        for delivery_id in _ids(first, last, session):
            consumer, msg_id = session.unsettled[delivery_id]
            if settled:  # its delivery-id is forgotten; the outcome waits for the discharge
                del session.unsettled[delivery_id]
            txn.retirements = [r for r in txn.retirements if r.delivery_id != delivery_id]
            txn.retirements.append(Retirement(consumer, delivery_id, msg_id, outcome, settled))

    def acquisition(self, consumer: ConsumerLink, flow: Any) -> bool:
        """4.4.3: a flow naming a txn-id: the link acquires in that transaction from now on
        (False: the flow's credit applies as usual). True if the link was detached
        instead: it sends settled ("If the link endpoint does not support transactional
        acquisition, the link MUST be terminated with a not-implemented error"), or the
        txn-id is not a live transaction of its session (amqp:transaction:unknown-id)."""
        properties = flow.properties
        if not properties or TXN_ID not in properties:
            return False
        if consumer.settled:  # a settled delivery's acquisition could not be rolled back
            self.connection.link_handler.detach_with(
                consumer.session,
                consumer.link,
                Cond.NOT_IMPLEMENTED,
                "no transactional acquisition on a link that sends settled",
            )
            return True
        txn = self._find(properties[TXN_ID], consumer.session)
        if txn is None:
            self.connection.link_handler.detach_with(
                consumer.session, consumer.link, UNKNOWN_ID, "flow for an unknown txn-id"
            )
            return True
        self.acquiring[consumer] = txn
        return False

    def acquired(self, consumer: ConsumerLink, delivery_id: int, msg_id: int) -> None:
        """ConsumerLink.deliver sent `delivery_id` in the link's transaction (4.4.3)."""
        txn = self.acquiring.get(consumer)
        if txn is not None:
            txn.acquisitions.append((consumer, delivery_id, msg_id))

    # ------------------------------------------------------------------ discharge
    def _cannot_commit(self, txn: Transaction) -> str | None:
        """Why the work can no longer be applied as announced (4.4.4.1), or None."""
        vhost = self.connection.vhost
        for post in txn.posts:
            try:
                if not vhost.route(
                    post.target, to=post.to, subject=post.subject, headers=post.headers
                ):
                    return "a posted message has no queue any more"
            except Exception as exc:
                return f"a posted message cannot be routed any more: {exc}"
        for retirement in txn.retirements:
            queue = retirement.consumer.queue
            found = queue.find_consumer(retirement.consumer.tag)
            if found is None or retirement.msg_id not in found.unacked:
                return "a retired delivery's link is gone (its message was requeued)"
        return None

    def _commit(self, txn: Transaction) -> list[int]:
        """Apply the work (4.4.1, 4.4.2); the store tokens of what it wrote. The records
        go to the store as one batch (no group-commit flush in between)."""
        self._finish(txn)
        store = self.connection.vhost.store
        tokens: list[int] = []
        with store.atomic() if store is not None else contextlib.nullcontext():
            for post in txn.posts:
                tokens += self._publish(post)
            for retirement in txn.retirements:
                self._apply(retirement)
        return tokens

    def _publish(self, post: Post) -> list[int]:
        try:
            result = self.connection.vhost.publish(
                post.target, post.payload, to=post.to, subject=post.subject, headers=post.headers
            )
        except Exception as exc:  # the route changed after _cannot_commit: logged
            log.info("committed message not routed: %s", exc)
            return []
        return list(result.tokens)

    def _apply(self, retirement: Retirement) -> None:
        consumer = retirement.consumer
        session = consumer.session
        if not retirement.settled and session.unsettled.pop(retirement.delivery_id, None) is None:
            return  # settled meanwhile outside the transaction
        outcome, kwargs = outcome_of(retirement.state)
        if consumer.queue.has_consumer(consumer.tag):
            consumer.queue.settle(consumer.tag, [retirement.msg_id], outcome, **kwargs)
        if not retirement.settled:  # 4.4.4.1: the state of the delivery reflects it
            try:
                session.engine.disposition(
                    Role.SENDER,
                    retirement.delivery_id,
                    retirement.delivery_id,
                    True,
                    retirement.state,
                )
            except UsageError:
                pass

    def _rollback(self, txn: Transaction) -> None:
        """Posts dropped; retired deliveries the controller settled get the default outcome
        (released: 4.4.4.2), unsettled ones stay acquired (4.4.2)."""
        self._finish(txn)
        for retirement in txn.retirements:
            consumer = retirement.consumer
            if retirement.settled and consumer.queue.has_consumer(consumer.tag):
                consumer.queue.settle(consumer.tag, [retirement.msg_id], RELEASED)
        for consumer, delivery_id, msg_id in txn.acquisitions:  # 4.4.4.3: rolled back
            session = consumer.session
            live = session.unsettled.pop(delivery_id, None) is not None
            if consumer.queue.has_consumer(consumer.tag):
                consumer.queue.settle(consumer.tag, [msg_id], RELEASED)
            if live:  # tell the controller: the delivery is settled, released
                try:
                    session.engine.disposition(
                        Role.SENDER, delivery_id, delivery_id, True, Released()
                    )
                except UsageError:
                    pass
        txn.posts.clear()
        txn.retirements.clear()
        txn.acquisitions.clear()

    def _expire(self, txn: Transaction, now: float) -> None:
        """The timeout's wake-up: a transaction still live is rolled back (4.5.8
        transaction-timeout) and its txn-id kept for the discharge's answer."""
        txn.timer = None
        if self.live.get(txn.txn_id) is not txn or not self.connection.open:
            return
        self._rollback(txn)
        self.timed_out[txn.txn_id] = now
        if len(self.timed_out) > 1024:  # a controller that never discharges: the oldest go
            del self.timed_out[next(iter(self.timed_out))]
        self.connection.mark_dirty()
        self.connection.context.end_turn(now)  # released messages go out to consumers

    def _finish(self, txn: Transaction) -> None:
        """Discharged: no longer live; 4.4.3 "the txn-id of any link endpoints will be
        cleared"."""
        if txn.timer is not None:
            txn.timer.cancel()
            txn.timer = None
        self.live.pop(txn.txn_id, None)
        txn.controller.transactions.pop(txn.txn_id, None)
        if self.acquiring:
            self.acquiring = {c: t for c, t in self.acquiring.items() if t is not txn}

    def _find(self, txn_id: Any, session: BrokerSession) -> Transaction | None:
        """The live transaction `txn_id` if `session` may work in it (declared on it: we
        do not offer amqp:multi-ssns-per-txn, 4.5.7)."""
        txn = self.live.get(bytes(txn_id or b""))
        if txn is None or txn.controller.session is not session:
            return None
        return txn

    # ------------------------------------------------------------------ answers
    def _settle(self, coordinator: CoordinatorLink, delivery_id: int, state: Any) -> None:
        coordinator.session.settle_publish(delivery_id, state)

    def _refuse(
        self, coordinator: CoordinatorLink, delivery_id: int, condition: str, reason: str
    ) -> None:
        """4.2 / 4.3: the transaction-error as a rejected outcome when the control link's
        source supports it, else as the error of a detach of the control link."""
        if coordinator.allows_rejected:
            error = Error(condition=condition, description=reason)
            self._settle(coordinator, delivery_id, Rejected(error=error))
        else:
            self._detach(coordinator, condition, reason)

    def _detach(self, coordinator: CoordinatorLink, condition: str, reason: str) -> None:
        self.connection.link_handler.detach_with(
            coordinator.session, coordinator.link, condition, reason
        )


def _ids(first: int, last: int, session: BrokerSession) -> list[int]:
    """The delivery-ids first..last we sent unsettled on `session`."""
    span = serial_offset(first, last)
    return [d for d in session.unsettled if serial_offset(first, d) <= span]
