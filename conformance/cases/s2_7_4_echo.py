"""2.7.4 flow echo and 2.6.7 `available`: the broker reports its flow state when asked —
on a link and a session (also with a new incoming window), on a publisher link (the broker
is the receiver), after deliveries and with zero credit — and how many messages wait for
credit (after partial consumption, on an empty queue). No sentence requires an echo to be
answered (2.7.4's echo field has none): that is RabbitMQ 4's model (DIFFERS without a
reply); the state in a reply the broker sends as the link's sender is the spec's (its
current delivery-count, 2.7.4; the link-credit the formula gives, 2.6.7: MUST); `available`
has no keyword sentence (recorded).

Owns the cases `2.7.4/*` (echo) and `2.6.7/available-*`.
"""

from __future__ import annotations

from collections.abc import Callable

from amqpspec.amqp10.serial import serial_offset
from amqpspec.conformance.run.registry import MAY, MODEL, MUST, RunFunction, case, case_function
from amqpspec.conformance.steps.credit import (
    available_after,
    echo_after_receiving,
    echo_reply,
    server_flows,
)
from amqpspec.conformance.steps.links import consumer, publisher, session_flow
from amqpspec.conformance.steps.sentences import (
    AVAILABLE,
    CREDIT_DECREMENT,
    CREDIT_FORMULA,
    FLOW_DELIVERY_COUNT_SENDER,
    RABBITMQ4,
)
from amqpspec.conformance.verdicts import CaseFailed

ECHO = (
    "echo: request link state from other endpoint (2.7.4; no sentence requires the answer: "
    "RabbitMQ 4 answers with its state)."
)
STATE = (FLOW_DELIVERY_COUNT_SENDER, "2.6.7/flow-control.3", CREDIT_FORMULA, CREDIT_DECREMENT)


@case("2.7.4/echo-link", MODEL, ECHO, model=RABBITMQ4, requires={"echo"})
def echo_link(probe, ctx):
    """A receiver's flow with echo=true: the broker answers with a flow for that link."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    event = echo_reply(probe, link, 1)
    ctx.check(
        event.handle is not None,
        "expected a link flow answering the echo; observed one without a handle",
    )


@case("2.7.4/echo-session", MODEL, ECHO, model=RABBITMQ4, requires={"echo"})
def echo_session(probe, ctx):
    """A session flow (no handle) with echo=true: the broker answers with a session flow."""
    session = probe.open_session()
    since = probe.mark()
    session.flow(echo=True)
    probe.flush()
    probe.wait_for_frame("flow", since=since)  # none: DIFFERS (the model answers echo)


def _echo_reply_case(
    case_id: str, sentence: str, *, sentences: tuple[str, ...] = STATE
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a MUST on the state of the broker's (the link sender's) flow in its reply
    to our echo (the reply itself is RabbitMQ 4's model)."""
    return case(
        case_id,
        MUST,
        sentence,
        sentences=sentences,
        role="sender",
        model=RABBITMQ4,
        requires={"echo", "queues"},
    )


@_echo_reply_case(
    "2.7.4/echo-link-state",
    "When the flow state is sent from the Sender this field MUST be set to the current "
    "delivery-count; link-credit follows the formula (2.6.7): in an echo reply.",
)
def echo_state(probe, ctx):
    """Grant 4 on an empty queue with echo: the reply's delivery-count equals the attach's
    initial-delivery-count and its link-credit is at most 4."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    dc0 = link.delivery_count
    flow = echo_reply(probe, link, 4)
    ctx.check(
        flow.delivery_count == dc0,
        f"expected delivery-count {dc0} (nothing sent) in the echo reply; observed "
        f"{flow.delivery_count}",
    )
    ctx.check(
        flow.link_credit is not None and flow.link_credit <= 4,
        f"expected link-credit at most 4 (our grant) in the echo reply; observed "
        f"{flow.link_credit}",
    )


def _available_case(slug: str, queued: int, consumed: int, why: str, name: str, doc: str) -> None:
    """Declare `2.6.7/available-<slug>`: `queued` messages, `consumed` of them received,
    then an echo: the broker's flow reports the rest as available (`why`: in the reason);
    none left may also be reported as no available at all."""
    left = queued - consumed
    accepted = (None, 0) if left == 0 else (left,)

    def run(probe, ctx):
        flow = available_after(probe, ctx, queued, consumed)
        ctx.check(
            flow.available in accepted,
            f"expected available {left} ({why}); observed {flow.available}",
        )

    declare = case(
        f"2.6.7/available-{slug}",
        MAY,
        AVAILABLE + " (no keyword: recorded)",
        requires={"available", "echo", "queues"},
    )
    declare(case_function(run, name, doc, __name__))


_available_case(
    "reported",
    5,
    0,
    "5 queued",
    "available",
    "5 queued, no credit, echo: the broker's flow reports available = 5.",
)


SESSION_STATE = (
    "next-incoming-id: the expected transfer-id of the next incoming transfer frame; a "
    "session flow carries the sender's current session state (2.5.6, 2.7.4)."
)


@case("2.7.4/echo-session-new-window", MODEL, ECHO, model=RABBITMQ4, requires={"echo"})
def echo_session_new_window(probe, ctx):
    """A session flow with incoming-window 50 and echo: the broker answers with a session
    flow whose next-incoming-id is our next-outgoing-id."""
    session = probe.open_session()
    since = probe.mark()
    session.flow(incoming_window=50, echo=True)
    probe.flush()
    probe.wait_for_frame("flow", since=since, predicate=lambda f: f.performative.handle is None)
    flows = server_flows(probe, since, session_only=True)
    ctx.check(
        flows[-1].next_incoming_id == session.next_outgoing_id,
        f"expected next-incoming-id {session.next_outgoing_id} (our next-outgoing-id); observed "
        f"{flows[-1].next_incoming_id}",
    )


@case(
    "2.7.4/echo-session-state-after-publish",
    MAY,
    SESSION_STATE + " (definitions: no keyword)",
    requires={"echo", "queues"},
)
def echo_session_after_publish(probe, ctx):
    """Publish 5 single-frame messages, then a session echo: any session flow the broker
    sends afterwards has next-incoming-id = our next-outgoing-id (5 transfers later)."""
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    probe.publish(sender, 5)
    since = probe.mark()
    probe.send_frame(session_flow(session, echo=True), session.channel)
    try:
        probe.wait_for_frame("flow", 2.0, lambda f: f.performative.handle is None, since=since)
    except CaseFailed:
        ctx.note("no session flow in answer to the echo")
    for flow in server_flows(probe, since, session_only=True):
        ctx.check(
            flow.next_incoming_id == session.next_outgoing_id,
            f"expected next-incoming-id {session.next_outgoing_id} (our next-outgoing-id "
            f"after 5 transfers); observed {flow.next_incoming_id}",
        )


@case("2.7.4/echo-publisher-link", MODEL, ECHO, model=RABBITMQ4, requires={"echo", "queues"})
def echo_publisher_link(probe, ctx):
    """Our sender link's flow with echo=true (the broker is the receiver): the broker
    answers with a flow for that link carrying its link-credit."""
    _, sender = publisher(probe, ctx, ctx.queue())
    since = probe.mark()
    sender.flow(echo=True)
    probe.flush()
    flow = probe.next_link_flow(sender, since)  # none: DIFFERS (the model answers echo)
    ctx.check(flow.link_credit is not None, "expected link-credit in the echo reply; observed none")


@_echo_reply_case(
    "2.7.4/echo-after-deliveries",
    "When the flow state is sent from the Sender delivery-count MUST be its current one, "
    "advanced once per delivery sent, and link-credit decreased by the same amount.",
)
def echo_after_deliveries(probe, ctx):
    """4 queued, grant 4, receive 4, then echo with credit 0: the reply's delivery-count is
    the initial one + 4 and link-credit 0."""
    dc0, flow = echo_after_receiving(probe, ctx, 4, granted=4, credit=0)
    ctx.check(
        serial_offset(dc0, flow.delivery_count) == 4,
        f"expected delivery-count {dc0} + 4 in the echo reply; observed {flow.delivery_count}",
    )
    ctx.check(
        flow.link_credit == 0,
        f"expected link-credit 0 after a grant of 0; observed {flow.link_credit}",
    )


@_echo_reply_case(
    "2.7.4/echo-zero-credit",
    "The Sender's link-credit MUST be set according to the formula when flow information is "
    "given by the receiver: after a grant of 0 it is 0 (in an echo reply).",
    sentences=(CREDIT_FORMULA,),
)
def echo_zero_credit(probe, ctx):
    """Empty queue, a flow with link-credit 0 and echo: reply link-credit 0."""
    queue = ctx.queue()
    _, link = consumer(probe, ctx, queue)
    flow = echo_reply(probe, link, 0)
    ctx.check(
        flow.link_credit == 0,
        f"expected link-credit 0 after a grant of 0; observed {flow.link_credit}",
    )


_available_case(
    "after-consumption",
    6,
    2,
    "4 left",
    "available_after_consumption",
    "6 queued, receive 2, then echo with credit 0: available = 4.",
)
_available_case(
    "empty-queue",
    0,
    0,
    "empty queue",
    "available_empty",
    "Empty queue, echo: available is 0 (or absent).",
)
