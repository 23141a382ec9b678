"""3.2.1 header on redelivery: a message that comes back after its link, session or TCP
stream went away unsettled does not claim first-acquirer and counts the failed delivery
in delivery-count; a first delivery carries the first-delivery marks. The header fields
(3.2.1) carry no keyword sentence: the redelivery marks are RabbitMQ 4's model (DIFFERS),
the first delivery's are recorded (MAY).

Owns the cases `3.2.1/redelivery-*`.
"""

from __future__ import annotations

from collections.abc import Callable

from amqpspec.conformance.run.registry import MAY, MODEL, RunFunction, case
from amqpspec.conformance.steps.deliveries import (
    check_requeued,
    consume_again,
    queued_receiver,
    take_unsettled,
    take_unsettled_bodies,
)
from amqpspec.conformance.steps.queues import header_of
from amqpspec.conformance.steps.sentences import RABBITMQ4
from amqpspec.conformance.steps.sentences import REQUEUE_NEEDS as NEEDS


def _marks_case(case_id: str, sentence: str) -> Callable[[RunFunction], RunFunction]:
    """`case` for a redelivery's marks (3.2.1 first-acquirer, delivery-count) after an
    unsettled delivery's requeue: RabbitMQ 4's model, on a broker that marks redeliveries."""
    return case(case_id, MODEL, sentence, model=RABBITMQ4, requires=NEEDS | {"redelivery-marks"})


@_marks_case(
    "3.2.1/redelivery-first-acquirer",
    "first-acquirer: if this value is true, then this message has not been acquired by any "
    "other link; a redelivered message is not first-acquirer (3.2.1).",
)
def redelivery_marks(probe, ctx):
    """A message received unsettled, its link detached, then redelivered: the redelivery
    does not claim first-acquirer=true."""
    queue = ctx.queue()
    _, link, bodies = take_unsettled_bodies(probe, ctx, queue, count=1)
    probe.detach(link)
    again = check_requeued(ctx, queue, bodies)
    header = header_of(again[0])
    ctx.check(
        header is None or not header.first_acquirer,
        f"expected the redelivery not to claim first-acquirer; observed "
        f"first-acquirer={header.first_acquirer if header else None}",
    )


@_marks_case(
    "3.2.1/redelivery-delivery-count",
    "delivery-count: the number of unsuccessful previous attempts to deliver this message; "
    "a message requeued after its link went away unsettled has delivery-count >= 1 when "
    "the broker counts it (3.2.1).",
)
def redelivery_delivery_count(probe, ctx):
    """1 message received unsettled, link detached, received again: header delivery-count
    >= 1 (or first-acquirer false at least)."""
    queue = ctx.queue()
    _, link, _ = take_unsettled(probe, ctx, queue, 1)
    probe.detach(link)
    back = consume_again(ctx, queue, 1, 0.4, timeout=5.0)
    header = header_of(back[0])
    count = (header.delivery_count if header is not None else 0) or 0
    first = header.first_acquirer if header is not None else None
    ctx.check(
        count >= 1 or first is False,
        f"expected the redelivery marked (delivery-count 1 or more, or first-acquirer false); "
        f"observed delivery-count {count}, first-acquirer {first}",
    )


@case(
    "3.2.1/redelivery-first-delivery-marks",
    MAY,
    "first-acquirer / delivery-count: a message never delivered before has delivery-count 0 "
    "(default): a first delivery is not marked as a redelivery (3.2.1; no keyword).",
    requires={"queues"},
)
def first_delivery_marks(probe, ctx):
    """A fresh message's first delivery has header delivery-count 0 (or no header)."""
    _, link = queued_receiver(probe, ctx, 1, credit=1)
    header = header_of(probe.next_transfer(link))
    count = header.delivery_count if header is not None else 0
    ctx.check(not count, f"expected header delivery-count 0 on a first delivery; observed {count}")


@_marks_case(
    "3.2.1/redelivery-after-tcp-drop-marks",
    "first-acquirer: if true, the message has not been acquired by any other link; a "
    "message redelivered after its first consumer's connection dropped is not "
    "first-acquirer (3.2.1).",
)
def redelivery_marks_tcp_drop(probe, ctx):
    """1 message unsettled, TCP dropped, redelivered: first-acquirer is not true."""
    queue = ctx.queue()
    take_unsettled(probe, ctx, queue, 1)
    probe.disconnect()
    back = consume_again(ctx, queue, 1, 0.4, timeout=5.0)
    header = header_of(back[0])
    ctx.check(
        header is not None and not header.first_acquirer,
        f"expected the redelivery not to claim first-acquirer; observed header {header!r}",
    )
