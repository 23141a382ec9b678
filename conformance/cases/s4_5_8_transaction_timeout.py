"""Transaction timeouts (4.5.8 transaction-timeout, "The work represented by this
transaction took too long"): Part 4 names the error and sets no duration, so these cases
grade the `txn-timeout` model (profile.MODELS, DIFFERS when not met) of a broker that claims
the transaction-timeout capability, with the timeout its profile names ([timeouts]
transaction: set for the case's connection through the admin adapter where it can, the
reference broker's admin API, so that the case waits a fraction of a second). A
transaction still live that long after its declare is rolled back by the broker: a
retirement's message is back at its queue before any discharge, and the commit is refused
with amqp:transaction:timeout (or the control link or the connection ends with it, as Qpid
Broker-J closes the connection). Once the broker said the transaction is gone, its posted
work never appearing is a MUST (4.4: the txn-ids of its frames said the work was that
transaction's).

Owns the cases `4.5.8/*`. Counters Qpid Broker-J's TransactionTimeoutTest.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from amqpspec.amqp10.composites import Accepted, TransactionalState
from amqpspec.conformance.cases.s4_transactions import WORK_TXN_IDS
from amqpspec.conformance.run.registry import MODEL, RunFunction, case
from amqpspec.conformance.steps.links import publisher
from amqpspec.conformance.steps.queues import message_text
from amqpspec.conformance.steps.transactions import (
    TIMEOUT,
    Controller,
    describe,
    error_condition,
    outcome_of_post,
    outlive,
    post,
    retire,
    transaction_timeout,
    visible,
)

TXN_TIMEOUT = "txn-timeout"  # profile.MODELS


def _commit_too_late(ctx, controller: Controller, txn_id: bytes, closed, seconds: float):
    """Commit `txn_id` after its timeout (unless the broker closed the connection): the
    answer must carry amqp:transaction:timeout (the model); the answer."""
    answer = closed if closed is not None else controller.discharge(txn_id)
    ctx.model(
        error_condition(answer) == TIMEOUT,
        f"expected the commit of txn-id {txn_id.hex()}, {seconds:g} s after its declare (the "
        f"broker's transaction timeout), refused with {TIMEOUT} (a rejected outcome, or the "
        f"control link or connection closed with it); observed {describe(answer)}",
    )
    return answer


def _timeout_case(case_id: str, sentence: str, *needs: str) -> Callable[[RunFunction], RunFunction]:
    """`case` for the transaction-timeout model, on a broker whose profile names its
    timeout (and has what `needs` names); no pipelined variant (as every Part 4 case:
    steps/transactions.py `coordinator_case`)."""
    return case(
        case_id,
        MODEL,
        sentence,
        model=TXN_TIMEOUT,
        requires={"queues", *needs, "transaction-timeout"},
        pipelined=False,
    )


@_timeout_case(
    "4.5.8/transaction-timeout-posting",
    "A message posted in a transaction that outlives the broker's transaction timeout: "
    "the commit is refused with amqp:transaction:timeout and the message never appears.",
)
def transaction_timeout_posting(probe, ctx):
    """Counters Qpid Broker-J's TransactionTimeoutTest.transactionalPostingTimeout: the
    profile's timeout for this connection; declare, post one unsettled message (its
    transactional-state comes back), wait the timeout out, commit: refused with
    amqp:transaction:timeout (DIFFERS otherwise); a consumer then gets nothing (FAILED: the
    broker said the transaction was gone)."""
    queue = ctx.queue()
    session = probe.open_session()
    seconds = transaction_timeout(probe, ctx)
    controller = Controller(probe, session)
    _, sender = publisher(probe, ctx, queue, session=session)
    since = time.monotonic()
    txn_id = controller.declare()
    delivery_id = post(probe, sender, txn_id, b"txn-posted")
    ctx.note(f"the posted message's state: {describe(outcome_of_post(probe, delivery_id, 2.0))}")
    _commit_too_late(ctx, controller, txn_id, outlive(probe, seconds, since), seconds)
    left = visible(ctx, queue)
    ctx.must(
        not left,
        f"expected nothing at the queue: txn-id {txn_id.hex()} timed out (its commit refused "
        f"with {TIMEOUT}); a consumer got {left}",
        WORK_TXN_IDS,
    )


@_timeout_case(
    "4.5.8/transaction-timeout-retirement",
    "A delivery accepted (settled) in a transaction that outlives the broker's transaction "
    "timeout: the message is back at its queue once the time is up, before any discharge, "
    "and the commit is refused with amqp:transaction:timeout.",
    "unsettled-deliveries",
)
def transaction_timeout_retirement(probe, ctx):
    """Counters Qpid Broker-J's TransactionTimeoutTest.transactionalRetirementTimeout: the
    profile's timeout for this connection; one message received unsettled, settled with
    transactional-state(txn-id, accepted); wait the timeout out: a consumer on another
    connection gets the message (the transaction rolled back when its time was up, the
    default outcome applied, 4.4.4.2), then the commit is refused with
    amqp:transaction:timeout."""
    queue = ctx.queue()
    controller, link, (delivery,) = retire(probe, ctx, queue)
    seconds = transaction_timeout(probe, ctx)
    since = time.monotonic()
    txn_id = controller.declare()
    state = TransactionalState(txn_id=txn_id, outcome=Accepted())
    link.disposition(delivery.delivery_id, settled=True, state=state)
    probe.flush()
    closed = outlive(probe, seconds, since)
    back = visible(ctx, queue)
    expected = [message_text(delivery)]
    ctx.model(
        back == expected,
        f"expected {expected} back at the queue {seconds:g} s after the declare of txn-id "
        f"{txn_id.hex()} (timed out: rolled back, the default outcome applied), before any "
        f"discharge; a consumer got {back}",
    )
    _commit_too_late(ctx, controller, txn_id, closed, seconds)
