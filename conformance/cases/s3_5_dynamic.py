"""3.5.4 dynamic targets and 3.5.10 lifetime policies: a sender asking for a dynamic target
gets the address of the node the broker created (3.5.4 MUST); a node asked for with a
lifetime-policy in its dynamic-node-properties (3.5.9) that the broker reports back as
created (2.6.3 MUST: "the endpoint MUST report the actual properties of the terminus as
created") lives and goes as that policy says (3.5.10: delete-on-close, "deleted at the
point that the Link which caused its creation ceases to exist"; delete-on-no-links, when
"there remain no Links for which the node is either the source or target";
delete-on-no-messages, when "the Link which caused its creation no longer exists and there
remain no Messages at the Node"; 3.5.9: "the lifetime will never be less than the lifetime
of the link which caused its creation").

Capability-gated by what the broker answers, never FAILED for lacking the feature: a broker
that refuses dynamic nodes, or answers dynamic=false, is UNSUPPORTED; one that does not
report a lifetime-policy in its terminus's dynamic-node-properties (or reports another
policy than asked: 2.6.3 lets it adjust) does not claim the policy, UNSUPPORTED. FAILED only
when it reported the policy and the node outlives it (or goes before it). Whether a node
still exists is seen through a message left in it, so a broker that creates a node on
demand for any address is judged right: after deletion, a receiver from the address gets
nothing (or is refused); a node that lives on gives back the message.

The JMS mapping's temporary-queue and temporary-topic capabilities are recorded (MAY): no
sentence of the core specification binds them.

Owns the cases `3.5.4/terminus-dynamic-target-*`, `3.5.4/temporary-queue`,
`3.5.4/temporary-topic`, `3.5.9/node-properties-*` and `3.5.10/*`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.composites import (
    DeleteOnClose,
    DeleteOnNoLinks,
    DeleteOnNoLinksOrMessages,
    DeleteOnNoMessages,
    Source,
    Target,
)
from amqpspec.amqp10.engine import (
    RemoteAttach,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    TransferReceived,
)
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.run.registry import MAY, MUST, case, case_function
from amqpspec.conformance.steps.deliveries import collect, exactly
from amqpspec.conformance.steps.links import attach_answer
from amqpspec.conformance.verdicts import Unsupported

DYNAMIC_TARGET_ADDRESS = "3.5.4/target.address.2"  # set by the receiver when dynamic is true
AS_CREATED = "2.6.3/establishing-or-resuming-a-link.3"  # report the terminus as created
LIFETIME_POLICIES = "3.5.9/node-properties.1"  # one of the four lifetime-policies
LIFETIME = symbol("lifetime-policy")
POLICY_NAMES = {
    DeleteOnClose: "delete-on-close",
    DeleteOnNoLinks: "delete-on-no-links",
    DeleteOnNoMessages: "delete-on-no-messages",
    DeleteOnNoLinksOrMessages: "delete-on-no-links-or-messages",
}
GONE_WAIT = 1.0  # seconds a receiver from a deleted node waits for the message left in it


def _dynamic(probe, ctx, *, target: bool, policy: Any = None, session=None):
    """A link asking for a dynamic node (a sender: dynamic target; a receiver: dynamic
    source), expiry-policy link-detach, `policy` as its lifetime-policy: (session, link,
    the broker's terminus). UNSUPPORTED when the broker refuses it or creates none."""
    session = session or probe.open_session()
    properties = {LIFETIME: policy} if policy is not None else None
    if target:
        terminus = Target(
            dynamic=True, expiry_policy="link-detach", dynamic_node_properties=properties
        )
        link = session.attach_sender(f"amqpspec-dyn-t-{id(terminus)}", Source(), terminus)
    else:
        terminus = Source(
            dynamic=True, expiry_policy="link-detach", dynamic_node_properties=properties
        )
        link = session.attach_receiver(f"amqpspec-dyn-s-{id(terminus)}", terminus, Target())
    event = attach_answer(probe, session, link, "attach")
    if not isinstance(event, RemoteAttach):
        ctx.note(f"the broker answered the dynamic attach with {event}")
        raise Unsupported(f"the broker refuses dynamic nodes ({_refusal(event)})")
    reported = event.attach.target if target else event.attach.source
    if reported is None:
        probe.expect(lambda e: isinstance(e, RemoteDetach) and e.link is link, what="detach")
        raise Unsupported("the broker refuses dynamic nodes (a null terminus, then a detach)")
    if not reported.dynamic:  # 2.6.3: it may adjust the terminus; it created no dynamic node
        raise Unsupported(f"the broker answered dynamic=false (no dynamic node): {reported!r}")
    return session, link, reported


def _refusal(event) -> str:
    """The broker's answer to a dynamic attach it refused: the frame and its error."""
    name = {RemoteEnd: "end", RemoteClose: "close", RemoteAttach: "a null terminus"}
    error = getattr(event, "error", None)
    condition = f" with {error.condition}: {error.description}" if error is not None else ""
    return f"{name.get(type(event), type(event).__name__)}{condition}"


def _claimed(ctx, reported, asked: type) -> str:
    """The node's address when the broker reported the lifetime-policy asked for (3.5.9, a
    valid one: MUST); UNSUPPORTED when it reports none or another (it claims no such node)."""
    if not reported.address:
        raise Unsupported(f"the broker's dynamic terminus has no address: {reported!r}")
    properties = reported.dynamic_node_properties
    value = properties.get(LIFETIME) if isinstance(properties, dict) else None
    if value is None:
        raise Unsupported(
            "the broker does not report the node's lifetime-policy (dynamic-node-properties "
            f"of its terminus: {properties!r}), so it claims none (3.5.9)"
        )
    ctx.must(
        type(value) in POLICY_NAMES,
        f"expected one of the defined lifetime-policies in the broker's dynamic-node-properties; "
        f"observed {value!r}",
        LIFETIME_POLICIES,
    )
    if not isinstance(value, asked):
        raise Unsupported(
            f"asked for {POLICY_NAMES[asked]}, the broker created {POLICY_NAMES[type(value)]} "
            "(2.6.3 lets it adjust the terminus)"
        )
    ctx.note(f"the broker reports {POLICY_NAMES[asked]} for node {reported.address!r}")
    return reported.address


def _leave_message(probe, session, address: str, sender=None) -> None:
    """One unsettled message into the node at `address`, accepted (a new sender, or
    `sender`: the link that created the node)."""
    link = sender or probe.attach_sender(session, address)
    probe.publish(link, 1, b"left-in-the-node", timeout=5.0)


def _node_keeps_message(probe, session, address: str) -> bool:
    """Whether the node at `address` still holds the message left in it: a receiver from
    it gets a delivery within GONE_WAIT (refused, or nothing: the node is gone, or a new one
    was created on demand). The message is settled (accepted) when it comes."""
    link = probe.attach_receiver(session, address, wait=False)
    event = probe.expect(
        lambda e: isinstance(e, RemoteAttach | RemoteDetach) and e.link is link,
        what="attach",
    )
    if isinstance(event, RemoteDetach):
        return False
    if event.attach.source is None:  # 2.6.3: refused, a detach follows
        probe.expect(lambda e: isinstance(e, RemoteDetach) and e.link is link, what="detach")
        return False
    probe.grant(link, 1)
    try:
        delivery = probe.expect(
            lambda e: isinstance(e, TransferReceived) and e.link is link, GONE_WAIT, "transfer"
        )
    except WaitTimeout:
        probe.detach(link)
        return False
    if not delivery.settled:
        probe.settle(link, delivery)
    probe.detach(link)
    return True


@case(
    "3.5.4/terminus-dynamic-target-address",
    MUST,
    "The address of the target MUST be set when sent on a attach frame sent by the receiving "
    "Link Endpoint where the dynamic flag is set to true.",
    sentences=(DYNAMIC_TARGET_ADDRESS,),
    role="receiver",
)
def dynamic_target_address(probe, ctx):
    """A sender with a dynamic target (RabbitMQ's dynamic_target_short_link_name; Qpid
    Broker-J's DeleteOnCloseTest.deleteOnCloseOnTarget creates one): the broker's target
    has dynamic set and an address (UNSUPPORTED when it refuses dynamic nodes)."""
    _, _, target = _dynamic(probe, ctx, target=True)
    ctx.check(
        bool(target.address),
        f"expected an address in the broker's dynamic target; observed {target!r}",
    )


@case(
    "3.5.4/terminus-dynamic-target-usable",
    MAY,
    "A node the broker created for a dynamic target takes the messages sent on the link and "
    "gives them to a receiver from its address (3.5.4 dynamic; no keyword).",
)
def dynamic_target_usable(probe, ctx):
    """A sender with a dynamic target sends one message; a receiver on the same connection
    from the target's address gets it (Qpid Broker-J's
    TemporaryDestinationTest.createTemporaryQueueReceivingLink, without the JMS capability)."""
    session, sender, target = _dynamic(probe, ctx, target=True)
    if not target.address:  # 3.5.4/terminus-dynamic-target-address judges that
        raise Unsupported(f"the dynamic target has no address to receive from: {target!r}")
    _leave_message(probe, session, target.address, sender)
    receiver = probe.attach_receiver(session, target.address, credit=1)
    exactly(probe, receiver, 1)


def _deleted_on_close(probe, ctx, *, target: bool) -> None:
    session, link, reported = _dynamic(probe, ctx, target=target, policy=DeleteOnClose())
    address = _claimed(ctx, reported, DeleteOnClose)
    _leave_message(probe, session, address, link if target else None)
    probe.detach(link)
    ctx.must(
        not _node_keeps_message(probe, session, address),
        f"expected node {address!r} (reported delete-on-close) deleted once the link that "
        "created it was closed (3.5.10); a receiver from it still got the message left in it",
        AS_CREATED,
    )


@case(
    "3.5.10/delete-on-close-source",
    MUST,
    "A node the broker reported as created with lifetime-policy delete-on-close is deleted "
    "at the point that the link which caused its creation ceases to exist (3.5.10).",
    sentences=(AS_CREATED, LIFETIME_POLICIES),
)
def delete_on_close_source(probe, ctx):
    """Counters Qpid Broker-J's DeleteOnCloseTest.deleteOnCloseOnSource (and RabbitMQ's
    dynamic_terminus_delete): a receiver with a dynamic source, lifetime-policy
    delete-on-close; one message left in the node; the receiver closed (detach
    closed=true): a new receiver from the address gets nothing."""
    _deleted_on_close(probe, ctx, target=False)


@case(
    "3.5.10/delete-on-close-target",
    MUST,
    "A node the broker reported as created with lifetime-policy delete-on-close is deleted "
    "at the point that the link which caused its creation ceases to exist (3.5.10).",
    sentences=(AS_CREATED, LIFETIME_POLICIES),
)
def delete_on_close_target(probe, ctx):
    """Counters Qpid Broker-J's DeleteOnCloseTest.deleteOnCloseOnTarget and
    TemporaryDestinationTest.deleteOnCloseWithConnectionCloseForQueue (RabbitMQ's
    dynamic_target_long_link_name): a sender with a dynamic target, delete-on-close, sends
    one message, then closes: a receiver from the address gets nothing."""
    _deleted_on_close(probe, ctx, target=True)


@case(
    "3.5.10/delete-on-close-kept-while-suspended",
    MUST,
    "A node reported as delete-on-close lives as long as the link that created it, and a "
    "link detached with closed=false is suspended, not gone (3.5.9: the lifetime will "
    "never be less than the lifetime of the link which caused its creation).",
    sentences=(AS_CREATED, LIFETIME_POLICIES),
)
def delete_on_close_kept_while_suspended(probe, ctx):
    """Counters Qpid Broker-J's DeleteOnCloseTest.doesNotDeleteOnDetach: a receiver with a
    dynamic source, delete-on-close, expiry-policy never; one message left in the node; the
    receiver detached with closed=false: a receiver on the same connection from the
    address still gets the message. Then the same link attached again: when the broker
    resumes it with the same node (2.6: the termini of a suspended link remain), one more
    message, the link closed: the node is gone (another node: recorded)."""
    session = probe.open_session()
    source = Source(
        dynamic=True, expiry_policy="never", dynamic_node_properties={LIFETIME: DeleteOnClose()}
    )
    link = session.attach_receiver("amqpspec-dyn-suspend", source, Target())
    probe.flush()
    event = probe.expect(
        lambda e: isinstance(e, RemoteAttach | RemoteEnd | RemoteClose), what="attach"
    )
    if not isinstance(event, RemoteAttach) or event.attach.source is None:
        raise Unsupported(f"the broker refuses dynamic nodes ({_refusal(event)})")
    if not event.attach.source.dynamic:
        raise Unsupported("the broker answered dynamic=false (no dynamic node)")
    address = _claimed(ctx, event.attach.source, DeleteOnClose)
    _leave_message(probe, session, address)
    probe.detach(link, closed=False)
    ctx.must(
        _node_keeps_message(probe, session, address),
        f"expected node {address!r} (reported delete-on-close) to outlive the detach with "
        "closed=false of the link that created it (suspended, not gone); a receiver from it "
        "got nothing",
        AS_CREATED,
    )
    again = session.attach_receiver("amqpspec-dyn-suspend", source, Target())  # resumed
    probe.flush()
    event = probe.expect(
        lambda e: isinstance(e, RemoteAttach | RemoteEnd | RemoteClose), what="attach"
    )
    resumed = event.attach.source if isinstance(event, RemoteAttach) else None
    if resumed is None or resumed.address != address:
        ctx.note(f"attached again, the link got another node (not resumed): {resumed!r}")
        return
    _leave_message(probe, session, address)
    probe.detach(again)
    ctx.must(
        not _node_keeps_message(probe, session, address),
        f"expected node {address!r} (reported delete-on-close) deleted once the link that "
        "created it, suspended and attached again, was closed; a receiver from it still got "
        "the message left in it",
        AS_CREATED,
    )


@case(
    "3.5.10/delete-on-no-links",
    MUST,
    "A node the broker reported as created with lifetime-policy delete-on-no-links is "
    "deleted at the point that there remain no links for which the node is either the "
    "source or target (3.5.10), not before.",
    sentences=(AS_CREATED, LIFETIME_POLICIES),
)
def delete_on_no_links(probe, ctx):
    """A sender with a dynamic target, delete-on-no-links, sends two messages; a receiver
    from the address attaches; the sender closes: the receiver still gets one message (a
    link remains); then it closes too: a new receiver from the address gets nothing."""
    session, sender, reported = _dynamic(probe, ctx, target=True, policy=DeleteOnNoLinks())
    address = _claimed(ctx, reported, DeleteOnNoLinks)
    probe.publish(sender, 2, b"left-in-the-node", timeout=5.0)
    receiver = probe.attach_receiver(session, address)
    probe.detach(sender)
    probe.grant(receiver, 1)
    try:
        probe.receive(receiver, 1, timeout=5.0)
    except AssertionError as exc:
        ctx.must(
            False,
            f"expected node {address!r} (reported delete-on-no-links) kept while a link "
            f"from it remains; {exc}",
            AS_CREATED,
        )
    probe.detach(receiver)
    ctx.must(
        not _node_keeps_message(probe, session, address),
        f"expected node {address!r} (reported delete-on-no-links) deleted once no link had "
        "it as source or target (3.5.10); a receiver from it still got the message left in it",
        AS_CREATED,
    )


def _kept_with_messages(probe, ctx, policy: Any) -> None:
    session, sender, reported = _dynamic(probe, ctx, target=True, policy=policy)
    address = _claimed(ctx, reported, type(policy))
    _leave_message(probe, session, address, sender)
    probe.detach(sender)
    ctx.must(
        _node_keeps_message(probe, session, address),
        f"expected node {address!r} (reported {POLICY_NAMES[type(policy)]}) kept while a "
        "message remains in it after the link that created it closed (3.5.10); a receiver "
        "from it got nothing",
        AS_CREATED,
    )


@case(
    "3.5.10/delete-on-no-messages",
    MUST,
    "A node the broker reported as created with lifetime-policy delete-on-no-messages is "
    "deleted when the link which caused its creation no longer exists and there remain no "
    "messages at the node (3.5.10): not while a message remains.",
    sentences=(AS_CREATED, LIFETIME_POLICIES),
)
def delete_on_no_messages(probe, ctx):
    """A sender with a dynamic target, delete-on-no-messages, sends one message and
    closes: a receiver from the address still gets the message."""
    _kept_with_messages(probe, ctx, DeleteOnNoMessages())


@case(
    "3.5.10/delete-on-no-links-or-messages",
    MUST,
    "A node the broker reported as created with lifetime-policy "
    "delete-on-no-links-or-messages is deleted when no links have it as source or target "
    "and there remain no messages at the node (3.5.10): not while a message remains.",
    sentences=(AS_CREATED, LIFETIME_POLICIES),
)
def delete_on_no_links_or_messages(probe, ctx):
    """A sender with a dynamic target, delete-on-no-links-or-messages, sends one message
    and closes: a receiver from the address still gets the message."""
    _kept_with_messages(probe, ctx, DeleteOnNoLinksOrMessages())


def _temporary_node(probe, ctx, kind: str):
    """A sender with a dynamic target asking for the JMS mapping's temporary-`kind`
    capability (queue or topic), delete-on-close: (session, link, the broker's target),
    its capabilities noted. UNSUPPORTED when the broker refuses dynamic nodes or creates
    none."""
    session = probe.open_session()
    target = Target(
        dynamic=True,
        expiry_policy="link-detach",
        capabilities=[symbol(f"temporary-{kind}")],
        dynamic_node_properties={LIFETIME: DeleteOnClose()},
    )
    link = session.attach_sender(f"amqpspec-temp-{kind}", Source(), target)
    probe.flush()
    event = probe.expect(
        lambda e: isinstance(e, RemoteAttach | RemoteEnd | RemoteClose), what="attach"
    )
    if not isinstance(event, RemoteAttach) or event.attach.target is None:
        raise Unsupported(f"the broker refuses dynamic nodes ({_refusal(event)})")
    reported = event.attach.target
    if not reported.dynamic or not reported.address:
        raise Unsupported(f"the broker created no dynamic node: {reported!r}")
    ctx.note(f"the broker's target capabilities: {reported.capabilities!r}")
    return session, link, reported


def _attached_or_refused(probe, link) -> str:
    """'attached' when the broker's attach answering `link` carries its terminus, else
    'refused' (recorded)."""
    answer = probe.expect(
        lambda e: isinstance(e, RemoteAttach | RemoteDetach) and e.link is link, what="attach"
    )
    if not isinstance(answer, RemoteAttach):
        return "refused"
    terminus = answer.attach.target if link.is_sender else answer.attach.source
    return "attached" if terminus is not None else "refused"


def _note_other_connection(ctx, address: str, answer_of: Callable[[Any, Any], str]) -> None:
    """A second connection's sender to the node at `address` and receiver from it: how the
    broker answered each (`answer_of(probe, link)`), noted (recorded, not judged)."""
    other = ctx.probe()
    session = other.open_session()
    sender = other.attach_sender(session, address, wait=False)
    ctx.note(f"another connection's sender to the node: {answer_of(other, sender)}")
    receiver = other.attach_receiver(session, address, wait=False)
    ctx.note(f"another connection's receiver from it: {answer_of(other, receiver)}")


@case(
    "3.5.4/temporary-queue",
    MAY,
    "A dynamic target asked for with the JMS mapping's temporary-queue capability: whether "
    "the broker reports the capability, and whether another connection may consume from "
    "the node (JMS: only the creating connection) is recorded (no AMQP keyword).",
)
def temporary_queue(probe, ctx):
    """Counters Qpid Broker-J's TemporaryDestinationTest.createTemporaryQueueReceivingLink,
    ...FromOtherConnectionDisallowed and createTemporaryQueueSendingLinkFromOtherConnection
    Allowed (recorded, not judged): a sender with a dynamic target, capability
    temporary-queue, delete-on-close; the broker's capabilities; a second connection's
    sender to the node and its receiver from it."""
    _, link, reported = _temporary_node(probe, ctx, "queue")
    _note_other_connection(ctx, reported.address, _attached_or_refused)
    probe.detach(link)


DIST_MODES = symbol("supported-dist-modes")
DIST_MODES_SYMBOLS = "3.5.9/node-properties.2"  # one or more symbols, valid modes


def _invalid_node_properties(probe, ctx, properties: dict) -> None:
    """A receiver with a dynamic source whose dynamic-node-properties break 3.5.9 (the
    probe's side): the broker's answer is recorded; a node it reports back carries valid
    properties (3.5.9 binds its attach too)."""
    session = probe.open_session()
    source = Source(dynamic=True, expiry_policy="link-detach", dynamic_node_properties=properties)
    since = probe.mark()
    link = session.attach_receiver("amqpspec-dyn-invalid", source, Target())
    event = attach_answer(probe, session, link, "attach")
    reported = event.attach.source if isinstance(event, RemoteAttach) else None
    if reported is None:
        ctx.outcome(probe.error_outcome(timeout=1.0, since=since))
        return
    answered = reported.dynamic_node_properties
    ctx.note(f"the broker attached the node: {reported!r}")
    if isinstance(answered, dict) and answered.get(LIFETIME) is not None:
        value = answered[LIFETIME]
        ctx.must(
            type(value) in POLICY_NAMES,
            f"expected a defined lifetime-policy in the broker's dynamic-node-properties; "
            f"observed {value!r}",
            LIFETIME_POLICIES,
        )
    if isinstance(answered, dict) and answered.get(DIST_MODES) is not None:
        modes = answered[DIST_MODES]
        modes = modes if isinstance(modes, list | tuple) else [modes]
        ctx.must(
            all(isinstance(m, symbol) for m in modes),
            f"expected symbols in the broker's supported-dist-modes; observed {modes!r}",
            DIST_MODES_SYMBOLS,
        )
    ctx.outcome("attached")


def _invalid_properties_case(field: str, what: str, properties: dict, doc: str) -> None:
    """Declare `3.5.9/node-properties-<field>-invalid` (`_invalid_node_properties`)."""

    def run(probe, ctx):
        _invalid_node_properties(probe, ctx, properties)

    declare = case(
        f"3.5.9/node-properties-{field}-invalid",
        MAY,
        f"A dynamic source whose {what}: the probe breaks 3.5.9, the broker's answer is "
        "recorded; what it reports back must be valid.",
        outcomes={"attached", "detach:*", "end:*", "close:*"},
    )
    name = f"node_properties_{field.replace('-', '_')}_invalid"
    declare(case_function(run, name, doc, __name__))


_invalid_properties_case(
    "lifetime-policy",
    "lifetime-policy is no lifetime-policy (a string)",
    {LIFETIME: "delete-on-close"},
    """Counters Qpid Broker-J's DecodeErrorTest.nodePropertiesLifetimePolicy (which expects
    a decode-error): lifetime-policy "delete-on-close" as a string, not the described type.""",
)
_invalid_properties_case(
    "dist-modes",
    "supported-dist-modes is no symbol (an integer)",
    {DIST_MODES: 7},
    """Counters Qpid Broker-J's DecodeErrorTest.nodePropertiesSupportedDistributionModes
    (which expects a decode-error): supported-dist-modes 7, not symbols.""",
)


def _answer(probe, link) -> str:
    """'attached' or what the broker refused `link` with (recorded)."""
    event = probe.expect(
        lambda e: isinstance(e, RemoteAttach | RemoteDetach) and e.link is link, what="attach"
    )
    terminus = None
    if isinstance(event, RemoteAttach):
        terminus = event.attach.target if link.is_sender else event.attach.source
    if terminus is not None:
        return "attached"
    if isinstance(event, RemoteAttach):
        event = probe.expect(
            lambda e: isinstance(e, RemoteDetach) and e.link is link, what="detach"
        )
    return f"refused ({event.error.condition if event.error is not None else 'no error'})"


@case(
    "3.5.4/temporary-topic",
    MAY,
    "A dynamic target asked for with the JMS mapping's temporary-topic capability: whether "
    "the broker reports the capability, delivers what the link sends to a receiver from the "
    "node's address, and lets another connection consume from it is recorded (no AMQP "
    "keyword).",
)
def temporary_topic(probe, ctx):
    """Counters Qpid Broker-J's TemporaryDestinationTest.
    createTemporaryTopicSubscriptionReceivingLink, ...FromOtherConnectionDisallowed,
    createTemporaryTopicSendingLinkFromOtherConnectionAllowed and
    deleteOnCloseWithConnectionCloseForTopic (recorded, not judged): a sender with a dynamic
    target, capability temporary-topic, delete-on-close; a receiver on the same connection
    from its address gets what the sender sends; a second connection's sender to it and
    receiver from it; then the sender closes."""
    session, link, reported = _temporary_node(probe, ctx, "topic")
    receiver = probe.attach_receiver(session, reported.address, wait=False)
    answer = _answer(probe, receiver)
    ctx.note(f"a receiver on the same connection from the node: {answer}")
    if answer == "attached":
        probe.grant(receiver, 1)
        probe.publish(link, 1, b"to-the-topic", timeout=5.0)
        delivered = collect(probe, receiver, 1.0)
        ctx.note(f"the message the link sent reached that receiver: {bool(delivered)}")
    _note_other_connection(ctx, reported.address, _answer)
    probe.detach(link)
