"""2.6.7 link flow control: credit is per link. Receivers on one session or on two, with
different grants, each get exactly their own credit; a drain applies to its link only; and
the broker as the receiver of a publisher keeps its own credit arithmetic straight (a
publisher's delivery-count wrapping past 2^32, flows that never count deliveries we did
not send). The broker is the links' sender (2.6.7: no transfer beyond credit, the credit
formula; fewer are recorded) or, for a publisher, their receiver (2.7.4: its flows carry
the last delivery-count it knows of ours).

Owns the cases `2.6.7/credit-*` about several links and `2.6.7/publisher-*` about a
publisher's credit (`2.6.7/publisher-gets-credit` is in s2_7_performatives.py).
"""

from __future__ import annotations

from amqpspec.amqp10.serial import serial_add, serial_gt, serial_offset
from amqpspec.conformance.probe.observed import brief
from amqpspec.conformance.run.registry import MUST, case
from amqpspec.conformance.steps.credit import drain, drain_case, grant_case
from amqpspec.conformance.steps.deliveries import (
    check_nothing_more,
    collect,
    consumed_exactly,
    exactly,
    queued_receiver,
    settle_all,
)
from amqpspec.conformance.steps.links import consumer, publisher, wait_credit
from amqpspec.conformance.steps.queues import body, fill
from amqpspec.conformance.steps.sentences import (
    CREDIT_LIMIT,
)
from amqpspec.conformance.verdicts import CaseFailed

RECEIVER_COUNT = "2.7.4/flow.delivery-count.3"  # receiver: the sender's last known count


@grant_case(
    "2.6.7/credit-links-independent",
    "Link credit is per link: each link has its own delivery-count and link-credit (2.6.7); "
    + CREDIT_LIMIT,
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
        ctx.check(
            len(got) <= credit,
            f"expected at most {credit} transfers on the link granted {credit}; observed "
            f"{len(got)}",
        )
        if len(got) < credit:
            ctx.note(f"the link granted {credit} got {len(got)} (fewer: no sentence requires)")


@grant_case(
    "2.6.7/credit-many-links-one-session",
    "Each link has its own delivery-count and link-credit (2.6.7). " + CREDIT_LIMIT,
)
def credit_many_links(probe, ctx):
    """Twelve receivers on one session, credits 0..11 (cycling 0, 1, 2, 3), five messages
    behind each: every link gets exactly min(credit, 5)."""
    session = probe.open_session()
    links = []
    for index in range(12):
        queue = ctx.queue(f"m{index}")
        fill(probe, ctx, queue, 5)
        _, link = consumer(probe, ctx, queue, session=session)
        links.append((index % 4 + (index // 4) * 2, link))
    for credit, link in links:
        if credit:
            probe.grant(link, credit)
    probe.idle(1.0)
    for credit, link in links:
        got = collect(probe, link, 0.2)
        settle_all(probe, link, got)
        ctx.check(
            len(got) <= credit,
            f"expected at most {credit} transfers on the link granted {credit}; observed "
            f"{len(got)}",
        )
        if len(got) < min(credit, 5):
            ctx.note(f"the link granted {credit} got {len(got)} (fewer: no sentence requires)")


@grant_case(
    "2.6.7/credit-two-sessions-independent",
    "Link credit is per link, whatever session carries it (2.6.7). " + CREDIT_LIMIT,
)
def credit_two_sessions(probe, ctx):
    """One queue, two receivers on two sessions with credit 2 and 3; 10 queued: exactly 5
    deliveries in all, at most 2 and 3 per link."""
    queue, first = queued_receiver(probe, ctx, 10, credit=2)
    _, second = consumer(probe, ctx, queue, credit=3)
    probe.idle(1.0)
    a, b = collect(probe, first, 0.3), collect(probe, second, 0.3)
    settle_all(probe, first, a)
    settle_all(probe, second, b)
    ctx.check(
        len(a) <= 2 and len(b) <= 3,
        f"expected at most 2 and 3 transfers on links granted 2 and 3; observed {len(a)} and "
        f"{len(b)}",
    )
    if len(a) + len(b) < 5:
        ctx.note(f"{len(a) + len(b)} deliveries for 5 credits, 10 queued (fewer: recorded)")


@drain_case(
    "2.6.7/credit-drained-link-other-unaffected",
    "A drain applies to the link it was sent for; other links keep their credit (2.6.7).",
)
def credit_drain_one_link(probe, ctx):
    """Two receivers on one session with credit 4 on empty queues; drain the first; then
    queue 6 behind each: the first gets none, the second exactly 4."""
    session = probe.open_session()
    q1, q2 = ctx.queue("a"), ctx.queue("b")
    _, first = consumer(probe, ctx, q1, credit=4, session=session)
    _, second = consumer(probe, ctx, q2, credit=4, session=session)
    drain(probe, first, 4)
    fill(probe, ctx, q1, 6)
    fill(probe, ctx, q2, 6)
    check_nothing_more(
        ctx,
        probe,
        first,
        lambda n: f"expected no transfer on the drained link (link-credit 0); observed {n}",
        quiet=0.5,
    )
    exactly(probe, second, 4)


@case(
    "2.6.7/publisher-delivery-count-wrap",
    MUST,
    "When the flow state is being sent from the Receiver Endpoint to the Sender Endpoint "
    "delivery-count MUST be set to the last known value of the corresponding Sending "
    "Endpoint: also across the 2^32 wrap of a sender's delivery-count (RFC 1982).",
    sentences=(RECEIVER_COUNT,),
    role="receiver",
    requires={"queues"},
)
def publisher_delivery_count_wrap(probe, ctx):
    """A publisher attached with initial-delivery-count 2^32 - 3 sends 8 unsettled
    messages across the wrap: all 8 accepted and queued; the broker's flows keep granting."""
    queue = ctx.queue()
    start = serial_add(0, -3)  # 2^32 - 3
    since = probe.mark()
    _, sender = publisher(probe, ctx, queue, initial_delivery_count=start)
    probe.publish(sender, 8, lambda i: body(i), timeout=10.0)
    for frame in probe.frames_since(since, "flow"):
        flow = frame.item.performative
        if flow.handle is None or flow.delivery_count is None:
            continue
        ctx.check(
            serial_offset(start, flow.delivery_count) <= 8,
            f"expected delivery-count {start} + 0..8 (what we sent, across the wrap) in the "
            f"broker's flows; observed {brief(frame)}",
        )
    ctx.check(
        serial_offset(start, sender.delivery_count) == 8,
        f"expected our delivery-count {start} + 8; it is {sender.delivery_count}",
    )
    consumed_exactly(probe, ctx, queue, 8, credit=10)


@case(
    "2.6.7/publisher-credit-respected-by-broker-flow",
    MUST,
    "When the flow state is being sent from the Receiver Endpoint to the Sender Endpoint "
    "delivery-count MUST be set to the last known value of the corresponding Sending "
    "Endpoint: never above what we sent.",
    sentences=(RECEIVER_COUNT,),
    role="receiver",
    requires={"queues"},
)
def publisher_credit_flows(probe, ctx):
    """Publish 300 unsettled messages; every flow the broker sends for the sender link has
    delivery-count at most our delivery-count (it cannot count deliveries we did not send)."""
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    since = probe.mark()
    wait_credit(probe, sender)
    probe.publish(sender, 300, lambda i: body(i), timeout=20.0)
    for frame in probe.frames_since(since, "flow"):
        flow = frame.item.performative
        if flow.handle is None or flow.delivery_count is None:
            continue
        if serial_gt(flow.delivery_count, sender.delivery_count):
            raise CaseFailed(
                f"expected delivery-count at most {sender.delivery_count} (what we sent) in the "
                f"broker's flows; observed {brief(frame)}"
            )
