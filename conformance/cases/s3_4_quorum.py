"""Quorum queues (RabbitMQ 4's `x-queue-type: quorum`): the header delivery-count counts the
failed deliveries (3.2.1, raised by modified delivery-failed, 3.4.5), and past
`x-delivery-limit` the message is dead-lettered through `x-dead-letter-exchange` instead of
coming back; a rejected message (3.4.3) is dead-lettered too.

Owns the cases `3.4.5/quorum-delivery-limit-dead-letters` and
`3.4.3/quorum-rejected-dead-letters` (conformance/cases/s3_4_quorum_variants.py owns the
other `*/quorum-*`), under the `quorum` capability (the profile's broker
declares quorum queues through its admin adapter). Delivery limits and dead-lettering are
RabbitMQ 4's model (no sentence: MODEL, DIFFERS when the broker does otherwise); the
delivery-count a modified(delivery-failed) adds is 3.4.5's MUST.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Modified, Rejected
from amqpspec.conformance.run.registry import MODEL, case
from amqpspec.conformance.steps.deliveries import check_nothing_more
from amqpspec.conformance.steps.links import unsettled_consumer
from amqpspec.conformance.steps.queues import fill, header_of, message_text
from amqpspec.conformance.steps.sentences import RABBITMQ4

FAILED_COUNT = "3.4.5/modified.delivery-failed.1"  # delivery-failed: MUST be incremented

NEEDS = {"queues", "quorum", "unsettled-deliveries"}
DELIVERY_COUNT = (
    "delivery-count: the number of unsuccessful previous attempts to deliver this message. If "
    "this value is non-zero it can be taken as an indication that the delivery might be a "
    "duplicate."
)
REJECTED = (
    "rejected: the message is invalid and therefore unprocessable; the broker does not hand it "
    "out again, and a queue with a dead-letter exchange sends it there (RabbitMQ)."
)


def quorum_with_dead_letters(probe, ctx, limit: int) -> tuple[str, str]:
    """A dead-letter queue and a quorum queue holding one message whose dead letters go
    to it through the default exchange: (the quorum queue, the dead-letter queue)."""
    dlq = ctx.queue("dlq")
    arguments = {
        "x-queue-type": "quorum",
        "x-delivery-limit": limit,
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": dlq,
    }
    queue = ctx.queue("quorum", arguments)
    fill(probe, ctx, queue, 1)
    return queue, dlq


def check_dead_lettered(probe, ctx, dlq: str) -> None:
    _, dead = unsettled_consumer(probe, ctx, dlq, credit=5)
    copy = probe.next_transfer(dead)
    ctx.check(
        message_text(copy) == b"amqpspec-0",
        f"expected the dead-lettered message; observed {message_text(copy)!r}",
    )


@case(
    "3.4.5/quorum-delivery-limit-dead-letters",
    MODEL,
    DELIVERY_COUNT + " Past x-delivery-limit the message is dead-lettered (RabbitMQ 4).",
    sentences=(FAILED_COUNT,),
    model=RABBITMQ4,
    requires=NEEDS,
)
def delivery_limit(probe, ctx):
    """x-delivery-limit 1: two deliveries settled modified(delivery-failed) carry header
    delivery-count 0 and 1; the message then goes to the dead-letter queue, not back."""
    queue, dlq = quorum_with_dead_letters(probe, ctx, 1)
    _, link = unsettled_consumer(probe, ctx, queue, credit=1)
    counts = []
    for _ in range(2):
        delivery = probe.next_transfer(link)
        header = header_of(delivery)
        counts.append((header.delivery_count if header is not None else 0) or 0)
        probe.settle(link, delivery, Modified(delivery_failed=True))
        probe.grant(link, 1)
    ctx.must(
        counts[1] == counts[0] + 1,
        f"expected header delivery-count {counts[0] + 1} after modified(delivery-failed); "
        f"observed {counts[1]}",
        FAILED_COUNT,
    )
    ctx.check(counts == [0, 1], f"expected header delivery-count [0, 1]; observed {counts}")
    check_nothing_more(
        ctx,
        probe,
        link,
        lambda n: f"expected no delivery past the delivery limit; observed {n}",
    )
    check_dead_lettered(probe, ctx, dlq)


@case("3.4.3/quorum-rejected-dead-letters", MODEL, REJECTED, model=RABBITMQ4, requires=NEEDS)
def rejected_dead_letters(probe, ctx):
    """One message settled rejected: never delivered again on the link, and delivered from
    the dead-letter queue."""
    queue, dlq = quorum_with_dead_letters(probe, ctx, 20)
    _, link = unsettled_consumer(probe, ctx, queue, credit=1)
    probe.settle(link, probe.next_transfer(link), Rejected())
    probe.grant(link, 1)
    check_nothing_more(
        ctx, probe, link, lambda n: f"expected the rejected message not again; observed {n}"
    )
    check_dead_lettered(probe, ctx, dlq)
