"""Checked steps shared by the case modules: one scenario step plus the check the cases
make after it — a drain and its reply, an echo and its reply, the proton prefetch pattern,
a queue with a receiver, a publisher with credit, unsettled deliveries and their requeue
or outcome, multi-frame deliveries — and `case_function`, which names a run function
built by a case module's factory. Steps about refusals live in refusals.py, those about
alarms and session windows in alarm_windows.py.

Owns no case: it registers nothing (the registry imports it with the case modules, which is
harmless). Probe compositions without checks live in conformance/steps.py and
conformance/steps_more.py; this module builds on them. Touches nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqp10.composites import Flow
from amqp10.engine import Link, Session, TransferReceived
from conformance.probe import Probe
from conformance.runner import CaseContext
from conformance.steps import collect, consumer, drain_reply, fill, message_text, unsettled_consumer
from conformance.steps_more import advance, wait_credit

RunFunction = Callable[[Probe, CaseContext], None]


def case_function(run: RunFunction, name: str, doc: str, module: str) -> RunFunction:
    """Give a run function made by a factory its case's name, docstring (the registry's
    description) and case module (the registry's `module`)."""
    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    run.__module__ = module
    return run


# 2.6.7 flow control: drains and echoes


def drain(
    probe: Probe,
    link: Link,
    credit: int,
    *,
    receive: int = 0,
    settle: bool = True,
    echo: bool = False,
    timeout: float | None = None,
) -> tuple[Flow, list[TransferReceived]]:
    """Grant `credit` with drain (and echo), receive `receive` deliveries, then wait for the
    drain reply (a flow with link-credit 0): (the reply, the deliveries)."""
    since = probe.mark()
    probe.grant(link, credit, drain=True, echo=echo)
    got = probe.receive(link, receive, settle=settle) if receive else []
    return drain_reply(probe, link, since, timeout), got


def prefetch_receive(probe: Probe, ctx: CaseContext, prefetch: int, count: int) -> None:
    """The proton prefetch pattern: `count` messages queued, a receiver on a session with a
    4-frame incoming window, link-credit `prefetch` re-granted after every delivery while
    transfers are in flight; all `count` must arrive (the checker judges each transfer)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, count)
    session = probe.open_session(incoming_window=4)
    _, link = consumer(probe, ctx, queue, credit=prefetch, session=session)
    got = probe.receive(link, count, regrant=prefetch, timeout=10.0)
    ctx.check(len(got) == count, f"received {len(got)} of {count}")


def check_advanced(
    ctx: CaseContext, flow: Flow, start: int, by: int, what: str = "drain reply"
) -> None:
    """2.6.7: the flow's delivery-count is `by` past `start` (serial arithmetic)."""
    ctx.check(
        advance(flow.delivery_count, start) == by,
        f"{what} delivery-count {flow.delivery_count}, expected {start} + {by}",
    )


def check_nothing_more(
    ctx: CaseContext, probe: Probe, link: Link, message: Callable[[int], str], quiet: float = 0.3
) -> list[TransferReceived]:
    """No delivery arrives on `link` for `quiet` seconds; `message(extra)` names a failure."""
    extra = collect(probe, link, quiet)
    ctx.check(not extra, message(len(extra)))
    return extra


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


def echo_reply(probe: Probe, link: Link, credit: int) -> Flow:
    """Grant `credit` with echo=true (2.7.4): the broker's next flow for `link`."""
    since = probe.mark()
    probe.grant(link, credit, echo=True)
    return probe.next_link_flow(link, since)


def available_after(probe: Probe, ctx: CaseContext, queued: int, consumed: int) -> Flow:
    """`queued` messages on a new queue, `consumed` of them received, then a flow with
    link-credit 0 and echo: the broker's reply (its `available`, 2.7.4)."""
    queue = ctx.queue()
    if queued:
        fill(probe, ctx, queue, queued)
    _, link = consumer(probe, ctx, queue, credit=consumed)
    if consumed:
        probe.receive(link, consumed)
    return echo_reply(probe, link, 0)


# publishers


def publisher(
    probe: Probe, ctx: CaseContext, queue: str, *, session: Session | None = None, **attach: Any
) -> tuple[Session, Link]:
    """A sender to `queue` (on `session`, or a new one; `attach` fields for its attach),
    once the broker granted it credit."""
    session = session or probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue), **attach)
    wait_credit(probe, sender)
    return session, sender


# unsettled deliveries and requeue (2.6.6, 3.4)


def take_unsettled(
    probe: Probe, ctx: CaseContext, queue: str, count: int
) -> tuple[Session, Link, list[TransferReceived]]:
    """Queue `count` messages and receive them all unsettled on an at-least-once link."""
    fill(probe, ctx, queue, count)
    session, link = unsettled_consumer(probe, ctx, queue, credit=count)
    return session, link, probe.receive(link, count, settle=False)


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
        ctx, probe, link, lambda n: f"rejected message delivered again ({n} transfers)", quiet
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


def texts(deliveries: list[TransferReceived]) -> list[bytes]:
    """The sorted message bodies of `deliveries` (to compare sets of messages)."""
    return sorted(message_text(d) for d in deliveries)


# multi-frame deliveries (2.6.14)


def small_frame_probe(ctx: CaseContext, max_frame_size: int = 512) -> Probe:
    """A new connection opened with a small max-frame-size, so deliveries come in pieces."""
    receiver = ctx.probe()
    receiver.open(max_frame_size=max_frame_size)
    return receiver


def check_split(ctx: CaseContext, deliveries: list[TransferReceived]) -> None:
    """Each delivery came in more than one transfer frame."""
    ctx.check(all(d.frame_count > 1 for d in deliveries), "deliveries were not split into frames")
