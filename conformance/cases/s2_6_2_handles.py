"""2.6.2 / 2.7.2 / 2.7.3 link handles: frames on a handle nobody attached, an attach on a
handle in use, a handle above handle-max. Owns the cases `2.6.2/*` and `2.7.3/*`.
"""

from __future__ import annotations

from amqp10.composites import Attach, Flow, Source, Target, Transfer
from amqp10.message import Message
from amqp10.spec import Role
from conformance.registry import MUST, case
from conformance.verdicts import Unsupported

UNATTACHED = {"end:amqp:session:unattached-handle", "close:amqp:session:unattached-handle"}
IN_USE = {"end:amqp:session:handle-in-use", "close:amqp:session:handle-in-use"}
# the broker noticed (ended something) but not with the condition the spec names
ANY_END = {"end:*", "close:*", "tcp-close"}


def _flow_on(session, handle: int) -> Flow:
    return Flow(
        next_incoming_id=session.next_incoming_id,
        incoming_window=session.incoming_window,
        next_outgoing_id=session.next_outgoing_id,
        outgoing_window=session.outgoing_window,
        handle=handle,
        delivery_count=0,
        link_credit=1,
    )


@case(
    "2.6.2/unattached-handle-flow",
    MUST,
    "If any input (other than an attach) related to a handle is received by an endpoint "
    "while the handle is not associated with a link, the endpoint MUST respond with an end "
    "carrying the error amqp:session:unattached-handle (2.7.4 flow handle).",
    outcomes=UNATTACHED,
    lenient=ANY_END,
)
def unattached_flow(probe, ctx):
    """A link flow on handle 77, never attached: the broker ends the session."""
    session = probe.open_session()
    since = probe.mark()
    probe.send_frame(_flow_on(session, 77), session.channel)
    ctx.outcome(probe.error_outcome(since=since))


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
    since = probe.mark()
    transfer = Transfer(handle=78, delivery_id=0, delivery_tag=b"u", message_format=0)
    probe.send_frame(transfer, session.channel, Message.of(b"x").encode())
    ctx.outcome(probe.error_outcome(since=since))


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
    since = probe.mark()
    attach = Attach(
        name="amqpspec-second-link",
        handle=link.handle,
        role=Role.RECEIVER,
        source=Source(address=link.source.address if link.source is not None else None),
        target=Target(),
    )
    probe.send_frame(attach, session.channel)
    ctx.outcome(probe.error_outcome(since=since))


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
)
def handle_above_max(probe, ctx):
    """A crafted attach with handle (broker's handle-max + 1): the broker refuses it."""
    session = probe.open_session()
    handle_max = session.remote_handle_max
    if handle_max is None or handle_max >= 0xFFFFFFFF:
        raise Unsupported(f"broker handle-max {handle_max}: no handle above it")
    since = probe.mark()
    attach = Attach(
        name="amqpspec-high",
        handle=handle_max + 1,
        role=Role.RECEIVER,
        source=Source(),
        target=Target(),
    )
    probe.send_frame(attach, session.channel)
    ctx.outcome(probe.error_outcome(since=since))
