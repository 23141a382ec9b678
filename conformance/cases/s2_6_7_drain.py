"""2.6.7 drain: the broker as a sender uses up the credit and reports it (go-amqp#255,
DISPATCH-1090). Owns the cases `2.6.7/drain-*`.
"""

from __future__ import annotations

from conformance.cases.checks import check_advanced, check_nothing_more, drain, queued_receiver
from conformance.cases.sentences import DRAIN
from conformance.registry import MUST, case
from conformance.steps import collect, consumer, drain_reply, expect_count, fill


@case("2.6.7/drain-empty-queue", MUST, DRAIN, requires={"queues", "drain-reply"})
def drain_empty(probe, ctx):
    """Empty queue, link-credit 10 with drain: a prompt flow with delivery-count +10 and
    link-credit 0, and no transfer."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    dc0 = link.delivery_count
    reply, _ = drain(probe, link, 10)
    check_advanced(ctx, reply, dc0, 10)
    check_nothing_more(ctx, probe, link, lambda n: f"{n} transfers from an empty queue")


@case("2.6.7/drain-partial", MUST, DRAIN, requires={"queues", "drain-reply"})
def drain_partial(probe, ctx):
    """3 queued, link-credit 10 with drain: 3 transfers, then a flow with delivery-count
    +10 and link-credit 0."""
    _, link = queued_receiver(probe, ctx, 3)
    dc0 = link.delivery_count
    reply, got = drain(probe, link, 10, receive=3)
    check_advanced(ctx, reply, dc0, 10)
    extra = collect(probe, link, 0.3)
    ctx.check(not extra and len(got) == 3, f"{len(got) + len(extra)} transfers, expected 3")


@case("2.6.7/drain-exact", MUST, DRAIN, requires={"queues", "drain-reply"})
def drain_exact(probe, ctx):
    """5 queued, link-credit 5 with drain: 5 transfers and a flow with link-credit 0 and
    delivery-count +5."""
    _, link = queued_receiver(probe, ctx, 5)
    dc0 = link.delivery_count
    reply, _ = drain(probe, link, 5, receive=5)
    check_advanced(ctx, reply, dc0, 5)


@case("2.6.7/drain-credit-after", MUST, DRAIN, requires={"queues", "drain-reply"})
def drain_then_credit(probe, ctx):
    """Drain an empty queue, then queue 5 and grant 2 without drain: exactly 2 transfers
    (no credit left over from before the drain: DISPATCH-1090)."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    drain(probe, link, 10)
    fill(probe, ctx, queue, 5)
    check_nothing_more(
        ctx, probe, link, lambda n: f"{n} transfers after the drain used up the credit", 0.5
    )
    probe.grant(link, 2)
    expect_count(probe, link, 2)


@case("2.6.7/drain-in-flight", MUST, DRAIN, requires={"queues", "drain-reply"})
def drain_in_flight(probe, ctx):
    """10 queued, link-credit 20, then at once (transfers in flight) the same horizon with
    drain: 10 transfers, then a flow with delivery-count +20 and link-credit 0. Fewer
    messages than credit, so the drain always finds credit left whatever the timing."""
    _, link = queued_receiver(probe, ctx, 10)
    dc0 = link.delivery_count
    since = probe.mark()
    probe.grant(link, 20)
    probe.grant(link, link.link_credit, drain=True)  # same horizon, now draining
    probe.receive(link, 10)
    reply = drain_reply(probe, link, since)
    check_advanced(ctx, reply, dc0, 20)
    check_nothing_more(ctx, probe, link, lambda n: f"{10 + n} transfers from 10 queued messages")


@case(
    "2.6.7/drain-then-detach-nothing-unsettled",
    MUST,
    DRAIN + " Deliveries settled by the receiver are not redelivered (2.6.12).",
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
    ctx.check(not redelivered, f"{len(redelivered)} settled deliveries came back after detach")
