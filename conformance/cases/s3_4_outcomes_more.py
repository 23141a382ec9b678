"""3.4 delivery outcomes, more: rejected with an error description, several released
messages redelivered, modified without flags, modified delivery-failed marking the
redelivery, undeliverable-here going to another link, rejected messages leaving the
queue for good.

Owns the cases `3.4.*/outcome-more-*`.
"""

from __future__ import annotations

from amqp10.composites import Error, Modified, Rejected, Released
from conformance.cases.checks import (
    check_rejected_gone,
    queued_receiver,
    settle_first,
    take_unsettled,
    texts,
)
from conformance.registry import MUST, SHOULD, case
from conformance.steps import collect, header_of, message_text, unsettled_consumer
from conformance.verdicts import CaseFailed

NEEDS = {"queues", "unsettled-deliveries"}


def _next_or_drop(probe, link, timeout=None):
    """The next delivery on `link`; when the broker ended the session or connection
    instead (refusing the outcome), drop our TCP connection before failing, so that no
    close exchange with a half-broken connection follows (RabbitMQ 3.10 then sends two
    close frames at random) and the verdict stays the same from run to run."""
    try:
        return probe.next_transfer(link, timeout)
    except CaseFailed:
        probe.disconnect()
        raise


@case(
    "3.4.3/outcome-more-rejected-with-description",
    MUST,
    "rejected: the message is invalid and unprocessable; error carries diagnostic "
    "information. A terminal outcome: the message is not delivered to the consumer again.",
    requires=NEEDS | {"rejected-outcome"},
)
def rejected_with_description(probe, ctx):
    """Reject one message with amqp:decode-error and a description: not delivered again."""
    error = Error(condition="amqp:decode-error", description="amqpspec: cannot process")
    link, _ = settle_first(probe, ctx, ctx.queue(), Rejected(error=error))
    check_rejected_gone(probe, ctx, link, 3, 0.8)


@case(
    "3.4.3/outcome-more-rejected-leaves-queue",
    MUST,
    "rejected is terminal: the rejected messages are gone from the queue (dead-lettered or "
    "dropped); the others are still there.",
    requires=NEEDS | {"rejected-outcome", "requeue-on-detach"},
)
def rejected_leaves_queue(probe, ctx):
    """5 unsettled; reject 3, leave 2 unsettled, detach: a new consumer gets exactly the 2."""
    queue = ctx.queue()
    _, link, got = take_unsettled(probe, ctx, queue, 5)
    for delivery in got[:3]:
        probe.settle(link, delivery, Rejected())
    probe.detach(link)
    other = ctx.probe()
    _, again = unsettled_consumer(other, ctx, queue, credit=10)
    back = other.receive(again, 2) + collect(other, again, 0.4)
    ctx.check(
        texts(back) == texts(got[3:]),
        f"{[message_text(d) for d in back]} came back, expected the 2 never settled",
    )


@case(
    "3.4.4/outcome-more-released-several",
    SHOULD,
    "released: the message was not acted upon; the queue delivers it again (3.4.4).",
    requires=NEEDS,
)
def released_several(probe, ctx):
    """3 received, all released: the same 3 are delivered again."""
    _, link = queued_receiver(probe, ctx, 3, unsettled=True, credit=3)
    first = probe.receive(link, 3, settle=False)
    for delivery in first:
        probe.settle(link, delivery, Released())
    probe.grant(link, 3)
    again = probe.receive(link, 3)
    ctx.check(
        texts(again) == texts(first),
        "other messages came instead of the released ones",
    )


@case(
    "3.4.5/outcome-more-modified-no-flags",
    SHOULD,
    "modified with delivery-failed and undeliverable-here both false: the message is "
    "modified (no annotations) and may be redelivered to this link, like released.",
    requires=NEEDS | {"modified-outcome"},
)
def modified_no_flags(probe, ctx):
    """Settle one message modified() without flags: it is delivered again."""
    link, first = settle_first(probe, ctx, ctx.queue(), Modified())
    probe.grant(link, 1)
    again = _next_or_drop(probe, link)
    ctx.check(message_text(again) == message_text(first), "another message came instead")


@case(
    "3.4.5/outcome-more-modified-failed-not-first-acquirer",
    SHOULD,
    "modified delivery-failed counts an unsuccessful attempt (delivery-count + 1, 3.2.1); "
    "the redelivered message is not first-acquirer.",
    requires=NEEDS | {"modified-outcome", "redelivery-marks"},
)
def modified_failed_marks(probe, ctx):
    """Settle one message modified(delivery-failed): the redelivery has delivery-count >= 1
    and first-acquirer not true."""
    link, _ = settle_first(probe, ctx, ctx.queue(), Modified(delivery_failed=True))
    probe.grant(link, 1)
    header = header_of(_next_or_drop(probe, link))
    ctx.check(header is not None, "redelivery without a header")
    ctx.check((header.delivery_count or 0) >= 1, f"delivery-count {header.delivery_count}")
    ctx.check(not header.first_acquirer, "redelivery claims first-acquirer=true")


@case(
    "3.4.5/outcome-more-undeliverable-here-other-link",
    SHOULD,
    "modified undeliverable-here: the message MUST NOT be redelivered to this link "
    "endpoint; it stays in the queue for other links (ARTEMIS-794).",
    requires=NEEDS | {"modified-outcome"},
)
def undeliverable_here_other_link(probe, ctx):
    """Link A settles one message modified(undeliverable-here, delivery-failed); link B on
    another connection gets it."""
    queue, link = queued_receiver(probe, ctx, 1, unsettled=True, credit=1)
    first = probe.next_transfer(link)
    since = probe.mark()
    probe.settle(link, first, Modified(delivery_failed=True, undeliverable_here=True))
    ended = probe.error_outcome(timeout=0.5, since=since)
    if ended != "timeout":
        probe.disconnect()
        raise CaseFailed(f"the broker refused the modified outcome: {ended}")
    other = ctx.probe()
    _, second = unsettled_consumer(other, ctx, queue, credit=1)
    again = other.next_transfer(second, timeout=3.0)
    ctx.check(message_text(again) == message_text(first), "another message came instead")
