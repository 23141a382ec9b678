"""2.6.12 / 2.7.5 / 2.7.6 / 2.8 settlement: a disposition range settles every delivery in
it (also over part of the deliveries), a delivery settled twice, an outcome first sent
unsettled then settled, snd-settle-mode settled honoured, many unsettled publishes each
settled by the broker, pre-settled publishes queued without dispositions, mixed settled
and unsettled publishes on one link. What binds the broker: an accepted message is never
sent again (3.5.2), a disposition's updated state is applied to every delivery of its range
(2.7.6), on a link whose snd-settle-mode is settled every delivery comes settled (2.7.5),
and as the receiver in rcv-settle-mode first it settles each delivery once it arrived
(2.7.5); a delivery settled twice, no disposition for a pre-settled one and what a
consumer then gets are recorded (MAY); the partial range's requeue is RabbitMQ 4's model.

Owns the cases `2.6.12/*`, `2.7.5/*` and `2.8.*/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Accepted
from amqpspec.amqp10.engine import DispositionReceived
from amqpspec.amqp10.spec import Role, SndSettleMode
from amqpspec.conformance.run.registry import MAY, MODEL, MUST, case
from amqpspec.conformance.steps.deliveries import (
    collect,
    collect_again,
    consumed_exactly,
    exactly,
    queued_receiver,
    take_unsettled,
)
from amqpspec.conformance.steps.links import consumer, publisher, unsettled_consumer
from amqpspec.conformance.steps.queues import body, message_text
from amqpspec.conformance.steps.sentences import NOT_RESENT, RABBITMQ4

APPLIED = "2.7.6/disposition.2"  # the updated state MUST be applied (live deliveries)
SETTLED_MODE = "2.7.5/transfer.settled.3"  # snd-settle-mode settled: every delivery settled
SETTLE_FIRST = "2.7.5/transfer.rcv-settle-mode.1"  # first: the receiver settles on arrival

NEEDS = {"queues", "unsettled-deliveries"}


SETTLED_DONE = (
    "A Source MUST NOT resend a Message which has previously been successfully transferred "
    "from the Source, i.e. reached an ACCEPTED delivery state at the receiver (3.5.2)."
)


def _redelivered(ctx, queue, expected: int):
    other = ctx.probe()
    _, link = unsettled_consumer(other, ctx, queue, credit=expected + 5)
    got = other.receive(link, expected, timeout=5.0) if expected else []
    return got + collect(other, link, 0.4)


@case(
    "2.6.12/disposition-range",
    MUST,
    "A disposition's updated state MUST be applied to every delivery-id from first to last "
    "(2.7.6); accepted ones are never sent again (3.5.2).",
    sentences=(APPLIED, NOT_RESENT),
    role="sender",
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
    ctx.check(
        not back,
        f"expected none of the 5 accepted by the range again; observed {len(back)} resent",
    )


@case(
    "2.6.12/settlement-settled-twice",
    MAY,
    "Once a delivery is settled its delivery-id is forgotten (2.6.12); a second disposition "
    "for it refers to nothing (no sentence says the receiver of it ignores it).",
    requires=NEEDS,
)
def settled_twice(probe, ctx):
    """Receive one unsettled, settle it accepted twice, then grant 1 more: the next
    message arrives and nothing ends."""
    _, link = queued_receiver(probe, ctx, 2, unsettled=True, credit=1)
    first = probe.next_transfer(link)
    since = probe.mark()
    probe.settle(link, first)
    probe.settle(link, first)
    probe.grant(link, 1)
    probe.next_transfer(link)
    observed = probe.error_outcome(timeout=0.3, since=since)
    ctx.check(observed == "timeout", f"expected the link kept working; {probe.observed(since)}")


@case(
    "2.6.12/settlement-state-then-settle",
    MUST,
    SETTLED_DONE + " A receiver may first send the outcome unsettled and settle later.",
    sentences=(NOT_RESENT, APPLIED),
    role="sender",
    requires=NEEDS | {"requeue-on-detach"},
)
def state_then_settle(probe, ctx):
    """3 unsettled; each gets accepted with settled=false, then settled=true; detach:
    nothing comes back."""
    queue, link = queued_receiver(probe, ctx, 3, unsettled=True, credit=3)
    got = probe.receive(link, 3, settle=False)
    for delivery in got:
        link.disposition(delivery.delivery_id, settled=False, state=Accepted())
    probe.flush()
    probe.idle(0.2)
    for delivery in got:
        link.disposition(delivery.delivery_id, settled=True, state=Accepted())
    probe.flush()
    probe.detach(link)
    back = _redelivered(ctx, queue, 0)
    ctx.check(not back, f"expected none of the 3 accepted again; observed {len(back)} resent")


@case(
    "2.6.12/settlement-range-partial",
    MODEL,
    "disposition first..last settles exactly the deliveries in the range (2.7.6), which are "
    "never sent again (3.5.2); the others return to the queue when the link closes "
    "(RabbitMQ 4's model).",
    sentences=(NOT_RESENT, APPLIED),
    model=RABBITMQ4,
    requires=NEEDS | {"requeue-on-detach"},
)
def range_partial(probe, ctx):
    """6 unsettled; one disposition settles the 2nd..4th; detach: exactly the 1st, 5th and
    6th come back."""
    queue, link = queued_receiver(probe, ctx, 6, unsettled=True, credit=6)
    got = probe.receive(link, 6, settle=False)
    link.disposition(got[1].delivery_id, got[3].delivery_id, settled=True, state=Accepted())
    probe.flush()
    probe.detach(link)
    back = sorted(message_text(d) for d in collect_again(ctx, queue, 8, 0.5))
    accepted = sorted(message_text(d) for d in got[1:4])
    resent = sorted(set(back) & set(accepted))
    ctx.must(not resent, f"expected none of the 3 accepted again; observed {resent}", NOT_RESENT)
    expected = sorted(message_text(d) for d in (got[0], got[4], got[5]))
    ctx.check(back == expected, f"expected {expected} back after the detach; observed {back}")


@case(
    "2.8.2/snd-settle-mode-settled",
    MUST,
    "If the negotiated value for snd-settle-mode at attachment is settled, then the settled "
    "field MUST be true on at least one transfer frame for a delivery.",
    sentences=(SETTLED_MODE,),
    role="sender",
    requires={"queues"},
)
def snd_settle_settled(probe, ctx):
    """A receiver asking for snd-settle-mode settled: if the broker's attach agrees, every
    transfer arrives settled (the checker verifies each)."""
    _, link = queued_receiver(probe, ctx, 3, snd_settle_mode=SndSettleMode.SETTLED)
    agreed = link.remote_attach.snd_settle_mode if link.remote_attach is not None else None
    probe.grant(link, 3)
    got = exactly(probe, link, 3)
    if agreed == SndSettleMode.SETTLED:
        ctx.check(
            all(d.settled for d in got),
            f"expected every delivery settled (snd-settle-mode settled agreed); observed "
            f"{sum(not d.settled for d in got)} unsettled",
        )
    else:
        ctx.note(f"broker answered snd-settle-mode {agreed}")


@case(
    "2.6.12/settlement-publish-many-unsettled",
    MUST,
    "If first, this indicates that the Receiver MUST settle the delivery once it has arrived "
    "without waiting for the Sender to settle first: every one of 200 (dispositions may "
    "cover ranges).",
    sentences=(SETTLE_FIRST,),
    role="receiver",
    requires={"queues"},
)
def publish_many_unsettled(probe, ctx):
    """200 unsettled messages in one burst: every delivery-id is settled by a broker
    disposition (publish() waits for each), with state accepted."""
    queue = ctx.queue()
    _, sender = publisher(probe, ctx, queue)
    states = []

    def record(event):  # sees every event; consumes none
        if isinstance(event, DispositionReceived) and event.role == Role.RECEIVER:
            states.append(event.state)

    probe.conn.add_observer(record)
    try:
        probe.publish(sender, 200, lambda i: body(i), timeout=20.0)
    finally:
        probe.conn.remove_observer(record)
    bad = [s for s in states if not isinstance(s, Accepted)]
    if bad:  # which outcome is the receiver's choice (3.4): recorded
        ctx.note(f"{len(bad)} dispositions with state other than accepted: {bad[:1]}")


@case(
    "2.6.12/settlement-presettled-no-disposition",
    MAY,
    "A delivery sent settled has nothing left to settle: the receiver need send no "
    "disposition for it (2.6.12, 2.8.2; no sentence forbids one).",
    requires={"queues"},
)
def presettled_no_disposition(probe, ctx):
    """5 pre-settled messages on a settled sender link: no disposition from the broker in
    0.5 s, and all 5 are queued."""
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(
        session, ctx.target_address(queue), snd_settle_mode=SndSettleMode.SETTLED
    )
    since = probe.mark()
    probe.publish(sender, 5, lambda i: body(i), settled=True)
    probe.idle(0.5)
    dispositions = list(probe.frames_since(since, "disposition"))
    ctx.check(
        not dispositions,
        f"expected no disposition for pre-settled messages; observed {len(dispositions)}",
    )
    consumed_exactly(probe, ctx, queue, 5)


@case(
    "2.7.5/presettled-publish",
    MAY,
    "A settled transfer is at-most-once: the receiving broker takes the message without a "
    "disposition, and a healthy broker queues it (no sentence requires it to).",
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
    got = probe.receive(link, 3, timeout=3.0)
    ctx.check(len(got) == 3, f"expected the 3 pre-settled messages queued; observed {len(got)}")


@case(
    "2.6.12/settlement-mixed-publish",
    MUST,
    "snd-settle-mode mixed: the sender may send a mixture of settled and unsettled "
    "deliveries; in rcv-settle-mode first the Receiver MUST settle the unsettled ones once "
    "they arrived (2.7.5); a consumer then gets all six (recorded).",
    sentences=(SETTLE_FIRST,),
    role="receiver",
    requires={"queues"},
)
def mixed_publish(probe, ctx):
    """On one mixed-mode sender: 3 settled and 3 unsettled messages interleaved; the
    unsettled ones are settled by the broker, and a consumer gets all 6."""
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(
        session, ctx.target_address(queue), snd_settle_mode=SndSettleMode.MIXED
    )
    for index in range(6):
        probe.publish(sender, 1, body(index), settled=index % 2 == 0, timeout=10.0)
    consumed_exactly(probe, ctx, queue, 6)
