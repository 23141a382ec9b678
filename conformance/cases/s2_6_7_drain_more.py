"""2.6.7 drain, more scenarios: drain twice, drain with zero credit, drain with echo, drain
after partial consumption, a large drained credit, drain of unsettled deliveries followed
by detach (they come back), and a link that keeps working after a drain.

Owns the cases `2.6.7/drain-more-*`.
"""

from __future__ import annotations

from conformance.cases.checks import (
    check_advanced,
    check_nothing_more,
    drain,
    queued_receiver,
    texts,
)
from conformance.cases.sentences import DRAIN
from conformance.registry import MUST, SHOULD, case
from conformance.steps import collect, consumer, fill
from conformance.steps_more import advance, exactly

NEEDS = {"queues", "drain-reply"}


@case("2.6.7/drain-more-twice", MUST, DRAIN, requires=NEEDS)
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
    check_nothing_more(ctx, probe, link, lambda n: f"{n} transfers from an empty queue")


@case(
    "2.6.7/drain-more-zero-credit",
    MUST,
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
    ctx.check(not extra, f"{len(extra)} transfers after a drain with link-credit 0")
    for flow in probe.link_flows(link, since):
        ctx.check(
            flow.link_credit == 0 and advance(flow.delivery_count, dc0) == 0,
            f"reply with link-credit {flow.link_credit}, delivery-count {flow.delivery_count}",
        )


@case("2.6.7/drain-more-with-echo", MUST, DRAIN, requires=NEEDS)
def drain_with_echo(probe, ctx):
    """Empty queue, credit 6 with drain and echo: a flow with link-credit 0 and
    delivery-count +6 (the drain reply may serve as the echo reply)."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    dc0 = link.delivery_count
    reply, _ = drain(probe, link, 6, echo=True)
    check_advanced(ctx, reply, dc0, 6, "drain+echo reply")


@case("2.6.7/drain-more-after-partial-consumption", MUST, DRAIN, requires=NEEDS)
def drain_after_partial(probe, ctx):
    """8 queued; grant 5, receive 5; drain with credit 6: the 3 left, then a reply with
    delivery-count +11."""
    _, link = queued_receiver(probe, ctx, 8, credit=5)
    dc0 = link.delivery_count
    probe.receive(link, 5)
    reply, _ = drain(probe, link, 6, receive=3)
    check_advanced(ctx, reply, dc0, 11)
    check_nothing_more(ctx, probe, link, lambda n: f"{n} transfers beyond the 8 queued")


@case("2.6.7/drain-more-large-credit", MUST, DRAIN, requires=NEEDS)
def drain_large_credit(probe, ctx):
    """10 queued, drain with credit 1,000: 10 transfers, then a reply with delivery-count
    +1,000 and link-credit 0."""
    _, link = queued_receiver(probe, ctx, 10)
    dc0 = link.delivery_count
    reply, _ = drain(probe, link, 1000, receive=10)
    check_advanced(ctx, reply, dc0, 1000)


@case(
    "2.6.7/drain-more-unsettled-then-detach-requeued",
    MUST,
    DRAIN + " Deliveries the drain sent but the receiver never settled are not consumed: "
    "after detach the queue delivers them again (2.6.6, 3.4).",
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
    back = other.receive(again, 3) + collect(other, again, 0.3)
    ctx.check(
        texts(back) == texts(got),
        f"{len(back)} redelivered after detach, expected the 3 unsettled",
    )


@case(
    "2.6.7/drain-more-link-usable-after",
    MUST,
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
    "2.6.7/drain-more-reply-prompt",
    SHOULD,
    DRAIN + " On an empty queue nothing is to be sent, so the reply is due promptly "
    "(go-amqp#255: clients wait for it).",
    requires=NEEDS,
)
def drain_reply_prompt(probe, ctx):
    """Empty queue, drain credit 10: the reply arrives within 1 s."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    drain(probe, link, 10, timeout=1.0)
