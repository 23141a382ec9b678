"""2.7.4 flow echo and 2.6.7 `available`: the broker reports its flow state when asked.

Owns the cases `2.7.4/*` (echo) and `2.6.7/available-*`.
"""

from __future__ import annotations

from conformance.cases.checks import available_after, echo_reply
from conformance.cases.sentences import AVAILABLE, ECHO
from conformance.registry import MUST, SHOULD, case
from conformance.steps import consumer


@case("2.7.4/echo-link", SHOULD, ECHO, requires={"echo"})
def echo_link(probe, ctx):
    """A receiver's flow with echo=true: the broker answers with a flow for that link."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    event = echo_reply(probe, link, 1)
    ctx.check(event.handle is not None, "echo reply has no handle")


@case("2.7.4/echo-session", SHOULD, ECHO, requires={"echo"})
def echo_session(probe, ctx):
    """A session flow (no handle) with echo=true: the broker answers with a session flow."""
    session = probe.open_session()
    since = probe.mark()
    session.flow(echo=True)
    probe.flush()
    probe.wait_for_frame("flow", since=since)


@case(
    "2.7.4/echo-link-state",
    MUST,
    "The flow state sent in reply to an echo is the sender's current state: delivery-count "
    "and link-credit agree with the transfers it sent (2.6.7).",
    requires={"echo", "queues"},
)
def echo_state(probe, ctx):
    """Grant 4 on an empty queue with echo: the reply's delivery-count equals the attach's
    initial-delivery-count and its link-credit is at most 4."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    dc0 = link.delivery_count
    flow = echo_reply(probe, link, 4)
    ctx.check(
        flow.delivery_count == dc0, f"delivery-count {flow.delivery_count}, sent none from {dc0}"
    )
    ctx.check(
        flow.link_credit is not None and flow.link_credit <= 4,
        f"link-credit {flow.link_credit} after a grant of 4",
    )


@case(
    "2.6.7/available-reported",
    SHOULD,
    AVAILABLE,
    requires={"available", "echo", "queues"},
)
def available(probe, ctx):
    """5 queued, no credit, echo: the broker's flow reports available = 5."""
    flow = available_after(probe, ctx, 5, 0)
    ctx.check(flow.available == 5, f"available {flow.available} with 5 messages queued")
