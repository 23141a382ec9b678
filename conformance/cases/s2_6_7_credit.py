"""2.6.7 link flow control: credit accuracy of the broker as a sender (RabbitMQ #2597 & co).

Owns the cases `2.6.7/credit-*`. The checker's link.credit.* rules judge every transfer
against every grant in every case; the cases add the scenario and exact counts.
"""

from __future__ import annotations

from conformance.cases.checks import (
    case_function,
    check_nothing_more,
    check_split,
    echo_reply,
    prefetch_receive,
    queued_receiver,
    small_frame_probe,
)
from conformance.cases.sentences import CREDIT_LIMIT
from conformance.registry import MUST, case
from conformance.steps import collect, consumer, drain_reply, expect_count, fill


def _one_grant(credit: int, queued: int, name: str, doc: str):
    def run(probe, ctx):
        _, link = queued_receiver(probe, ctx, queued, credit=credit)
        expect_count(probe, link, credit)

    return case_function(run, name, doc, __name__)


case("2.6.7/credit-single-grant", MUST, CREDIT_LIMIT, requires={"queues"})(
    _one_grant(
        3,
        5,
        "credit_single_grant",
        "5 messages queued, one grant of 3: exactly 3 transfers arrive.",
    )
)
for _credit, _queued in ((1, 3), (2, 5), (200, 250)):
    case(f"2.6.7/credit-{_credit}", MUST, CREDIT_LIMIT, requires={"queues"})(
        _one_grant(
            _credit,
            _queued,
            f"credit_{_credit}",
            f"{_queued} messages queued, link-credit {_credit}: exactly {_credit} transfers.",
        )
    )


@case(
    "2.6.7/credit-zero-no-transfer",
    MUST,
    CREDIT_LIMIT,
    requires={"queues"},
)
def credit_zero(probe, ctx):
    """Messages queued, receiver attached without credit, then an explicit grant of 0:
    no transfer may arrive."""
    _, link = queued_receiver(probe, ctx, 3, credit=0)
    probe.grant(link, 0)
    check_nothing_more(ctx, probe, link, lambda n: f"{n} transfers with link-credit 0", 1.0)


@case(
    "2.6.7/credit-regrant-in-flight",
    MUST,
    CREDIT_LIMIT + " A receiver may grant again at any time; the new link-credit replaces "
    "the old (link-credit(snd) := delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)).",
    requires={"queues"},
    budget=120.0,
)
def credit_regrant_in_flight(probe, ctx):
    """The proton prefetch pattern over 2,000 messages: link-credit 2 re-granted after every
    delivery while transfers are in flight, with a small (4-frame) session window. A broker
    that adds the new grant to the old credit over-delivers (RabbitMQ #2597)."""
    prefetch_receive(probe, ctx, 2, 2000)


@case(
    "2.6.7/credit-reduced-in-flight",
    MUST,
    "The receiver may reduce credit while transfers are in flight; those are legal, but once "
    "the sender has applied the new flow (its echo reply proves it) " + CREDIT_LIMIT,
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
    ctx.check(total <= 50, f"{total} transfers for a grant of 50")
    horizon = reply.delivery_count + reply.link_credit
    ctx.note(f"{total} in flight before the reduction applied; echo reply horizon {horizon}")


@case(
    "2.6.7/credit-multi-frame-counts-once",
    MUST,
    "delivery-count: incremented ... for each delivery (not for each transfer frame); "
    "only the first transfer frame of a multi-frame delivery consumes link-credit (2.6.7, "
    "2.6.14).",
    requires={"queues", "multi-frame", "echo"},
)
def credit_multi_frame(probe, ctx):
    """Our max-frame-size 512; three 3,000-byte messages queued; link-credit 2: exactly two
    whole (multi-frame) deliveries, and the echo reply reports link-credit 0 with
    delivery-count advanced by 2 (azure-uamqp-c PR #383 counted frames)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 3, size=3000)
    receiver = small_frame_probe(ctx)
    _, link = consumer(receiver, ctx, queue)
    dc0 = link.delivery_count
    receiver.grant(link, 2)
    check_split(ctx, expect_count(receiver, link, 2))
    reply = echo_reply(receiver, link, 0)
    ctx.check(
        reply.link_credit == 0 and (reply.delivery_count - dc0) % 2**32 == 2,
        f"echo reply delivery-count {reply.delivery_count} (start {dc0}), link-credit "
        f"{reply.link_credit}: credit counted per frame?",
    )


@case(
    "2.6.7/credit-links-independent",
    MUST,
    "Link credit is per link: each link has its own delivery-count and link-credit (2.6.7); "
    + CREDIT_LIMIT,
    requires={"queues"},
)
def credit_links_independent(probe, ctx):
    """Five receivers on one session, credits 1..5, ten messages behind each: every link
    gets exactly its own credit."""
    session = probe.open_session()
    links = []
    for credit in range(1, 6):
        queue = ctx.queue(f"l{credit}")
        fill(probe, ctx, queue, 10)
        _, link = consumer(probe, ctx, queue, session=session)
        links.append((credit, link))
    for credit, link in links:
        probe.grant(link, credit)
    probe.idle(1.0)
    for credit, link in links:
        got = collect(probe, link, quiet=0.3)
        ctx.check(len(got) == credit, f"link with credit {credit} got {len(got)} transfers")


@case(
    "2.6.7/credit-grant-before-attach-reply",
    MUST,
    "A flow without delivery-count means the receiver has not seen the sender's attach: the "
    "sender uses initial-delivery-count (2.6.7). " + CREDIT_LIMIT,
    requires={"queues"},
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
    expect_count(probe, link, 2)


@case(
    "2.6.7/credit-after-consumption",
    MUST,
    CREDIT_LIMIT + " New credit is granted relative to the receiver's delivery-count.",
    requires={"queues"},
)
def credit_topup(probe, ctx):
    """Grant 3, consume 3, grant 3 again (new credit only after the old is used): exactly 6
    in all out of 10 queued."""
    _, link = queued_receiver(probe, ctx, 10, credit=3)
    expect_count(probe, link, 3)
    probe.grant(link, 3)
    expect_count(probe, link, 3)


@case(
    "2.6.7/credit-flow-state-reported",
    MUST,
    "The sender's flow carries its delivery-count and link-credit (2.7.4); an echo is "
    "answered with the current state, which must agree with what it sent.",
    requires={"queues", "echo"},
)
def credit_state_echo(probe, ctx):
    """Grant 5 with 2 queued: 2 transfers; an echo then reports delivery-count +2 and
    link-credit 3 (or less, never more)."""
    _, link = queued_receiver(probe, ctx, 2)
    dc0 = link.delivery_count
    probe.grant(link, 5)
    probe.receive(link, 2)
    flow = echo_reply(probe, link, 3)
    ctx.check(
        (flow.delivery_count - dc0) % 2**32 == 2,
        f"delivery-count {flow.delivery_count} after 2 deliveries from {dc0}",
    )
    ctx.check(flow.link_credit <= 3, f"link-credit {flow.link_credit} after a grant of 3")


def _random_schedule(seed: int, drain: bool, echo: bool, steps: int = 200):
    import random

    rng = random.Random(seed)
    kinds = ["grant", "grant", "reduce", "settle", "pump"]
    kinds += ["drain"] if drain else []
    kinds += ["echo"] if echo else []
    return [(rng.choice(kinds), rng.randint(0, 6)) for _ in range(steps)]


SCHEDULE_SEEDS = range(1, 7)


def _broker_must_violation(probe) -> bool:
    return any(v.origin == "server" and v.level == MUST for v in probe.violations)


@case(
    "2.6.7/credit-random-schedules",
    MUST,
    CREDIT_LIMIT + " Each new grant replaces the old; drain uses up the credit; an echo "
    "reports the current state.",
    requires={"queues"},
    budget=120.0,
)
def credit_random_schedules(probe, ctx):
    """Six seeded random schedules (seeds 1-6, 200 operations each, a fresh link each) of
    grants, reductions, drains, echoes and settlements over one queue of 1,500 messages;
    the checker judges every transfer and flow. Stops at the first broker violation."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1500)
    session = probe.open_session()
    drain, echo = ctx.profile.has("drain-reply"), ctx.profile.has("echo")
    for seed in SCHEDULE_SEEDS:
        _, link = consumer(probe, ctx, queue, session=session)
        received = _run_schedule(probe, link, _random_schedule(seed, drain, echo))
        ctx.note(f"seed {seed}: {received} deliveries")
        if _broker_must_violation(probe):
            return
        probe.detach(link)


def _run_schedule(probe, link, schedule) -> int:
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


@case(
    "2.6.7/credit-multi-frame-drain",
    MUST,
    "delivery-count is incremented once per delivery, not per transfer frame (2.6.7, "
    "2.6.14); a drain then advances it by exactly the credit left (drain reply).",
    requires={"queues", "multi-frame", "drain-reply"},
)
def credit_multi_frame_drain(probe, ctx):
    """Our max-frame-size 512; five 3,000-byte messages queued; link-credit 10 with drain: all
    five (multi-frame) deliveries, then a drain reply with delivery-count +10. A broker that
    counts frames runs out of credit early (azure-uamqp-c PR #383)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 5, size=3000)
    receiver = small_frame_probe(ctx)
    _, link = consumer(receiver, ctx, queue)
    dc0 = link.delivery_count
    since = receiver.mark()
    receiver.grant(link, 10, drain=True)
    check_split(ctx, receiver.receive(link, 5))
    reply = drain_reply(receiver, link, since)
    ctx.check(
        (reply.delivery_count - dc0) % 2**32 == 10,
        f"drain reply delivery-count {reply.delivery_count} from {dc0} after 5 deliveries and "
        f"a drain of credit 10: expected {dc0 + 10} (credit counted per frame?)",
    )
