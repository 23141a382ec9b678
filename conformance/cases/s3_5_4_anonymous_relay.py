"""The anonymous relay: OASIS "Using the AMQP Anonymous Terminus for Message Routing
Version 1.0" (Committee Specification 01, 17 September 2018,
https://docs.oasis-open.org/amqp/anonterm/v1.0/anonterm-v1.0.html; not part of the core
specification, so not in the normative manifest: the `anonterm` model, profile.MODELS).

Capability-gated: a broker claims the convention by offering ANONYMOUS-RELAY in its open
(2.7.1 offered-capabilities); one that does not is UNSUPPORTED on every case here, never
FAILED. A broker that offers it: a sender attached with a null target has each message
routed to the node its properties.to names (anonterm 2.2: messages "will be forwarded to
the node referenced in the to field of properties of the message just as if a direct link
has been established to that node", no keyword: DIFFERS from the model when not). Its 2.2.2
Routing Errors are MUSTs on the routing node, quoted as Qpid Broker-J's
AnonymousTerminusTest quotes them: "If the source of the link supports the rejected
outcome, and the message has not already been settled by the sender, then the routing
node MUST reject the message."; "If the source of the link does not support the rejected
outcome, [...] then the routing node MUST detach the link with an error", as when "the
message has already been settled by the sender"; "the info field of error MUST contain an
entry with symbolic key delivery-tag and binary value of the delivery-tag of the message
which caused the failure." The anonterm text itself is not among the specification texts
the suite grades against (the normative manifest covers the core specification:
conformance/spec/amqp-1.0), and these quotes come second-hand: a broker that claims the relay and
breaks one DIFFERS from the anonterm model, never FAILED, until that text is in the
manifest.

The unknown destination is a queue address of the profile that was never declared. A
broker that creates nodes on demand has no unknown destination: the message is accepted
and found at that address, UNSUPPORTED (nothing to route wrongly).

The in-transaction variants (4.4.1 transactional posting through the relay) are UNSUPPORTED
on a broker without local transactions (conformance/steps/transactions.py gates them).
Broker-J's pre-settled in-transaction unknown-destination tests rest on text that is "not
in spec yet" (AMQP-140: the transaction marked rollback-only): no case here.

Owns the cases `3.5.4/anonymous-relay-*` (the null target of 3.5.4, routed as anonterm says).
"""

from __future__ import annotations

from amqpspec.amqp10.composites import (
    Accepted,
    Properties,
    Rejected,
    Source,
    Target,
    TransactionalState,
)
from amqpspec.amqp10.engine import (
    DispositionReceived,
    RemoteAttach,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
)
from amqpspec.amqp10.extensions import ANONYMOUS_RELAY_CAPABILITY as RELAY
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.run.registry import MODEL, case, case_function
from amqpspec.conformance.steps.deliveries import collect, exactly
from amqpspec.conformance.steps.links import attach_answer
from amqpspec.conformance.steps.transactions import Controller, describe
from amqpspec.conformance.verdicts import Unsupported

ANONTERM = "anonterm"  # profile.MODELS
DELIVERY_TAG = symbol("delivery-tag")
ACCEPTED = symbol("amqp:accepted:list")
REJECTED = symbol("amqp:rejected:list")
MUST_REJECT = (
    'anonterm 2.2.2: "If the source of the link supports the rejected outcome, and the '
    "message has not already been settled by the sender, then the routing node MUST reject "
    'the message."'
)
MUST_DETACH = (
    'anonterm 2.2.2: "If the source of the link does not support the rejected outcome, [...] '
    'then the routing node MUST detach the link with an error", as when "the message has '
    'already been settled by the sender"'
)
MUST_NAME_TAG = (
    'anonterm 2.2.2: "the info field of error MUST contain an entry with symbolic key '
    "delivery-tag and binary value of the delivery-tag of the message which caused the "
    'failure."'
)
ROUTING = (
    "Messages sent over links into a routing node will be forwarded to the node referenced "
    "in the to field of properties of the message (anonterm 2.2)."
)


def _relay(probe, ctx, *, outcomes=None):
    """A sender to the anonymous terminus (null target) on a broker offering
    ANONYMOUS-RELAY: (session, link). UNSUPPORTED when the broker does not offer it; a
    broker that offers it and refuses the null target DIFFERS from the model."""
    session = probe.open_session()
    offered = probe.conn.remote_open.offered_capabilities if probe.conn.remote_open else None
    offered = [offered] if isinstance(offered, str) else list(offered or ())
    if RELAY not in {str(c) for c in offered}:
        raise Unsupported(f"the broker does not offer {RELAY} in its open (offered: {offered})")
    source = Source(outcomes=outcomes) if outcomes is not None else Source()
    link = session.attach_sender(f"amqpspec-relay-{id(source)}", source, Target())
    event = attach_answer(probe, session, link, "attach")
    ctx.check(
        isinstance(event, RemoteAttach) and event.attach.target is not None,
        f"expected the null target attached (the broker offers {RELAY}); observed {event}",
    )
    return session, link


def _message(to: str, body: bytes = b"relayed") -> Message:
    return Message.of(body, properties=Properties(to=to))


def _unknown(ctx) -> str:
    """The address of a queue that was never declared."""
    return ctx.target_address(ctx.queue("unknown", declare=False))


def _created_on_demand(ctx, address_queue: str) -> bool:
    """Whether a message sent to a never-declared queue is there (a node created on
    demand): a fresh connection's receiver gets it."""
    other = ctx.probe()
    session = other.open_session()
    link = other.attach_receiver(session, ctx.source(address_queue), wait=False)
    event = other.expect(
        lambda e: isinstance(e, RemoteAttach | RemoteDetach) and e.link is link, what="attach"
    )
    if isinstance(event, RemoteDetach) or event.attach.source is None:
        return False
    other.grant(link, 1)
    return bool(collect(other, link, 1.0))


def _error_of(probe, link, delivery_id: int, since: int):
    """What the broker answered the delivery: ("rejected", error), ("detach", error), or
    (other outcome name, None)."""

    def answers(event) -> bool:
        if isinstance(event, DispositionReceived):
            return event.role == Role.RECEIVER and event.first <= delivery_id <= event.last
        return (isinstance(event, RemoteDetach) and event.link is link) or isinstance(
            event, RemoteEnd | RemoteClose
        )

    try:
        event = probe.expect(answers, None, "the broker's answer to the unroutable message")
    except WaitTimeout:
        return "nothing", None
    if isinstance(event, RemoteDetach):
        return "detach", event.error
    if isinstance(event, DispositionReceived):
        state = event.state
        if isinstance(state, TransactionalState):  # 4.4.1: the outcome it carries
            state = state.outcome
        if isinstance(state, Rejected):
            return "rejected", state.error
        return type(state).__name__.lower() if state is not None else "no outcome", None
    return type(event).__name__, getattr(event, "error", None)


def _names_tag(ctx, error, tag: bytes, what: str) -> None:
    info = getattr(error, "info", None)
    named = info.get(DELIVERY_TAG) if isinstance(info, dict) else None
    ctx.model(
        error is not None and named is not None and bytes(named) == tag,
        f"expected the {what}'s error to name delivery-tag {tag!r} in its info; observed "
        f"error {error!r}. {MUST_NAME_TAG}",
    )


def _unroutable(probe, ctx, *, settled: bool, outcomes=None) -> tuple[str, object, bytes]:
    """One message to an unknown queue through the relay: (answer, error, its tag).
    UNSUPPORTED when the broker created the node on demand (nothing unroutable)."""
    _, link = _relay(probe, ctx, outcomes=outcomes)
    queue = ctx.queue("unknown", declare=False)
    tag = b"amqpspec-unroutable"
    since = probe.mark()
    delivery_id = probe.send_message(
        link, _message(ctx.target_address(queue)), settled=settled, tag=tag
    )
    answer, error = _error_of(probe, link, delivery_id, since)
    ctx.note(f"the broker answered the unroutable message with {answer}: {error!r}")
    if answer in ("accepted", "nothing") and _created_on_demand(ctx, queue):
        raise Unsupported(
            f"the broker created node {ctx.target_address(queue)!r} on demand: no address is "
            "unknown to it, so no routing error can be provoked"
        )
    return answer, error, tag


def _routed(ctx, queue: str, count: int, what: str) -> None:
    """anonterm 2.2: a fresh connection's receiver from `queue` gets exactly `count`
    messages (`what`: which, in the reason)."""
    other = ctx.probe()
    receiver = other.attach_receiver(other.open_session(), ctx.source(queue), credit=count)
    try:
        exactly(other, receiver, count)
    except AssertionError as exc:
        ctx.check(False, f"expected {what} to {queue!r}; {exc}")


# anonterm 2.2.2: the answer a routing error owes, in the reason: what was expected, the
# sentence, the name of what carries the error
ANSWERS = {
    "rejected": ("the message rejected", MUST_REJECT, "rejected outcome"),
    "detach": ("the link detached with an error", MUST_DETACH, "detach"),
}


def _graded(ctx, expected: str, answer: str, error, tag: bytes) -> None:
    """anonterm 2.2.2: the unroutable message got the `expected` answer (ANSWERS) and its
    error names the delivery-tag (DIFFERS from the model otherwise)."""
    what, sentence, carrier = ANSWERS[expected]
    ctx.model(answer == expected, f"expected {what}; observed {answer}. {sentence}")
    _names_tag(ctx, error, tag, carrier)


def _unknown_destination_case(
    slug: str, sentence: str, name: str, doc: str, *, expected: str, **sent
) -> None:
    """Declare `3.5.4/anonymous-relay-<slug>`: one message to an unknown queue through the
    relay (`sent`: `_unroutable`'s settled and outcomes, or `_txn_unroutable`'s outcomes
    with in_transaction=True), graded by `_graded` against the `expected` answer."""
    in_transaction = sent.pop("in_transaction", False)

    def run(probe, ctx):
        if in_transaction:
            answer, error, tag = _txn_unroutable(probe, ctx, expected, **sent)
        else:
            answer, error, tag = _unroutable(probe, ctx, **sent)
        _graded(ctx, expected, answer, error, tag)

    declare = case(
        f"3.5.4/anonymous-relay-{slug}",
        MODEL,
        sentence,
        model=ANONTERM,
        requires={"queues"},
        pipelined=False,
    )
    declare(case_function(run, name, doc, __name__))


@case(
    "3.5.4/anonymous-relay-known-destination",
    MODEL,
    ROUTING,
    model=ANONTERM,
    requires={"queues"},
    pipelined=False,  # it reads the broker's open before its first attach
)
def relay_known_destination(probe, ctx):
    """Counters Qpid Broker-J's AnonymousTerminusTest.transferPreSettledToKnownDestination
    (and RabbitMQ's dynamic_source_rpc reply path): a settled message with properties.to
    naming a queue, sent on a null-target link, reaches a receiver from that queue."""
    _, link = _relay(probe, ctx)
    queue = ctx.queue()
    probe.send_message(link, _message(ctx.target_address(queue)), settled=True)
    _routed(ctx, queue, 1, "the message routed by its to")


_unknown_destination_case(
    "unknown-destination-rejected",
    "An unsettled message whose to names no node, on a link whose source supports the "
    "rejected outcome, is rejected with an error naming its delivery-tag (anonterm 2.2.2, "
    "MUST).",
    "relay_unknown_destination_rejected",
    """Counters Qpid Broker-J's AnonymousTerminusTest.
    transferUnsettledToUnknownDestinationWhenRejectedOutcomeSupportedBySource: source
    outcomes accepted and rejected; an unsettled message to a queue never declared: the
    broker rejects it (FAILED otherwise, a MUST of the relay it offers), the error's info
    carrying the delivery-tag.""",
    expected="rejected",
    settled=False,
    outcomes=[ACCEPTED, REJECTED],
)
_unknown_destination_case(
    "unknown-destination-settled-detach",
    "A settled message whose to names no node cannot be rejected: the link is detached with "
    "an error naming its delivery-tag (anonterm 2.2.2, MUST).",
    "relay_unknown_destination_settled_detach",
    """Counters Qpid Broker-J's AnonymousTerminusTest.transferPreSettledToUnknownDestination:
    a settled message to a queue never declared: the broker detaches the link with an
    error whose info carries the delivery-tag.""",
    expected="detach",
    settled=True,
)
_unknown_destination_case(
    "unknown-destination-no-rejected-detach",
    "An unsettled message whose to names no node, on a link whose source does not support "
    "the rejected outcome: the link is detached with an error naming its delivery-tag "
    "(anonterm 2.2.2, MUST).",
    "relay_unknown_destination_no_rejected_detach",
    """Counters Qpid Broker-J's AnonymousTerminusTest.
    transferUnsettledToUnknownDestinationWhenRejectedOutcomeNotSupportedBySource: source
    outcomes accepted only; an unsettled message to a queue never declared: the broker
    detaches the link with an error whose info carries the delivery-tag.""",
    expected="detach",
    settled=False,
    outcomes=[ACCEPTED],
)


def _txn_post(probe, link, txn_id: bytes, to: str, tag: bytes, settled: bool = False) -> int:
    """4.4.1: one message to `to` on the relay link, inside transaction `txn_id`."""
    delivery_id = link.send(
        _message(to).encode(), tag, settled, state=TransactionalState(txn_id=txn_id)
    )
    probe.flush()
    return delivery_id


def _relay_in_transaction(probe, ctx, *, outcomes=None):
    """A relay link and a declared transaction on one session: (link, controller, txn-id).
    UNSUPPORTED without ANONYMOUS-RELAY or without local transactions (Part 4 optional)."""
    session, link = _relay(probe, ctx, outcomes=outcomes)
    controller = Controller(probe, session)
    return link, controller, controller.declare()


def _txn_unroutable(probe, ctx, expected: str, *, outcomes) -> tuple[str, object, bytes]:
    """One unsettled message to an unknown queue through the relay inside a transaction
    (4.4.1): (answer, error, its tag). Unless the answer is the `expected` one, the
    transaction is committed and a node the broker created on demand is UNSUPPORTED."""
    link, controller, txn_id = _relay_in_transaction(probe, ctx, outcomes=outcomes)
    queue = ctx.queue("unknown", declare=False)
    tag = b"amqpspec-txn-unroutable"
    since = probe.mark()
    delivery_id = _txn_post(probe, link, txn_id, ctx.target_address(queue), tag)
    answer, error = _error_of(probe, link, delivery_id, since)
    ctx.note(f"the broker answered the unroutable message with {answer}: {error!r}")
    if answer != expected:
        controller.discharge(txn_id)
        if _created_on_demand(ctx, queue):
            raise Unsupported(f"the broker created node {queue!r} on demand: nothing unknown")
    return answer, error, tag


@case(
    "3.5.4/anonymous-relay-txn-known-destination",
    MODEL,
    ROUTING + " Inside a transaction (4.4.1), at its commit.",
    model=ANONTERM,
    requires={"queues"},
    pipelined=False,
)
def relay_txn_known_destination(probe, ctx):
    """Counters Qpid Broker-J's AnonymousTerminusTest.
    transferUnsettledInTransactionToKnownDestination and
    transferPreSettledInTransactionToKnownDestination: two messages to a queue through the
    relay inside a transaction, one unsettled, one settled; the transaction committed: a
    receiver from the queue gets both. UNSUPPORTED without ANONYMOUS-RELAY or local
    transactions."""
    link, controller, txn_id = _relay_in_transaction(probe, ctx)
    queue = ctx.queue()
    _txn_post(probe, link, txn_id, ctx.target_address(queue), b"txn-known")
    _txn_post(probe, link, txn_id, ctx.target_address(queue), b"txn-known-settled", True)
    answer = controller.discharge(txn_id)
    ctx.note(f"the commit was answered with {describe(answer)}")
    if not isinstance(answer, Accepted):
        raise Unsupported(f"the commit was not accepted ({describe(answer)}): nothing to route")
    _routed(ctx, queue, 2, "the committed messages routed by their to")


_unknown_destination_case(
    "txn-unknown-destination-rejected",
    "A transactional message whose to names no node, on a link whose source supports the "
    "rejected outcome, is rejected (its transactional-state's outcome) with an error naming "
    "its delivery-tag (anonterm 2.2.2, MUST).",
    "relay_txn_unknown_destination_rejected",
    """Counters Qpid Broker-J's AnonymousTerminusTest.
    transferUnsettledInTransactionToUnknownDestinationWhenRejectedOutcomeSupportedBySource:
    source outcomes accepted and rejected; an unsettled transactional message to a queue
    never declared: the broker's transactional-state carries a rejected outcome whose
    error names the delivery-tag (a detach instead FAILS: the source supports rejected).""",
    expected="rejected",
    in_transaction=True,
    outcomes=[ACCEPTED, REJECTED],
)
_unknown_destination_case(
    "txn-unknown-destination-no-rejected-detach",
    "A transactional message whose to names no node, on a link whose source does not "
    "support the rejected outcome: the link is detached with an error naming its "
    "delivery-tag (anonterm 2.2.2, MUST).",
    "relay_txn_unknown_destination_no_rejected_detach",
    """Counters Qpid Broker-J's AnonymousTerminusTest.
    transferUnsettledInTransactionToUnknownDestinationWhenRejectedOutcomeNotSupportedBySource:
    source outcomes accepted only; an unsettled transactional message to a queue never
    declared: the broker detaches the link with an error whose info carries the
    delivery-tag.""",
    expected="detach",
    in_transaction=True,
    outcomes=[ACCEPTED],
)
