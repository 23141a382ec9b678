"""Topic subscriptions as the AMQP JMS mapping makes them (OASIS "AMQP JMS Mapping
Version 1.0", bindmap-jms, working draft; the conventions of Qpid JMS and Qpid Broker-J,
whose TopicDestinationTest these cases counter; not part of the core specification, so not
in the normative manifest: the `jms-topics` model, profile.MODELS).

A JMS topic consumer is a receiver whose source carries the capability `topic` (bindmap-jms
5.2: "type information SHOULD be conveyed ... by supplying a terminus capability for the
particular Destination type", quoted as Broker-J quotes it). Its subscription is durable
when the source never expires and is kept durably (expiry-policy never, durable
configuration or unsettled-state: 3.5.5, 3.5.6) and volatile otherwise; shared (capability
`shared`) when several links attach to it by one name (the link name up to its first `|`:
`sub|global`, `sub|global2`), global (capability `global`) when that name is not the client
container's alone. A durable subscription's links detach with closed=false to keep it and
closed=true to remove it; removing it while another link is attached is refused with
amqp:resource-locked. A receiver attached with a null source by a subscription's link name
finds the subscription and is told its source. What the topic gets while a durable
subscription has no link attached waits in it (JMS 2.0 6.11.1); a message is sent to the
topic by a sender to its address.

Capability-gated: a profile without the `topic-subscriptions` capability (and a
`topic_source` address: the exchange a subscription is made on) is UNSUPPORTED on every
case here; the shared cases also need `SHARED-SUBS` in the broker's open (2.7.1
offered-capabilities; what Qpid JMS looks for before it creates a shared subscription). The
mapping's text is not among the specification texts the suite grades against: a broker
that claims the capability and breaks a convention DIFFERS from the model, never FAILED.

Owns the cases `3.5.3/jms-topic-*`.
"""

from __future__ import annotations

import uuid

from amqpspec.amqp10.composites import Properties, Source, Target
from amqpspec.amqp10.engine import RemoteAttach
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role
from amqpspec.amqp10.types import symbol, uint
from amqpspec.conformance.run.registry import MODEL, case
from amqpspec.conformance.steps.deliveries import granted_one
from amqpspec.conformance.steps.links import attach_answer
from amqpspec.conformance.verdicts import Unsupported

JMS_TOPICS = "jms-topics"  # profile.MODELS
CAPABILITY = "topic-subscriptions"  # profile.CAPABILITIES
SHARED_SUBS = "SHARED-SUBS"
TOPIC = symbol("topic")
SHARED_GLOBAL = [TOPIC, symbol("shared"), symbol("global")]
RESOURCE_LOCKED = "amqp:resource-locked"
NONE, CONFIGURATION, UNSETTLED_STATE = 0, 1, 2  # 3.5.5 terminus-durability


def _topic(ctx) -> str:
    """The profile's topic address; UNSUPPORTED without the capability or the address."""
    ctx.require(CAPABILITY)
    address = ctx.profile.topic_source
    if not address:
        raise Unsupported("the profile names no topic_source address to subscribe to")
    return address


def _shared(probe) -> None:
    """UNSUPPORTED unless the broker offers SHARED-SUBS in its open."""
    probe.open_session()  # the broker's open is in
    offered = probe.conn.remote_open.offered_capabilities if probe.conn.remote_open else None
    offered = [offered] if isinstance(offered, str) else list(offered or ())
    if SHARED_SUBS not in {str(c) for c in offered}:
        raise Unsupported(f"the broker does not offer {SHARED_SUBS} in its open ({offered})")


def _source(address: str, *, durable: bool, capabilities=None) -> Source:
    if durable:
        return Source(
            address=address,
            durable=uint(UNSETTLED_STATE if capabilities is None else CONFIGURATION),
            expiry_policy=symbol("never"),
            capabilities=capabilities or [TOPIC],
        )
    return Source(
        address=address,
        durable=uint(NONE),
        expiry_policy=symbol("link-detach"),
        capabilities=capabilities or [TOPIC],
    )


def _subscribe(probe, ctx, session, name: str, source: Source | None):
    """A receiver named `name` from `source`: its link and the broker's attach; the
    model's difference when the broker refuses it (null source, end or close)."""
    link = session.attach_receiver(name, source, None)
    event = attach_answer(probe, session, link, f"the attach of {name!r}")
    attach = event.attach if isinstance(event, RemoteAttach) else None
    ctx.model(
        attach is not None and attach.source is not None and attach.role == Role.SENDER,
        f"expected link {name!r} attached by the broker as sender with a source (the "
        f"subscription); observed {event}",
    )
    return link, attach


def _detach(probe, ctx, link, *, closed: bool) -> None:
    """Detach `link`; the broker answers in kind (closed as asked) without an error."""
    answer = probe.detach(link, closed=closed)
    ctx.model(
        answer.error is None and bool(answer.closed) == closed,
        f"expected link {link.name!r} detached with closed={closed} and no error; observed "
        f"closed={answer.closed} error={answer.error!r}",
    )


def _name() -> str:
    return f"amqpspec-sub-{uuid.uuid4().hex[:12]}"


def _one_link(probe, ctx, *, durable: bool) -> None:
    address = _topic(ctx)
    session = probe.open_session()
    link, attach = _subscribe(probe, ctx, session, _name(), _source(address, durable=durable))
    ctx.note(f"the broker's source: {attach.source!r}")
    _detach(probe, ctx, link, closed=True)


@case(
    "3.5.3/jms-topic-nonshared-volatile",
    MODEL,
    "A receiver from a topic (source capability topic, expiry-policy link-detach, durable "
    "none) is attached as the subscription's sender, and its detach closed=true answered "
    "without an error (the JMS mapping's non-shared volatile subscription).",
    model=JMS_TOPICS,
)
def nonshared_volatile(probe, ctx):
    """Counters Qpid Broker-J's TopicDestinationTest.nonSharedVolatileSubscriptionLink
    AttachDetach: attach, detach closed=true: closed=true, no error."""
    _one_link(probe, ctx, durable=False)


@case(
    "3.5.3/jms-topic-nonshared-durable",
    MODEL,
    "A receiver from a topic whose source never expires and keeps its unsettled state "
    "(a non-shared durable subscription) is attached, and its detach closed=true (the "
    "subscription removed) answered without an error.",
    model=JMS_TOPICS,
)
def nonshared_durable(probe, ctx):
    """Counters Qpid Broker-J's TopicDestinationTest.nonSharedDurableSubscriptionLink
    AttachDetach: expiry-policy never, durable unsettled-state; detach closed=true."""
    _one_link(probe, ctx, durable=True)


def _two_links(probe, ctx, *, durable: bool, suffix: str):
    """Two links of one shared global subscription (`name|suffix`, `name|suffix2`)."""
    address = _topic(ctx)
    _shared(probe)
    session = probe.open_session()
    name = _name()
    source = _source(address, durable=durable, capabilities=SHARED_GLOBAL)
    first, _ = _subscribe(probe, ctx, session, f"{name}|{suffix}", source)
    second, _ = _subscribe(probe, ctx, session, f"{name}|{suffix}2", source)
    return session, name, first, second


@case(
    "3.5.3/jms-topic-shared-volatile",
    MODEL,
    "Two links of a shared global volatile subscription (capabilities topic, shared, "
    "global; names sub|global-volatile, sub|global-volatile2) are attached; one detached "
    "with closed=false, the other with closed=true, each answered without an error.",
    model=JMS_TOPICS,
    pipelined=False,  # it reads the broker's open before its first attach
)
def shared_volatile(probe, ctx):
    """Counters Qpid Broker-J's TopicDestinationTest.sharedGlobalVolatileSubscriptionLink
    AttachDetach."""
    _, _, first, second = _two_links(probe, ctx, durable=False, suffix="global-volatile")
    answer = probe.detach(second, closed=False)
    ctx.model(answer.error is None, f"expected no error; observed {answer.error!r}")
    _detach(probe, ctx, first, closed=True)


@case(
    "3.5.3/jms-topic-shared-durable",
    MODEL,
    "A shared global durable subscription outlives its two links detached with "
    "closed=false: a receiver attached with a null source by its link name is told the "
    "subscription's source (its topic address), and closing that link removes it.",
    model=JMS_TOPICS,
    pipelined=False,
)
def shared_durable(probe, ctx):
    """Counters Qpid Broker-J's TopicDestinationTest.sharedGlobalDurableSubscriptionLink
    AttachDetach: sub|global and sub|global2 (expiry never, durable configuration),
    both detached closed=false; sub|global attached again with a null source: its source
    is the topic's; detached closed=true."""
    session, name, first, second = _two_links(probe, ctx, durable=True, suffix="global")
    _detach(probe, ctx, second, closed=False)
    _detach(probe, ctx, first, closed=False)
    again, attach = _subscribe(probe, ctx, session, f"{name}|global", None)
    address = attach.source.address
    ctx.model(
        address == ctx.profile.topic_source,
        f"expected the subscription's source address {ctx.profile.topic_source!r} reported "
        f"to the null-source attach of {name}|global; observed {address!r}",
    )
    _detach(probe, ctx, again, closed=True)


@case(
    "3.5.3/jms-topic-shared-durable-close-in-use",
    MODEL,
    "Removing a shared durable subscription (detach closed=true) while another link is "
    "attached to it is refused: the link is detached with closed=true and "
    "amqp:resource-locked.",
    model=JMS_TOPICS,
    pipelined=False,
)
def shared_durable_close_in_use(probe, ctx):
    """Counters Qpid Broker-J's TopicDestinationTest.sharedGlobalDurableSubscriptionClose
    WithActiveLink: sub|global and sub|global2 attached; sub|global detached closed=true:
    answered closed=true with amqp:resource-locked. The second link then removes it."""
    _, _, first, second = _two_links(probe, ctx, durable=True, suffix="global")
    answer = probe.detach(first, closed=True)
    condition = str(answer.error.condition) if answer.error is not None else None
    ctx.model(
        bool(answer.closed) and condition == RESOURCE_LOCKED,
        f"expected the close refused: detach closed=true with {RESOURCE_LOCKED}; observed "
        f"closed={answer.closed} error={answer.error!r}",
    )
    if second.remote_detach is None:
        _detach(probe, ctx, second, closed=True)  # the last link: the subscription goes


@case(
    "3.5.3/jms-topic-durable-keeps-messages",
    MODEL,
    "A durable subscription whose link detached with closed=false keeps what the topic "
    "gets meanwhile: the link attached again receives it.",
    model=JMS_TOPICS,
)
def durable_keeps_messages(probe, ctx):
    """What a durable subscription is for (JMS 2.0 6.11.1; Broker-J's TopicDestinationTest
    checks only the link handshakes): a non-shared durable subscription's link detached
    with closed=false; a message sent to the topic (a sender to the topic's address,
    capability topic, settled); the link attached again with the same name gets it within
    the profile's wait; then closed, which removes the subscription."""
    address = _topic(ctx)
    session = probe.open_session()
    name = _name()
    source = _source(address, durable=True)
    link, _ = _subscribe(probe, ctx, session, name, source)
    _detach(probe, ctx, link, closed=False)
    sender = probe.attach_sender(session, Target(address=address, capabilities=[TOPIC]))
    kept = Message.of(b"kept for the subscription", properties=Properties(subject="amqpspec"))
    probe.send_message(sender, kept, settled=True)
    again, _ = _subscribe(probe, ctx, probe.open_session(), name, source)
    got = granted_one(probe, again)
    ctx.model(
        got == 1,
        f"expected the message sent to {address!r} while subscription {name!r} was "
        f"detached (closed=false) delivered when it attached again; observed {got}",
    )
    _detach(probe, ctx, again, closed=True)
