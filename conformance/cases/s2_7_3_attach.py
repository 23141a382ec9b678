"""2.7.3 / 2.6.1 attach: the broker's attach answers (its initial-delivery-count as sender,
2.7.3 MUST; role and name recorded), the settle modes it agreed to and then keeps (2.7.5
MUST), a link name reused after detach and max-message-size enforced (MAY: no sentence
binds the broker there), and the receiver's max-message-size kept by the broker as sender
(the rabbitmq4 model: no sentence binds the sender either).

Owns the cases `2.7.3/attach-*` and `2.6.1/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.engine import DispositionReceived
from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.origins import SERVER
from amqpspec.amqp10.spec import RcvSettleMode, Role, SndSettleMode
from amqpspec.amqp10.types import ulong
from amqpspec.conformance.run.registry import MAY, MODEL, MUST, case
from amqpspec.conformance.steps.deliveries import exactly, queued_receiver
from amqpspec.conformance.steps.links import consumer, wait_credit
from amqpspec.conformance.steps.queues import body, fill, publish_messages
from amqpspec.conformance.steps.sentences import RABBITMQ4
from amqpspec.conformance.verdicts import Unsupported

INITIAL_COUNT = "2.7.3/attach.initial-delivery-count.1"  # not null if role is sender
UNSETTLED_MODE = "2.7.5/transfer.settled.4"  # snd-settle-mode unsettled: never settled
SETTLE_FIRST = "2.7.5/transfer.rcv-settle-mode.1"  # first: the receiver settles on arrival


@case(
    "2.7.3/attach-receiver-answer",
    MUST,
    "initial-delivery-count: This MUST NOT be null if role is sender (the broker's attach "
    "for our receiving link; its role and name are recorded).",
    sentences=(INITIAL_COUNT,),
    role="sender",
    requires={"queues"},
)
def receiver_answer(probe, ctx):
    """Attach a receiver: the answer is a sender attach named like ours with an
    initial-delivery-count."""
    _, link = consumer(probe, ctx, ctx.queue())
    reply = link.remote_attach
    if reply.role != Role.SENDER or reply.name != link.name:
        ctx.note(f"answer role {reply.role}, name {reply.name!r} for {link.name!r}")
    ctx.check(
        reply.role != Role.SENDER or reply.initial_delivery_count is not None,
        "expected initial-delivery-count in the broker's attach as sender; observed none",
    )


@case(
    "2.7.3/attach-sender-answer",
    MAY,
    "The broker's attach for our sending link has role receiver and the same link name "
    "(2.6.3: a link is identified by its name and the roles of its two ends; no keyword).",
    requires={"queues"},
)
def sender_answer(probe, ctx):
    """Attach a sender: the answer is a receiver attach with our link name."""
    session = probe.open_session()
    link = probe.attach_sender(session, ctx.target_address(ctx.queue()))
    reply = link.remote_attach
    ctx.check(
        reply.role == Role.RECEIVER and reply.name == link.name,
        f"expected role receiver and name {link.name!r}; observed {reply.role}, {reply.name!r}",
    )


@case(
    "2.7.3/attach-snd-settle-unsettled-kept",
    MUST,
    "If the negotiated value for snd-settle-mode at attachment is unsettled, then the "
    "settled field MUST be false (or unset) on every transfer frame for a delivery.",
    sentences=(UNSETTLED_MODE,),
    role="sender",
    requires={"queues"},
)
def snd_settle_unsettled(probe, ctx):
    """A receiver asking for snd-settle-mode unsettled: if the broker's attach agrees,
    every transfer arrives unsettled."""
    _, link = queued_receiver(probe, ctx, 3, snd_settle_mode=SndSettleMode.UNSETTLED)
    if link.remote_attach.snd_settle_mode != SndSettleMode.UNSETTLED:
        raise Unsupported(f"broker answered snd-settle-mode {link.remote_attach.snd_settle_mode}")
    probe.grant(link, 3)
    got = probe.receive(link, 3)
    ctx.check(
        not any(d.settled for d in got),
        f"expected every delivery unsettled (snd-settle-mode unsettled agreed); observed "
        f"{sum(d.settled for d in got)} settled",
    )


@case(
    "2.7.3/attach-rcv-settle-first-publish",
    MUST,
    "If first, this indicates that the Receiver MUST settle the delivery once it has arrived "
    "without waiting for the Sender to settle first.",
    sentences=(SETTLE_FIRST,),
    role="receiver",
    requires={"queues"},
)
def rcv_settle_first(probe, ctx):
    """A publisher with rcv-settle-mode first: if the broker agrees, its dispositions for
    our 5 unsettled messages are settled (publish() waits for exactly that)."""
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(
        session, ctx.target_address(queue), rcv_settle_mode=RcvSettleMode.FIRST
    )
    agreed = sender.remote_attach.rcv_settle_mode
    if agreed not in (None, RcvSettleMode.FIRST):
        raise Unsupported(f"broker answered rcv-settle-mode {agreed}")
    probe.publish(sender, 5, lambda i: body(i), timeout=10.0)


@case(
    "2.6.1/attach-name-reused-after-detach",
    MAY,
    "A link name identifies the link; after it is closed (detach closed=true answered) the "
    "same name can attach a new link (2.6.1, 2.6.6; no keyword).",
    requires={"queues"},
)
def name_reused(probe, ctx):
    """Attach receiver 'amqpspec-reuse', detach it, attach the same name again: answered,
    and it receives."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1)
    session = probe.open_session()
    first = probe.attach_receiver(session, ctx.source(queue), name="amqpspec-reuse")
    probe.detach(first)
    again = probe.attach_receiver(session, ctx.source(queue), name="amqpspec-reuse", credit=1)
    exactly(probe, again, 1)


@case(
    "2.7.3/attach-max-message-size-enforced",
    MAY,
    "max-message-size: the maximum message size supported by the link endpoint; any "
    "attempt to deliver a message larger than this results in a message-size-exceeded "
    "link-error (a description; no sentence binds the receiver).",
    requires={"queues", "multi-frame"},
    outcomes={"detach:amqp:link:message-size-exceeded"},
    budget=60.0,
)
def max_message_size(probe, ctx):
    """When the broker's attach for our sender names a max-message-size of at most 1 MiB...
    17 MiB, we send one message 1 KiB larger: the link is detached with
    message-size-exceeded (a rejected outcome is lenient)."""
    queue = ctx.queue()
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    limit = sender.remote_attach.max_message_size
    if not limit or limit > 17 * 1024 * 1024:
        raise Unsupported(f"broker max-message-size {limit}: none, or too large to exceed")
    wait_credit(probe, sender)
    since = probe.mark()
    payload = Message.of(b"\x00" * (limit + 1024)).encode()
    delivery_id = session.next_delivery_id
    sender.remote_attach = sender.remote_attach.replace(max_message_size=None)  # we exceed it
    sender.send(payload, b"too-big", False)
    probe.flush()
    observed = probe.error_outcome(timeout=15.0, since=since)
    if observed == "timeout":
        for event in list(probe.inbox):
            if isinstance(event, DispositionReceived) and event.first <= delivery_id <= event.last:
                observed = f"disposition:{type(event.state).__name__.lower()}"
    ctx.outcome(observed)


RECEIVER_LIMIT = 2000  # the receiver's max-message-size (RabbitMQ's test uses the same)
SIZE_EXCEEDED = frozenset(
    f"{ending}:amqp:link:message-size-exceeded" for ending in ("detach", "end")
)


def _largest_delivery(probe, handle: int | None, since: int) -> int:
    """The largest delivery (its transfer frames' payloads together) the broker sent on
    the link whose handle (the broker's) is `handle`, after trace position `since`."""
    largest = size = 0
    for item in probe.recording.items[since:]:
        frame = item.item
        if item.direction != SERVER or not isinstance(frame, Frame) or frame.name != "transfer":
            continue
        if frame.performative.handle != handle:
            continue
        size += len(frame.payload)
        if not frame.performative.more:
            largest, size = max(largest, size), 0
    return max(largest, size)


@case(
    "2.7.3/attach-max-message-size-receiver",
    MODEL,
    "max-message-size: the maximum message size supported by the link endpoint; any "
    "attempt to deliver a message larger than this results in a message-size-exceeded "
    "link-error. The broker as sender delivers what fits and not the larger message, its "
    "link (or session) ended with message-size-exceeded (RabbitMQ 4; no sentence binds the "
    "sender).",
    model=RABBITMQ4,
    requires={"queues"},
    outcomes=SIZE_EXCEEDED,
)
def max_message_size_receiver(probe, ctx):
    """Counters RabbitMQ's max_message_size_server_to_client: a queue holding a 1,500-byte
    message and a 3,000-byte one; a receiver attached with max-message-size 2000 grants 2:
    the first is delivered, the second is not (no delivery over 2000 bytes on the link) and
    the broker ends the link or its session with amqp:link:message-size-exceeded."""
    queue = ctx.queue()
    small, large = Message.of(b"\x00" * 1500), Message.of(b"\x00" * 3000)
    publish_messages(probe, ctx, queue, [small, large])
    session = probe.open_session()
    receiver = probe.attach_receiver(
        session, ctx.source(queue), max_message_size=ulong(RECEIVER_LIMIT)
    )
    since = probe.mark()
    probe.grant(receiver, 2)
    first = probe.next_transfer(receiver)
    ctx.check(
        Message.decode(first.payload).value == small.value,
        f"expected the 1,500-byte message first; observed a {len(first.payload)}-byte one",
    )
    observed = probe.error_outcome(timeout=2.0, since=since)
    largest = _largest_delivery(probe, receiver.remote_handle, since)
    ctx.check(
        largest <= RECEIVER_LIMIT,
        f"expected no delivery over the receiver's max-message-size {RECEIVER_LIMIT}; the "
        f"broker sent one of {largest} bytes",
    )
    ctx.outcome(observed)
