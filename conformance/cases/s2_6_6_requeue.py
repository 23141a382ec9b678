"""2.6.6 / 3.4 / 3.2.1 requeue, more scenarios: partly settled deliveries when the session
ends, many unsettled deliveries on a TCP drop, a close with an error, pre-settled
deliveries never coming back, deliveries still held by another link not handed out twice,
and the redelivery marks (first-acquirer, delivery-count) on requeued messages.

Owns the cases `2.6.6/requeue-more-*` and `3.2.1/redelivery-more-*`.
"""

from __future__ import annotations

from amqp10.composites import Error
from amqp10.spec import SndSettleMode
from conformance.cases.checks import consume_again, queued_receiver, take_unsettled, texts
from conformance.cases.sentences import REQUEUE
from conformance.cases.sentences import REQUEUE_NEEDS as NEEDS
from conformance.registry import MUST, SHOULD, case
from conformance.steps import collect, header_of, message_text, unsettled_consumer


def _redelivered(ctx, queue, expected: int):
    return consume_again(ctx, queue, expected, 0.4, timeout=5.0)


@case("2.6.6/requeue-more-partly-settled-session-end", MUST, REQUEUE, requires=NEEDS)
def partly_settled_session_end(probe, ctx):
    """5 unsettled; 2 accepted and settled; the session ends: exactly the other 3 back."""
    queue = ctx.queue()
    session, link, got = take_unsettled(probe, ctx, queue, 5)
    for delivery in got[:2]:
        probe.settle(link, delivery)
    probe.end(session)
    back = _redelivered(ctx, queue, 3)
    ctx.check(
        texts(back) == texts(got[2:]),
        f"{[message_text(d) for d in back]} came back, expected the 3 unsettled",
    )


@case("2.6.6/requeue-more-many-tcp-drop", MUST, REQUEUE, requires=NEEDS)
def many_tcp_drop(probe, ctx):
    """100 unsettled deliveries, then the TCP connection dropped: all 100 come back."""
    queue = ctx.queue()
    take_unsettled(probe, ctx, queue, 100)
    probe.disconnect()
    back = _redelivered(ctx, queue, 100)
    ctx.check(len({message_text(d) for d in back}) == 100, f"{len(back)} of 100 came back")


@case("2.6.6/requeue-more-close-with-error", MUST, REQUEUE, requires=NEEDS)
def close_with_error(probe, ctx):
    """3 unsettled, the connection closed with an error (amqp:internal-error): all 3
    come back."""
    queue = ctx.queue()
    take_unsettled(probe, ctx, queue, 3)
    probe.close(Error(condition="amqp:internal-error", description="amqpspec test"))
    back = _redelivered(ctx, queue, 3)
    ctx.check(len(back) == 3, f"{len(back)} of 3 came back")


@case("2.6.6/requeue-more-detach-with-error", MUST, REQUEUE, requires=NEEDS)
def detach_with_error(probe, ctx):
    """3 unsettled, the link detached with an error: all 3 come back."""
    queue = ctx.queue()
    _, link, _ = take_unsettled(probe, ctx, queue, 3)
    link.detach(closed=True, error=Error(condition="amqp:internal-error"))
    probe.flush()
    probe.idle(0.3)
    back = _redelivered(ctx, queue, 3)
    ctx.check(len(back) == 3, f"{len(back)} of 3 came back")


@case(
    "2.6.6/requeue-more-presettled-not-redelivered",
    MUST,
    "A delivery sent settled (snd-settle-mode settled) is done at the sender when sent "
    "(at-most-once, 2.6.12): it is not delivered again when the link goes away.",
    requires={"queues", "requeue-on-detach"},
)
def presettled_not_redelivered(probe, ctx):
    """A receiver with snd-settle-mode settled gets 3; detach: a new consumer gets only
    the 2 never sent."""
    queue, link = queued_receiver(probe, ctx, 5, snd_settle_mode=SndSettleMode.SETTLED)
    if link.remote_attach.snd_settle_mode != SndSettleMode.SETTLED:
        from conformance.verdicts import Unsupported

        raise Unsupported("the broker did not agree to snd-settle-mode settled")
    probe.grant(link, 3)
    got = probe.receive(link, 3, settle=False)
    probe.detach(link)
    back = _redelivered(ctx, queue, 2)
    ctx.check(len(back) == 2, f"{len(back)} came back, expected the 2 never sent")
    overlap = {message_text(d) for d in back} & {message_text(d) for d in got}
    ctx.check(not overlap, f"pre-settled deliveries came back: {sorted(overlap)}")


@case(
    "2.6.6/requeue-more-held-not-shared",
    SHOULD,
    "A message delivered unsettled to one link is acquired by it (3.2.1 first-acquirer); "
    "the queue does not hand it to another consumer while that link holds it.",
    requires=NEEDS,
)
def held_not_shared(probe, ctx):
    """2 queued; link A takes both unsettled; link B on another connection with credit 5
    gets nothing while A holds them; A detaches: B gets both."""
    queue, holder = queued_receiver(probe, ctx, 2, unsettled=True, credit=2)
    probe.receive(holder, 2, settle=False)
    other = ctx.probe()
    _, waiting = unsettled_consumer(other, ctx, queue, credit=5)
    early = collect(other, waiting, 0.5)
    ctx.check(not early, f"{len(early)} held deliveries handed to another consumer")
    probe.detach(holder)
    late = other.receive(waiting, 2, timeout=5.0)
    ctx.check(len(late) == 2, f"{len(late)} of 2 after the holder detached")


@case(
    "3.2.1/redelivery-more-delivery-count",
    SHOULD,
    "delivery-count: the number of unsuccessful previous attempts to deliver this message; "
    "a message requeued after its link went away unsettled has delivery-count >= 1 when "
    "the broker counts it (3.2.1).",
    requires=NEEDS | {"redelivery-marks"},
)
def redelivery_delivery_count(probe, ctx):
    """1 message received unsettled, link detached, received again: header delivery-count
    >= 1 (or first-acquirer false at least)."""
    queue = ctx.queue()
    _, link, _ = take_unsettled(probe, ctx, queue, 1)
    probe.detach(link)
    back = _redelivered(ctx, queue, 1)
    header = header_of(back[0])
    count = (header.delivery_count if header is not None else 0) or 0
    first = header.first_acquirer if header is not None else None
    ctx.check(
        count >= 1 or first is False,
        f"redelivery not marked: header delivery-count {count}, first-acquirer {first}",
    )


@case(
    "3.2.1/redelivery-more-first-delivery-marks",
    MUST,
    "first-acquirer / delivery-count: a message never delivered before has delivery-count 0 "
    "(default) — a broker must not mark a first delivery as a redelivery (3.2.1).",
    requires={"queues"},
)
def first_delivery_marks(probe, ctx):
    """A fresh message's first delivery has header delivery-count 0 (or no header)."""
    _, link = queued_receiver(probe, ctx, 1, credit=1)
    header = header_of(probe.next_transfer(link))
    count = header.delivery_count if header is not None else 0
    ctx.check(not count, f"first delivery has header delivery-count {count}")


@case(
    "3.2.1/redelivery-more-after-tcp-drop-marks",
    SHOULD,
    "first-acquirer: if true, the message has not been acquired by any other link; a "
    "message redelivered after its first consumer's connection dropped is not "
    "first-acquirer (3.2.1).",
    requires=NEEDS | {"redelivery-marks"},
)
def redelivery_marks_tcp_drop(probe, ctx):
    """1 message unsettled, TCP dropped, redelivered: first-acquirer is not true."""
    queue = ctx.queue()
    take_unsettled(probe, ctx, queue, 1)
    probe.disconnect()
    back = _redelivered(ctx, queue, 1)
    header = header_of(back[0])
    ctx.check(
        header is not None and not header.first_acquirer,
        f"redelivery header {header!r}",
    )
