"""2.6.2 / 2.7.3 link handles: a flow, transfer or detach on a handle nobody attached (also
right after a detach), an attach on a handle in use, a handle above handle-max, and a
transfer on the broker's receiving link; a link attached again from another connection of
the same container is stolen (2.6.1).

Owns the cases `2.6.1/link-stolen`, `2.6.2/*` and `2.7.3/handle-*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Attach, Detach, Source, Target, Transfer
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.links import link_flow, session_flow
from amqpspec.conformance.steps.refusals import sent_frame_outcome
from amqpspec.conformance.steps.sentences import ANY_END, UNATTACHED, UNATTACHED_INPUT
from amqpspec.conformance.verdicts import Unsupported

IN_USE = {"end:amqp:session:handle-in-use", "close:amqp:session:handle-in-use"}


@case(
    "2.6.2/unattached-handle-flow",
    MUST,
    UNATTACHED_INPUT + " (2.7.4 flow handle).",
    outcomes=UNATTACHED,
    lenient=ANY_END,
)
def unattached_flow(probe, ctx):
    """A link flow on handle 77, never attached: the broker ends the session."""
    session = probe.open_session()
    flow = session_flow(session, handle=77, delivery_count=0, link_credit=1)
    ctx.outcome(sent_frame_outcome(probe, flow, session.channel))


@case(
    "2.6.2/unattached-handle-transfer",
    MUST,
    "A transfer on a handle that is not attached MUST be answered with an end carrying "
    "amqp:session:unattached-handle.",
    outcomes=UNATTACHED,
    lenient=ANY_END,
)
def unattached_transfer(probe, ctx):
    """A transfer on handle 78, never attached: the broker ends the session."""
    session = probe.open_session()
    transfer = Transfer(handle=78, delivery_id=0, delivery_tag=b"u", message_format=0)
    payload = Message.of(b"x").encode()
    ctx.outcome(sent_frame_outcome(probe, transfer, session.channel, payload))


@case(
    "2.6.2/unattached-handle-detach",
    MUST,
    UNATTACHED_INPUT + ".",
    outcomes=UNATTACHED,
    lenient=ANY_END,
)
def detach_unattached(probe, ctx):
    """A detach on handle 41, never attached: the broker ends the session."""
    session = probe.open_session()
    ctx.outcome(sent_frame_outcome(probe, Detach(handle=41, closed=True), session.channel))


@case(
    "2.6.2/flow-after-detach",
    MUST,
    "After a detach exchange the handle is no longer associated with a link: a flow on it "
    "MUST be answered with an end carrying amqp:session:unattached-handle.",
    requires={"queues"},
    outcomes=UNATTACHED,
    lenient=ANY_END,
)
def flow_after_detach(probe, ctx):
    """Attach a receiver, detach it (answered), then a crafted flow on its old handle."""
    session = probe.open_session()
    link = probe.attach_receiver(session, ctx.source(ctx.queue()))
    probe.detach(link)
    flow = link_flow(session, link, link_credit=5)
    ctx.outcome(sent_frame_outcome(probe, flow, session.channel))


@case(
    "2.6.2/handle-in-use",
    MUST,
    "handle: if the handle is already in use by another link, the endpoint MUST end the "
    "session with amqp:session:handle-in-use (2.7.3).",
    outcomes=IN_USE,
    lenient=ANY_END,
)
def handle_in_use(probe, ctx):
    """A receiver attached, then a crafted attach of another link on the same handle."""
    session = probe.open_session()
    link = probe.attach_receiver(
        session, ctx.source(ctx.queue()) if ctx.profile.has("queues") else None
    )
    attach = Attach(
        name="amqpspec-second-link",
        handle=link.handle,
        role=Role.RECEIVER,
        source=Source(address=link.source.address if link.source is not None else None),
        target=Target(),
    )
    ctx.outcome(sent_frame_outcome(probe, attach, session.channel))


@case(
    "2.7.3/handle-above-handle-max",
    MUST,
    "handle-max: the maximum handle value that can be used on the session; a peer MUST NOT "
    "attach with a handle above its partner's handle-max (a session or connection error).",
    outcomes={
        "close:amqp:connection:framing-error",
        "end:amqp:connection:framing-error",
        "end:amqp:resource-limit-exceeded",
        "end:amqp:not-allowed",
        "end:amqp:invalid-field",
        "close:amqp:resource-limit-exceeded",
        "tcp-close",
    },
    lenient=ANY_END,
    pipelined=False,  # reads the broker's open or begin
)
def handle_above_max(probe, ctx):
    """A crafted attach with handle (broker's handle-max + 1): the broker refuses it."""
    session = probe.open_session()
    handle_max = session.remote_handle_max
    if handle_max is None or handle_max >= 0xFFFFFFFF:
        raise Unsupported(f"broker handle-max {handle_max}: no handle above it")
    attach = Attach(
        name="amqpspec-high",
        handle=handle_max + 1,
        role=Role.RECEIVER,
        source=Source(),
        target=Target(),
    )
    ctx.outcome(sent_frame_outcome(probe, attach, session.channel))


@case(
    "2.6.2/transfer-on-receiving-link",
    SHOULD,
    "Only the sender of a link sends transfers (2.6.1 roles): a transfer on our receiving "
    "link's handle is illegal and ends the link, session or connection.",
    requires={"queues"},
    outcomes={
        "detach:amqp:illegal-state",
        "end:amqp:illegal-state",
        "close:amqp:illegal-state",
        "detach:amqp:not-allowed",
        "end:amqp:session:unattached-handle",
    },
    lenient={"detach:*", "end:*", "close:*", "tcp-close"},
)
def transfer_on_receiver(probe, ctx):
    """Attach a receiver, then a crafted transfer on its handle: refused."""
    session = probe.open_session()
    link = probe.attach_receiver(session, ctx.source(ctx.queue()))
    transfer = Transfer(handle=link.handle, delivery_id=0, delivery_tag=b"wrong", message_format=0)
    payload = Message.of(b"x").encode()
    ctx.outcome(sent_frame_outcome(probe, transfer, session.channel, payload, timeout=2.0))


@case(
    "2.6.1/link-stolen",
    SHOULD,
    "A link's name identifies it uniquely from its source container to its target container "
    "(2.6.1); attached again from another connection of the same container, the older "
    "attachment is closed with amqp:link:stolen.",
    requires={"queues"},
    outcomes={"detach:amqp:link:stolen"},
)
def link_stolen(probe, ctx):
    """Two connections with one container-id attach a receiver of the same name: the first
    connection's link is detached with amqp:link:stolen."""
    queue = ctx.queue()
    container = f"amqpspec-{queue}"
    probe.open(container_id=container)
    probe.attach_receiver(probe.begin(), ctx.source(queue), name="amqpspec-stolen")
    since = probe.mark()
    thief = ctx.probe()
    thief.open(container_id=container)
    thief.attach_receiver(thief.begin(), ctx.source(queue), name="amqpspec-stolen", wait=False)
    thief.pump(0.2)
    ctx.outcome(probe.error_outcome(timeout=2.0, since=since))
