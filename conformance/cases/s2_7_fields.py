"""2.7 performative fields a client may set, each sent with a non-default value and the
broker going on as the spec says: an open and a begin with every field (locales,
capabilities, properties), an attach with capabilities and properties, a receiver in
rcv-settle-mode second, a flow with properties, a batchable disposition, an aborted
multi-frame delivery that is discarded, a transfer with rcv-settle-mode, state and
batchable set, and a delivery resumed (resume=true) after an attach whose (incomplete)
unsettled map names it.

Owns the cases `2.7.1/open-every-field`, `2.7.2/begin-every-field`,
`2.7.3/attach-every-field`, `2.7.3/rcv-settle-second`, `2.7.5/transfer-aborted-discarded`,
`2.6.13/resume-unknown-delivery`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Accepted, Close, Open, Transfer
from amqpspec.amqp10.engine import DispositionReceived
from amqpspec.amqp10.spec import RcvSettleMode, Role, SndSettleMode
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.registry import MUST, case
from amqpspec.conformance.steps.deliveries import exactly
from amqpspec.conformance.steps.links import consumer, link_flow, publisher
from amqpspec.conformance.steps.queues import body, fill, message_text
from amqpspec.conformance.verdicts import CaseFailed, HarnessError, Unsupported

NOT_IMPLEMENTED = (
    "detach:amqp:not-implemented",
    "end:amqp:not-implemented",
    "close:amqp:not-implemented",
)


def refused_unless_implemented(probe, attach):
    """`attach()`'s result; a broker refusing it with amqp:not-implemented (an optional
    feature it lacks) makes the case UNSUPPORTED."""
    since = probe.mark()
    try:
        return attach()
    except (CaseFailed, HarnessError):
        outcome = probe.error_outcome(timeout=0.5, since=since)
        if outcome in NOT_IMPLEMENTED:
            raise Unsupported(f"the broker refused the link: {outcome}") from None
        raise


CAPABILITIES = [symbol("amqpspec-capability")]  # no broker knows it: offered or desired
PROPERTIES = {symbol("amqpspec-property"): "amqpspec"}


@case(
    "2.7.1/open-every-field",
    MUST,
    "open: locales, capabilities and properties the broker does not know do not stop it "
    "from answering with its own open (2.4.1; an unknown desired capability is just not "
    "offered back).",
    pipelined=False,  # an open alone: nothing to pipeline
)
def open_every_field(probe, ctx):
    """An open (crafted: the engine sets no locales) with every field set: answered with
    an open, and a close is answered with a close."""
    probe.raw_handshake()
    probe.send_frame(
        Open(
            container_id="amqpspec-every-field",
            hostname=probe.hostname,
            max_frame_size=65536,
            channel_max=7,
            idle_time_out=60000,
            outgoing_locales=[symbol("en-US")],
            incoming_locales=[symbol("en-US"), symbol("de-DE")],
            offered_capabilities=CAPABILITIES,
            desired_capabilities=CAPABILITIES,
            properties=PROPERTIES,
        )
    )
    probe.wait_for_frame("open")
    probe.send_frame(Close())
    error = probe.wait_for_frame("close").performative.error
    ctx.check(error is None, f"the broker closed with {error}")


@case(
    "2.7.2/begin-every-field",
    MUST,
    "begin: capabilities and properties the broker does not know do not stop it from "
    "answering with its own begin (2.5.2).",
)
def begin_every_field(probe, ctx):
    """A begin with offered and desired capabilities and properties: answered, and its end
    answered."""
    session = probe.open_session(
        handle_max=63,
        offered_capabilities=CAPABILITIES,
        desired_capabilities=CAPABILITIES,
        properties=PROPERTIES,
    )
    probe.end(session)


@case(
    "2.7.3/attach-every-field",
    MUST,
    "attach: capabilities and properties the broker does not know do not stop the link: "
    "it attaches and delivers (2.6.3).",
    requires={"queues"},
)
def attach_every_field(probe, ctx):
    """A receiver attach with capabilities, properties and max-message-size: attached, and
    a queued message delivered on a flow that carries properties."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1)
    _, link = consumer(
        probe,
        ctx,
        queue,
        offered_capabilities=CAPABILITIES,
        desired_capabilities=CAPABILITIES,
        properties=PROPERTIES,
        max_message_size=1 << 20,
    )
    probe.send_frame(
        link_flow(link.session, link, link_credit=1, properties=PROPERTIES), link.session.channel
    )
    exactly(probe, link, 1)


@case(
    "2.7.3/rcv-settle-second",
    MUST,
    "rcv-settle-mode: set at the receiver, the settlement mode in use; in mode second the "
    "receiver settles only after the sender settled (2.6.12). A broker without it refuses "
    "the link with amqp:not-implemented.",
    requires={"queues", "unsettled-deliveries"},
)
def rcv_settle_second(probe, ctx):
    """A receiver in rcv-settle-mode second, unsettled deliveries: one message, accepted by
    an unsettled batchable disposition; the broker settles it, then we do; it is not
    delivered again."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1)
    session = probe.open_session()
    link = refused_unless_implemented(
        probe,
        lambda: probe.attach_receiver(
            session,
            ctx.source(queue),
            credit=1,
            snd_settle_mode=SndSettleMode.UNSETTLED,
            rcv_settle_mode=RcvSettleMode.SECOND,
        ),
    )
    delivery = probe.next_transfer(link)
    ctx.check(not delivery.settled, "the delivery came settled on an unsettled link")
    link.disposition(delivery.delivery_id, settled=False, state=Accepted(), batchable=True)
    probe.flush()
    settled = probe.expect(
        lambda e: (
            isinstance(e, DispositionReceived)
            and e.role == Role.SENDER
            and e.settled
            and e.first <= delivery.delivery_id <= e.last
        ),
        what="the broker's settlement (mode second)",
    )
    ctx.note(f"settled by the broker with {settled.state}")
    link.disposition(delivery.delivery_id, settled=True, state=Accepted())
    probe.flush()
    probe.detach(link)
    _, again = consumer(probe, ctx, queue, session=session, credit=1)
    exactly(probe, again, 0)


@case(
    "2.7.5/transfer-aborted-discarded",
    MUST,
    "aborted: if set, the message is aborted and the receiver discards it: the frames "
    "before the aborted one are not a message (2.6.14).",
    requires={"queues", "multi-frame"},
)
def transfer_aborted(probe, ctx):
    """A first frame (more=true), then its aborted frame; then a whole message sent with
    rcv-settle-mode first, state accepted and batchable on its transfer: the queue holds
    only that message."""
    queue = ctx.queue()
    session, sender = publisher(probe, ctx, queue)
    first_id = session.next_outgoing_id
    part = body(0).encode()
    frames = [
        (Transfer(handle=sender.handle, delivery_id=first_id, delivery_tag=b"aborted",
                  message_format=0, settled=True, more=True), part[:4]),
        (Transfer(handle=sender.handle, more=False, aborted=True), b""),
        (Transfer(handle=sender.handle, delivery_id=first_id + 1, delivery_tag=b"whole",
                  message_format=0, settled=True, rcv_settle_mode=RcvSettleMode.FIRST,
                  state=Accepted(), batchable=True), body(1).encode()),
    ]  # fmt: skip
    for transfer, payload in frames:
        probe.send_frame(transfer, session.channel, payload, strict=False)
    _, link = consumer(probe, ctx, queue, credit=5)
    got = exactly(probe, link, 1)
    ctx.check(message_text(got[0]) == b"amqpspec-1", f"delivered {message_text(got[0])!r}")


@case(
    "2.6.13/resume-unknown-delivery",
    MUST,
    "Resuming a link: a delivery in the sender's unsettled map that the receiver does not "
    "know is sent again with resume=true (2.6.13), and the receiver takes it as a new one.",
    requires={"queues"},
)
def resume_unknown_delivery(probe, ctx):
    """A sender attaches with an unsettled map naming one delivery (incomplete-unsettled:
    the map may not list every one), then sends it with resume=true, unsettled: the broker
    settles it, and the queue holds the message once."""
    queue = ctx.queue()
    session, sender = refused_unless_implemented(
        probe,
        lambda: publisher(
            probe, ctx, queue, unsettled={b"amqpspec-resumed": None}, incomplete_unsettled=True
        ),
    )
    transfer = Transfer(
        handle=sender.handle,
        delivery_id=session.next_outgoing_id,
        delivery_tag=b"amqpspec-resumed",
        message_format=0,
        settled=False,
        resume=True,
    )
    probe.send_frame(transfer, session.channel, body(7).encode())
    probe.expect(
        lambda e: isinstance(e, DispositionReceived) and e.role == Role.RECEIVER and e.settled,
        what="the broker's settlement of the resumed delivery",
    )
    _, link = consumer(probe, ctx, queue, credit=5)
    got = exactly(probe, link, 1)
    ctx.check(message_text(got[0]) == b"amqpspec-7", f"delivered {message_text(got[0])!r}")
