"""3.4 delivery outcomes and 2.6.12 / 2.8 settlement: what the broker does with accepted,
rejected, released and modified deliveries, both as a receiver (publish) and as a sender.

Owns the cases `3.4.*/*`, `2.6.12/*` and `2.8.*/*`.
"""

from __future__ import annotations

from amqp10.composites import Accepted, Error, Modified, Rejected, Released
from amqp10.engine import DispositionReceived
from amqp10.spec import Role, SndSettleMode
from conformance.cases.checks import (
    check_rejected_gone,
    queued_receiver,
    settle_first,
    take_unsettled,
)
from conformance.registry import MUST, SHOULD, case
from conformance.steps import (
    body,
    collect,
    consumer,
    expect_count,
    header_of,
    message_text,
)
from conformance.verdicts import CaseFailed

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
    "2.6.12/disposition-range",
    MUST,
    "A disposition settles every delivery-id from first to last inclusive (2.7.6); settled "
    "deliveries are not redelivered.",
    requires=NEEDS | {"requeue-on-detach"},
)
def disposition_range(probe, ctx):
    """5 unsettled deliveries settled by one disposition first..last, detach: nothing comes
    back to a new consumer."""
    queue = ctx.queue()
    _, link, got = take_unsettled(probe, ctx, queue, 5)
    ids = [d.delivery_id for d in got]
    link.disposition(ids[0], ids[-1], settled=True, state=Accepted())
    probe.flush()
    probe.detach(link)
    _, again = consumer(probe, ctx, queue, credit=5)
    back = collect(probe, again, 1.0)
    ctx.check(not back, f"{len(back)} deliveries settled by the range came back")


@case(
    "2.8.2/snd-settle-mode-settled",
    MUST,
    "snd-settle-mode settled: the sender will send all deliveries settled to the receiver.",
    requires={"queues"},
)
def snd_settle_settled(probe, ctx):
    """A receiver asking for snd-settle-mode settled: if the broker's attach agrees, every
    transfer arrives settled (the checker verifies each)."""
    _, link = queued_receiver(probe, ctx, 3, snd_settle_mode=SndSettleMode.SETTLED)
    agreed = link.remote_attach.snd_settle_mode if link.remote_attach is not None else None
    probe.grant(link, 3)
    got = expect_count(probe, link, 3)
    if agreed == SndSettleMode.SETTLED:
        ctx.check(all(d.settled for d in got), "unsettled transfer on a settled link")
    else:
        ctx.note(f"broker answered snd-settle-mode {agreed}")


@case(
    "2.7.5/presettled-publish",
    SHOULD,
    "A settled transfer is at-most-once: the receiving broker takes the message without a "
    "disposition, and a healthy broker queues it.",
    requires={"queues"},
)
def presettled_publish(probe, ctx):
    """3 messages sent settled on a sender link with snd-settle-mode settled: a consumer gets
    all 3."""
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(
        session, ctx.target_address(queue), snd_settle_mode=SndSettleMode.SETTLED
    )
    probe.publish(sender, 3, lambda i: body(i), settled=True)
    _, link = consumer(probe, ctx, queue, credit=3)
    try:
        got = probe.receive(link, 3, timeout=3.0)
    except CaseFailed as exc:
        raise CaseFailed(f"pre-settled messages not all queued: {exc}") from exc
    ctx.check(len(got) == 3, f"{len(got)} of 3")
