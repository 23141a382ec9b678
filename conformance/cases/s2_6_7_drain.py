"""2.6.7 drain: the broker as a sender uses up the credit and reports it (go-amqp#255,
DISPATCH-1090): drain on an empty queue, with fewer or exactly as many messages as credit,
with deliveries in flight, twice, with zero or a large credit, with echo, after partial
consumption; after a drain the link has no credit left but keeps working when granted
more, and unsettled deliveries of a drained link come back when it detaches. The broker is
the link's sender: "If the Sender's drain flag is set and there are no available messages,
the Sender MUST advance its delivery-count until link-credit is zero, and send its updated
flow state to the Receiver" (2.6.7); the requeue is RabbitMQ 4's model (DIFFERS), a reply
within 1 s is recorded (no sentence bounds it).

Owns the cases `2.6.7/drain-*`.
"""

from __future__ import annotations

from amqpspec.amqp10.serial import serial_offset
from amqpspec.conformance.run.registry import MAY, MUST, case
from amqpspec.conformance.steps.credit import check_advanced, drain, drain_case, drain_reply
from amqpspec.conformance.steps.deliveries import (
    check_nothing_more,
    collect,
    exactly,
    nothing_until_granted,
    queued_receiver,
)
from amqpspec.conformance.steps.links import consumer
from amqpspec.conformance.steps.queues import fill, texts
from amqpspec.conformance.steps.sentences import (
    DRAIN,
    DRAIN_ADVANCE,
    DRAINING,
    NOT_RESENT,
    RABBITMQ4,
)
from amqpspec.conformance.verdicts import NoDelivery


@drain_case("2.6.7/drain-empty-queue", DRAIN)
def drain_empty(probe, ctx):
    """Empty queue, link-credit 10 with drain: a prompt flow with delivery-count +10 and
    link-credit 0, and no transfer."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    dc0 = link.delivery_count
    reply, _ = drain(probe, link, 10)
    check_advanced(ctx, reply, dc0, 10)
    check_nothing_more(
        ctx, probe, link, lambda n: f"expected no transfer from an empty queue; observed {n}"
    )


@drain_case("2.6.7/drain-partial", DRAIN)
def drain_partial(probe, ctx):
    """3 queued, link-credit 10 with drain: 3 transfers, then a flow with delivery-count
    +10 and link-credit 0."""
    _, link = queued_receiver(probe, ctx, 3)
    dc0 = link.delivery_count
    reply, got = drain(probe, link, 10, receive=3)
    check_advanced(ctx, reply, dc0, 10)
    extra = collect(probe, link, 0.3)
    ctx.check(not extra, f"expected 3 transfers from 3 queued; observed {len(got) + len(extra)}")


@drain_case("2.6.7/drain-exact", DRAIN)
def drain_exact(probe, ctx):
    """5 queued, link-credit 5 with drain: 5 transfers and a flow with link-credit 0 and
    delivery-count +5."""
    _, link = queued_receiver(probe, ctx, 5)
    dc0 = link.delivery_count
    reply, _ = drain(probe, link, 5, receive=5)
    check_advanced(ctx, reply, dc0, 5)


@drain_case("2.6.7/drain-credit-after", DRAIN)
def drain_then_credit(probe, ctx):
    """Drain an empty queue, then queue 5 and grant 2 without drain: exactly 2 transfers
    (no credit left over from before the drain: DISPATCH-1090)."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    drain(probe, link, 10)
    fill(probe, ctx, queue, 5)
    nothing_until_granted(
        ctx,
        probe,
        link,
        lambda n: f"expected no transfer after the drain used up the credit; observed {n}",
    )


@drain_case("2.6.7/drain-in-flight", DRAIN)
def drain_in_flight(probe, ctx):
    """10 queued, link-credit 20, then at once (transfers in flight) the same horizon with
    drain: 10 transfers, then a flow with delivery-count +20 and link-credit 0. Fewer
    messages than credit, so the drain always finds credit left whatever the timing."""
    _, link = queued_receiver(probe, ctx, 10)
    dc0 = link.delivery_count
    since = probe.mark()
    probe.grant(link, 20)
    probe.grant(link, link.link_credit, drain=True)  # same horizon, now draining
    try:
        probe.receive(link, 10)
    except NoDelivery as exc:  # the drain reply is what 2.6.7 requires; it says the rest
        ctx.note(str(exc))
    reply = drain_reply(probe, link, since)
    check_advanced(ctx, reply, dc0, 20)
    check_nothing_more(
        ctx, probe, link, lambda n: f"expected 10 transfers from 10 queued; observed {10 + n}"
    )


@drain_case(
    "2.6.7/drain-then-detach-nothing-unsettled",
    DRAIN + " A Source MUST NOT resend a Message which has previously been successfully "
    "transferred (3.5.2): the accepted ones do not come back.",
    sentences=(*DRAINING, NOT_RESENT),
    requires={"queues", "drain-reply", "unsettled-deliveries"},
)
def drain_then_detach(probe, ctx):
    """3 queued, drain with credit 5, settle the 3, detach: the queue is empty afterwards (a
    new receiver's drain gets no transfer)."""
    queue, link = queued_receiver(probe, ctx, 3)
    drain(probe, link, 5, receive=3)
    probe.detach(link)
    _, again = consumer(probe, ctx, queue)
    drain(probe, again, 5)
    redelivered = collect(probe, again, 0.3) + probe.transfers(again)
    ctx.check(
        not redelivered,
        f"expected none of the 3 accepted messages again; observed {len(redelivered)} resent",
    )


NEEDS = {"queues", "drain-reply"}


@case("2.6.7/drain-twice", MUST, DRAIN, sentences=DRAINING, role="sender", requires=NEEDS)
def drain_twice(probe, ctx):
    """Empty queue: drain credit 4 -> reply +4; drain credit 3 again -> a second reply
    with delivery-count +7 in all, no transfer."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    dc0 = link.delivery_count
    first, _ = drain(probe, link, 4)
    check_advanced(ctx, first, dc0, 4, "first drain reply")
    second, _ = drain(probe, link, 3)
    check_advanced(ctx, second, dc0, 7, "second drain reply")
    check_nothing_more(
        ctx, probe, link, lambda n: f"expected no transfer from an empty queue; observed {n}"
    )


@drain_case(
    "2.6.7/drain-zero-credit",
    DRAIN + " With no link-credit there is nothing to consume: no transfer may follow.",
    requires=NEEDS,
)
def drain_zero_credit(probe, ctx):
    """3 queued, a flow with drain=true and link-credit 0: no transfer; a reply, if any,
    has link-credit 0 and delivery-count unchanged."""
    _, link = queued_receiver(probe, ctx, 3)
    dc0 = link.delivery_count
    since = probe.mark()
    probe.grant(link, 0, drain=True)
    extra = collect(probe, link, 0.6)
    ctx.check(
        not extra, f"expected no transfer after a drain with link-credit 0; observed {len(extra)}"
    )
    for flow in probe.link_flows(link, since):
        ctx.check(
            flow.link_credit == 0 and serial_offset(dc0, flow.delivery_count) == 0,
            f"expected link-credit 0 and delivery-count {dc0} in the reply; observed link-credit "
            f"{flow.link_credit}, delivery-count {flow.delivery_count}",
        )


@case("2.6.7/drain-with-echo", MUST, DRAIN, sentences=DRAINING, role="sender", requires=NEEDS)
def drain_with_echo(probe, ctx):
    """Empty queue, credit 6 with drain and echo: a flow with link-credit 0 and
    delivery-count +6 (the drain reply may serve as the echo reply)."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    dc0 = link.delivery_count
    reply, _ = drain(probe, link, 6, echo=True)
    check_advanced(ctx, reply, dc0, 6, "drain+echo reply")


@drain_case(
    "2.6.7/drain-after-partial-consumption",
    DRAIN,
    requires=NEEDS,
)
def drain_after_partial(probe, ctx):
    """8 queued; grant 5, receive 5; drain with credit 6: the 3 left, then a reply with
    delivery-count +11."""
    _, link = queued_receiver(probe, ctx, 8, credit=5)
    dc0 = link.delivery_count
    probe.receive(link, 5)
    reply, _ = drain(probe, link, 6, receive=3)
    check_advanced(ctx, reply, dc0, 11)
    check_nothing_more(
        ctx, probe, link, lambda n: f"expected no transfer beyond the 8 queued; observed {n}"
    )


@case("2.6.7/drain-large-credit", MUST, DRAIN, sentences=DRAINING, role="sender", requires=NEEDS)
def drain_large_credit(probe, ctx):
    """10 queued, drain with credit 1,000: 10 transfers, then a reply with delivery-count
    +1,000 and link-credit 0."""
    _, link = queued_receiver(probe, ctx, 10)
    dc0 = link.delivery_count
    reply, _ = drain(probe, link, 1000, receive=10)
    check_advanced(ctx, reply, dc0, 1000)


@drain_case(
    "2.6.7/drain-unsettled-then-detach-requeued",
    DRAIN + " Deliveries the drain sent but the receiver never settled go back to the queue "
    "when the link detaches (RabbitMQ 4's model).",
    model=RABBITMQ4,
    requires=NEEDS | {"unsettled-deliveries", "requeue-on-detach"},
)
def drain_unsettled_detach(probe, ctx):
    """3 queued, drain with credit 5 on an unsettled link, nothing settled, detach: a new
    receiver gets the same 3 messages."""
    queue, link = queued_receiver(probe, ctx, 3, snd_settle_mode=0)
    _, got = drain(probe, link, 5, receive=3, settle=False)
    probe.detach(link)
    other = ctx.probe()
    _, again = consumer(other, ctx, queue, credit=5)
    try:
        back = other.receive(again, 3) + collect(other, again, 0.3)
    except NoDelivery as exc:
        back = other.transfers(again)
        ctx.note(str(exc))
    ctx.model(
        texts(back) == texts(got),
        f"expected the 3 unsettled messages again after the detach; observed {len(back)}",
    )


@drain_case(
    "2.6.7/drain-link-usable-after",
    DRAIN + " After the drain the receiver may grant new credit on the same link.",
    requires=NEEDS,
)
def drain_link_usable_after(probe, ctx):
    """Drain an empty queue; queue 4; grant 4 twice in a row (same horizon): exactly 4,
    then drain again: a reply with link-credit 0."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    drain(probe, link, 2)
    fill(probe, ctx, queue, 6)
    probe.grant(link, 4)
    probe.grant(link, 4)
    exactly(probe, link, 4)
    drain(probe, link, 1, receive=1)


@case(
    "2.6.7/drain-reply-prompt",
    MAY,
    DRAIN + " On an empty queue nothing is to be sent, so the reply can come at once "
    "(go-amqp#255: clients wait for it; no sentence bounds the time).",
    sentences=(DRAIN_ADVANCE,),
    requires=NEEDS,
)
def drain_reply_prompt(probe, ctx):
    """Empty queue, drain credit 10: the reply arrives within 1 s."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    drain(probe, link, 10, timeout=1.0)
