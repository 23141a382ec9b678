"""2.6.6 / 2.6.4 / 3.4 requeue: unsettled deliveries go back to the queue when their link,
session, connection or TCP stream goes away (at-least-once) — also when only some were
settled, when many were in flight, when the close or detach carries an error — and settled
or pre-settled ones do not; a delivery still held by another link is not handed out twice.
No sentence requires the requeue (3.3: the source's default-outcome decides what happens
to a delivery the receiver never settled; a source's expiry-policy session-end keeps the
terminus until the session ends): it is RabbitMQ 4's model, so these cases are MODEL
(DIFFERS when the broker does otherwise). What the spec does say is checked on the way: a
message that reached accepted is never sent again (3.5.2, MUST: FAILED), nor is an
acquired one handed to another link while acquired (3.3, no keyword: the model's).

Owns the cases `2.6.6/*` and `2.6.4/*` (the redelivery marks are in s3_2_1_redelivery.py).
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Error
from amqpspec.amqp10.spec import SndSettleMode
from amqpspec.conformance.run.registry import MODEL, case
from amqpspec.conformance.steps.deliveries import (
    check_requeued,
    collect,
    collect_again,
    consume_again,
    queued_receiver,
    take_unsettled,
    take_unsettled_bodies,
)
from amqpspec.conformance.steps.links import unsettled_consumer
from amqpspec.conformance.steps.queues import message_text, texts
from amqpspec.conformance.steps.sentences import NOT_RESENT, RABBITMQ4, REQUEUE
from amqpspec.conformance.steps.sentences import REQUEUE_NEEDS as NEEDS


def _requeued_after(probe, ctx, link_goes_away) -> None:
    """3 unsettled deliveries, then `link_goes_away(session, link)`: all 3 come back."""
    queue = ctx.queue()
    session, link, bodies = take_unsettled_bodies(probe, ctx, queue)
    link_goes_away(session, link)
    check_requeued(ctx, queue, bodies)


def _gone(probe, step, endpoint, **fields) -> None:
    """Detach the link or end the session (`step`) without waiting for the broker's answer
    (the requeue after it is the model's point, the answer is not), then let it act."""
    step(endpoint, wait=False, **fields)
    probe.idle(0.3)


def _redelivered(ctx, queue, expected: int):
    return consume_again(ctx, queue, expected, 0.4, timeout=5.0)


def _no_accepted_resent(ctx, queue, accepted, unsettled) -> None:
    """A new consumer of `queue`: none of the `accepted` messages comes again (3.5.2,
    MUST), and the `unsettled` ones do (the model)."""
    back = collect_again(ctx, queue, len(unsettled) + len(accepted), 0.5)
    resent = sorted({message_text(d) for d in back} & {message_text(d) for d in accepted})
    ctx.must(
        not resent,
        f"expected none of the {len(accepted)} accepted messages again; observed {resent}",
        NOT_RESENT,
    )
    ctx.check(
        texts(back) == texts(unsettled),
        f"expected the {len(unsettled)} unsettled messages back; observed "
        f"{[message_text(d) for d in back]}",
    )


@case("2.6.6/requeue-after-detach-closed", MODEL, REQUEUE, model=RABBITMQ4, requires=NEEDS)
def requeue_detach_closed(probe, ctx):
    """3 deliveries received unsettled, link detached with closed=true: all 3 come back."""
    _requeued_after(probe, ctx, lambda _, link: _gone(probe, probe.detach, link, closed=True))


@case(
    "2.6.4/requeue-after-detach-suspended",
    MODEL,
    "detach with closed=false suspends the link; a broker that does not resume links treats "
    "it as closed and returns unsettled deliveries to the queue (RabbitMQ 4, Artemis).",
    model=RABBITMQ4,
    requires=NEEDS,
)
def requeue_detach_suspended(probe, ctx):
    """3 unsettled, detach closed=false: the 3 come back to a new consumer."""
    _requeued_after(probe, ctx, lambda _, link: _gone(probe, probe.detach, link, closed=False))


@case("2.6.6/requeue-after-session-end", MODEL, REQUEUE, model=RABBITMQ4, requires=NEEDS)
def requeue_session_end(probe, ctx):
    """3 unsettled, the session ended (links detached implicitly): all 3 come back."""
    _requeued_after(probe, ctx, lambda session, _: _gone(probe, probe.end, session))


@case("2.6.6/requeue-after-connection-close", MODEL, REQUEUE, model=RABBITMQ4, requires=NEEDS)
def requeue_connection_close(probe, ctx):
    """3 unsettled, the connection closed cleanly: all 3 come back."""
    _requeued_after(probe, ctx, lambda *_: probe.close())


@case("2.6.6/requeue-after-tcp-drop", MODEL, REQUEUE, model=RABBITMQ4, requires=NEEDS)
def requeue_tcp_drop(probe, ctx):
    """3 unsettled, the TCP connection dropped without close: all 3 come back."""
    _requeued_after(probe, ctx, lambda *_: probe.disconnect())


def _two_settled_then(probe, ctx, count: int, link_goes_away) -> None:
    """`count` unsettled deliveries, the first two accepted and settled, then
    `link_goes_away(session, link)`: only the others come back (`_no_accepted_resent`)."""
    queue = ctx.queue()
    session, link, got = take_unsettled(probe, ctx, queue, count)
    for delivery in got[:2]:
        probe.settle(link, delivery)
    link_goes_away(session, link)
    _no_accepted_resent(ctx, queue, got[:2], got[2:])


@case(
    "2.6.6/settled-not-redelivered",
    MODEL,
    "A delivery settled by the receiver with a terminal outcome (accepted) is done: A Source "
    "MUST NOT resend a Message which has previously been successfully transferred (3.5.2); "
    "the unsettled ones return to the queue when the link closes (RabbitMQ 4's model).",
    sentences=(NOT_RESENT,),
    model=RABBITMQ4,
    requires=NEEDS,
)
def settled_not_redelivered(probe, ctx):
    """4 unsettled, the first 2 accepted and settled, detach: only the other 2 come back."""
    _two_settled_then(probe, ctx, 4, lambda session, link: _gone(probe, probe.detach, link))


@case(
    "2.6.6/requeue-partly-settled-session-end",
    MODEL,
    REQUEUE + " A Source MUST NOT resend a Message which has previously been successfully "
    "transferred (3.5.2).",
    sentences=(NOT_RESENT,),
    model=RABBITMQ4,
    requires=NEEDS,
)
def partly_settled_session_end(probe, ctx):
    """5 unsettled; 2 accepted and settled; the session ends: exactly the other 3 back."""
    _two_settled_then(probe, ctx, 5, lambda session, link: _gone(probe, probe.end, session))


@case("2.6.6/requeue-many-tcp-drop", MODEL, REQUEUE, model=RABBITMQ4, requires=NEEDS)
def many_tcp_drop(probe, ctx):
    """100 unsettled deliveries, then the TCP connection dropped: all 100 come back."""
    queue = ctx.queue()
    take_unsettled(probe, ctx, queue, 100)
    probe.disconnect()
    back = _redelivered(ctx, queue, 100)
    ctx.check(
        len({message_text(d) for d in back}) == 100,
        f"expected the 100 unsettled messages back; observed {len(back)}",
    )


@case("2.6.6/requeue-close-with-error", MODEL, REQUEUE, model=RABBITMQ4, requires=NEEDS)
def close_with_error(probe, ctx):
    """3 unsettled, the connection closed with an error (amqp:internal-error): all 3
    come back."""
    queue = ctx.queue()
    take_unsettled(probe, ctx, queue, 3)
    probe.close(Error(condition="amqp:internal-error", description="amqpspec test"))
    back = _redelivered(ctx, queue, 3)
    ctx.check(len(back) == 3, f"expected the 3 unsettled messages back; observed {len(back)}")


@case("2.6.6/requeue-detach-with-error", MODEL, REQUEUE, model=RABBITMQ4, requires=NEEDS)
def detach_with_error(probe, ctx):
    """3 unsettled, the link detached with an error: all 3 come back."""
    queue = ctx.queue()
    _, link, _ = take_unsettled(probe, ctx, queue, 3)
    link.detach(closed=True, error=Error(condition="amqp:internal-error"))
    probe.flush()
    probe.idle(0.3)
    back = _redelivered(ctx, queue, 3)
    ctx.check(len(back) == 3, f"expected the 3 unsettled messages back; observed {len(back)}")


@case(
    "2.6.6/requeue-presettled-not-redelivered",
    MODEL,
    "A delivery sent settled (snd-settle-mode settled) is done at the sender when sent "
    "(at-most-once, 2.6.12): it is not delivered again when the link goes away.",
    model=RABBITMQ4,
    requires={"queues", "requeue-on-detach"},
)
def presettled_not_redelivered(probe, ctx):
    """A receiver with snd-settle-mode settled gets 3; detach: a new consumer gets only
    the 2 never sent."""
    queue, link = queued_receiver(probe, ctx, 5, snd_settle_mode=SndSettleMode.SETTLED)
    if link.remote_attach.snd_settle_mode != SndSettleMode.SETTLED:
        from amqpspec.conformance.verdicts import Unsupported

        raise Unsupported("the broker did not agree to snd-settle-mode settled")
    probe.grant(link, 3)
    got = probe.receive(link, 3, settle=False)
    _gone(probe, probe.detach, link)
    back = _redelivered(ctx, queue, 2)
    ctx.check(len(back) == 2, f"expected the 2 never sent; observed {len(back)}")
    overlap = {message_text(d) for d in back} & {message_text(d) for d in got}
    ctx.check(not overlap, f"expected no pre-settled delivery again; observed {sorted(overlap)}")


@case(
    "2.6.6/requeue-held-not-shared",
    MODEL,
    "A message delivered unsettled to one link is acquired by it (3.2.1 first-acquirer); "
    "the queue does not hand it to another consumer while that link holds it.",
    model=RABBITMQ4,
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
    ctx.check(
        not early,
        f"expected no delivery to the other consumer while the first holds both; observed "
        f"{len(early)}",
    )
    _gone(probe, probe.detach, holder)
    late = other.receive(waiting, 2, timeout=5.0)
    ctx.check(len(late) == 2, f"expected 2 after the holder detached; observed {len(late)}")
