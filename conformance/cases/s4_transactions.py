"""Part 4 local transactions: the broker as the transactional resource, the suite as the
controller (conformance/steps/transactions.py). Transactions are optional: every case first
attaches a control link to the coordinator and declares a transaction, and a broker that
refuses the coordinator, does not state `amqp:local-transactions` in its attach or does not
answer the declare with `declared` is UNSUPPORTED. A broker that has them is held to Part
4's MUSTs: a rollback always completes (4.3), a discharge it cannot complete is refused
with a transaction-error (4.3: an unknown, already discharged or rolled-back txn-id; in
a rejected outcome, or a detach of the control link when its source does not allow
rejected), a
posted delivery gets its presumptive outcome in a transactional-state of the same
transaction before the commit is accepted (4.4.1, 4.4.4.1) and a commit it can no longer
apply as announced (the posting link gone), or with a settled posting it cannot process
(its queue deleted), is not accepted (4.4.4.1), the txn-ids of its
frames say
truly which transaction the work belongs to (4.4: a posted message is not available before
the commit, a rolled-back one never; a retired message leaves at commit), a link that does
not support transactional acquisition is detached with amqp:not-implemented (4.4.3), and
after a rollback a retired delivery the controller left unsettled is still live (4.4.2,
a SHOULD), as is detaching a control link on which a declare came settled (4.2, a SHOULD).
What a broker answers to a transfer in a txn-id it never declared is recorded (MAY).

Owns the cases `4.*/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import (
    Accepted,
    Declare,
    Rejected,
    Released,
    Source,
    TransactionalState,
)
from amqpspec.amqp10.engine import RemoteDetach
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.run.registry import MAY, MUST, SHOULD, case
from amqpspec.conformance.steps.queues import message_text
from amqpspec.conformance.steps.transactions import (
    QUEUES,
    RETIRE_NEEDS,
    ROLLBACK_COMPLETES,
    TRANSACTION_ERRORS,
    UNKNOWN_ID,
    Controller,
    accept_in,
    acquire,
    answer_in_words,
    check_at_queue,
    commit,
    coordinator_case,
    declared,
    describe,
    error_condition,
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

CANNOT_DISCHARGE = "4.3/discharging-a-transaction.2"  # MUST convey it as a transaction-error
REJECTED_WITH_IT = "4.3/discharging-a-transaction.3"  # MUST be rejected carrying it
DETACH_WITH_IT = "4.3/discharging-a-transaction.4"  # no rejected outcome: MUST detach with it
SETTLED_DETACH = "4.2/declaring-a-transaction.4"  # a settled declare: should detach
NO_LONGER_APPLY = "4.4.4.1/transactional-posting.4"  # MUST NOT allow the successful discharge
UNABLE_TO_PROCESS = "4.4.4.1/transactional-posting.1"  # settled: MUST NOT allow it either
WORK_TXN_IDS = "4.4/transactional-work.1"  # txn-ids MUST correctly indicate the transaction
PRESUMPTIVE = "4.4.1/transactional-posting.5"  # must inform ... before it can discharge
PRESUMPTIVE_STATE = "4.4.1/transactional-posting.6"  # a disposition with transactional-state
BEFORE_COMMIT = "4.4.4.1/transactional-posting.2"  # determined and communicated before
SAME_TXN = "4.4.4.1/transactional-posting.3"  # associated with the same transaction
NO_ACQUISITION = "4.4.3/transactional-acquisition.1"  # terminated with not-implemented
STILL_LIVE = "4.4.2/transactional-retirement.3"  # rolled back: deliveries still live


def _unable_to_discharge(ctx, answer, what: str) -> None:
    """4.3: a discharge the coordinator cannot complete is refused with a transaction-error,
    as a rejected outcome (our control link's source allows it: the default outcomes)."""
    condition = error_condition(answer)
    refused = isinstance(answer, Rejected | RemoteDetach)
    ctx.must(
        refused and condition in TRANSACTION_ERRORS,
        f"expected the discharge of {what} rejected with a transaction-error (amqp:transaction:"
        f"unknown-id); observed {describe(answer)}",
        CANNOT_DISCHARGE,
    )
    ctx.must(
        not isinstance(answer, RemoteDetach),
        f"expected a rejected outcome carrying the transaction-error (the control link's "
        f"source supports rejected); observed {describe(answer)}",
        REJECTED_WITH_IT,
    )
    if condition != UNKNOWN_ID:
        ctx.note(f"the transaction-error is {condition}, not {UNKNOWN_ID}")


@coordinator_case(
    "4.3/rollback-always-completes",
    MUST,
    "A discharge with fail=true is always completed: accepted.",
    ROLLBACK_COMPLETES,
)
def rollback_always_completes(probe, ctx):
    """Declare a transaction, discharge it with fail=true: the outcome is accepted."""
    controller, txn_id = declared(probe)
    answer = controller.discharge(txn_id, fail=True)
    ctx.check(
        isinstance(answer, Accepted),
        f"expected accepted for a discharge with fail=true; observed {describe(answer)}",
    )


@coordinator_case(
    "4.3/discharge-unknown-id",
    MUST,
    "A discharge naming a txn-id never declared is refused with a transaction-error "
    "(amqp:transaction:unknown-id) in a rejected outcome.",
    CANNOT_DISCHARGE,
    REJECTED_WITH_IT,
)
def discharge_unknown_id(probe, ctx):
    """Declare a transaction (the gate), then discharge (commit) a txn-id that differs
    from it in every octet: rejected with amqp:transaction:unknown-id."""
    controller, txn_id = declared(probe)
    unknown = unknown_txn_id(txn_id)
    answer = controller.discharge(unknown)
    _unable_to_discharge(ctx, answer, f"txn-id {unknown.hex()} (never declared)")


@coordinator_case(
    "4.3/discharge-twice",
    MUST,
    "A second discharge of a transaction already committed is refused with a "
    "transaction-error (amqp:transaction:unknown-id) in a rejected outcome.",
    CANNOT_DISCHARGE,
    REJECTED_WITH_IT,
)
def discharge_twice(probe, ctx):
    """Declare, commit (accepted), commit the same txn-id again: the second is refused."""
    controller, txn_id = declared(probe)
    first = controller.discharge(txn_id)
    ctx.check(
        isinstance(first, Accepted),
        f"expected accepted for the commit of an empty transaction; observed {describe(first)}",
    )
    answer = controller.discharge(txn_id)
    _unable_to_discharge(ctx, answer, f"txn-id {txn_id.hex()} (already discharged)")


@posting_case(
    "4.4.1/posting-presumptive-outcome",
    "A message posted in a transaction gets a disposition with a transactional-state of "
    "that transaction and a terminal outcome, before the commit is accepted.",
    PRESUMPTIVE,
    PRESUMPTIVE_STATE,
    BEFORE_COMMIT,
    SAME_TXN,
)
def posting_presumptive_outcome(probe, ctx):
    """Declare, post one unsettled message with transactional-state(txn-id), commit: a
    disposition for it carrying transactional-state(txn-id, accepted | rejected | released
    | modified) arrives before the discharge's accepted."""
    queue = ctx.queue()
    controller, txn_id, sender = posting(probe, ctx, queue)
    delivery_id = post(probe, sender, txn_id, b"posted")
    state = outcome_of_post(probe, delivery_id, ctx.profile.wait)
    answer = controller.discharge(txn_id)
    if not isinstance(answer, Accepted):
        ctx.note(f"the commit was not accepted: {describe(answer)}")
    ctx.must(
        state is not None,
        "expected a disposition for the posted message before the commit was accepted; "
        f"observed none, then {describe(answer)} for the discharge",
        PRESUMPTIVE,
        BEFORE_COMMIT,
    )
    ctx.must(
        isinstance(state, TransactionalState),
        f"expected the posted message's state to be a transactional-state; observed "
        f"{describe(state)}",
        PRESUMPTIVE_STATE,
    )
    ctx.must(
        state.txn_id is not None and bytes(state.txn_id) == txn_id,
        f"expected the transactional-state of txn-id {txn_id.hex()}; observed {state!r}",
        SAME_TXN,
    )
    outcome = getattr(state.outcome, "NAME", None)
    ctx.must(
        outcome in ("accepted", "rejected", "released", "modified"),
        f"expected a terminal outcome in the transactional-state; observed {state!r}",
        PRESUMPTIVE_STATE,
    )


@posting_case(
    "4.4.1/posting-visible-after-commit",
    "A posted message is not available at the queue before its transaction commits, and is "
    "after (the txn-id of its disposition said which transaction the work belongs to).",
    WORK_TXN_IDS,
)
def posting_visible_after_commit(probe, ctx):
    """Declare, post two messages (one unsettled, one settled) in the transaction: a
    consumer on another connection gets nothing; commit: it gets both. The broker's
    transactional-state said the posting was the transaction's work (4.4), which does not
    make the message available before the transaction is discharged (4.4.1)."""
    queue = ctx.queue()
    controller, txn_id, sender = posting(probe, ctx, queue)
    delivery_id = post(probe, sender, txn_id, b"txn-unsettled")
    post(probe, sender, txn_id, b"txn-settled", settled=True)
    outcome_of_post(probe, delivery_id, ctx.profile.wait)
    before = f"no message at the queue before the commit (posted in txn-id {txn_id.hex()})"
    check_at_queue(ctx, queue, [], before, WORK_TXN_IDS)
    commit(controller, txn_id)
    after = "both posted messages at the queue after the commit was accepted"
    check_at_queue(ctx, queue, [b"txn-settled", b"txn-unsettled"], after, WORK_TXN_IDS)


@posting_case(
    "4.4.1/posting-rollback-leaves-nothing",
    "A message posted in a transaction that is rolled back never becomes available.",
    WORK_TXN_IDS,
)
def posting_rollback_leaves_nothing(probe, ctx):
    """Declare, post one unsettled and one settled message, roll back (fail=true): a
    consumer gets nothing. A message there after the rollback is work the broker did
    outside the transaction its transactional-state named."""
    queue = ctx.queue()
    controller, txn_id, sender = posting(probe, ctx, queue)
    delivery_id = post(probe, sender, txn_id, b"txn-unsettled")
    post(probe, sender, txn_id, b"txn-settled", settled=True)
    outcome_of_post(probe, delivery_id, ctx.profile.wait)
    roll_back(ctx, controller, txn_id)
    what = f"nothing at the queue after the rollback of txn-id {txn_id.hex()}"
    check_at_queue(ctx, queue, [], what, WORK_TXN_IDS)


@posting_case(
    "4.1/control-link-detach-rolls-back",
    "Closing the control link rolls back its open transactions: what they posted never "
    "becomes available, and a later discharge of one is refused with a transaction-error.",
    WORK_TXN_IDS,
    CANNOT_DISCHARGE,
)
def control_link_detach_rolls_back(probe, ctx):
    """Declare, post a message, detach the control link (closed): a consumer gets nothing,
    and discharging the txn-id on a new control link is refused (4.1: the transaction was
    rolled back; 4.3)."""
    queue = ctx.queue()
    controller, txn_id, sender = posting(probe, ctx, queue)
    delivery_id = post(probe, sender, txn_id, b"txn-posted")
    outcome_of_post(probe, delivery_id, ctx.profile.wait)
    probe.detach(controller.link)
    what = f"nothing at the queue once the control link of txn-id {txn_id.hex()} closed"
    check_at_queue(ctx, queue, [], f"{what} (4.1: rolled back)", WORK_TXN_IDS)
    again = Controller(probe, controller.session, name="txn-ctl-again")
    answer = again.discharge(txn_id)
    _unable_to_discharge(ctx, answer, f"txn-id {txn_id.hex()} (rolled back with its link)")


@retiring_case(
    "4.4.2/retirement-commit",
    MUST,
    "A delivery accepted in a transaction leaves the queue when the transaction commits.",
    WORK_TXN_IDS,
    requires=RETIRE_NEEDS,
)
def retirement_commit(probe, ctx):
    """Receive one message unsettled, settle it with transactional-state(txn-id, accepted),
    commit, detach the receiver: a new consumer gets nothing (the acceptance was the
    transaction's work and the transaction committed)."""
    queue = ctx.queue()
    controller, link, (delivery,) = retire(probe, ctx, queue)
    commit(controller, accept_in(probe, controller, link, delivery.delivery_id))
    probe.detach(link)
    what = "the message gone after its transactional acceptance committed"
    check_at_queue(ctx, queue, [], what, WORK_TXN_IDS)


@retiring_case(
    "4.4.2/retirement-rollback-still-live",
    SHOULD,
    "After a rollback, a delivery the controller retired in it without settling is still "
    "live: a later (non-transactional) released returns it to the queue.",
    STILL_LIVE,
    requires=RETIRE_NEEDS,
)
def retirement_rollback_still_live(probe, ctx):
    """Receive one message unsettled, send transactional-state(txn-id, accepted) without
    settling, roll back, then settle it released: the message comes back to a new
    consumer (the transactional acceptance was not applied)."""
    queue = ctx.queue()
    controller, link, (delivery,) = retire(probe, ctx, queue)
    txn_id = accept_in(probe, controller, link, delivery.delivery_id, settled=False)
    roll_back(ctx, controller, txn_id)
    link.disposition(delivery.delivery_id, settled=True, state=Released())
    probe.flush()
    probe.detach(link)
    back = visible(ctx, queue)
    ctx.check(
        back == [message_text(delivery)],
        f"expected the message back after the rollback and a released outcome; a consumer "
        f"got {back}",
    )


@retiring_case(
    "4.4.3/acquisition-refused-or-transactional",
    MUST,
    "A flow asking for transactional acquisition (txn-id in its properties): the broker "
    "either detaches the link with amqp:not-implemented or sends transfers whose state "
    "names that transaction.",
    NO_ACQUISITION,
    WORK_TXN_IDS,
    requires=QUEUES,
)
def acquisition_refused_or_transactional(probe, ctx):
    """One queued message; a receiver on the controller's session grants credit in a flow
    whose properties carry txn-id: either a detach with amqp:not-implemented (no
    transactional acquisition, 4.4.3) or a transfer with transactional-state(txn-id)."""
    controller, txn_id = declared(probe)
    event = acquire(probe, ctx, ctx.queue(), controller.session, txn_id)
    if isinstance(event, RemoteDetach):
        condition = error_condition(event)
        ctx.must(
            condition == "amqp:not-implemented",
            f"expected a detach with amqp:not-implemented (no transactional acquisition); "
            f"observed a detach with {condition}",
            NO_ACQUISITION,
        )
        return
    state = event.state
    ctx.must(
        isinstance(state, TransactionalState) and bytes(state.txn_id or b"") == txn_id,
        f"expected the transfer acquired in txn-id {txn_id.hex()} to carry its "
        f"transactional-state, or a detach with amqp:not-implemented; observed a transfer "
        f"with state {state!r}",
        NO_ACQUISITION,
        WORK_TXN_IDS,
    )
    controller.discharge(txn_id, fail=True)


@coordinator_case(
    "4.3/discharge-unknown-id-no-rejected-outcome",
    MUST,
    "On a control link whose source does not support the rejected outcome, a discharge the "
    "coordinator cannot complete detaches the link with the transaction-error.",
    CANNOT_DISCHARGE,
    DETACH_WITH_IT,
)
def discharge_unknown_id_no_rejected_outcome(probe, ctx):
    """A control link whose source supports accepted only (outcomes=[amqp:accepted:list]):
    declare (the gate), then discharge a txn-id never declared: the broker detaches the
    control link with amqp:transaction:unknown-id (a transaction-error), not rejected."""
    controller, txn_id = declared(probe, source=Source(outcomes=[symbol("amqp:accepted:list")]))
    unknown = unknown_txn_id(txn_id)
    answer = controller.discharge(unknown)
    condition = error_condition(answer)
    ctx.must(
        isinstance(answer, RemoteDetach) and condition in TRANSACTION_ERRORS,
        f"expected a detach of the control link with a transaction-error (amqp:transaction:"
        f"unknown-id: its source does not support rejected); observed {describe(answer)}",
        DETACH_WITH_IT,
    )


@coordinator_case(
    "4.2/declare-settled-detached",
    SHOULD,
    "A declare sent settled (which the controller must not do) makes the coordinator detach "
    "the control link with an error.",
    SETTLED_DETACH,
)
def declare_settled_detached(probe, ctx):
    """Declare once unsettled (the gate), then send a declare settled: the broker detaches
    the control link with an error (4.2 "it should detach with an appropriate error")."""
    controller, _ = declared(probe)
    try:
        answer = controller.request(Declare(), settled=True, timeout=2.0)
    except WaitTimeout:
        answer = None
    ctx.check(
        isinstance(answer, RemoteDetach) and error_condition(answer) is not None,
        f"expected a detach of the control link with an error for a settled declare; "
        f"observed {describe(answer)}",
    )


@posting_case(
    "4.4.1/posting-commit-after-sender-detach",
    "A commit after the posting link detached: either refused, or accepted with the posted "
    "message at the queue (a resource that can no longer apply the outcome it announced "
    "must not accept the commit).",
    NO_LONGER_APPLY,
)
def posting_commit_after_sender_detach(probe, ctx):
    """Declare, post one unsettled message, take its transactional-state, detach the sender
    (closed), commit: accepted and the message at the queue, or the commit refused (a
    transaction-error); accepted with no message is the MUST NOT of 4.4.4.1 broken."""
    queue = ctx.queue()
    controller, txn_id, sender = posting(probe, ctx, queue)
    delivery_id = post(probe, sender, txn_id, b"txn-posted")
    state = outcome_of_post(probe, delivery_id, ctx.profile.wait)
    probe.detach(sender)
    answer = controller.discharge(txn_id)
    if not isinstance(answer, Accepted):
        ctx.note(f"the commit after the detach was refused: {describe(answer)}")
        return
    announced = getattr(getattr(state, "outcome", None), "NAME", None)
    if announced != "accepted":
        ctx.note(f"the posted message's announced outcome was {describe(state)}")
        return
    there = visible(ctx, queue)
    ctx.must(
        there == [b"txn-posted"],
        f"expected the posted message at the queue after the commit was accepted (its "
        f"announced outcome accepted, then the sender detached); a consumer got {there}",
        NO_LONGER_APPLY,
    )


@case(
    "4.4.1/posting-unknown-txn-id",
    MAY,
    "A transfer whose transactional-state names a txn-id never declared: the broker's answer "
    "is recorded (no sentence says which; amqp:transaction:unknown-id names the case).",
    outcomes={"rejected:amqp:transaction:unknown-id", "detach:amqp:transaction:unknown-id"},
    requires={"queues"},
    pipelined=False,
)
def posting_unknown_txn_id(probe, ctx):
    """Declare (the gate), then post one unsettled message in a txn-id that differs from
    the declared one in every octet: the broker's answer (a rejected outcome, a detach of
    the link, or the message taken) is recorded."""
    queue = ctx.queue()
    _, txn_id, sender = posting(probe, ctx, queue)
    unknown = unknown_txn_id(txn_id)
    delivery_id = post(probe, sender, unknown, b"txn-unknown")
    ctx.outcome(answer_in_words(probe, sender, ctx.profile.wait, delivery_id))


@posting_case(
    "4.4.4.1/settled-post-queue-deleted-no-commit",
    "A message posted settled in a transaction whose queue is deleted before the commit: "
    "the resource cannot process it, so the commit is not accepted.",
    UNABLE_TO_PROCESS,
    requires={"queues", "declare-queues"},
)
def settled_post_queue_deleted_no_commit(probe, ctx):
    """Declare, post one settled message to a fresh queue, delete the queue through the
    admin adapter, commit: the discharge is rejected (a transaction-error) or the control
    link destroyed, never accepted (4.4.4.1: "Should the resource be unable to process the
    delivery it MUST NOT allow the successful discharge of the associated transaction")."""
    queue = ctx.queue()
    controller, txn_id, sender = posting(probe, ctx, queue)
    post(probe, sender, txn_id, b"txn-settled", settled=True)
    probe.pump(0.2)  # the transfer reaches the broker before the queue goes
    ctx.admin.delete_queue(queue)
    answer = controller.discharge(txn_id)
    ctx.must(
        not isinstance(answer, Accepted),
        f"expected the commit refused (the settled message's queue was deleted before it); "
        f"observed {describe(answer)}",
        UNABLE_TO_PROCESS,
    )
    ctx.note(f"the commit was answered with {describe(answer)}")
