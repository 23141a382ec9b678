"""Steps for link flow control (2.6.7) and flow state (2.7.4): the broker's flows after a
mark, MUST violations of the broker so far, a drain and its reply, an echo and its
reply, `available` after consumption, and the proton prefetch pattern.

Owns compositions of `Probe` calls and the checks cases make right after them, and how a
grant or drain case is declared (`grant_case`, `drain_case`: the sentences every such case
rests on, the broker the link's sender); registers no case itself. Touches nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from amqpspec.amqp10.composites import Flow
from amqpspec.amqp10.engine import Link, TransferReceived
from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.monitor import TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.serial import serial_offset
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.run.registry import MUST, RunFunction, case
from amqpspec.conformance.steps.deliveries import queued_receiver
from amqpspec.conformance.steps.links import consumer
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.steps.sentences import CREDIT, DRAINING
from amqpspec.conformance.verdicts import MODEL_LEVEL, CaseFailed, NoDelivery

GRANT_NEEDS = frozenset({"queues"})
DRAIN_NEEDS = frozenset({"queues", "drain-reply"})


def grant_case(
    case_id: str,
    sentence: str,
    *,
    sentences: Iterable[str] = CREDIT,
    requires: Iterable[str] = GRANT_NEEDS,
    **options: Any,
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a MUST on the broker as the sender of a link we grant credit (2.6.7:
    no transfer beyond the credit, the credit formula: `CREDIT`); `options` as `case`'s."""
    return case(
        case_id, MUST, sentence, sentences=sentences, role="sender", requires=requires, **options
    )


def drain_case(case_id: str, sentence: str, **options: Any) -> Callable[[RunFunction], RunFunction]:
    """`grant_case` for a drain (2.6.7: the sender advances its delivery-count until the
    link-credit is zero and sends its flow state: `DRAINING`), on a broker that answers a
    drain (`DRAIN_NEEDS`) unless `options` say otherwise."""
    options.setdefault("sentences", DRAINING)
    options.setdefault("requires", DRAIN_NEEDS)
    return grant_case(case_id, sentence, **options)


def broker_violated(probe: Probe) -> bool:
    """The checker found a MUST violation by the broker on this probe (a case that repeats
    a scenario stops at the first)."""
    return any(v.origin == "server" and v.level == MUST for v in probe.violations)


def server_flows(probe: Probe, since: int, *, session_only: bool = False) -> list[Flow]:
    """Flows the broker sent after trace position `since` (only handle-less ones when
    `session_only`)."""
    flows = [t.item.performative for t in probe.frames_since(since, "flow")]
    return [f for f in flows if f.handle is None] if session_only else flows


def unanswered_drain(probe: Probe, link: Link) -> TraceItem | None:
    """Our last flow with drain=true for `link` that no broker flow for the link with
    link-credit 0 followed (2.6.7 flow-control.7 requires one), or None."""
    asked = None
    for item in probe.recording.items:
        frame = item.item
        if not isinstance(frame, Frame) or frame.name != "flow":
            continue
        flow = frame.performative
        if item.direction == CLIENT and flow.handle == link.handle and flow.drain:
            asked = item
        elif (
            item.direction == SERVER
            and link.remote_handle is not None
            and flow.handle == link.remote_handle
            and flow.link_credit == 0
        ):
            asked = None
    return asked


def check_drains_answered(probe: Probe, link: Link, gone: CaseFailed) -> None:
    """The link went away (`gone`): FAILED (2.6.7) when a drain we sent was never answered
    with a flow of link-credit 0, else `gone` as it is (a shortfall)."""
    asked = unanswered_drain(probe, link)
    if asked is None:
        raise gone
    raise CaseFailed(
        f"expected a flow for the link with link-credit 0 answering our drain (frame "
        f"#{asked.index}); {probe.observed(asked.index)}"
    ) from gone


def drain_reply(probe: Probe, link: Link, since: int, timeout: float | None = None) -> Flow:
    """The broker's flow for `link` with link-credit 0 after trace position `since`; the
    failure names the last flow the broker did send for the link."""
    try:
        frame = probe.wait_for_frame(
            "flow",
            timeout,
            lambda f: (
                f.performative.handle == link.remote_handle and f.performative.link_credit == 0
            ),
            since=since,
        )
    except CaseFailed as exc:
        flows = probe.link_flows(link, since)
        seen = (
            f"; its last flow for the link said delivery-count {flows[-1].delivery_count}, "
            f"link-credit {flows[-1].link_credit}, drain {flows[-1].drain}"
            if flows
            else ""
        )
        raise CaseFailed(
            f"expected a flow for the link with link-credit 0 answering the drain; "
            f"{probe.observed(since)}{seen}"
        ) from exc
    return frame.performative


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
    got: list[TransferReceived] = []
    if receive:
        try:
            got = probe.receive(link, receive, settle=settle)
        except NoDelivery:
            # fewer came (or the session ended): the drain reply is what 2.6.7 requires,
            # and its wait says what the broker did instead
            got = probe.transfers(link)
    return drain_reply(probe, link, since, timeout), got


def check_advanced(
    ctx: CaseContext, flow: Flow, start: int, by: int, what: str = "drain reply"
) -> None:
    """2.6.7: the flow's delivery-count is `by` past `start` (serial arithmetic)."""
    ctx.check(
        serial_offset(start, flow.delivery_count) == by,
        f"expected delivery-count {start} + {by} in the {what} (the credit all consumed); "
        f"observed {flow.delivery_count}",
    )


def echo_reply(probe: Probe, link: Link, credit: int) -> Flow:
    """Grant `credit` with echo=true (2.7.4): the broker's next flow for `link`. No
    sentence requires the answer (RabbitMQ 4's model does): without one the failure is
    graded as the case's model (DIFFERS)."""
    since = probe.mark()
    probe.grant(link, credit, echo=True)
    try:
        return probe.next_link_flow(link, since)
    except CaseFailed as exc:
        raise CaseFailed(
            f"expected a flow for the link answering our echo; {probe.observed(since)}",
            level=MODEL_LEVEL,
        ) from exc


def echo_after_receiving(
    probe: Probe, ctx: CaseContext, queued: int, *, granted: int, credit: int
) -> tuple[int, Flow]:
    """`queued` messages received on a link granted `granted`, then our flow of `credit`
    with echo: (the link's delivery-count before them, the broker's reply)."""
    _, link = queued_receiver(probe, ctx, queued)
    before = link.delivery_count
    probe.grant(link, granted)
    probe.receive(link, queued)
    return before, echo_reply(probe, link, credit)


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
