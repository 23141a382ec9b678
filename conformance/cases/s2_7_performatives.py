"""2.6.3 / 2.7.x: a link to a missing node is attached with a null terminus and then
detached at once (2.6.3 MUST), and so is a link whose attach (a receiver without a target,
a sender without a source: the probe's own terminus absent) the broker answers with a null
terminus (what it answers otherwise is recorded), a close is answered with a close before
the connection ends (2.4.3 MUST), the bare message of a multi-frame or ordinary delivery
comes out with its exact encoding (3.2 MUST); how the broker answers a detach and an end,
and whether it grants a publisher credit, are recorded (MAY: no keyword sentence binds
it).

Owns the cases `2.6.3/*`, `2.7.7/*`, `2.7.8/*`, `2.7.9/*`, `2.6.14/*` and `3.2/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Data, Properties, Source, Target
from amqpspec.amqp10.message import Message
from amqpspec.conformance.run.registry import MAY, MUST, case
from amqpspec.conformance.steps.links import consumer, small_frame_probe
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.steps.refusals import close_answered_case

NOT_FOUND = {"detach:amqp:not-found"}
NULL_TERMINUS = "2.6.3/establishing-or-resuming-a-link.1"  # then MUST detach at once
BARE_ENCODING = "3.2/message-format.2"  # the bare message's exact encoding not modified
BARE_NOT_INSERTED = "3.2/message-format.1"  # an omitted section not inserted
PROPERTIES_UNALTERED = "3.2.4/properties.1"  # properties retransmitted unaltered


@case(
    "2.6.3/attach-missing-node",
    MUST,
    "If the application chooses not to create a Terminus, the Session Endpoint will still "
    "create a Link Endpoint and issue an attach indicating that the Link Endpoint has no "
    "associated local terminus. In this case, the Session Endpoint MUST immediately detach "
    "the newly created Link Endpoint.",
    sentences=(NULL_TERMINUS,),
    requires={"queues", "declare-queues"},
    outcomes={"detach:*"},
)
def attach_missing_node(probe, ctx):
    """A receiver from a queue that does not exist: the broker's attach has a null source,
    then a detach with amqp:not-found."""
    session = probe.open_session()
    missing = f"amqpspec-missing-{id(probe)}"
    since = probe.mark()
    session.attach_receiver("missing", Source(address=ctx.source(missing)), Target())
    probe.flush()
    observed = probe.error_outcome(since=since)
    attaches = [f.item.performative for f in probe.frames_since(since, "attach")]
    if not attaches or attaches[0].source is not None:  # no null-terminus attach: recorded
        ctx.note(f"no attach with a null source; {probe.observed(since)}")
        return
    detached = [f for f in probe.frames_since(since, "detach")]
    ctx.check(
        bool(detached),
        f"expected a detach right after the broker's attach with a null source; "
        f"{probe.observed(since)}",
    )
    ctx.note(f"outcome {observed}")


def _null_terminus_answer(probe, ctx, attach, ours: str) -> None:
    """`attach()` sends our attach without our own terminus (`ours`: target or source):
    the broker's attach with a null terminus of its own must be followed by its detach
    (2.6.3 MUST); an attach with its terminus, and what follows, is recorded."""
    session = probe.open_session()
    since = probe.mark()
    attach(session)
    probe.flush()
    observed = probe.error_outcome(timeout=0.5, since=since)
    attaches = [f.item.performative for f in probe.frames_since(since, "attach")]
    if not attaches:
        ctx.note(f"no attach answered our attach without a {ours}; {probe.observed(since)}")
        ctx.note(f"outcome {observed}")
        return
    theirs = attaches[0].source if ours == "target" else attaches[0].target
    null_side = "source" if ours == "target" else "target"
    ctx.note(f"the broker's attach: {null_side} {'null' if theirs is None else 'set'}")
    ctx.note(f"outcome {'attached' if observed == 'timeout' else observed}")
    if theirs is not None:
        return
    ctx.check(
        bool(list(probe.frames_since(since, "detach"))),
        f"expected a detach right after the broker's attach with a null {null_side}; "
        f"{probe.observed(since)}",
    )


@case(
    "2.6.3/attach-receiver-null-target",
    MUST,
    "If the application chooses not to create a Terminus, the Session Endpoint will still "
    "issue an attach indicating that the Link Endpoint has no associated local terminus; "
    "it MUST immediately detach the newly created Link Endpoint: a receiver attached "
    "without a target, answered with a null source, is detached (an attach with a source "
    "is recorded).",
    sentences=(NULL_TERMINUS,),
    requires={"queues"},
)
def attach_receiver_null_target(probe, ctx):
    """A receiver from a queue whose attach carries no target: if the broker's attach
    has a null source, its detach follows."""
    queue = ctx.queue()

    def attach(session):
        session.attach_receiver("null-target", Source(address=ctx.source(queue)), None)

    _null_terminus_answer(probe, ctx, attach, "target")


@case(
    "2.6.3/attach-sender-null-source",
    MUST,
    "If the application chooses not to create a Terminus, the Session Endpoint will still "
    "issue an attach indicating that the Link Endpoint has no associated local terminus; "
    "it MUST immediately detach the newly created Link Endpoint: a sender attached without "
    "a source, answered with a null target, is detached (an attach with a target is "
    "recorded).",
    sentences=(NULL_TERMINUS,),
    requires={"queues"},
)
def attach_sender_null_source(probe, ctx):
    """A sender to a queue whose attach carries no source: if the broker's attach has a
    null target, its detach follows."""
    queue = ctx.queue()

    def attach(session):
        session.attach_sender("null-source", None, Target(address=ctx.target_address(queue)))

    _null_terminus_answer(probe, ctx, attach, "source")


@case(
    "2.7.7/detach-answered",
    MAY,
    "detach: the partner will destroy the link endpoint and reply with its own detach with "
    "the closed flag set to true (2.6.6; 'will', no keyword).",
    requires={"queues"},
)
def detach_answered(probe, ctx):
    """Attach a receiver, detach it with closed=true: the broker's detach says closed."""
    _, link = consumer(probe, ctx, ctx.queue())
    reply = probe.detach(link, closed=True)
    ctx.check(
        reply.closed and reply.error is None,
        f"expected a detach with closed=true and no error; observed closed={reply.closed}, "
        f"error {reply.error}",
    )


@case(
    "2.7.8/end-answered",
    MAY,
    "end: an endpoint that receives an end answers with its own end (2.5.5: END_RCVD -> "
    "END_SENT -> UNMAPPED; the states, no keyword).",
)
def end_answered(probe, ctx):
    """Begin a session and end it: the broker answers with an end without error."""
    session = probe.open_session()
    probe.end(session)
    ctx.check(
        session.state.name == "UNMAPPED",
        f"expected the session unmapped after both ends; observed {session.state.name}",
    )


close_answered_case(
    "2.7.9/close-answered",
    "the broker answers our close with its own before the connection ends (its error, if "
    "any, recorded).",
    "close_answered",
    """Open, begin, close: the broker answers with a close (a TCP close without it, or no
    answer, is FAILED).""",
    __name__,
)


@case(
    "2.6.14/multi-frame-publish",
    MUST,
    "The exact encoding of sections of the bare message MUST NOT be modified: a message "
    "published in many frames (2.6.14) comes out with the same body.",
    sentences=(BARE_ENCODING,),
    requires={"queues", "multi-frame"},
)
def multi_frame_publish(probe, ctx):
    """A 40,000-byte message published over a connection whose frames are at most 512 bytes
    (the broker's max-frame-size or ours, whichever applies), then consumed: the same bytes."""
    queue = ctx.queue()
    payload = bytes(range(256)) * 156 + b"end"
    small = small_frame_probe(ctx)
    session = small.open_session()
    sender = small.attach_sender(session, ctx.target_address(queue))
    small.publish(sender, 1, Message.of(payload))
    _, link = consumer(probe, ctx, queue, credit=1)
    delivery = probe.next_transfer(link)
    body = Message.decode(delivery.payload).body
    got = b"".join(bytes(section.value) for section in body)
    ctx.check(
        got == payload,
        f"expected the body of {len(payload)} bytes unchanged; observed {len(got)} bytes, "
        f"{'equal' if got == payload else 'different'}",
    )


@case(
    "3.2/bare-message-immutable",
    MUST,
    "The exact encoding of sections of the bare message MUST NOT be modified (properties, "
    "application-properties, body); if a section of the bare message is omitted, one may "
    "not be inserted by an intermediary.",
    sentences=(BARE_ENCODING, BARE_NOT_INSERTED, PROPERTIES_UNALTERED),
    requires={"queues"},
)
def bare_message_immutable(probe, ctx):
    """A message with properties, application-properties and a data body goes through a
    queue: all three sections come out equal."""
    queue = ctx.queue()
    sent = Message(
        properties=Properties(message_id="amqpspec-1", subject="bare", content_type="x/y"),
        application_properties={"color": "blue", "n": 7},
        body=[Data(b"immutable")],
    )
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    probe.publish(sender, 1, sent)
    _, link = consumer(probe, ctx, queue, credit=1)
    got = Message.decode(probe.next_transfer(link).payload)
    ctx.check(got.body == sent.body, f"expected body {sent.body!r}; observed {got.body!r}")
    ctx.check(
        got.application_properties == sent.application_properties,
        f"expected application-properties {sent.application_properties!r}; observed "
        f"{got.application_properties!r}",
    )
    for name in ("message_id", "subject", "content_type"):
        ctx.check(
            getattr(got.properties, name, None) == getattr(sent.properties, name),
            f"expected properties.{name} {getattr(sent.properties, name)!r}; observed "
            f"{getattr(got.properties, name, None)!r}",
        )


@case(
    "2.6.7/publisher-gets-credit",
    MAY,
    "The receiver (here the broker) grants link-credit for the sender to transfer; a broker "
    "that takes messages grants credit to a publisher after its attach (2.6.7: only the "
    "receiver chooses link-credit; no sentence makes it grant any).",
    requires={"queues"},
)
def publisher_gets_credit(probe, ctx):
    """Attach a sender to a queue: the broker grants link-credit > 0 within the wait."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1)
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    if sender.link_credit <= 0:
        probe.expect(
            lambda e: getattr(e, "link", None) is sender and sender.link_credit > 0,
            what="link credit for the sender",
        )
    probe.detach(sender)
