"""2.6.6 / 2.6.4 / 3.4: unsettled deliveries go back to the queue when their link, session,
connection or TCP stream goes away (at-least-once), and settled ones do not.

Owns the cases `2.6.6/requeue-*`, `2.6.6/settled-not-redelivered` and
`3.2.1/redelivery-first-acquirer`.
"""

from __future__ import annotations

from conformance.cases.checks import consume_again, take_unsettled, texts
from conformance.cases.sentences import REQUEUE
from conformance.cases.sentences import REQUEUE_NEEDS as NEEDS
from conformance.registry import MUST, SHOULD, case
from conformance.steps import header_of, message_text


def _take_unsettled(probe, ctx, queue, count=3):
    session, link, got = take_unsettled(probe, ctx, queue, count)
    unsettled = [d for d in got if not d.settled]
    ctx.check(len(unsettled) == count, f"only {len(unsettled)} of {count} deliveries unsettled")
    return session, link, [message_text(d) for d in got]


def _expect_redelivered(ctx, queue, bodies):
    """A fresh connection consumes the queue: every body in `bodies` must come back."""
    got = consume_again(ctx, queue, len(bodies), 0.3)
    back = texts(got)
    ctx.check(
        back == sorted(bodies),
        f"after the link went away the queue delivered {back}, expected {sorted(bodies)}",
    )
    return got


def _requeued_after(probe, ctx, link_goes_away) -> None:
    """3 unsettled deliveries, then `link_goes_away(session, link)`: all 3 come back."""
    queue = ctx.queue()
    session, link, bodies = _take_unsettled(probe, ctx, queue)
    link_goes_away(session, link)
    _expect_redelivered(ctx, queue, bodies)


@case("2.6.6/requeue-after-detach-closed", MUST, REQUEUE, requires=NEEDS)
def requeue_detach_closed(probe, ctx):
    """3 deliveries received unsettled, link detached with closed=true: all 3 come back."""
    _requeued_after(probe, ctx, lambda _, link: probe.detach(link, closed=True))


@case(
    "2.6.4/requeue-after-detach-suspended",
    SHOULD,
    "detach with closed=false suspends the link; a broker that does not resume links treats "
    "it as closed and returns unsettled deliveries to the queue (RabbitMQ 4, Artemis).",
    requires=NEEDS,
)
def requeue_detach_suspended(probe, ctx):
    """3 unsettled, detach closed=false: the 3 come back to a new consumer."""
    _requeued_after(probe, ctx, lambda _, link: probe.detach(link, closed=False))


@case("2.6.6/requeue-after-session-end", MUST, REQUEUE, requires=NEEDS)
def requeue_session_end(probe, ctx):
    """3 unsettled, the session ended (links detached implicitly): all 3 come back."""
    _requeued_after(probe, ctx, lambda session, _: probe.end(session))


@case("2.6.6/requeue-after-connection-close", MUST, REQUEUE, requires=NEEDS)
def requeue_connection_close(probe, ctx):
    """3 unsettled, the connection closed cleanly: all 3 come back."""
    _requeued_after(probe, ctx, lambda *_: probe.close())


@case("2.6.6/requeue-after-tcp-drop", MUST, REQUEUE, requires=NEEDS)
def requeue_tcp_drop(probe, ctx):
    """3 unsettled, the TCP connection dropped without close: all 3 come back."""
    _requeued_after(probe, ctx, lambda *_: probe.disconnect())


@case(
    "2.6.6/settled-not-redelivered",
    MUST,
    "A delivery settled by the receiver with a terminal outcome (accepted) is done: it is "
    "not delivered again when the link ends (2.6.12, 3.4.2).",
    requires=NEEDS,
)
def settled_not_redelivered(probe, ctx):
    """4 unsettled, the first 2 accepted and settled, detach: only the other 2 come back."""
    queue = ctx.queue()
    _, link, got = take_unsettled(probe, ctx, queue, 4)
    for delivery in got[:2]:
        probe.settle(link, delivery)
    probe.detach(link)
    _expect_redelivered(ctx, queue, [message_text(d) for d in got[2:]])


@case(
    "3.2.1/redelivery-first-acquirer",
    SHOULD,
    "first-acquirer: if this value is true, then this message has not been acquired by any "
    "other link; a redelivered message is not first-acquirer (3.2.1).",
    requires=NEEDS | {"redelivery-marks"},
)
def redelivery_marks(probe, ctx):
    """A message received unsettled, its link detached, then redelivered: the redelivery
    does not claim first-acquirer=true."""
    queue = ctx.queue()
    _, link, bodies = _take_unsettled(probe, ctx, queue, count=1)
    probe.detach(link)
    again = _expect_redelivered(ctx, queue, bodies)
    header = header_of(again[0])
    ctx.check(
        header is None or not header.first_acquirer,
        f"redelivered message has first-acquirer={header.first_acquirer if header else None}",
    )
