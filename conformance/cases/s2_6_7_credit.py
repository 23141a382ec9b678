"""2.6.7 link flow control: credit accuracy of the broker as a sender on one link (RabbitMQ
#2597 & co): exactly the granted number of deliveries for grants of many sizes, none
without credit, credit granted before messages exist or before the attach reply, credit
that stays granted while a queue fills, new credit after consumption, the flow state an
echo reports, and multi-frame deliveries that take credit once.

Owns the cases `2.6.7/credit-*` of one link (re-grants in flight are in
s2_6_7_credit_regrant.py, several links in s2_6_7_credit_links.py). The checker's
link.credit.* rules judge every transfer against every grant in every case; the cases add
the scenario and exact counts. The broker is the link's sender: more transfers than granted
break 2.6.7 (flow-control.6, "it is illegal to send more messages"; the link-credit
formula, flow-control.2), fewer are recorded (no sentence makes a sender use its credit).
"""

from __future__ import annotations

from amqpspec.amqp10.serial import serial_offset
from amqpspec.conformance.run.registry import case_function
from amqpspec.conformance.steps.credit import (
    drain_reply,
    echo_after_receiving,
    echo_reply,
    grant_case,
)
from amqpspec.conformance.steps.deliveries import (
    check_nothing_more,
    check_split,
    exactly,
    nothing_until_granted,
    queued_receiver,
)
from amqpspec.conformance.steps.links import consumer, small_frame_probe
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.steps.sentences import (
    CREDIT,
    CREDIT_BEFORE_ATTACH,
    CREDIT_DECREMENT,
    CREDIT_FORMULA,
    CREDIT_LIMIT,
    DRAIN_ADVANCE,
    FLOW_DELIVERY_COUNT_SENDER,
    RABBITMQ4,
)
from amqpspec.conformance.verdicts import NoDelivery

CREDIT_MATCHED = "2.6.7/flow-control.3"  # the sender's credit matches the delivery-limit


def _one_grant(credit: int, queued: int, name: str, doc: str):
    def run(probe, ctx):
        _, link = queued_receiver(probe, ctx, queued, credit=credit)
        exactly(probe, link, credit)

    return case_function(run, name, doc, __name__)


grant_case("2.6.7/credit-single-grant", CREDIT_LIMIT)(
    _one_grant(
        3,
        5,
        "credit_single_grant",
        "5 messages queued, one grant of 3: exactly 3 transfers arrive.",
    )
)


for _credit, _queued in ((1, 3), (2, 5), (200, 250)):
    grant_case(f"2.6.7/credit-{_credit}", CREDIT_LIMIT)(
        _one_grant(
            _credit,
            _queued,
            f"credit_{_credit}",
            f"{_queued} messages queued, link-credit {_credit}: exactly {_credit} transfers.",
        )
    )


for _credit, _queued in ((3, 4), (5, 12), (10, 11), (50, 80), (100, 101)):
    grant_case(f"2.6.7/credit-exact-{_credit}", CREDIT_LIMIT)(
        _one_grant(
            _credit,
            _queued,
            f"credit_exact_{_credit}",
            f"{_queued} messages queued, one grant of {_credit}: exactly {_credit} transfers.",
        )
    )


@grant_case("2.6.7/credit-zero-no-transfer", CREDIT_LIMIT)
def credit_zero(probe, ctx):
    """Messages queued, receiver attached without credit, then an explicit grant of 0:
    no transfer may arrive."""
    _, link = queued_receiver(probe, ctx, 3, credit=0)
    probe.grant(link, 0)
    check_nothing_more(
        ctx, probe, link, lambda n: f"expected no transfer at link-credit 0; observed {n}", 1.0
    )


@grant_case(
    "2.6.7/credit-granted-before-messages",
    CREDIT_LIMIT + " Credit granted on an empty queue stays valid until used.",
)
def credit_before_messages(probe, ctx):
    """Grant 3 on an empty queue, then queue 6: exactly 3 transfers."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue, credit=3)
    probe.idle(0.2)
    fill(probe, ctx, queue, 6)
    exactly(probe, link, 3)


@grant_case(
    "2.6.7/credit-queue-fills-later",
    CREDIT_LIMIT + " Credit not used yet stays granted while the queue fills in steps.",
)
def credit_queue_fills_later(probe, ctx):
    """Grant 5 with 2 queued: 2 transfers; then 6 more queued: exactly 3 more (5 in all)."""
    queue, link = queued_receiver(probe, ctx, 2, credit=5)
    exactly(probe, link, 2, quiet=0.3)
    fill(probe, ctx, queue, 6)
    exactly(probe, link, 3)


@grant_case(
    "2.6.7/credit-zero-then-grant",
    CREDIT_LIMIT + " A later grant enables exactly the credit it gives.",
)
def credit_zero_then_grant(probe, ctx):
    """5 queued, attach without credit: nothing for 0.5 s; then grant 2: exactly 2."""
    _, link = queued_receiver(probe, ctx, 5)
    nothing_until_granted(
        ctx,
        probe,
        link,
        lambda n: f"expected no transfer before any credit; observed {n} (rabbitmq-amqp1.0#43)",
    )


@grant_case(
    "2.6.7/credit-grant-before-attach-reply",
    "A flow without delivery-count means the receiver has not seen the sender's attach: the "
    "sender uses initial-delivery-count (2.6.7). " + CREDIT_LIMIT,
    sentences=(*CREDIT, CREDIT_BEFORE_ATTACH),
)
def credit_grant_early(probe, ctx):
    """Credit 2 granted right after our attach, before the broker's attach arrives: exactly
    two transfers."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 4)
    session = probe.open_session()
    link = probe.attach_receiver(session, ctx.source(queue), wait=False)
    link.flow(link_credit=2)
    probe.flush()
    probe.wait_attached(link)
    exactly(probe, link, 2)


@grant_case(
    "2.6.7/credit-after-consumption",
    CREDIT_LIMIT + " New credit is granted relative to the receiver's delivery-count.",
)
def credit_topup(probe, ctx):
    """Grant 3, consume 3, grant 3 again (new credit only after the old is used): exactly 6
    in all out of 10 queued."""
    _, link = queued_receiver(probe, ctx, 10, credit=3)
    exactly(probe, link, 3)
    probe.grant(link, 3)
    exactly(probe, link, 3)


@grant_case(
    "2.6.7/credit-flow-state-reported",
    "The sender's flow carries its current delivery-count (2.7.4) and the link-credit the "
    "formula gives (2.6.7); an echo is answered (RabbitMQ 4's model) with that state.",
    sentences=(FLOW_DELIVERY_COUNT_SENDER, CREDIT_MATCHED, CREDIT_FORMULA, CREDIT_DECREMENT),
    model=RABBITMQ4,
    requires={"queues", "echo"},
)
def credit_state_echo(probe, ctx):
    """Grant 5 with 2 queued: 2 transfers; an echo then reports delivery-count +2 and
    link-credit 3 (or less, never more)."""
    dc0, flow = echo_after_receiving(probe, ctx, 2, granted=5, credit=3)
    ctx.check(
        serial_offset(dc0, flow.delivery_count) == 2,
        f"expected delivery-count {dc0} + 2 in the echo reply (2 deliveries sent); observed "
        f"{flow.delivery_count}",
    )
    ctx.check(
        flow.link_credit <= 3,
        f"expected link-credit at most 3 in the echo reply; observed {flow.link_credit}",
    )


def _small_frame_consumer(probe, ctx, queued: int, size: int, *, credit: int = 0):
    """A new queue holding `queued` messages of `size` bytes, and a receiver from it (granted
    `credit`) on a connection whose max-frame-size is 512, so that each delivery takes
    several frames: (that connection's probe, the receiver)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, queued, size=size)
    receiver = small_frame_probe(ctx)
    _, link = consumer(receiver, ctx, queue, credit=credit)
    return receiver, link


@grant_case(
    "2.6.7/credit-multi-frame-counts-once",
    "delivery-count is incremented whenever a Message is sent (not per transfer frame), and "
    "the sender MUST decrease link-credit by the same amount; its flow reports its current "
    "delivery-count (2.7.4).",
    sentences=(CREDIT_DECREMENT, FLOW_DELIVERY_COUNT_SENDER),
    model=RABBITMQ4,
    requires={"queues", "multi-frame", "echo"},
)
def credit_multi_frame(probe, ctx):
    """Our max-frame-size 512; three 3,000-byte messages queued; link-credit 2: exactly two
    whole (multi-frame) deliveries, and the echo reply reports link-credit 0 with
    delivery-count advanced by 2 (azure-uamqp-c PR #383 counted frames)."""
    receiver, link = _small_frame_consumer(probe, ctx, 3, 3000)
    dc0 = link.delivery_count
    since = receiver.mark()
    receiver.grant(link, 2)
    try:
        check_split(ctx, exactly(receiver, link, 2))
    except NoDelivery as exc:  # fewer whole deliveries: the echo says how the broker counted
        ctx.note(f"fewer than 2 whole deliveries: {exc}")
    started = {
        t.item.performative.delivery_id
        for t in receiver.frames_since(since, "transfer")
        if t.item.performative.delivery_id is not None
    }
    reply = echo_reply(receiver, link, 0)
    ctx.check(
        serial_offset(dc0, reply.delivery_count) == len(started),
        f"expected delivery-count {dc0} + {len(started)} in the echo reply ({len(started)} "
        f"messages sent, in several frames each); observed {reply.delivery_count} (credit "
        "counted per frame?)",
    )


@grant_case(
    "2.6.7/credit-multi-frame-exact",
    "Only the first transfer frame of a multi-frame delivery takes link-credit (2.6.7, "
    "2.6.14). " + CREDIT_LIMIT,
    requires={"queues", "multi-frame"},
)
def credit_multi_frame_exact(probe, ctx):
    """Our max-frame-size 512; five 2,500-byte messages queued; credit 3: exactly 3 whole
    deliveries, each in several frames."""
    receiver, link = _small_frame_consumer(probe, ctx, 5, 2500, credit=3)
    check_split(ctx, exactly(receiver, link, 3))


@grant_case(
    "2.6.7/credit-multi-frame-drain",
    "delivery-count is incremented once per delivery, not per transfer frame (2.6.7, "
    "2.6.14); a drain then advances it by exactly the credit left (drain reply).",
    sentences=(DRAIN_ADVANCE, CREDIT_DECREMENT),
    requires={"queues", "multi-frame", "drain-reply"},
)
def credit_multi_frame_drain(probe, ctx):
    """Our max-frame-size 512; five 3,000-byte messages queued; link-credit 10 with drain: all
    five (multi-frame) deliveries, then a drain reply with delivery-count +10. A broker that
    counts frames runs out of credit early (azure-uamqp-c PR #383)."""
    receiver, link = _small_frame_consumer(probe, ctx, 5, 3000)
    dc0 = link.delivery_count
    since = receiver.mark()
    receiver.grant(link, 10, drain=True)
    try:
        check_split(ctx, receiver.receive(link, 5))
    except NoDelivery as exc:  # the drain reply is what 2.6.7 requires; it says the rest
        ctx.note(f"fewer than 5 whole deliveries: {exc}")
    reply = drain_reply(receiver, link, since)
    ctx.check(
        serial_offset(dc0, reply.delivery_count) == 10,
        f"expected delivery-count {dc0} + 10 in the drain reply (credit 10 all consumed); "
        f"observed {reply.delivery_count}",
    )
