"""2.6.2 / 2.7.3 link handles: a flow on a handle nobody attached (also right after a
detach) ends the session with unattached-handle (2.7.4 MUST), a transfer there ends it with
an error (2.5.4 MUST: a session unable to process input issues an end), an attach on a
handle in use is answered with handle-in-use (2.7.3 MUST), a handle above handle-max closes
the connection with framing-error (2.7.2 MUST), a link attached again from another
connection of the same container is closed with amqp:link:stolen (2.6.1 "must"); how the
broker answers a detach on a handle nobody attached and a transfer on its receiving link
no sentence prescribes (MAY, recorded).

Owns the cases `2.6.1/link-stolen`, `2.6.2/*` and `2.7.3/handle-*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Attach, Detach, Source, Target, Transfer
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.run.registry import MAY, MUST, case
from amqpspec.conformance.steps.declaring import above_max_case
from amqpspec.conformance.steps.links import link_flow, session_flow
from amqpspec.conformance.steps.refusals import sent_frame_outcome, sent_transfer_outcome
from amqpspec.conformance.steps.sentences import (
    FLOW_UNATTACHED,
    SESSION_ERROR,
    UNATTACHED,
    UNATTACHED_INPUT,
)
from amqpspec.conformance.verdicts import Unsupported

IN_USE = {"end:amqp:session:handle-in-use", "close:amqp:session:handle-in-use"}
HANDLE_IN_USE = "2.7.3/attach.handle.2"  # an immediate close carrying handle-in-use
HANDLE_ABOVE = "2.7.2/begin.handle-max.2"  # a handle above handle-max: framing-error
ONE_CONNECTION = "2.6.1/naming-a-link.2"  # a link active in one connection at a time
STOLEN = "2.6.1/naming-a-link.3"  # the first attach must then be closed: stolen
# 2.5.4: an end (or the close that ends it with the connection) with an error
ENDED_WITH_ERROR = {"end:amqp:*", "close:amqp:*"}


@case(
    "2.6.2/unattached-handle-flow",
    MUST,
    UNATTACHED_INPUT,
    sentences=(FLOW_UNATTACHED,),
    outcomes=UNATTACHED,
)
def unattached_flow(probe, ctx):
    """A link flow on handle 77, never attached: the broker ends the session."""
    session = probe.open_session()
    flow = session_flow(session, handle=77, delivery_count=0, link_credit=1)
    ctx.outcome(sent_frame_outcome(probe, flow, session.channel))


@case(
    "2.6.2/unattached-handle-transfer",
    MUST,
    "When a Session is unable to process input (a transfer on a handle that is not "
    "attached), it MUST indicate this by issuing an END with an appropriate error "
    "(unattached-handle names it; a close that ends the session with an error counts).",
    sentences=(SESSION_ERROR,),
    outcomes=ENDED_WITH_ERROR,
)
def unattached_transfer(probe, ctx):
    """A transfer on handle 78, never attached: the broker ends the session."""
    session = probe.open_session()
    transfer = Transfer(handle=78, delivery_id=0, delivery_tag=b"u", message_format=0)
    ctx.outcome(sent_transfer_outcome(probe, session, transfer))


@case(
    "2.6.2/unattached-handle-detach",
    MAY,
    "A detach on a handle nobody attached: no sentence prescribes the answer (2.6.5 excepts "
    "a detach from the input that terminates a session; unattached-handle names the error).",
    outcomes=UNATTACHED,
)
def detach_unattached(probe, ctx):
    """A detach on handle 41, never attached: the broker ends the session."""
    session = probe.open_session()
    ctx.outcome(sent_frame_outcome(probe, Detach(handle=41, closed=True), session.channel))


@case(
    "2.6.2/flow-after-detach",
    MUST,
    UNATTACHED_INPUT + " After a detach exchange the handle is no longer associated with a link.",
    sentences=(FLOW_UNATTACHED,),
    requires={"queues"},
    outcomes=UNATTACHED,
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
    "An attempt to attach using a handle which is already associated with a Link MUST be "
    "responded to with an immediate close carrying a Handle-in-use session-error (an end "
    "with it counts: it is a session error).",
    sentences=(HANDLE_IN_USE,),
    outcomes=IN_USE,
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


@above_max_case("2.7.3/handle-above-handle-max", "handle", HANDLE_ABOVE)
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
    MAY,
    "Only the sender of a link sends transfers (2.6.1 roles): no sentence prescribes how the "
    "receiver answers a transfer on its sending link's handle (detach, end or close).",
    requires={"queues"},
    outcomes={
        "detach:amqp:illegal-state",
        "end:amqp:illegal-state",
        "close:amqp:illegal-state",
        "detach:amqp:not-allowed",
        "end:amqp:session:unattached-handle",
    },
)
def transfer_on_receiver(probe, ctx):
    """Attach a receiver, then a crafted transfer on its handle: refused."""
    session = probe.open_session()
    link = probe.attach_receiver(session, ctx.source(ctx.queue()))
    transfer = Transfer(handle=link.handle, delivery_id=0, delivery_tag=b"wrong", message_format=0)
    ctx.outcome(sent_transfer_outcome(probe, session, transfer, timeout=2.0))


@case(
    "2.6.1/link-stolen",
    MUST,
    "If an attempt is made to attach the link subsequently when it is not suspended, then "
    "the link can be 'stolen', i.e. the second attach succeeds and the first attach must "
    "then be closed with a link error of stolen.",
    sentences=(STOLEN, ONE_CONNECTION),
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
