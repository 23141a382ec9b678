"""2.6.7 link flow control: re-grants and reductions while transfers are in flight. The
receiver's newest flow sets the credit (link-credit(snd) := delivery-count(rcv) +
link-credit(rcv) - delivery-count(snd)); a broker that adds a new grant to the old
over-delivers (RabbitMQ #2597). Covers the proton prefetch pattern at several prefetch
sizes, repeated and growing grants of one horizon, re-grants after a batch, credit reduced
(to zero) with echo, and seeded random schedules of grants, drains and echoes.

Owns the cases `2.6.7/credit-*` about re-grants. The checker's link.credit.* rules judge
every transfer against every grant. The broker is the link's sender: every case rests on
2.6.7 (flow-control.6, no transfer beyond credit; flow-control.2, the credit formula); an
echo answered is RabbitMQ 4's model (DIFFERS without one).
"""

from __future__ import annotations

from amqpspec.conformance.run.registry import case_function
from amqpspec.conformance.steps.credit import (
    broker_violated,
    check_drains_answered,
    echo_reply,
    grant_case,
    prefetch_receive,
)
from amqpspec.conformance.steps.deliveries import (
    check_nothing_more,
    collect,
    exactly,
    queued_receiver,
    settle_all,
)
from amqpspec.conformance.steps.links import consumer
from amqpspec.conformance.steps.queues import body, fill
from amqpspec.conformance.steps.sentences import (
    CREDIT,
    CREDIT_LIMIT,
    DRAIN_ADVANCE,
    RABBITMQ4,
)
from amqpspec.conformance.verdicts import NoDelivery

REPLACES = (
    " The receiver's flow sets the credit: link-credit(snd) := delivery-count(rcv) + "
    "link-credit(rcv) - delivery-count(snd); a new grant replaces the old, it does not add."
)


@grant_case(
    "2.6.7/credit-regrant-in-flight",
    CREDIT_LIMIT + " A receiver may grant again at any time; the new link-credit replaces "
    "the old (link-credit(snd) := delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)).",
    budget=120.0,
)
def credit_regrant_in_flight(probe, ctx):
    """The proton prefetch pattern over 2,000 messages: link-credit 2 re-granted after every
    delivery while transfers are in flight, with a small (4-frame) session window. A broker
    that adds the new grant to the old credit over-delivers (RabbitMQ #2597)."""
    prefetch_receive(probe, ctx, 2, 2000)


def _prefetch(prefetch: int, count: int):
    def run(probe, ctx):
        prefetch_receive(probe, ctx, prefetch, count)

    doc = (
        f"The proton prefetch pattern at prefetch {prefetch} over {count} messages: "
        f"link-credit {prefetch} re-granted after every delivery with transfers in flight, "
        "4-frame session window; the checker judges every transfer (RabbitMQ #2597)."
    )
    return case_function(run, f"credit_prefetch_{prefetch}", doc, __name__)


for _prefetch_n, _count in ((1, 1000), (10, 1000)):
    grant_case(
        f"2.6.7/credit-prefetch-{_prefetch_n}-regrant",
        CREDIT_LIMIT + REPLACES,
        budget=90.0,
    )(_prefetch(_prefetch_n, _count))


ROUNDS = 8  # a racy over-delivery shows in some rounds only: repeat on fresh links


def _repeated_grants(probe, ctx, credits: tuple[int, ...], queued: int) -> None:
    """ROUNDS fresh receivers on one queue; each gets the flows `credits` in a row before
    anything is read (so all carry the same delivery-count): exactly the last credit
    arrives. Stops at the first round the checker flags."""
    queue = ctx.queue()
    fill(probe, ctx, queue, queued * ROUNDS)
    session = probe.open_session()
    last = credits[-1]
    for round_no in range(ROUNDS):
        _, link = consumer(probe, ctx, queue, session=session)
        for credit in credits:  # nothing is read between the grants: same delivery-count
            probe.grant(link, credit)
        got = probe.receive(link, last)
        extra = collect(probe, link, 0.3)
        settle_all(probe, link, extra)
        ctx.check(
            not extra,
            f"round {round_no + 1}: expected {last} transfers after flows with link-credit "
            f"{credits} and one delivery-count (the last grant replaces the others); observed "
            f"{len(got) + len(extra)}",
        )
        if broker_violated(probe):
            return
        probe.detach(link)


@grant_case("2.6.7/credit-same-grant-repeated", CREDIT_LIMIT + REPLACES)
def credit_same_grant_repeated(probe, ctx):
    """Eight rounds on fresh links: five flows in a row, each delivery-count d0 +
    link-credit 2 (one horizon): exactly 2 transfers per round, not 10 (a broker that adds
    grants over-delivers)."""
    _repeated_grants(probe, ctx, (2, 2, 2, 2, 2), 10)


@grant_case("2.6.7/credit-grow-grant", CREDIT_LIMIT + REPLACES)
def credit_grow_grant(probe, ctx):
    """Eight rounds on fresh links: grants 1, 3, 6 in a row before any transfer is read
    (same delivery-count): the last replaces the others, so exactly 6 per round."""
    _repeated_grants(probe, ctx, (1, 3, 6), 12)


@grant_case(
    "2.6.7/credit-regrant-after-batch",
    CREDIT_LIMIT + REPLACES,
    budget=60.0,
)
def credit_regrant_after_batch(probe, ctx):
    """500 queued; grant 10, receive 5, grant 10 again (horizon +5), repeated: every
    transfer within the latest grant, all 500 arrive."""
    _, link = queued_receiver(probe, ctx, 500, credit=10)
    received = 0
    while received < 500:
        step = min(5, 500 - received)
        probe.receive(link, step, timeout=10.0)
        received += step
        probe.grant(link, 10)
    check_nothing_more(ctx, probe, link, lambda n: f"{n} transfers beyond the 500 queued")


@grant_case(
    "2.6.7/credit-reduced-in-flight",
    "The receiver may reduce credit while transfers are in flight; those are legal, but once "
    "the sender has applied the new flow (its echo reply proves it) " + CREDIT_LIMIT,
    model=RABBITMQ4,
    requires={"queues", "echo"},
)
def credit_reduced(probe, ctx):
    """50 queued, grant 50 then at once link-credit 0 with echo: after the broker's echo
    reply no transfer may follow; never more than 50 in all."""
    _, link = queued_receiver(probe, ctx, 50, credit=50)
    reply = echo_reply(probe, link, 0)
    before = len(probe.transfers(link))
    after_reply = collect(probe, link, quiet=1.0)
    total = before + len(after_reply)
    ctx.check(total <= 50, f"expected at most 50 transfers for a grant of 50; observed {total}")
    horizon = reply.delivery_count + reply.link_credit
    ctx.note(f"{total} in flight before the reduction applied; echo reply horizon {horizon}")


@grant_case(
    "2.6.7/credit-reduce-to-zero-then-grant",
    "A receiver may reduce credit to zero while transfers are in flight; once the sender's "
    "echo reply shows it applied that, a new grant of n allows exactly n more. " + CREDIT_LIMIT,
    model=RABBITMQ4,
    requires={"queues", "echo"},
)
def credit_reduce_then_grant(probe, ctx):
    """60 queued, grant 20, at once link-credit 0 with echo; after the echo reply and the
    transfers before it, grant 3: exactly 3 more."""
    _, link = queued_receiver(probe, ctx, 60, credit=20)
    echo_reply(probe, link, 0)
    in_flight = collect(probe, link, 0.5)
    settle_all(probe, link, in_flight)
    ctx.check(
        len(in_flight) <= 20,
        f"expected at most 20 transfers for a grant of 20; observed {len(in_flight)}",
    )
    ctx.note(f"{len(in_flight)} transfers were in flight before credit 0 applied")
    probe.grant(link, 3)
    exactly(probe, link, 3)


def _random_schedule(seed: int, drain: bool, echo: bool, steps: int = 200):
    import random

    rng = random.Random(seed)
    kinds = ["grant", "grant", "reduce", "settle", "pump", "publish"]
    kinds += ["drain"] if drain else []
    kinds += ["echo"] if echo else []
    return [(rng.choice(kinds), rng.randint(0, 6)) for _ in range(steps)]


SCHEDULE_SEEDS = range(1, 7)
SCHEDULE_STOCK = 20  # messages queued before each schedule; `publish` steps add more


@grant_case(
    "2.6.7/credit-random-schedules",
    CREDIT_LIMIT + " Each new grant replaces the old; drain uses up the credit; an echo "
    "reports the current state.",
    sentences=(*CREDIT, DRAIN_ADVANCE),
    budget=120.0,
)
def credit_random_schedules(probe, ctx):
    """Six seeded random schedules (seeds 1-6, 200 operations each, a fresh link each) of
    grants, reductions, drains, echoes, settlements and publishes over one queue that holds
    a few messages at the start of each schedule and runs dry in between: grants made while
    the queue is empty must not add up (RabbitMQ #2597) when messages arrive. The checker
    judges every transfer and flow. Stops at the first broker violation."""
    queue = ctx.queue()
    session = probe.open_session()
    publisher = probe.attach_sender(probe.open_session(), ctx.target_address(queue))
    published = 0

    def publish(count: int) -> None:
        nonlocal published
        probe.publish(publisher, count, lambda i: body(published + i))
        published += count

    drain, echo = ctx.profile.has("drain-reply"), ctx.profile.has("echo")
    for seed in SCHEDULE_SEEDS:
        publish(SCHEDULE_STOCK)
        _, link = consumer(probe, ctx, queue, session=session)
        try:
            received = _run_schedule(probe, link, _random_schedule(seed, drain, echo), publish)
        except NoDelivery as gone:  # the link went away: FAILED if a drain was unanswered
            check_drains_answered(probe, link, gone)
        ctx.note(f"seed {seed}: {received} deliveries")
        if broker_violated(probe):
            return
        probe.detach(link)


def _run_schedule(probe, link, schedule, publish) -> int:
    received = 0
    for kind, amount in schedule:
        probe.fail_if_gone(link)  # a broker that ended the session fails the case here
        if kind == "grant":
            probe.grant(link, amount)
        elif kind == "reduce":
            probe.grant(link, max(0, link.link_credit - amount))
        elif kind == "drain":
            probe.grant(link, amount, drain=True)
        elif kind == "echo":
            probe.grant(link, link.link_credit, echo=True)
        elif kind == "publish":
            publish(amount)
        elif kind == "settle":
            for delivery in probe.transfers(link):
                received += 1
                if not delivery.settled:
                    probe.settle(link, delivery)
        probe.pump(0.005)
    for delivery in collect(probe, link, 0.3):
        received += 1
        if not delivery.settled:
            probe.settle(link, delivery)
    return received
