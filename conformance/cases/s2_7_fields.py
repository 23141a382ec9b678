"""2.7 performative fields a client may set, each sent with a non-default value and the
broker going on as the spec says: an open and a begin with every field (locales,
capabilities, properties), an attach with capabilities and properties, a receiver in
rcv-settle-mode second, a flow with properties, a batchable disposition, an aborted
multi-frame delivery that is discarded, a transfer with rcv-settle-mode, state and
batchable set, and a delivery resumed (resume=true) after an attach whose (incomplete)
unsettled map names it. What binds the broker: its first frame is an open (2.7.1), the
data before an abort is discarded (2.6.14), a resumed delivery it does not know is
ignored (2.7.5: "The receiver MUST ignore resumed deliveries that are not in its local
unsettled map"), and an accepted message is not sent again (3.5.2); the rest is recorded.

Owns the cases `2.7.1/open-every-field`, `2.7.2/begin-every-field`,
`2.7.3/attach-every-field`, `2.7.3/rcv-settle-second`, `2.7.3/rcv-settle-second-rejected`,
`2.7.5/transfer-aborted-discarded`,
`2.6.13/resume-unknown-delivery`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Accepted, Close, Error, Open, Rejected, Transfer
from amqpspec.amqp10.spec import RcvSettleMode, Role, SndSettleMode
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.run.registry import MAY, MODEL, MUST, case
from amqpspec.conformance.steps.deliveries import collect, exactly, settles
from amqpspec.conformance.steps.frames import crafted_transfer
from amqpspec.conformance.steps.links import consumer, link_flow, publisher
from amqpspec.conformance.steps.queues import body, fill, message_text
from amqpspec.conformance.steps.sentences import NOT_RESENT, RABBITMQ4
from amqpspec.conformance.steps.sessions import end_session
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


OPEN_FIRST = "2.7.1/open.1"  # the first frame in either direction MUST be an open
OPEN_BEFORE_OTHERS = "2.4.1/opening-a-connection.1"  # each peer must send open first
REMOTE_CHANNEL = "2.7.2/begin.remote-channel.2"  # the answering begin names our channel
ABORTED = "2.6.14/transferring-large-messages.2"  # the data before the abort is discarded
ABORTED_IGNORED = "2.7.5/transfer.aborted.1"  # the payload of the aborting frame ignored
RESUME_UNKNOWN = "2.7.5/transfer.resume.1"  # ignore resumed deliveries not in its map
RESUME_SOURCE_ONLY = "2.6.13/resuming-deliveries.1"  # only the source's: ignored
CAPABILITIES = [symbol("amqpspec-capability")]  # no broker knows it: offered or desired
PROPERTIES = {symbol("amqpspec-property"): "amqpspec"}


@case(
    "2.7.1/open-every-field",
    MUST,
    "The first frame sent on a connection in either direction MUST contain an Open body: "
    "locales, capabilities and properties the broker does not know do not change that (an "
    "unknown desired capability is just not offered back); the close is recorded.",
    sentences=(OPEN_FIRST, OPEN_BEFORE_OTHERS),
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
    since = probe.mark()
    frame = (
        probe.wait_for_frame("open", predicate=None, since=since)
        if _first_is_open(probe, ctx, since)
        else None
    )
    if frame is None:
        return
    probe.send_frame(Close())
    error = probe.wait_for_frame("close").performative.error
    if error is not None:
        ctx.note(f"the broker answered our close with {error}")


def _first_is_open(probe, ctx, since) -> bool:
    """Wait for the broker's first frame after `since`: FAILED unless it is an open (2.7.1);
    False (recorded) when none comes."""
    found = probe.first_frame(since)
    if found is None:
        ctx.note(f"no frame from the broker after our open; {probe.observed(since)}")
        return False
    ctx.check(
        found.name == "open",
        f"expected an open as the broker's first frame; observed {found.name}",
    )
    return True


@case(
    "2.7.2/begin-every-field",
    MUST,
    "begin: capabilities and properties the broker does not know do not stop it from "
    "answering with its own begin (2.5.2; no keyword); When an endpoint responds to a "
    "remotely initiated Session, the remote-channel MUST be set to the channel on which the "
    "remote Session sent the begin.",
    sentences=(REMOTE_CHANNEL,),
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
    end_session(probe, ctx, session)  # waits: a pipelined probe has the broker's begin now
    begins = probe.server_frames("begin")
    reply = begins[0].performative if begins else None
    ctx.check(
        reply is not None and reply.remote_channel == session.channel,
        f"expected remote-channel {session.channel} in the begin answering ours; observed "
        f"{reply.remote_channel if reply is not None else 'no begin'}",
    )


@case(
    "2.7.3/attach-every-field",
    MAY,
    "attach: capabilities and properties the broker does not know do not stop the link: "
    "it attaches and delivers (2.6.3; no keyword).",
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
    MAY,
    "rcv-settle-mode: set at the receiver, the settlement mode in use; in mode second the "
    "receiver settles only after the sender settled (2.7.5 binds the receiver, the probe "
    "here); an accepted message is never sent again (3.5.2, MUST). A broker without mode "
    "second refuses the link with amqp:not-implemented.",
    sentences=(NOT_RESENT,),
    requires={"queues", "unsettled-deliveries"},
)
def rcv_settle_second(probe, ctx):
    """A receiver in rcv-settle-mode second, unsettled deliveries: one message, accepted by
    an unsettled batchable disposition; the broker settles it, then we do; it is not
    delivered again."""
    queue, session = _settled_in_mode_second(probe, ctx, Accepted(), batchable=True)
    _, again = consumer(probe, ctx, queue, session=session, credit=1)
    resent = collect(probe, again, 0.5)
    ctx.must(
        not resent,
        f"expected the accepted message not sent again; observed {len(resent)}",
        NOT_RESENT,
    )


@case(
    "2.7.3/rcv-settle-second-rejected",
    MODEL,
    "In rcv-settle-mode second the receiver settles only after the sender settled (2.7.5 "
    "binds the receiver, the probe here); a message the receiver rejects leaves the queue "
    "(3.4.3 rejected is terminal: RabbitMQ 4's model). A broker without mode second "
    "refuses the link with amqp:not-implemented.",
    model=RABBITMQ4,
    requires={"queues", "unsettled-deliveries", "rejected-outcome"},
)
def rcv_settle_second_rejected(probe, ctx):
    """A receiver in rcv-settle-mode second, unsettled deliveries: one message, rejected by
    an unsettled disposition; the broker settles it, then we do; it is not delivered
    again."""
    rejected = Rejected(error=Error(condition="amqp:internal-error"))
    queue, session = _settled_in_mode_second(probe, ctx, rejected)
    _, again = consumer(probe, ctx, queue, session=session, credit=1)
    back = collect(probe, again, 0.5)
    ctx.check(not back, f"expected the rejected message gone; observed {len(back)} resent")


@case(
    "2.7.5/transfer-aborted-discarded",
    MUST,
    "In this case (aborted) the receiver MUST discard the Message data that was transferred "
    "prior to the abort: the aborted delivery never reaches the queue.",
    sentences=(ABORTED, ABORTED_IGNORED),
    role="receiver",
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
    got = collect(probe, link, 1.0)
    texts = [message_text(d) for d in got]
    ctx.check(
        b"amqpspec-0" not in texts and not any(t.startswith(part[:4]) for t in texts if t),
        f"expected the aborted delivery discarded; observed it queued ({texts})",
    )
    if texts != [b"amqpspec-1"]:  # the whole one queued: no sentence requires it
        ctx.note(f"the consumer got {texts}, expected the whole message only")


@case(
    "2.6.13/resume-unknown-delivery",
    MUST,
    "The receiver MUST ignore resumed deliveries that are not in its local unsettled map: a "
    "delivery only the source considers unsettled, resent with resume=true, is ignored "
    "(2.6.13), so it never reaches the queue.",
    sentences=(RESUME_UNKNOWN, RESUME_SOURCE_ONLY),
    role="receiver",
    requires={"queues"},
)
def resume_unknown_delivery(probe, ctx):
    """A sender attaches with an unsettled map naming one delivery (incomplete-unsettled:
    the map may not list every one), then sends it with resume=true, unsettled: when the
    broker's attach names no such delivery in its unsettled map, the broker ignores it and
    the queue stays empty (a broker whose map names it may take it: recorded)."""
    queue = ctx.queue()
    session, sender = refused_unless_implemented(
        probe,
        lambda: publisher(
            probe, ctx, queue, unsettled={b"amqpspec-resumed": None}, incomplete_unsettled=True
        ),
    )
    transfer = crafted_transfer(
        sender, session.next_outgoing_id, b"amqpspec-resumed", settled=False, resume=True
    )
    known = sender.remote_attach.unsettled or {}
    probe.send_frame(transfer, session.channel, body(7).encode())
    probe.idle(0.5)
    _, link = consumer(probe, ctx, queue, credit=5)
    got = collect(probe, link, 1.0)
    if b"amqpspec-resumed" in known:
        ctx.note(f"the broker's attach names the delivery; the queue got {len(got)}")
        return
    ctx.check(
        not got,
        f"expected the resumed delivery ignored (not in the broker's unsettled map {known!r}); "
        f"observed it queued ({[message_text(d) for d in got]})",
    )


def _settled_in_mode_second(
    probe, ctx, state: object, batchable: bool = False
) -> tuple[str, object]:
    """One message to a receiver in rcv-settle-mode second (unsettled deliveries): our
    unsettled disposition with `state`, the broker's settlement, then ours, and the link
    detached. Returns the queue and the session (for a second consumer)."""
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
    ctx.check(
        not delivery.settled,
        "expected the delivery unsettled (snd-settle-mode unsettled); observed it settled",
    )
    link.disposition(delivery.delivery_id, settled=False, state=state, batchable=batchable)
    probe.flush()
    settled = probe.expect(
        settles(Role.SENDER, delivery.delivery_id), what="the broker's settlement (mode second)"
    )
    ctx.note(f"settled by the broker with {settled.state}")
    link.disposition(delivery.delivery_id, settled=True, state=state)
    probe.flush()
    probe.detach(link)
    return queue, session
