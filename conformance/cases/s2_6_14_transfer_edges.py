"""Transfer edge cases the broker meets as the receiver of a publisher's transfers (Qpid
Broker-J's TransferTest, MultiTransferTest and MessageFormatTest rows): multi-frame
deliveries interleaved across two links of one session (2.6.14: MAY be interleaved) and
illegally on one link (2.6.14: MUST NOT, binds the sender), a continuation transfer
without payload, continuations repeating the delivery-id or the tag, a first transfer
lacking one of them (2.7.5: a MUST on the sender), a transfer carrying no message at all,
delivery-tags reused on another link, after settlement and (illegally, 2.6.12) among
unsettled deliveries, a continuation whose message-format differs from the first frame's,
and a transfer's own rcv-settle-mode: first (the receiver MUST settle on arrival, 2.7.5)
and second on a link negotiated first (illegal for the sender, 2.7.5).

What binds the broker here: a message it delivers keeps the exact bytes of its bare
message (3.2), and a delivery in rcv-settle-mode first is settled by it once it has
arrived (2.7.5). Where the probe breaks a sender's MUST (interleaving on one link, a
duplicate unsettled tag, rcv-settle-mode second on a link negotiated first) or does what
the text does not address (a changed message-format on a continuation, a transfer without
any section), no sentence says how the receiver answers: its answer is recorded (MAY).

The broker as sender: a consumer's non-terminal delivery state (received, 3.4.1) before
its accepted outcome; the broker MUST NOT send the received state back (3.4.1) and MUST
NOT send the accepted message again (3.5.2).

Owns the cases `2.6.14/interleaved-*`, `2.6.14/continuation-*`,
`2.7.5/transfer-without-payload`, `2.7.5/message-format-changed`,
`2.7.5/first-transfer-without-*`, `2.7.5/transfer-handle-null`,
`2.7.5/transfer-settled-flag-*`,
`2.7.5/transfer-rcv-settle-*`, `2.6.12/delivery-tag-*` and
`3.4.1/received-state-then-accepted`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from amqpspec.amqp10.builder import mutate
from amqpspec.amqp10.composites import Accepted, Received, Transfer
from amqpspec.amqp10.engine import DispositionReceived, Link, Session
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import RcvSettleMode, Role, SndSettleMode
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.run.registry import MAY, MUST, RunFunction, case, case_function
from amqpspec.conformance.steps.deliveries import collect, queued_receiver
from amqpspec.conformance.steps.links import consumer, publisher, unsettled_consumer
from amqpspec.conformance.steps.refusals import sent_bytes_outcome
from amqpspec.conformance.steps.sentences import NOT_RESENT

BARE_ENCODING = "3.2/message-format.2"  # the bare message's exact encoding not modified
SETTLE_FIRST = "2.7.5/transfer.rcv-settle-mode.1"  # receiver settles once it has arrived
SECOND_ILLEGAL = "2.7.5/transfer.rcv-settle-mode.3"  # second on a link negotiated first
NOT_INTERLEAVED = "2.6.14/transferring-large-messages.1"  # one link: not interleaved
TAG_UNIQUE = "2.6.12/transferring-a-message.2"  # unique amongst unsettled deliveries
FORMAT_FIRST = "2.7.5/transfer.message-format.1"  # specified on the first transfer
SETTLED_ON_SETTLED_LINK = "2.7.5/transfer.settled.3"  # snd-settle-mode settled: true
UNSETTLED_ON_UNSETTLED_LINK = "2.7.5/transfer.settled.4"  # unsettled: false on every frame
FIRST_ID = "2.7.5/transfer.delivery-id.1"  # delivery-id on the first transfer (sender)
FIRST_TAG = "2.7.5/transfer.delivery-tag.1"  # delivery-tag on the first transfer (sender)
RECEIVED_NOT_SENT = "3.4.1/received.1"  # the Sender never sends the received state
ENDINGS = {"detach:*", "end:*", "close:*"}
QUEUES = frozenset({"queues"})
MULTI_FRAME = frozenset({"queues", "multi-frame"})
SETTLE_WAIT = 2.0  # seconds for the broker's dispositions (a local broker answers in ms)
ANSWER_WAIT = 0.5  # seconds for the broker to end something after an illegal frame


def _recorded_case(
    case_id: str,
    sentence: str,
    *,
    sentences: tuple[str, ...] = (),
    requires: frozenset[str] = QUEUES,
    outcomes: Iterable[str] = ENDINGS,
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a transfer the probe makes illegal or the text does not address: the
    broker (the receiver) answers as it may (MAY, `outcomes`), recorded. No pipelined
    variant: for a recorded answer the stepwise run is enough (keeps the run short)."""
    return case(
        case_id,
        MAY,
        sentence,
        sentences=sentences,
        role="receiver",
        requires=requires,
        pipelined=False,
        outcomes=outcomes,
    )


def _received_case(
    case_id: str, sentence: str, *, sentences: tuple[str, ...], requires: frozenset[str] = QUEUES
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a MUST that binds the broker as the receiver of our transfers."""
    return case(case_id, MUST, sentence, sentences=sentences, role="receiver", requires=requires)


def _unchanged_case(case_id: str, sentence: str) -> Callable[[RunFunction], RunFunction]:
    """`case` for a multi-frame delivery the broker receives (3.2: its bare message comes
    out unchanged; 2.7.5: it settles it, rcv-settle-mode first)."""
    return _received_case(
        case_id, sentence, sentences=(BARE_ENCODING, SETTLE_FIRST), requires=MULTI_FRAME
    )


def _publishing(probe: Probe, ctx: CaseContext, **attach: object) -> tuple[str, Session, Link, int]:
    """A fresh queue and a sender to it (`attach`: fields of its attach), granted credit:
    (queue, session, sender, the delivery-id its first transfer takes)."""
    queue = ctx.queue()
    session, sender = publisher(probe, ctx, queue, **attach)
    return queue, session, sender, session.next_outgoing_id


def _body(text: str) -> bytes:
    """A whole message (one data section) as the bytes a transfer carries."""
    return Message.of(text.encode()).encode()


def _first(
    link: Link, delivery_id: int, tag: bytes, payload: bytes, **fields: object
) -> tuple[Transfer, bytes]:
    """The first (or only) transfer of a delivery, message-format 0, unsettled unless
    `fields` says settled."""
    fields.setdefault("settled", False)
    transfer = Transfer(
        handle=link.handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0,
        **fields,
    )  # fmt: skip
    return transfer, payload


def _send(probe: Probe, session: Session, frames: list[tuple[Transfer, bytes]]) -> None:
    """Write `frames` in one burst on `session`'s channel (strict=False: an illegal one
    is written anyway)."""
    for transfer, payload in frames:
        probe.send_frame(transfer, session.channel, payload, strict=False, flush=False)
    probe.flush()


def settlements(probe: Probe, ids: set[int], timeout: float = SETTLE_WAIT) -> dict[int, str]:
    """The broker's settled dispositions (as the receiver) for `ids`, delivery-id -> state
    name, waited for at most `timeout` (less when every id is settled or the connection
    ends)."""
    found: dict[int, str] = {}
    end = time.monotonic() + timeout
    while True:
        for event in probe.inbox:
            theirs = isinstance(event, DispositionReceived) and event.role == Role.RECEIVER
            if theirs and event.settled:
                for delivery_id in set(range(event.first, event.last + 1)) & ids:
                    found[delivery_id] = type(event.state).__name__.lower()
        if set(found) >= ids or probe.closed or (left := end - time.monotonic()) <= 0:
            return found
        probe.pump(min(left, 0.1))


def _queued(probe: Probe, ctx: CaseContext, queue: str, credit: int = 5) -> list[bytes]:
    """The bodies a fresh consumer gets from `queue` (bounded by a short quiet time)."""
    _, link = consumer(probe, ctx, queue, credit=credit)
    out = []
    for delivery in collect(probe, link, 0.3):
        body = Message.decode(delivery.payload).body
        out.append(b"".join(bytes(section.value) for section in body))
    return out


def _check_unchanged(ctx: CaseContext, got: list[bytes], sent: bytes) -> None:
    """3.2: each delivered copy has the exact body sent (a missing one is recorded: no
    sentence makes the broker take the message)."""
    if not got:
        ctx.note(f"the message ({len(sent)} bytes) was not delivered (recorded)")
    for body in got:
        ctx.check(
            body == sent,
            f"expected the body of {len(sent)} bytes unchanged; observed {len(body)} bytes "
            f"({body[:24]!r}...)",
        )


def _ended(probe: Probe, ctx: CaseContext, ids: set[int]) -> bool:
    """2.7.5: each delivery of `ids` (rcv-settle-mode first) settled by the broker once
    it has arrived: True when the broker instead ended the link, session or connection
    (recorded: no sentence makes it take the message); neither is FAILED."""
    since = probe.mark()
    settled = settlements(probe, ids)
    ending = probe.error_outcome(timeout=0, since=0)
    if ending != "timeout":
        ctx.note(f"the broker ended something: {ending} (recorded)")
        return True
    ctx.must(
        set(settled) == ids,
        f"expected deliveries {sorted(ids)} settled (rcv-settle-mode first); observed "
        f"settled {settled}, {probe.observed(since) or 'nothing else'}",
        SETTLE_FIRST,
    )
    return False


def _recorded(probe: Probe, ctx: CaseContext, since: int, ids: set[int]) -> None:
    """The broker's answer to an illegal or unaddressed transfer, recorded: how it ended
    the link, session or connection, or the settled dispositions it sent."""
    ending = probe.error_outcome(timeout=ANSWER_WAIT, since=since)
    if ending in ("timeout", "tcp-close"):
        states = settlements(probe, ids, 0.2)
        ctx.note(f"dispositions: {states or 'none'}")
        ending = "tcp-close" if ending == "tcp-close" else "no-error"
    ctx.outcome(ending)


@_unchanged_case(
    "2.6.14/interleaved-links",
    "Messages being transferred along different links MAY be interleaved (2.6.14); the "
    "exact encoding of sections of the bare message MUST NOT be modified: two multi-frame "
    "deliveries interleaved across two links of one session each come out unchanged.",
)
def interleaved_links(probe, ctx):
    """Two senders on one session, each to its own queue; their three-frame deliveries
    written frame by frame in turn (A1 B1 A2 B2 A3 B3): each queue's consumer gets its body
    unchanged, and each delivery is settled (rcv-settle-mode first)."""
    queues = [ctx.queue("a"), ctx.queue("b")]
    session, first = publisher(probe, ctx, queues[0])
    _, second = publisher(probe, ctx, queues[1], session=session)
    bodies = [_body("interleaved-a-" + "a" * 60), _body("interleaved-b-" + "b" * 60)]
    base = session.next_outgoing_id
    frames = []
    for part in range(3):
        for index, link in enumerate((first, second)):
            chunk = bodies[index][part * 30 : (part + 1) * 30 if part < 2 else None]
            if part == 0:
                frames.append(_first(link, base + index, b"tag-%d" % index, chunk, more=True))
            else:
                frames.append((Transfer(handle=link.handle, more=part < 2), chunk))
    _send(probe, session, frames)
    if _ended(probe, ctx, {base, base + 1}):
        return
    for index, queue in enumerate(queues):
        sent = Message.decode(bodies[index]).body[0].value
        _check_unchanged(ctx, _queued(probe, ctx, queue), bytes(sent))


@_recorded_case(
    "2.6.14/interleaved-same-link",
    "Messages transferred along a single link MUST NOT be interleaved (binds the sender, the "
    "probe here); no sentence says how the receiver answers: recorded.",
    sentences=(NOT_INTERLEAVED,),
    requires=MULTI_FRAME,
)
def interleaved_same_link(probe, ctx):
    """On one link, the first frame of a delivery (more=true), then a whole new delivery
    (a new delivery-id and tag) before the first is complete, then the first one's last
    frame: the broker's answer (Broker-J ends the link or session with an error)."""
    _, session, sender, base = _publishing(probe, ctx)
    whole = _body("interleaved-one-link")
    since = probe.mark()
    _send(probe, session, [
        _first(sender, base, b"first", whole[:10], more=True),
        _first(sender, base + 1, b"second", whole),
        (Transfer(handle=sender.handle, more=False), whole[10:]),
    ])  # fmt: skip
    _recorded(probe, ctx, since, {base, base + 1})


@_unchanged_case(
    "2.6.14/continuation-without-payload",
    "The exact encoding of sections of the bare message MUST NOT be modified: a delivery "
    "whose continuation transfers carry no payload (an empty one between two halves, an "
    "empty last one) comes out unchanged.",
)
def continuation_without_payload(probe, ctx):
    """A delivery in four frames: half its bytes (more=true), an empty continuation
    (more=true), the other half (more=true), an empty last frame (more=false): settled
    (rcv-settle-mode first) and delivered with the same body."""
    queue, session, sender, base = _publishing(probe, ctx)
    whole = _body("continuation-" + "c" * 40)
    _send(probe, session, [
        _first(sender, base, b"empty-parts", whole[:20], more=True),
        (Transfer(handle=sender.handle, more=True), b""),
        (Transfer(handle=sender.handle, more=True), whole[20:]),
        (Transfer(handle=sender.handle, more=False), b""),
    ])  # fmt: skip
    if _ended(probe, ctx, {base}):
        return
    _check_unchanged(ctx, _queued(probe, ctx, queue), Message.decode(whole).body[0].value)


@_unchanged_case(
    "2.6.14/continuation-with-id-or-tag",
    "On continuation transfers the delivery-id MAY be omitted and the delivery-tag may be "
    "(2.7.5): continuations that repeat one of them (the same values) carry the same "
    "delivery, which comes out unchanged (3.2) and settled (rcv-settle-mode first).",
)
def continuation_with_id_or_tag(probe, ctx):
    """A delivery in three frames: the first with delivery-id and tag (more=true), the
    second repeating the delivery-id only (more=true), the last repeating the tag only
    (more=false): settled and delivered with the same body."""
    queue, session, sender, base = _publishing(probe, ctx)
    whole = _body("id-or-tag-" + "i" * 40)
    _send(probe, session, [
        _first(sender, base, b"id-or-tag", whole[:20], more=True),
        (Transfer(handle=sender.handle, delivery_id=base, more=True), whole[20:40]),
        (Transfer(handle=sender.handle, delivery_tag=b"id-or-tag", more=False), whole[40:]),
    ])  # fmt: skip
    if _ended(probe, ctx, {base}):
        return
    _check_unchanged(ctx, _queued(probe, ctx, queue), Message.decode(whole).body[0].value)


def _first_without(probe: Probe, ctx: CaseContext, field: str) -> None:
    """A whole delivery in one unsettled transfer lacking `field` (delivery_id or
    delivery_tag): the broker's answer recorded."""
    _, session, sender, base = _publishing(probe, ctx)
    fields = {"delivery_id": base, "delivery_tag": b"half-named", field: None}
    transfer = Transfer(handle=sender.handle, message_format=0, settled=False, **fields)
    since = probe.mark()
    _send(probe, session, [(transfer, _body("half-named"))])
    _recorded(probe, ctx, since, {base})


def _first_without_case(field: str, sentence_id: str, sentence: str, doc: str) -> None:
    """Declare `2.7.5/first-transfer-without-<field>` (`_first_without`)."""

    def run(probe, ctx):
        _first_without(probe, ctx, field)

    slug = field.replace("_", "-")
    declare = _recorded_case(
        f"2.7.5/first-transfer-without-{slug}", sentence, sentences=(sentence_id,)
    )
    declare(case_function(run, f"first_transfer_without_{field}", doc, __name__))


_first_without_case(
    "delivery_id",
    FIRST_ID,
    "The delivery-id MUST be supplied on the first transfer of a multi-transfer delivery "
    "(binds the sender, the probe here); a single transfer with a tag and no delivery-id: "
    "no sentence says how the receiver answers (amqp:invalid-field names the error).",
    """One unsettled transfer with a delivery-tag and no delivery-id: the broker's answer
    (Broker-J detaches the link with invalid-field).""",
)
_first_without_case(
    "delivery_tag",
    FIRST_TAG,
    "The delivery-tag MUST be specified for the first transfer of a multi transfer message "
    "(binds the sender, the probe here); a single transfer with a delivery-id and no tag: "
    "no sentence says how the receiver answers (amqp:invalid-field names the error).",
    """One unsettled transfer with a delivery-id and no delivery-tag: the broker's answer
    (Broker-J detaches the link with invalid-field).""",
)


@_recorded_case(
    "2.7.5/transfer-handle-null",
    "transfer handle is mandatory (null is not permitted, 1.3: binds the sender, the probe "
    "here); no sentence says how the receiver answers a transfer with a null handle.",
)
def transfer_handle_null(probe, ctx):
    """A sender granted credit, then a transfer (0x14) naming its delivery but with a null
    handle, carrying a message: the broker's answer (Broker-J ends the session or
    connection with an error)."""
    session, _ = publisher(probe, ctx, ctx.queue())
    transfer = Transfer(
        handle=None, delivery_id=session.next_outgoing_id, delivery_tag=b"no-handle",
        message_format=0, settled=True,
    )  # fmt: skip
    data = mutate(transfer).frame(session.channel, payload=_body("no-handle"))
    ctx.outcome(sent_bytes_outcome(probe, data, timeout=ANSWER_WAIT, silence="no-error"))


def _settle_flag_against_mode(
    probe: Probe, ctx: CaseContext, mode: SndSettleMode, settled: bool
) -> None:
    """A sender attached with snd-settle-mode `mode`, then one transfer whose settled flag
    contradicts it: the broker's answer recorded (its attach's mode noted)."""
    _, session, sender, base = _publishing(probe, ctx, snd_settle_mode=mode)
    answered = sender.remote_attach.snd_settle_mode
    if answered != mode:
        ctx.note(f"the broker's attach says snd-settle-mode {answered}, ours {mode}")
    since = probe.mark()
    _send(probe, session, [_first(sender, base, b"flag", _body("settle-flag"), settled=settled)])
    _recorded(probe, ctx, since, {base})


def _settle_flag_case(
    mode: SndSettleMode, settled: bool, sentence_id: str, sentence: str, doc: str
) -> None:
    """Declare `2.7.5/transfer-settled-flag-<mode>-link` (`_settle_flag_against_mode`)."""

    def run(probe, ctx):
        _settle_flag_against_mode(probe, ctx, mode, settled)

    name = "unsettled" if mode == SndSettleMode.UNSETTLED else "settled"
    declare = _recorded_case(
        f"2.7.5/transfer-settled-flag-{name}-link", sentence, sentences=(sentence_id,)
    )
    declare(case_function(run, f"transfer_settled_flag_{name}_link", doc, __name__))


_settle_flag_case(
    SndSettleMode.UNSETTLED,
    True,
    UNSETTLED_ON_UNSETTLED_LINK,
    "If the negotiated value for snd-settle-mode at attachment is unsettled, then this field "
    "MUST be false (or unset) on every transfer frame for a delivery (binds the sender, the "
    "probe here); no sentence says how the receiver answers a settled one.",
    """A sender attached with snd-settle-mode unsettled, then a transfer with settled=true:
    the broker's answer (RabbitMQ 4 detaches the link with invalid-field).""",
)
_settle_flag_case(
    SndSettleMode.SETTLED,
    False,
    SETTLED_ON_SETTLED_LINK,
    "If the negotiated value for snd-settle-mode at attachment is settled, then this field "
    "MUST be true on at least one transfer frame for a delivery (binds the sender, the probe "
    "here); no sentence says how the receiver answers an unsettled one.",
    """A sender attached with snd-settle-mode settled, then a transfer with settled=false:
    the broker's answer (RabbitMQ 4 detaches the link with invalid-field).""",
)


@_recorded_case(
    "2.7.5/transfer-without-payload",
    "A transfer carrying no message section at all (more=false, empty payload): no "
    "sentence says what a receiver answers (Broker-J rejects it with decode-error): "
    "recorded.",
    outcomes=ENDINGS | {"no-error"},
    requires={"queues", "empty-transfer"},
)
def transfer_without_payload(probe, ctx):
    """One unsettled transfer with an empty payload: the broker's answer (a disposition's
    state, or the link, session or connection ended) is recorded, and what the queue
    holds afterwards noted."""
    queue, session, sender, base = _publishing(probe, ctx)
    since = probe.mark()
    _send(probe, session, [_first(sender, base, b"empty", b"")])
    _recorded(probe, ctx, since, {base})
    if not probe.closed:
        ctx.note(f"queued afterwards: {len(_queued(probe, ctx, queue))}")


@_recorded_case(
    "2.7.5/message-format-changed",
    "message-format MUST be specified on the first transfer and may only be omitted on "
    "continuation transfers (binds the sender); the text does not address a continuation "
    "naming another format: the receiver's answer is recorded.",
    sentences=(FORMAT_FIRST,),
    requires=MULTI_FRAME,
)
def message_format_changed(probe, ctx):
    """A two-frame delivery whose first frame says message-format 0 and whose
    continuation says 1: the broker's answer (Broker-J ends the link with an error)."""
    _, session, sender, base = _publishing(probe, ctx)
    whole = _body("format-changed")
    since = probe.mark()
    _send(probe, session, [
        _first(sender, base, b"format", whole[:8], more=True),
        (Transfer(handle=sender.handle, message_format=1, more=False), whole[8:]),
    ])  # fmt: skip
    _recorded(probe, ctx, since, {base})


@_received_case(
    "2.7.5/transfer-rcv-settle-first",
    "If first, this indicates that the Receiver MUST settle the delivery once it has "
    "arrived without waiting for the Sender to settle first: an unsettled transfer stating "
    "rcv-settle-mode first is settled by the broker's disposition.",
    sentences=(SETTLE_FIRST,),
)
def transfer_rcv_settle_first(probe, ctx):
    """An unsettled transfer with rcv-settle-mode first on its own frame: the broker's
    disposition settles it (no settled disposition within the bound is FAILED)."""
    _, session, sender, base = _publishing(probe, ctx)
    since = probe.mark()
    frame = _first(sender, base, b"first", _body("rcv-first"), rcv_settle_mode=RcvSettleMode.FIRST)
    _send(probe, session, [frame])
    settled = settlements(probe, {base})
    ctx.check(
        bool(settled),
        f"expected a settled disposition for delivery {base}; observed "
        f"{probe.observed(since) or 'nothing'}",
    )
    ctx.note(f"settled with {settled[base]}")


@_recorded_case(
    "2.7.5/transfer-rcv-settle-second-on-first-link",
    "If the negotiated link value is first, then it is illegal to set this field to second "
    "(binds the sender, the probe here); no sentence says how the receiver answers: "
    "recorded.",
    sentences=(SECOND_ILLEGAL,),
)
def transfer_rcv_settle_second_on_first_link(probe, ctx):
    """A sender attached with rcv-settle-mode first (the broker's attach states its
    value), then an unsettled transfer stating rcv-settle-mode second: the broker's answer
    (Broker-J detaches the link with invalid-field)."""
    _, session, sender, base = _publishing(probe, ctx, rcv_settle_mode=RcvSettleMode.FIRST)
    negotiated = sender.remote_attach.rcv_settle_mode
    if negotiated not in (None, RcvSettleMode.FIRST):
        ctx.note(f"the broker's attach says rcv-settle-mode {negotiated}: not illegal there")
    since = probe.mark()
    frame = _first(
        sender, base, b"second", _body("rcv-second"), rcv_settle_mode=RcvSettleMode.SECOND
    )
    _send(probe, session, [frame])
    _recorded(probe, ctx, since, {base})


@_received_case(
    "2.6.12/delivery-tag-other-link",
    "A delivery-tag identifies a delivery on its link; the Receiver MUST settle a delivery "
    "in rcv-settle-mode first once it has arrived: two unsettled deliveries with the same "
    "tag on two links of one session are each settled and delivered.",
    sentences=(SETTLE_FIRST, BARE_ENCODING),
)
def delivery_tag_other_link(probe, ctx):
    """Two senders on one session, one queue; the same tag on a delivery on each: the
    broker settles both (rcv-settle-mode first) and the queue gets both unchanged."""
    queue = ctx.queue()
    session, first = publisher(probe, ctx, queue)
    _, second = publisher(probe, ctx, queue, session=session)
    base = session.next_outgoing_id
    bodies = [_body("same-tag-0"), _body("same-tag-1")]
    _send(probe, session, [
        _first(first, base, b"same", bodies[0]),
        _first(second, base + 1, b"same", bodies[1]),
    ])  # fmt: skip
    _settled_and_queued(probe, ctx, queue, {base, base + 1}, [b"same-tag-0", b"same-tag-1"])


@_received_case(
    "2.6.12/delivery-tag-reused-after-settle",
    "The delivery-tag MUST be unique amongst deliveries that could be considered "
    "unsettled, so a settled delivery's tag may be reused; the Receiver MUST settle a "
    "delivery in rcv-settle-mode first once it has arrived: both are settled and delivered.",
    sentences=(SETTLE_FIRST, BARE_ENCODING),
)
def delivery_tag_reused_after_settle(probe, ctx):
    """An unsettled delivery tagged `reused`, settled by the broker and then by us, then a
    second delivery with the same tag: both settled by the broker, both queued."""
    queue, session, sender, base = _publishing(probe, ctx)
    _send(probe, session, [_first(sender, base, b"reused", _body("reused-0"))])
    if _ended(probe, ctx, {base}):
        return
    _send(probe, session, [_first(sender, base + 1, b"reused", _body("reused-1"))])
    _settled_and_queued(probe, ctx, queue, {base, base + 1}, [b"reused-0", b"reused-1"])


def _settled_and_queued(
    probe: Probe, ctx: CaseContext, queue: str, ids: set[int], bodies: list[bytes]
) -> None:
    """2.7.5: every delivery of `ids` settled by the broker (unless it ended something:
    recorded); 3.2: what the queue holds is what was sent (a missing one recorded)."""
    if _ended(probe, ctx, ids):
        return
    got = _queued(probe, ctx, queue)
    ctx.check(
        all(body in bodies for body in got),
        f"expected the bodies {bodies}; observed {got}",
    )
    if sorted(got) != sorted(bodies):
        ctx.note(f"queued {got}, sent {bodies} (recorded)")


@_recorded_case(
    "2.6.12/delivery-tag-duplicate-unsettled",
    "The delivery-tag MUST be unique amongst all deliveries that could be considered "
    "unsettled by either end of the Link (binds the sender, the probe here); no sentence "
    "says how the receiver answers: recorded.",
    sentences=(TAG_UNIQUE,),
)
def delivery_tag_duplicate_unsettled(probe, ctx):
    """Two unsettled deliveries with the same tag written in one burst (the first is
    unsettled at our end when the second goes): the broker's answer (Broker-J's own test
    is disabled upstream)."""
    _, session, sender, base = _publishing(probe, ctx)
    since = probe.mark()
    _send(probe, session, [
        _first(sender, base, b"twice", _body("twice-0")),
        _first(sender, base + 1, b"twice", _body("twice-1")),
    ])  # fmt: skip
    _recorded(probe, ctx, since, {base, base + 1})


@case(
    "3.4.1/received-state-then-accepted",
    MUST,
    "The Sender MUST NOT send the received state on transfer or disposition performatives "
    "except on the first transfer performative on a resumed delivery; a delivery the "
    "receiver marks received (non-terminal), then accepts and settles, is not sent again.",
    sentences=(RECEIVED_NOT_SENT, NOT_RESENT),
    role="sender",
    requires={"queues", "unsettled-deliveries", "requeue-on-detach"},
)
def received_state_then_accepted(probe, ctx):
    """One message taken unsettled; our disposition states received (section 0, offset 0)
    unsettled; the broker's frames after it carry no received state (an ending is
    recorded); then accepted and settled, the link detached: a new consumer gets nothing."""
    queue, link = queued_receiver(probe, ctx, 1, unsettled=True, credit=1)
    delivery = probe.receive(link, 1, settle=False)[0]
    since = probe.mark()
    link.disposition(delivery.delivery_id, state=Received(section_number=0, section_offset=0))
    probe.flush()
    ending = probe.error_outcome(timeout=0.2, since=since)
    echoed = [
        item.item
        for name in ("disposition", "transfer")
        for item in probe.frames_since(since, name)
        if isinstance(item.item.performative.state, Received)
    ]
    ctx.must(
        not echoed,
        f"expected no received state from the broker (the sender); observed {echoed[0]}"
        if echoed
        else "",
        RECEIVED_NOT_SENT,
    )
    if ending not in ("timeout",):
        ctx.note(f"the broker ended something after the received state: {ending} (recorded)")
        return
    link.disposition(delivery.delivery_id, settled=True, state=Accepted())
    probe.flush()
    probe.detach(link)
    other = ctx.probe()
    _, again = unsettled_consumer(other, ctx, queue, credit=5)
    back = collect(other, again, 0.4)
    ctx.must(
        not back,
        f"expected the accepted message not sent again; observed {len(back)} resent",
        NOT_RESENT,
    )
