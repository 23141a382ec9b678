"""2.6.12 / 2.7.5 / 2.7.6 / 2.8 settlement: a disposition range settles every delivery in
it (also over part of the deliveries), a delivery settled twice, an outcome first sent
unsettled then settled, snd-settle-mode settled honoured, many unsettled publishes each
settled by the broker, pre-settled publishes queued without dispositions, mixed settled
and unsettled publishes on one link.

Owns the cases `2.6.12/*`, `2.7.5/*` and `2.8.*/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Accepted
from amqpspec.amqp10.engine import DispositionReceived
from amqpspec.amqp10.spec import Role, SndSettleMode
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.deliveries import (
    collect,
    exactly,
    queued_receiver,
    take_unsettled,
)
from amqpspec.conformance.steps.links import consumer, publisher, unsettled_consumer
from amqpspec.conformance.steps.queues import body, message_text
from amqpspec.conformance.verdicts import CaseFailed

NEEDS = {"queues", "unsettled-deliveries"}


SETTLED_DONE = (
    "A delivery settled by the receiver with a terminal outcome (accepted) is done: it is "
    "not delivered again when the link ends (2.6.12, 3.4.2)."
)


def _redelivered(ctx, queue, expected: int):
    other = ctx.probe()
    _, link = unsettled_consumer(other, ctx, queue, credit=expected + 5)
    got = other.receive(link, expected, timeout=5.0) if expected else []
    return got + collect(other, link, 0.4)


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
    "2.6.12/settlement-settled-twice",
    SHOULD,
    "Once a delivery is settled its delivery-id is forgotten (2.6.12); a second "
    "disposition for it refers to nothing and is ignored — the link keeps working.",
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
    ctx.check(observed == "timeout", f"the broker ended something: {observed}")


@case(
    "2.6.12/settlement-state-then-settle",
    MUST,
    SETTLED_DONE + " A receiver may first send the outcome unsettled and settle later.",
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
    ctx.check(not back, f"{len(back)} settled deliveries came back")


@case(
    "2.6.12/settlement-range-partial",
    MUST,
    "disposition first..last settles exactly the deliveries in the range (2.7.6); the "
    "others stay unsettled and return to the queue when the link ends.",
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
    back = sorted(message_text(d) for d in _redelivered(ctx, queue, 3))
    expected = sorted(message_text(d) for d in (got[0], got[4], got[5]))
    ctx.check(back == expected, f"came back {back}, expected {expected}")


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
    got = exactly(probe, link, 3)
    if agreed == SndSettleMode.SETTLED:
        ctx.check(all(d.settled for d in got), "unsettled transfer on a settled link")
    else:
        ctx.note(f"broker answered snd-settle-mode {agreed}")


@case(
    "2.6.12/settlement-publish-many-unsettled",
    MUST,
    "The broker as receiver settles every unsettled delivery it takes with a terminal "
    "outcome (rcv-settle-mode first, 2.8.3, 3.4); dispositions may cover ranges.",
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
    ctx.check(not bad, f"{len(bad)} dispositions with state other than accepted: {bad[:1]}")


@case(
    "2.6.12/settlement-presettled-no-disposition",
    SHOULD,
    "A delivery sent settled has nothing left to settle: the receiver sends no disposition "
    "for it (2.6.12, 2.8.2).",
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
    ctx.check(not dispositions, f"{len(dispositions)} dispositions for pre-settled messages")
    _, link = consumer(probe, ctx, queue, credit=5)
    exactly(probe, link, 5)


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


@case(
    "2.6.12/settlement-mixed-publish",
    MUST,
    "snd-settle-mode mixed: the sender may send a mixture of settled and unsettled "
    "deliveries; the receiver settles the unsettled ones and takes all of them.",
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
    _, link = consumer(probe, ctx, queue, credit=6)
    exactly(probe, link, 6)
