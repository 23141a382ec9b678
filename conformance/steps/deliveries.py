"""Steps for deliveries: collecting what arrives on a link, receiving exactly a count,
settling, a queue with a receiver on it, unsettled deliveries and their requeue or outcome
(2.6.6, 3.4), a message round trip, and multi-frame deliveries (2.6.14).

Owns compositions of `Probe` calls and the checks cases make right after them; registers
no case. Touches nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from amqpspec.amqp10.engine import DispositionReceived, Link, Session, TransferReceived
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.probe import Probe, WaitTimeout
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.steps.links import consumer, unsettled_consumer
from amqpspec.conformance.steps.queues import fill, message_text, publish_messages, texts
from amqpspec.conformance.verdicts import CaseFailed


def collect(probe: Probe, link: Link, quiet: float = 0.5) -> list[TransferReceived]:
    """Every delivery that arrives on `link` until nothing came for `quiet` seconds."""
    got: list[TransferReceived] = []
    while True:
        got += probe.transfers(link)
        if probe.closed or not probe.pump(quiet):
            got += probe.transfers(link)
            return got


def exactly(probe: Probe, link: Link, count: int, quiet: float = 0.5) -> list[TransferReceived]:
    """Receive exactly `count` deliveries (settling them), then `quiet` seconds of nothing;
    the failure names how many came."""
    got = probe.receive(link, count) if count else []
    extra = collect(probe, link, quiet)
    if extra:
        raise CaseFailed(
            f"expected {count} deliveries; observed {count + len(extra)} (the first extra: "
            f"delivery-id {extra[0].delivery_id})"
        )
    return got


def consumed_exactly(
    probe: Probe, ctx: CaseContext, queue: str, count: int, *, credit: int | None = None
) -> list[TransferReceived]:
    """A new receiver from `queue`, granted `credit` (`count` unless given), gets exactly
    `count` deliveries (`exactly`)."""
    _, link = consumer(probe, ctx, queue, credit=count if credit is None else credit)
    return exactly(probe, link, count)


def settles(role: Role, delivery_id: int) -> Callable[[Any], bool]:
    """A `Probe.expect` predicate: the broker's disposition, as `role`, settling
    `delivery_id`."""
    return lambda e: (
        isinstance(e, DispositionReceived)
        and e.role == role
        and e.settled
        and e.first <= delivery_id <= e.last
    )


def settle_all(probe: Probe, link: Link, deliveries: Iterable[TransferReceived]) -> None:
    for delivery in deliveries:
        if not delivery.settled:
            probe.settle(link, delivery)


def check_nothing_more(
    ctx: CaseContext, probe: Probe, link: Link, message: Callable[[int], str], quiet: float = 0.3
) -> list[TransferReceived]:
    """No delivery arrives on `link` for `quiet` seconds; `message(extra)` names a failure."""
    extra = collect(probe, link, quiet)
    ctx.check(not extra, message(len(extra)))
    return extra


def nothing_until_granted(
    ctx: CaseContext, probe: Probe, link: Link, message: Callable[[int], str], credit: int = 2
) -> list[TransferReceived]:
    """No delivery on `link` for 0.5 s while it has no credit (`message(extra)` names a
    failure), then a grant of `credit`: exactly that many arrive (2.6.7)."""
    check_nothing_more(ctx, probe, link, message, 0.5)
    probe.grant(link, credit)
    return exactly(probe, link, credit)


def queued_receiver(
    probe: Probe,
    ctx: CaseContext,
    queued: int,
    *,
    unsettled: bool = False,
    credit: int = 0,
    **attach: Any,
) -> tuple[str, Link]:
    """A new queue holding `queued` messages and a receiver on it granted `credit` (an
    at-least-once one when `unsettled`): (the queue, the receiver)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, queued)
    if unsettled:
        _, link = unsettled_consumer(probe, ctx, queue, credit=credit)
    else:
        _, link = consumer(probe, ctx, queue, credit=credit, **attach)
    return queue, link


def roundtrip(probe: Probe, ctx: CaseContext, message: Message) -> tuple[Message, bytes]:
    """Send `message` through a fresh queue and consume it: (decoded message, raw payload)."""
    queue = ctx.queue()
    publish_messages(probe, ctx, queue, [message])
    _, link = consumer(probe, ctx, queue, credit=1)
    delivery = probe.next_transfer(link)
    if not delivery.settled:
        probe.settle(link, delivery)
    return Message.decode(delivery.payload), delivery.payload


# unsettled deliveries, their outcomes and requeue (2.6.6, 3.4)


def take_unsettled(
    probe: Probe, ctx: CaseContext, queue: str, count: int
) -> tuple[Session, Link, list[TransferReceived]]:
    """Queue `count` messages and receive them all unsettled on an at-least-once link."""
    fill(probe, ctx, queue, count)
    session, link = unsettled_consumer(probe, ctx, queue, credit=count)
    return session, link, probe.receive(link, count, settle=False)


def take_unsettled_bodies(
    probe: Probe, ctx: CaseContext, queue: str, count: int = 3
) -> tuple[Session, Link, list[bytes]]:
    """`take_unsettled`, checking that every delivery came unsettled: (the session, the
    link, the message bodies)."""
    session, link, got = take_unsettled(probe, ctx, queue, count)
    unsettled = [d for d in got if not d.settled]
    ctx.check(len(unsettled) == count, f"only {len(unsettled)} of {count} deliveries unsettled")
    return session, link, [message_text(d) for d in got]


def check_requeued(ctx: CaseContext, queue: str, bodies: list[bytes]) -> list[TransferReceived]:
    """A fresh connection consumes `queue`: every body in `bodies` must come back (2.6.6)."""
    got = consume_again(ctx, queue, len(bodies), 0.3)
    back = texts(got)
    ctx.check(
        back == sorted(bodies),
        f"expected {sorted(bodies)} back after the link went away; observed {back}",
    )
    return got


def settle_first(
    probe: Probe, ctx: CaseContext, queue: str, state: Any, *, credit: int = 1
) -> tuple[Link, TransferReceived]:
    """Queue one message, receive it on an at-least-once link granted `credit`, and settle
    it with the outcome `state` (3.4): (the link, the delivery)."""
    fill(probe, ctx, queue, 1)
    _, link = unsettled_consumer(probe, ctx, queue, credit=credit)
    first = probe.next_transfer(link)
    probe.settle(link, first, state)
    return link, first


def check_rejected_gone(
    probe: Probe, ctx: CaseContext, link: Link, credit: int, quiet: float
) -> None:
    """3.4.3 rejected is terminal: granting `credit` more brings no delivery back."""
    probe.grant(link, credit)
    check_nothing_more(
        ctx,
        probe,
        link,
        lambda n: f"expected the rejected message not delivered again; observed {n} transfers",
        quiet,
    )


def consume_again(
    ctx: CaseContext, queue: str, expected: int, quiet: float, timeout: float | None = None
) -> list[TransferReceived]:
    """A fresh connection consumes `queue` (credit `expected` + 5): the `expected`
    deliveries and any more that come within `quiet` seconds."""
    other = ctx.probe()
    _, link = unsettled_consumer(other, ctx, queue, credit=expected + 5)
    got = other.receive(link, expected, timeout=timeout) if expected else []
    return got + collect(other, link, quiet)


def collect_again(
    ctx: CaseContext, queue: str, credit: int, quiet: float
) -> list[TransferReceived]:
    """A fresh connection consumes `queue` with `credit`: whatever arrives until nothing
    came for `quiet` seconds (no count required: a check of what must not come back)."""
    other = ctx.probe()
    _, link = unsettled_consumer(other, ctx, queue, credit=credit)
    other.pump(quiet)
    return collect(other, link, quiet)


# multi-frame deliveries (2.6.14)


def check_split(ctx: CaseContext, deliveries: list[TransferReceived]) -> None:
    """Each delivery came in more than one transfer frame."""
    ctx.check(
        all(d.frame_count > 1 for d in deliveries),
        f"expected deliveries in several frames (max-frame-size 512); observed frame counts "
        f"{[d.frame_count for d in deliveries]}",
    )


def granted_one(probe: Probe, link: Link) -> int:
    """Grant `link` one credit and receive: 1 when a delivery came within the probe's
    wait, else 0."""
    probe.grant(link, 1)
    try:
        return len(probe.receive(link, 1))
    except WaitTimeout:
        return 0
