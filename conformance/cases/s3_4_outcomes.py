"""3.4 delivery outcomes: what the broker does with accepted, rejected, released and
modified deliveries, as a receiver (a publish is accepted; an unroutable one released) and
as a sender: rejected is terminal and leaves the queue for good (also with an error
description), released comes back (several at once too), modified counts a failed
delivery, marks the redelivery and with undeliverable-here goes to another link only.

Owns the cases `3.4.*/*` (settlement itself is in s2_6_12_settlement.py).
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Accepted, Error, Modified, Rejected, Released
from amqpspec.amqp10.engine import DispositionReceived
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.deliveries import (
    check_rejected_gone,
    collect,
    queued_receiver,
    settle_first,
    take_unsettled,
)
from amqpspec.conformance.steps.links import unsettled_consumer
from amqpspec.conformance.steps.queues import body, header_of, message_text, texts
from amqpspec.conformance.verdicts import CaseFailed

NEEDS = {"queues", "unsettled-deliveries"}


def _publish_outcome(probe, address: str):
    """Send one unsettled message to `address`; the broker's disposition state."""
    session = probe.open_session()
    sender = probe.attach_sender(session, address)
    delivery_id = probe.send_message(sender, body(0), settled=False)
    event = probe.expect(
        lambda e: (
            isinstance(e, DispositionReceived)
            and e.role == Role.RECEIVER
            and e.first <= delivery_id <= e.last
        ),
        what="disposition for the published message",
    )
    return event


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
    "3.4.2/accepted-on-publish",
    MUST,
    "accepted: the message was successfully processed by the receiver; the receiving "
    "broker settles each unsettled delivery it took into a queue with a terminal outcome.",
    requires={"queues"},
)
def accepted_on_publish(probe, ctx):
    """One unsettled message to an existing queue: a disposition with state accepted."""
    queue = ctx.queue()
    event = _publish_outcome(probe, ctx.target_address(queue))
    ctx.check(isinstance(event.state, Accepted), f"outcome {event.state!r}, expected accepted")
    ctx.should(event.settled, "the accepted disposition did not settle the delivery")


@case(
    "3.4.4/released-unroutable",
    SHOULD,
    "released: the message was not (and will not be) acted upon; a broker answers a message "
    "no queue takes with released (RabbitMQ), not accepted.",
    requires={"exchanges", "released-unroutable"},
)
def released_unroutable(probe, ctx):
    """One unsettled message to an exchange address with no binding: outcome released."""
    address = ctx.profile.unroutable_target
    ctx.check(address is not None, "profile has no unroutable_target")
    event = _publish_outcome(probe, address)
    ctx.check(isinstance(event.state, Released), f"outcome {event.state!r}, expected released")


@case(
    "3.4.3/rejected-not-redelivered",
    MUST,
    "rejected: the message is invalid and unprocessable; it is a terminal outcome, so the "
    "message is not delivered to the consumer again (it may be dead-lettered).",
    requires=NEEDS | {"rejected-outcome"},
)
def rejected(probe, ctx):
    """Receive one message, settle it rejected, consume again: nothing comes back."""
    rejected = Rejected(error=Error(condition="amqp:internal-error"))
    link, _ = settle_first(probe, ctx, ctx.queue(), rejected)
    check_rejected_gone(probe, ctx, link, 5, 1.0)


@case(
    "3.4.3/rejected-with-description",
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
    "3.4.3/rejected-leaves-queue",
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
    "3.4.4/released-redelivered",
    SHOULD,
    "released: the message was not acted upon; the broker may deliver it again, to this or "
    "another link (the queue keeps it).",
    requires=NEEDS,
)
def released(probe, ctx):
    """Receive one message, settle it released: it is delivered again."""
    link, first = settle_first(probe, ctx, ctx.queue(), Released())
    probe.grant(link, 1)
    again = probe.next_transfer(link)
    ctx.check(message_text(again) == message_text(first), "another message came instead")


@case(
    "3.4.4/released-several",
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
    "3.4.5/modified-delivery-failed-count",
    SHOULD,
    "modified delivery-failed: count the transfer as an unsuccessful delivery attempt; the "
    "redelivered message's header delivery-count is incremented (3.2.1, 3.4.5).",
    requires=NEEDS | {"modified-outcome"},
)
def modified_delivery_failed(probe, ctx):
    """Settle one message modified(delivery-failed): the redelivery has header
    delivery-count one higher."""
    link, first = settle_first(probe, ctx, ctx.queue(), Modified(delivery_failed=True))
    before = header_of(first)
    count0 = (before.delivery_count if before is not None else 0) or 0
    probe.grant(link, 1)
    again = probe.next_transfer(link)
    after = header_of(again)
    count1 = (after.delivery_count if after is not None else 0) or 0
    ctx.check(count1 == count0 + 1, f"header delivery-count {count0} -> {count1}")


@case(
    "3.4.5/modified-undeliverable-here",
    MUST,
    "modified undeliverable-here: if true, then the message MUST NOT be redelivered to this "
    "link endpoint (ARTEMIS-794).",
    requires=NEEDS | {"modified-outcome"},
)
def modified_undeliverable_here(probe, ctx):
    """Settle one message modified(undeliverable-here) with credit left on the link: it is
    not delivered to this link again."""
    modified = Modified(undeliverable_here=True)
    link, first = settle_first(probe, ctx, ctx.queue(), modified, credit=5)
    again = collect(probe, link, 1.0)
    same = [d for d in again if message_text(d) == message_text(first)]
    ctx.check(not same, "message modified undeliverable-here was redelivered to the same link")


@case(
    "3.4.5/modified-no-flags",
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
    "3.4.5/modified-failed-not-first-acquirer",
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
    "3.4.5/modified-undeliverable-here-other-link",
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
