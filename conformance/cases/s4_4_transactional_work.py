"""Part 4 transactional work beside ordinary work, and work in a txn-id the broker never
declared: the broker as the transactional resource, the suite as the controller
(conformance/steps/transactions.py; UNSUPPORTED without local transactions, as in
s4_transactions.py).

One link carrying transactional and non-transactional transfers (Qpid Broker-J's
TransferTest.transferMixtureOfTransactionalAndNonTransactionalDeliveries) or dispositions
(receiveMixture...) is held to 4.4: "the txn-ids included MUST correctly indicate with
which (if any) transaction this work is associated": the plain message's disposition names
no transaction and the plain work is done at once, the transactional work only at commit;
a delivery the controller settled in a rolled-back transaction gets the default outcome
(4.4.4.2 MUST). A disposition or a flow naming a txn-id never declared (Broker-J's
receiveTransactionalRetirementDispositionFailsDueToUnknownTransactionId and
receiveTransactionalAcquisitionFlowFailsDueToUnknownTransactionId): no sentence says what
the resource answers (amqp:transaction:unknown-id names the case): recorded (MAY), except
that a transfer may not claim the undeclared transaction (4.4).

A message acquired in a transaction (4.4.3) and accepted in it leaves the queue at commit
and is back after a rollback (4.4.4.3; 4.4: the transfer's txn-id said the acquisition was
that transaction's work); a broker without transactional acquisition is UNSUPPORTED there.

Owns the cases `4.4/posting-mixed-with-plain`, `4.4.2/retirement-mixed-with-plain`,
`4.4.2/retirement-unknown-txn-id`, `4.4.3/acquisition-unknown-txn-id`,
`4.4.3/acquisition-commit`, `4.4.3/acquisition-rollback`,
`4.4.2/retirement-queue-deleted` (recorded, MAY) and
`4.4.2/retirement-commit-rcv-settle-second` (a transactional acceptance the controller
does not settle, on a rcv-settle-mode second link, applied at commit).
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Accepted, Released, Source, TransactionalState
from amqpspec.amqp10.engine import RemoteDetach
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import RcvSettleMode, Role
from amqpspec.conformance.cases.s4_transactions import SAME_TXN, WORK_TXN_IDS
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.run.registry import MAY, MUST, case
from amqpspec.conformance.steps.queues import message_text
from amqpspec.conformance.steps.transactions import (
    QUEUES,
    RETIRE_NEEDS,
    ROLLBACK_COMPLETES,
    accept_in,
    acquire,
    answer_in_words,
    check_at_queue,
    commit,
    declared,
    describe,
    error_condition,
    in_words,
    outcome_of_post,
    post,
    posting,
    posting_case,
    retire,
    retiring_case,
    roll_back,
    unknown_txn_id,
    visible,
)
from amqpspec.conformance.verdicts import SHORTFALL, CaseFailed, Unsupported

DEFAULT_OUTCOME = "4.4.4.2/transactional-retirement.1"  # rolled back: MUST apply the default


@posting_case(
    "4.4/posting-mixed-with-plain",
    "On one link, a message posted in a transaction and one posted outside it: the plain "
    "one's disposition names no transaction and it is at the queue at once, the "
    "transactional one's names its transaction and it is there only after the commit.",
    WORK_TXN_IDS,
    SAME_TXN,
)
def posting_mixed_with_plain(probe, ctx):
    """Counters Qpid Broker-J's TransferTest.transferMixtureOfTransactionalAndNonTransactional
    Deliveries: declare; on one sender link post `txn-posted` unsettled in the transaction,
    then `plain` unsettled with no state; the broker's dispositions: transactional-state
    (txn-id) for the first, no transactional-state for the second; a consumer gets `plain`
    only; commit: it gets `txn-posted`."""
    queue = ctx.queue()
    controller, txn_id, sender = posting(probe, ctx, queue)
    txn_delivery = post(probe, sender, txn_id, b"txn-posted")
    plain_delivery = probe.send_message(sender, Message.of(b"plain"), settled=False)
    txn_state = outcome_of_post(probe, txn_delivery, ctx.profile.wait)
    plain_state = outcome_of_post(probe, plain_delivery, ctx.profile.wait)
    ctx.must(
        isinstance(txn_state, TransactionalState) and bytes(txn_state.txn_id or b"") == txn_id,
        f"expected the transactional message's disposition in a transactional-state of txn-id "
        f"{txn_id.hex()}; observed {describe(txn_state)}",
        SAME_TXN,
    )
    ctx.must(
        plain_state is not None and not isinstance(plain_state, TransactionalState),
        f"expected the plain message's disposition to name no transaction (it was sent "
        f"outside any); observed {describe(plain_state)}",
        WORK_TXN_IDS,
    )
    before = f"only the plain message at the queue before the commit of txn-id {txn_id.hex()}"
    check_at_queue(ctx, queue, [b"plain"], before, WORK_TXN_IDS)
    commit(controller, txn_id)
    after = "the transactional message at the queue after the commit"
    check_at_queue(ctx, queue, [b"txn-posted"], after, WORK_TXN_IDS)


@retiring_case(
    "4.4.2/retirement-mixed-with-plain",
    MUST,
    "Of two deliveries of one link, one accepted outside a transaction and one accepted "
    "(settled) in a transaction that is rolled back: the first is gone, the second gets the "
    "default outcome (released: back at the queue).",
    WORK_TXN_IDS,
    DEFAULT_OUTCOME,
    requires=RETIRE_NEEDS,
)
def retirement_mixed_with_plain(probe, ctx):
    """Counters Qpid Broker-J's TransferTest.receiveMixtureOfTransactionalAndNonTransactional
    Deliveries: two messages received unsettled on one link whose source asks for
    default-outcome released; the first settled accepted, the second settled with
    transactional-state(txn-id, accepted); roll back: a new consumer gets the second only
    (the first's acceptance was no transaction's work; the second's outcome was not applied
    and the resource MUST apply the default outcome, 4.4.4.2)."""
    queue = ctx.queue()
    source = Source(address=ctx.source(queue), default_outcome=Released())
    controller, link, (plain, retired) = retire(probe, ctx, queue, 2, source=source)
    txn_id = controller.declare()
    probe.settle(link, plain)
    state = TransactionalState(txn_id=txn_id, outcome=Accepted())
    link.disposition(retired.delivery_id, settled=True, state=state)
    probe.flush()
    roll_back(ctx, controller, txn_id)
    probe.detach(link)
    back = visible(ctx, queue)
    expected = [message_text(retired)]
    ctx.must(
        back == expected,
        f"expected {expected} back at the queue (its transactional acceptance rolled back, the "
        f"default outcome released applied) and {message_text(plain)!r} gone (accepted "
        f"outside the transaction); a consumer got {back}",
        WORK_TXN_IDS,
        DEFAULT_OUTCOME,
    )


@case(
    "4.4.2/retirement-unknown-txn-id",
    MAY,
    "A disposition whose transactional-state names a txn-id never declared: the broker's "
    "answer is recorded (no sentence says which; amqp:transaction:unknown-id names the case).",
    outcomes={"detach:amqp:transaction:unknown-id"},
    requires={"queues", "unsettled-deliveries"},
    pipelined=False,
)
def retirement_unknown_txn_id(probe, ctx):
    """Counters Qpid Broker-J's TransactionalTransferTest.receiveTransactionalRetirement
    DispositionFailsDueToUnknownTransactionId: declare (the gate); settle a received message
    with transactional-state(an undeclared txn-id, accepted): the broker's answer (Broker-J
    detaches the link with amqp:transaction:unknown-id) is recorded, and whether the message
    is still at the queue after (Broker-J keeps it) is noted."""
    queue = ctx.queue()
    controller, link, (delivery,) = retire(probe, ctx, queue)
    unknown = unknown_txn_id(controller.declare())
    state = TransactionalState(txn_id=unknown, outcome=Accepted())
    link.disposition(delivery.delivery_id, settled=True, state=state)
    probe.flush()
    answer = answer_in_words(probe, link, ctx.profile.wait, delivery.delivery_id, Role.SENDER)
    ctx.outcome(answer)
    if not answer.startswith("detach:"):
        probe.detach(link)
    ctx.note(f"after it, a consumer of the queue got {visible(ctx, queue)}")


@case(
    "4.4.3/acquisition-unknown-txn-id",
    MAY,
    "A flow asking for transactional acquisition in a txn-id never declared: the broker's "
    "answer is recorded (amqp:transaction:unknown-id names the case); a transfer it sends "
    "must not claim that transaction.",
    sentences=(WORK_TXN_IDS,),
    role="sender",
    outcomes={"detach:amqp:transaction:unknown-id"},
    requires={"queues"},
    pipelined=False,
)
def acquisition_unknown_txn_id(probe, ctx):
    """Counters Qpid Broker-J's TransactionalTransferTest.receiveTransactionalAcquisition
    FlowFailsDueToUnknownTransactionId (disabled there, QPID-7951): one queued message; a
    receiver on the controller's session grants credit in a flow whose properties carry a
    txn-id never declared: the broker's answer is recorded (Broker-J: a detach with
    amqp:transaction:unknown-id); a transfer whose transactional-state names that txn-id
    says the work is in a transaction that does not exist (4.4 MUST)."""
    controller, txn_id = declared(probe)
    unknown = unknown_txn_id(txn_id)
    try:
        event = acquire(probe, ctx, ctx.queue(), controller.session, unknown)
    except WaitTimeout:
        ctx.outcome("timeout")
        return
    if isinstance(event, RemoteDetach):
        ctx.outcome(f"detach:{error_condition(event)}")
        return
    state = event.state
    ctx.must(
        not (isinstance(state, TransactionalState) and bytes(state.txn_id or b"") == unknown),
        f"expected no transfer in txn-id {unknown.hex()} (never declared); observed a transfer "
        f"with state {state!r}",
        WORK_TXN_IDS,
    )
    ctx.outcome(f"transfer:{getattr(state, 'NAME', type(state).__name__)}")


def _acquired(probe, ctx, queue: str):
    """4.4.3: one message acquired in a new transaction and accepted in it (settled):
    (controller, txn-id, the delivery). UNSUPPORTED when the broker answers the flow with
    amqp:not-implemented (no transactional acquisition: 4.4.3 allows that, and
    `4.4.3/acquisition-refused-or-transactional` grades it)."""
    controller, txn_id = declared(probe)
    try:
        event = acquire(probe, ctx, queue, controller.session, txn_id)
    except WaitTimeout:
        raise CaseFailed(
            "no transfer and no detach after a flow asking for transactional acquisition",
            level=SHORTFALL,
        ) from None
    if isinstance(event, RemoteDetach):
        raise Unsupported(
            f"no transactional acquisition: the link was detached with {error_condition(event)}"
        )
    state = TransactionalState(txn_id=txn_id, outcome=Accepted())
    event.link.disposition(event.delivery_id, settled=True, state=state)
    probe.flush()
    return controller, txn_id, event


@retiring_case(
    "4.4.3/acquisition-commit",
    MUST,
    "A message acquired in a transaction and accepted in it leaves the queue when the "
    "transaction commits.",
    WORK_TXN_IDS,
    requires=QUEUES,
)
def acquisition_commit(probe, ctx):
    """Counters Qpid Broker-J's TransactionalTransferTest.receiveTransactionalAcquisition
    ReceiverSettleFirst: one queued message acquired through a flow with txn-id (its
    transfer in that transaction), settled with transactional-state(txn-id, accepted);
    commit; a new consumer gets nothing."""
    queue = ctx.queue()
    controller, txn_id, _ = _acquired(probe, ctx, queue)
    commit(controller, txn_id)
    what = f"the message gone after the commit of txn-id {txn_id.hex()} that acquired"
    check_at_queue(ctx, queue, [], f"{what} and accepted it", WORK_TXN_IDS)


@retiring_case(
    "4.4.3/acquisition-rollback",
    MUST,
    "A message acquired in a transaction and accepted in it is back at the queue when the "
    "transaction rolls back (the acquisition and the outcome undone).",
    WORK_TXN_IDS,
    ROLLBACK_COMPLETES,
    requires=QUEUES,
)
def acquisition_rollback(probe, ctx):
    """Counters Qpid Broker-J's TransactionalTransferTest.receiveTransactionalAcquisition
    DischargeFail: as `4.4.3/acquisition-commit`, then roll back: a new consumer gets the
    message (4.4.4.3: "otherwise both the acquisition and outcome are rolled back"; the
    transfer's txn-id said the acquisition was that transaction's work, 4.4)."""
    queue = ctx.queue()
    controller, txn_id, delivery = _acquired(probe, ctx, queue)
    roll_back(ctx, controller, txn_id)
    probe.detach(delivery.link)
    what = f"the message back at the queue after the rollback of txn-id {txn_id.hex()}"
    check_at_queue(
        ctx, queue, [message_text(delivery)], f"{what} that acquired and accepted it", WORK_TXN_IDS
    )


@case(
    "4.4.2/retirement-queue-deleted",
    MAY,
    "A delivery accepted in a transaction whose queue is deleted before the commit: the "
    "broker's answers (to the receiving link, to the commit) are recorded (no sentence says "
    "which; Qpid Broker-J detaches the link and refuses the commit).",
    outcomes={
        "detach:amqp:resource-deleted, commit rejected:amqp:transaction:rollback",
        "detach:amqp:resource-deleted, commit accepted",
    },
    requires={"queues", "unsettled-deliveries", "declare-queues"},
    pipelined=False,
)
def retirement_queue_deleted(probe, ctx):
    """Counters Qpid Broker-J's QueueDeletionTest.transactedReceiverDetachedOnQueueDeletion
    WhenTransactionInProgress: one message received unsettled, settled with
    transactional-state(txn-id, accepted); the queue deleted through the admin adapter;
    commit. Recorded: the receiving link's answer and the commit's (Broker-J: a detach
    with amqp:resource-deleted, then amqp:transaction:rollback; the reference broker
    accepts the commit, the accepted outcome leaving nothing to undo)."""
    queue = ctx.queue()
    controller, link, (delivery,) = retire(probe, ctx, queue)
    txn_id = accept_in(probe, controller, link, delivery.delivery_id)
    ctx.admin.delete_queue(queue)
    detached = answer_in_words(probe, link, ctx.profile.wait)
    ctx.outcome(f"{detached}, commit {in_words(controller.discharge(txn_id))}")


@retiring_case(
    "4.4.2/retirement-commit-rcv-settle-second",
    MUST,
    "On a link with rcv-settle-mode second, a delivery the controller gave a transactional "
    "accepted without settling it: the outcome is applied when the transaction commits (the "
    "message does not come back when the link goes).",
    WORK_TXN_IDS,
    requires={"queues", "unsettled-deliveries", "requeue-on-detach"},
)
def retirement_commit_rcv_settle_second(probe, ctx):
    """Counters Qpid Broker-J's TransactionalTransferTest.receiveTransactionalRetirement
    ReceiverSettleSecond (disabled there: Broker-J sends no disposition): a receiver with
    rcv-settle-mode second gets one message unsettled and sends transactional-state(txn-id,
    accepted) unsettled; commit; the broker's disposition for the delivery (4.4.4.2
    "Upon a successful discharge the outcome is applied") is noted; the link detached with
    the delivery still unsettled on our side: a new consumer gets nothing (an outcome not
    applied would leave the message to come back)."""
    queue = ctx.queue()
    controller, link, (delivery,) = retire(probe, ctx, queue, rcv_settle_mode=RcvSettleMode.SECOND)
    commit(controller, accept_in(probe, controller, link, delivery.delivery_id, settled=False))
    settled = answer_in_words(probe, link, 1.0, delivery.delivery_id, Role.SENDER)
    ctx.note(f"after the commit the broker answered the delivery with {settled}")
    probe.detach(link)
    what = "the message gone after the commit of its transactional acceptance (the delivery"
    what += " left unsettled by the controller, rcv-settle-mode second)"
    check_at_queue(ctx, queue, [], what, WORK_TXN_IDS)
