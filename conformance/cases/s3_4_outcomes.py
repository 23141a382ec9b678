"""3.4 delivery outcomes: what the broker does with accepted, rejected, released and
modified deliveries, as a receiver (a publish is accepted; an unroutable one released) and
as a sender: rejected is terminal and leaves the queue for good (also with an error
description), released comes back (several at once too), modified counts a failed
delivery, marks the redelivery and with undeliverable-here goes to another link only. What
binds the broker: it settles a delivery once it arrived in rcv-settle-mode first (2.7.5),
a released message's delivery-count is not incremented (3.4.4 MUST NOT), a modified one
with delivery-failed has it incremented (3.4.5 MUST) and one modified with
undeliverable-here is not redelivered to that link (3.4.5 MUST NOT). That a rejected
message leaves the queue, a released or modified one comes back and an unroutable one is
released is RabbitMQ 4's model (3.3 shows the states, with no keyword): DIFFERS.

Owns the cases `3.4.*/*` (settlement itself is in s2_6_12_settlement.py).
"""

from __future__ import annotations

from collections.abc import Callable

from amqpspec.amqp10.composites import Accepted, Error, Modified, Rejected, Released
from amqpspec.amqp10.engine import DispositionReceived
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.run.registry import MODEL, MUST, RunFunction, case, case_function
from amqpspec.conformance.steps.deliveries import (
    check_rejected_gone,
    collect,
    queued_receiver,
    settle_first,
    settles,
    take_unsettled,
)
from amqpspec.conformance.steps.links import unsettled_consumer
from amqpspec.conformance.steps.queues import body, header_of, message_text, texts
from amqpspec.conformance.steps.sentences import RABBITMQ4
from amqpspec.conformance.verdicts import CaseFailed

SETTLE_FIRST = "2.7.5/transfer.rcv-settle-mode.1"  # first: the receiver settles on arrival
RELEASED_COUNT = "3.4.4/released.1"  # released: delivery-count MUST NOT be incremented
FAILED_COUNT = "3.4.5/modified.delivery-failed.1"  # delivery-failed: MUST be incremented
NOT_HERE = "3.4.5/modified.undeliverable-here.1"  # MUST NOT be redelivered to this link

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


def _count(delivery) -> int:
    header = header_of(delivery)
    return (header.delivery_count if header is not None else 0) or 0


def _count_unchanged(ctx, first, again) -> None:
    """3.4.4: a released message's delivery-count MUST NOT be incremented."""
    ctx.must(
        _count(again) == _count(first),
        f"expected header delivery-count {_count(first)} after released (unchanged); observed "
        f"{_count(again)}",
        RELEASED_COUNT,
    )


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
    "If first, this indicates that the Receiver MUST settle the delivery once it has arrived: "
    "the broker settles a published message (its outcome, accepted for a queue, recorded).",
    sentences=(SETTLE_FIRST,),
    role="receiver",
    requires={"queues"},
)
def accepted_on_publish(probe, ctx):
    """One unsettled message to an existing queue: a disposition with state accepted."""
    queue = ctx.queue()
    event = _publish_outcome(probe, ctx.target_address(queue))
    if not isinstance(event.state, Accepted):  # the outcome is the receiver's choice (3.4)
        ctx.note(f"outcome {event.state!r} for a message a queue took")
    if not event.settled:  # 2.7.5: settled once it arrived; a later settlement may follow
        probe.expect(
            settles(Role.RECEIVER, event.first),
            what="disposition settling the published message (rcv-settle-mode first)",
        )


@case(
    "3.4.4/released-unroutable",
    MODEL,
    "released: the message was not (and will not be) acted upon; a broker answers a message "
    "no queue takes with released (RabbitMQ 4's model), not accepted.",
    model=RABBITMQ4,
    requires={"exchanges", "released-unroutable"},
)
def released_unroutable(probe, ctx):
    """One unsettled message to an exchange address with no binding: outcome released."""
    address = ctx.profile.unroutable_target
    ctx.check(address is not None, "profile has no unroutable_target")
    event = _publish_outcome(probe, address)
    ctx.check(
        isinstance(event.state, Released),
        f"expected released for an unroutable message; observed {event.state!r}",
    )


def _rejected_case(
    slug: str, name: str, sentence: str, error: Error, look: tuple[int, float], doc: str
) -> None:
    """Declare `3.4.3/rejected-<slug>` (RabbitMQ 4's model): one message settled rejected
    with `error`, then nothing comes back (`check_rejected_gone` with the credit and quiet
    time `look`)."""

    def run(probe, ctx):
        link, _ = settle_first(probe, ctx, ctx.queue(), Rejected(error=error))
        check_rejected_gone(probe, ctx, link, *look)

    declare = case(
        f"3.4.3/rejected-{slug}",
        MODEL,
        sentence,
        model=RABBITMQ4,
        requires=NEEDS | {"rejected-outcome"},
    )
    declare(case_function(run, name, doc, __name__))


_rejected_case(
    "not-redelivered",
    "rejected",
    "rejected: the message is invalid and unprocessable; a terminal outcome (3.3: ARCHIVED), "
    "so it is not delivered to the consumer again (RabbitMQ 4's model; no keyword).",
    Error(condition="amqp:internal-error"),
    (5, 1.0),
    "Receive one message, settle it rejected, consume again: nothing comes back.",
)
_rejected_case(
    "with-description",
    "rejected_with_description",
    "rejected: the message is invalid and unprocessable; error carries diagnostic "
    "information. A terminal outcome: the message is not delivered to the consumer again.",
    Error(condition="amqp:decode-error", description="amqpspec: cannot process"),
    (3, 0.8),
    "Reject one message with amqp:decode-error and a description: not delivered again.",
)


@case(
    "3.4.3/rejected-leaves-queue",
    MODEL,
    "rejected is terminal: the rejected messages are gone from the queue (dead-lettered or "
    "dropped); the others are still there.",
    model=RABBITMQ4,
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
        f"expected the 2 never settled back; observed {[message_text(d) for d in back]}",
    )


@case(
    "3.4.4/released-redelivered",
    MODEL,
    "released: the message was not acted upon; the broker may deliver it again, to this or "
    "another link (the queue keeps it).",
    sentences=(RELEASED_COUNT,),
    model=RABBITMQ4,
    requires=NEEDS,
)
def released(probe, ctx):
    """Receive one message, settle it released: it is delivered again."""
    link, first = settle_first(probe, ctx, ctx.queue(), Released())
    probe.grant(link, 1)
    again = probe.next_transfer(link)
    ctx.check(
        message_text(again) == message_text(first),
        f"expected the released message again; observed {message_text(again)!r}",
    )
    _count_unchanged(ctx, first, again)


@case(
    "3.4.4/released-several",
    MODEL,
    "released: the message was not acted upon; the queue delivers it again (3.4.4).",
    sentences=(RELEASED_COUNT,),
    model=RABBITMQ4,
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
        f"expected the 3 released messages again; observed {texts(again)}",
    )
    by_body = {message_text(d): d for d in first}
    for delivery in again:
        if message_text(delivery) in by_body:
            _count_unchanged(ctx, by_body[message_text(delivery)], delivery)


def _modified_case(
    case_id: str, sentence: str, sentence_id: str
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a MUST of 3.4.5 modified on the broker as the sender of the delivery we
    settle modified (`sentence_id`, the manifest's)."""
    return case(
        case_id,
        MUST,
        sentence,
        sentences=(sentence_id,),
        role="sender",
        requires=NEEDS | {"modified-outcome"},
    )


@_modified_case(
    "3.4.5/modified-delivery-failed-count",
    "If the delivery-failed flag is set, any Messages modified MUST have their "
    "delivery-count incremented (seen on the redelivery; none: recorded).",
    FAILED_COUNT,
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
    ctx.check(
        count1 == count0 + 1,
        f"expected header delivery-count {count0 + 1} on the redelivery; observed {count1}",
    )


@_modified_case(
    "3.4.5/modified-undeliverable-here",
    "If the undeliverable-here is set, then any Messages released MUST NOT be redelivered "
    "to the modifying Link Endpoint (ARTEMIS-794).",
    NOT_HERE,
)
def modified_undeliverable_here(probe, ctx):
    """Settle one message modified(undeliverable-here) with credit left on the link: it is
    not delivered to this link again."""
    modified = Modified(undeliverable_here=True)
    link, first = settle_first(probe, ctx, ctx.queue(), modified, credit=5)
    again = collect(probe, link, 1.0)
    same = [d for d in again if message_text(d) == message_text(first)]
    ctx.check(
        not same,
        f"expected the message modified undeliverable-here not redelivered to this link; "
        f"observed it again ({len(same)} times)",
    )


@case(
    "3.4.5/modified-no-flags",
    MODEL,
    "modified with delivery-failed and undeliverable-here both false: the message is "
    "modified (no annotations) and may be redelivered to this link, like released (RabbitMQ "
    "4's model redelivers it).",
    model=RABBITMQ4,
    requires=NEEDS | {"modified-outcome"},
)
def modified_no_flags(probe, ctx):
    """Settle one message modified() without flags: it is delivered again."""
    link, first = settle_first(probe, ctx, ctx.queue(), Modified())
    probe.grant(link, 1)
    again = _next_or_drop(probe, link)
    ctx.check(
        message_text(again) == message_text(first),
        f"expected the modified message again; observed {message_text(again)!r}",
    )


@case(
    "3.4.5/modified-failed-not-first-acquirer",
    MUST,
    "If the delivery-failed flag is set, any Messages modified MUST have their "
    "delivery-count incremented; the redelivery does not claim first-acquirer (3.2.1, no "
    "keyword: RabbitMQ 4's model).",
    sentences=(FAILED_COUNT,),
    role="sender",
    model=RABBITMQ4,
    requires=NEEDS | {"modified-outcome", "redelivery-marks"},
)
def modified_failed_marks(probe, ctx):
    """Settle one message modified(delivery-failed): the redelivery has delivery-count >= 1
    and first-acquirer not true."""
    link, _ = settle_first(probe, ctx, ctx.queue(), Modified(delivery_failed=True))
    probe.grant(link, 1)
    header = header_of(_next_or_drop(probe, link))
    count = (header.delivery_count if header is not None else 0) or 0
    ctx.check(
        count >= 1, f"expected header delivery-count 1 or more on the redelivery; observed {count}"
    )
    ctx.model(
        header is None or not header.first_acquirer,
        "expected the redelivery not to claim first-acquirer; observed first-acquirer=true",
    )


@case(
    "3.4.5/modified-undeliverable-here-other-link",
    MODEL,
    "modified undeliverable-here: the message MUST NOT be redelivered to this link "
    "endpoint; it stays in the queue for other links (ARTEMIS-794; RabbitMQ 4's model).",
    sentences=(NOT_HERE,),
    model=RABBITMQ4,
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
        raise CaseFailed(f"expected the modified outcome taken; {probe.observed(since)}")
    other = ctx.probe()
    _, second = unsettled_consumer(other, ctx, queue, credit=1)
    again = other.next_transfer(second, timeout=3.0)
    ctx.check(
        message_text(again) == message_text(first),
        f"expected the modified message on the other link; observed {message_text(again)!r}",
    )
