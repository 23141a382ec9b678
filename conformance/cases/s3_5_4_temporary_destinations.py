"""JMS temporary destinations as the AMQP JMS mapping makes them (OASIS "AMQP JMS Mapping
Version 1.0", bindmap-jms working draft, 5.3; Qpid Broker-J's TemporaryDestinationTest):
a sender asks for a dynamic target (3.5.4) with the capability `temporary-queue` or
`temporary-topic`, expiry-policy link-detach, lifetime-policy delete-on-close. JMS (2.0
section 6.2.2) lets only the creating connection consume from a temporary destination;
any connection may send to it. Broker-J refuses another connection's receiver with
amqp:resource-locked.

Not part of the core specification, so not in the normative manifest: the `jms-temporary`
model (profile.MODELS), DIFFERS when broken, never FAILED. Gated by what the broker
answers: one that refuses dynamic targets, or does not echo the capability in the target it
reports (2.6.3: the terminus as created), does not claim the temporary destination:
UNSUPPORTED. (3.5.4/temporary-queue and 3.5.4/temporary-topic record the same answers on
every broker, MAY.)

The creating connection's own receiver is attached (Broker-J's createTemporaryQueueReceiving
Link), and a node made with delete-on-close is gone once its connection closes (Broker-J's
deleteOnCloseWithConnectionClose*, which ask the broker's admin; here a receiver from the
address on another connection must be refused with amqp:not-found, which tells a node that
is gone from one that refuses others' receivers with amqp:resource-locked). A temporary topic
asked for by a receiver's dynamic source (Broker-J's createTemporaryTopicSubscriptionReceiving
Link) makes that receiver its subscriber: what a sender to its address sends reaches it.

Owns the cases `3.5.4/temporary-*-other-connection-*`, `3.5.4/temporary-queue-receiver` and
`3.5.4/temporary-*-gone-with-connection`, `3.5.4/temporary-topic-dynamic-source`.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import DeleteOnClose, Source, Target
from amqpspec.amqp10.engine import RemoteAttach, RemoteDetach
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.run.registry import MODEL, RunFunction, case, case_function
from amqpspec.conformance.steps.deliveries import granted_one
from amqpspec.conformance.steps.links import attach_answer
from amqpspec.conformance.verdicts import Unsupported

JMS_TEMPORARY = "jms-temporary"  # profile.MODELS
LIFETIME = symbol("lifetime-policy")
RESOURCE_LOCKED = "amqp:resource-locked"
NOT_FOUND = "amqp:not-found"  # 2.8.15: the node does not exist


def _listed(value) -> list:
    return [value] if isinstance(value, str) else list(value or ())


def _asked(terminus: type, capability: str):
    """A dynamic source or target asking for `capability`, as Broker-J asks: expiry-policy
    link-detach, lifetime-policy delete-on-close."""
    return terminus(
        dynamic=True,
        expiry_policy="link-detach",
        capabilities=[symbol(capability)],
        dynamic_node_properties={LIFETIME: DeleteOnClose()},
    )


def _temporary(probe, capability: str) -> str:
    """A sender with a dynamic target asking for `capability`: the node's address.
    UNSUPPORTED when the broker refuses it or does not echo the capability."""
    session = probe.open_session()
    target = _asked(Target, capability)
    link = session.attach_sender(f"amqpspec-{capability}-{id(target)}", Source(), target)
    event = attach_answer(probe, session, link)
    reported = event.attach.target if isinstance(event, RemoteAttach) else None
    if reported is None or not reported.dynamic or not reported.address:
        raise Unsupported(f"the broker created no dynamic node: {event}")
    if capability not in {str(c) for c in _listed(reported.capabilities)}:
        raise Unsupported(
            f"the broker does not report {capability} in the target it created "
            f"({reported.capabilities!r}): it does not claim the JMS temporary destination"
        )
    return reported.address


def _refusal(probe, link, event) -> tuple[bool, str | None]:
    """Whether the broker attached `link` (its answer `event`), and the condition of the
    detach, end or close that refused it."""
    if isinstance(event, RemoteAttach) and event.attach.source is not None:
        return True, None
    if isinstance(event, RemoteAttach):  # a null source: the detach follows (2.6.3)
        event = probe.expect(
            lambda e: isinstance(e, RemoteDetach) and e.link is link, what="the detach"
        )
    error = getattr(event, "error", None)
    return False, str(error.condition) if error is not None else None


def _refused_elsewhere(ctx, address: str, capability: str, expected: str, why: str) -> None:
    """A receiver from `address` on another connection: refused with `expected` (the
    model's difference otherwise; `why` the rule)."""
    other = ctx.probe()
    session = other.open_session()
    source = Source(address=address, capabilities=[symbol(capability)])
    link = session.attach_receiver("amqpspec-temp-other-receiver", source, Target())
    attached, condition = _refusal(other, link, attach_answer(other, session, link))
    ctx.model(
        not attached and condition == expected,
        f"expected a receiver from {capability} {address!r} on another connection refused "
        f"with {expected} ({why}); observed "
        f"{'attached' if attached else f'refused with {condition}'}",
    )


def _other_receiver(ctx, address: str, capability: str) -> None:
    """Another connection's receiver from the temporary node: refused (JMS 2.0 6.2.2),
    detached with closed=true and amqp:resource-locked as Broker-J does."""
    why = "only the creating connection consumes, JMS 2.0 6.2.2"
    _refused_elsewhere(ctx, address, capability, RESOURCE_LOCKED, why)


def _sender(ctx, probe, address: str, capability: str, who: str) -> Any:
    """A sender to the temporary node on `probe`'s connection: attached (any connection may
    send to a temporary destination). The link."""
    session = probe.open_session()
    target = Target(address=address, capabilities=[symbol(capability)])
    link = session.attach_sender(f"amqpspec-temp-sender-{id(target)}", Source(), target)
    event = attach_answer(probe, session, link)
    ctx.model(
        isinstance(event, RemoteAttach) and event.attach.target is not None,
        f"expected {who}'s sender to {capability} {address!r} attached (any connection may "
        f"send to a temporary destination); observed {event}",
    )
    return link


def _other_sender(ctx, address: str, capability: str) -> None:
    """Another connection's sender to the temporary node: attached."""
    _sender(ctx, ctx.probe(), address, capability, "another connection")


def _jms_case(slug: str, sentence: str, run: RunFunction, name: str, doc: str) -> None:
    """Register `run`, made by a factory (`case_function`: its `name`, `doc`), as the case
    `3.5.4/<slug>` of the JMS temporary-destination model."""
    case(f"3.5.4/{slug}", MODEL, sentence, model=JMS_TEMPORARY)(
        case_function(run, name, doc, __name__)
    )


# the link another connection attaches to a temporary node: (case slug, the sentence's
# ending, the check)
OTHER_CONNECTION = {
    "receiver": ("receiver-refused", "refused with amqp:resource-locked", _other_receiver),
    "sender": ("sender-allowed", "attached", _other_sender),
}


def _other_connection_case(kind: str, end: str, doc: str) -> None:
    """Declare `3.5.4/temporary-<kind>-other-connection-<...>`: a temporary `kind` (queue
    or topic) made on the case's connection; another connection's `end` (receiver or
    sender, OTHER_CONNECTION) is refused or attached as the JMS mapping says."""
    capability = f"temporary-{kind}"
    slug, answered, check = OTHER_CONNECTION[end]

    def run(probe, ctx):
        check(ctx, _temporary(probe, capability), capability)

    sentence = (
        f"A {end} from another connection than the one that created a temporary {kind} is "
        f"{answered} (the JMS mapping's {capability})."
    )
    name = f"temporary_{kind}_other_{end}"
    _jms_case(f"{capability}-other-connection-{slug}", sentence, run, name, doc)


_other_connection_case(
    "queue",
    "receiver",
    """Counters Qpid Broker-J's TemporaryDestinationTest.createTemporaryQueueReceiving
    LinkFromOtherConnectionDisallowed.""",
)
_other_connection_case(
    "queue",
    "sender",
    """Counters Qpid Broker-J's TemporaryDestinationTest.createTemporaryQueueSendingLink
    FromOtherConnectionAllowed.""",
)
_other_connection_case(
    "topic",
    "receiver",
    """Counters Qpid Broker-J's TemporaryDestinationTest.createTemporaryTopicSubscription
    ReceivingLinkFromOtherConnectionDisallowed (the topic made by a dynamic target here,
    where Broker-J's creating link is a receiver).""",
)
_other_connection_case(
    "topic",
    "sender",
    """Counters Qpid Broker-J's TemporaryDestinationTest.createTemporaryTopicSendingLink
    FromOtherConnectionAllowed.""",
)


@case(
    "3.5.4/temporary-queue-receiver",
    MODEL,
    "The connection that created a temporary queue attaches a receiver from its address: "
    "attached, its source naming that address (the JMS mapping's temporary-queue).",
    model=JMS_TEMPORARY,
)
def temporary_queue_receiver(probe, ctx):
    """Counters Qpid Broker-J's TemporaryDestinationTest.createTemporaryQueueReceivingLink:
    a dynamic target with temporary-queue; a receiver from its address on the same
    connection, capability temporary-queue."""
    address = _temporary(probe, "temporary-queue")
    session = probe.open_session()
    source = Source(address=address, capabilities=[symbol("temporary-queue")])
    link = session.attach_receiver("amqpspec-temp-queue-receiver", source, Target())
    event = attach_answer(probe, session, link)
    reported = event.attach.source if isinstance(event, RemoteAttach) else None
    ctx.model(
        reported is not None and reported.address == address,
        f"expected the creating connection's receiver from {address!r} attached with that "
        f"source address; observed {event}",
    )


def _gone_with_connection(ctx, capability: str) -> None:
    """The temporary node (delete-on-close) made on a connection that then closes: a
    receiver from its address on another connection is refused (the node is gone)."""
    creator = ctx.probe()
    address = _temporary(creator, capability)
    creator.close()
    why = "delete-on-close: gone with the connection that created it"
    _refused_elsewhere(ctx, address, capability, NOT_FOUND, why)


GONE = (
    "A temporary {kind} (delete-on-close) is gone once the connection that created it "
    "closes: a receiver from its address is refused (the JMS mapping's temporary-{kind})."
)


def _gone_case(kind: str, doc: str) -> None:
    """Declare `3.5.4/temporary-<kind>-gone-with-connection` (`_gone_with_connection`)."""

    def run(probe, ctx):
        _gone_with_connection(ctx, f"temporary-{kind}")

    sentence = GONE.format(kind=kind)
    _jms_case(
        f"temporary-{kind}-gone-with-connection", sentence, run, f"temporary_{kind}_gone", doc
    )


_gone_case(
    "queue",
    """Counters Qpid Broker-J's TemporaryDestinationTest.deleteOnCloseWithConnectionClose
    ForQueue (Broker-J asks its admin whether the node exists; here a receiver asks).""",
)
_gone_case(
    "topic",
    """Counters Qpid Broker-J's TemporaryDestinationTest.deleteOnCloseWithConnectionClose
    ForTopic.""",
)


@case(
    "3.5.4/temporary-topic-dynamic-source",
    MODEL,
    "A receiver asking for a dynamic source with temporary-topic subscribes to the "
    "temporary topic it creates: a sender to the reported address is attached and what it "
    "sends reaches the receiver (the JMS mapping's temporary-topic).",
    model=JMS_TEMPORARY,
)
def temporary_topic_dynamic_source(probe, ctx):
    """Counters Qpid Broker-J's TemporaryDestinationTest.createTemporaryTopicSubscription
    ReceivingLink (which stops at the sender's attach and flow; here one message goes
    through): a dynamic source, temporary-topic, delete-on-close, link-detach."""
    session = probe.open_session()
    source = _asked(Source, "temporary-topic")
    link = session.attach_receiver("amqpspec-temp-topic-source", source, Target())
    event = attach_answer(probe, session, link)
    reported = event.attach.source if isinstance(event, RemoteAttach) else None
    if reported is None or not reported.address:
        raise Unsupported(f"the broker created no dynamic source: {event}")
    if "temporary-topic" not in {str(c) for c in _listed(reported.capabilities)}:
        raise Unsupported(f"the broker does not report temporary-topic ({reported!r})")
    sender = _sender(ctx, probe, reported.address, "temporary-topic", "the same connection")
    probe.send_message(sender, b"to the temporary topic", settled=True)
    got = granted_one(probe, link)
    ctx.model(
        got == 1,
        f"expected the message sent to {reported.address!r} delivered to the receiver whose "
        f"dynamic source created it; observed {got}",
    )
