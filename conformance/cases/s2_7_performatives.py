"""2.6.3 / 2.7.x: the broker answers begin, attach, detach, end and close as the spec says,
refuses a link to a missing node the spec's way, and (3.2) keeps the bare message intact.

Owns the cases `2.6.3/*`, `2.7.7/*`, `2.7.8/*`, `2.7.9/*`, `2.6.14/*` and `3.2/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Data, Properties, Source, Target
from amqpspec.amqp10.engine import RemoteClose
from amqpspec.amqp10.message import Message
from amqpspec.conformance.registry import MUST, case
from amqpspec.conformance.steps.links import consumer, small_frame_probe
from amqpspec.conformance.steps.queues import fill

NOT_FOUND = {"detach:amqp:not-found"}


@case(
    "2.6.3/attach-missing-node",
    MUST,
    "If the remote peer cannot create the terminus, it attaches with a null source (or "
    "target) and then detaches with an error, e.g. amqp:not-found (2.6.3).",
    requires={"queues", "declare-queues"},
    outcomes=NOT_FOUND,
    lenient={"detach:*", "end:*", "close:*"},
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
    if observed.startswith("detach:"):
        ctx.check(
            bool(attaches) and attaches[0].source is None,
            f"the broker detached without first attaching with a null source: {attaches!r}",
        )
    ctx.outcome(observed)


@case(
    "2.7.7/detach-answered",
    MUST,
    "detach: the peer answers a detach with its own detach of the link, with the same "
    "closed flag when it closes the link (2.6.6).",
    requires={"queues"},
)
def detach_answered(probe, ctx):
    """Attach a receiver, detach it with closed=true: the broker's detach says closed."""
    _, link = consumer(probe, ctx, ctx.queue())
    reply = probe.detach(link, closed=True)
    ctx.check(reply.closed, "the broker answered a closing detach with closed=false")
    ctx.check(reply.error is None, f"the broker's detach carries an error: {reply.error}")


@case(
    "2.7.8/end-answered",
    MUST,
    "end: an endpoint that receives an end answers with its own end (2.5.5: END_RCVD -> "
    "END_SENT -> UNMAPPED).",
)
def end_answered(probe, ctx):
    """Begin a session and end it: the broker answers with an end without error."""
    session = probe.open_session()
    probe.end(session)
    ctx.check(session.state.name == "UNMAPPED", f"session state {session.state.name}")


@case(
    "2.7.9/close-answered",
    MUST,
    "close: an endpoint that receives a close answers with its own close; after sending "
    "close nothing else is sent (2.4.6, 2.7.9).",
)
def close_answered(probe, ctx):
    """Open, begin, close: the broker answers with a close without error."""
    probe.open_session()
    probe.conn.close()
    probe.flush()
    event = probe.expect_type(RemoteClose)
    ctx.check(event.error is None, f"the broker's close carries an error: {event.error}")


@case(
    "2.6.14/multi-frame-publish",
    MUST,
    "Messages larger than max-frame-size are split across several transfer frames (more=true "
    "on all but the last); the receiver reassembles them into one delivery (2.6.14).",
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
    ctx.check(got == payload, f"body of {len(got)} bytes differs from the {len(payload)} sent")


@case(
    "3.2/bare-message-immutable",
    MUST,
    "The bare message (properties, application-properties, body) is immutable: an "
    "intermediary MUST NOT change it; only header, annotations and footer may be altered.",
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
    ctx.check(got.body == sent.body, f"body {got.body!r} != {sent.body!r}")
    ctx.check(
        got.application_properties == sent.application_properties,
        f"application-properties {got.application_properties!r}",
    )
    for name in ("message_id", "subject", "content_type"):
        ctx.check(
            getattr(got.properties, name, None) == getattr(sent.properties, name),
            f"properties.{name} {getattr(got.properties, name, None)!r}",
        )


@case(
    "2.6.7/publisher-gets-credit",
    MUST,
    "The receiver (here the broker) grants link-credit for the sender to transfer; a broker "
    "that takes messages grants credit to a publisher after its attach (2.6.7).",
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
