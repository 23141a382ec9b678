"""2.6.13 Resuming Deliveries with the broker as receiver (the sending-link rows of Qpid
Broker-J's ResumeDeliveriesTest, all @Ignore("QPID-7845") upstream: Broker-J fails them). A
publisher link to a target asking for expiry-policy never holds deliveries unsettled at the
broker, is suspended (detach closed=false, 2.6.4) and attached again with the sender's
unsettled map. What the text makes of the broker then:

- its attach carries what it holds unsettled: "If either end of the Link is already
  associated with a Terminus, the attach frame MUST include its unsettled delivery state."
  (2.6.3); a map too large for the agreed max-frame-size: "the session may be ended with the
  frame-size-too-small error [...] The endpoint SHOULD make use of the ability to send an
  incomplete unsettled map" (2.7.3 unsettled);
- having sent an incomplete map, "a receiving endpoint which sent an incomplete unsettled
  map MUST detach with an error on receiving a transfer which does not have the resume flag
  set to true" (2.7.3 incomplete-unsettled). The probe breaks the sender's half of that
  sentence ("a sending endpoint MUST NOT send any new deliveries") on purpose, as Broker-J's
  test does; a broker whose map was complete is UNSUPPORTED there (the MUST binds only a
  receiver that sent an incomplete map);
- a delivery resumed from the middle: the broker's map states how much it has (3.4.1
  received, "the furthest point in the payload of the message which the target will not
  need to have resent"), the probe resumes it from there and the message the broker queues
  keeps the exact bytes of the bare message (3.2: "The exact encoding of sections of the
  bare message MUST NOT be modified").

Deliveries stay unsettled at a broker only in rcv-settle-mode second (2.8.3): the cases that
need them ask for it, and a broker answering first is UNSUPPORTED there (as Broker-J's
assumeReceiverSettlesSecond). Capability-gated like the other recovery cases (profile
capability `link-recovery`, conformance/cases/s2_6_13_recovery.py).

Owns the cases `2.6.13/publisher-resume-*` but `publisher-resume-not-in-map-ignored`, and
`2.7.3/publisher-*`.
"""

from __future__ import annotations

import time
import uuid

from amqpspec.amqp10.composites import Properties, Received, Source, Target
from amqpspec.amqp10.engine import DispositionReceived, Link, RemoteAttach, Session
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.message import Message, resume_offset, split_sections
from amqpspec.amqp10.spec import RcvSettleMode, Role
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.run.registry import MUST, case
from amqpspec.conformance.steps.deliveries import collect, settle_all
from amqpspec.conformance.steps.frames import send_head
from amqpspec.conformance.steps.links import attach_answer, small_frame_probe, wait_credit
from amqpspec.conformance.verdicts import Unsupported

ATTACH_UNSETTLED = "2.6.3/establishing-or-resuming-a-link.2"  # the attach carries its map
INCOMPLETE_SHOULD = "2.7.3/attach.unsettled.2"  # SHOULD send an incomplete map, not an error
INCOMPLETE = "2.7.3/attach.incomplete-unsettled.1"  # ... MUST detach with an error
BARE_ENCODING = "3.2/message-format.2"  # the bare message's exact encoding not modified
RECOVERY = {"queues", "link-recovery"}
HELD = 24  # publishes held unsettled: more than a 512-octet attach can list
TAG_OCTETS = 40  # each map entry >= 43 octets: at most 11 in a 512-octet frame
ANSWER_WAIT = 1.0  # seconds for the broker's dispositions or its detach (a local broker: ms)


def _name(kind: str) -> str:
    return f"amqpspec-{kind}-{uuid.uuid4().hex[:12]}"


def _target(ctx: CaseContext, queue: str) -> Target:
    return Target(address=ctx.target_address(queue), expiry_policy="never")


def _attached(probe: Probe, session: Session, link: Link) -> RemoteAttach:
    """The broker's attach for `link`; UNSUPPORTED when it refuses the link."""
    answer = attach_answer(probe, session, link)
    if not isinstance(answer, RemoteAttach) or answer.attach.target is None:
        raise Unsupported(f"the broker refuses the sender {link.name!r}: {answer}")
    return answer


def _second_sender(probe: Probe, ctx: CaseContext, session: Session, queue: str) -> Link:
    """A sender to `queue` (expiry-policy never) asking for rcv-settle-mode second, once it
    has credit; UNSUPPORTED when the broker agrees to first (2.8.3: deliveries then settle at
    it on arrival, none stays unsettled across a suspend)."""
    link = session.attach_sender(
        _name("resume-pub"), Source(), _target(ctx, queue), rcv_settle_mode=RcvSettleMode.SECOND
    )
    mode = _attached(probe, session, link).attach.rcv_settle_mode
    if mode is None or int(mode) != RcvSettleMode.SECOND:
        raise Unsupported(f"the broker agreed to rcv-settle-mode {mode!r}, not second")
    wait_credit(probe, link)
    return link


def _outcomes(probe: Probe, ids: set[int]) -> dict[int, tuple[bool, object]]:
    """The broker's dispositions (as receiver) for `ids`: delivery-id -> (settled, state),
    waited for at most ANSWER_WAIT."""
    found: dict[int, tuple[bool, object]] = {}
    end = time.monotonic() + ANSWER_WAIT
    while True:
        for event in probe.inbox:
            if isinstance(event, DispositionReceived) and event.role == Role.RECEIVER:
                for delivery_id in set(range(event.first, event.last + 1)) & ids:
                    found[delivery_id] = (event.settled, event.state)
        if set(found) >= ids or probe.closed or (left := end - time.monotonic()) <= 0:
            return found
        probe.pump(min(left, 0.1))


def _held(probe: Probe, link: Link, count: int, tag_octets: int = 0) -> dict[bytes, object]:
    """`count` publishes on `link` (rcv-settle-mode second) left unsettled at the broker:
    tag -> the state of the broker's unsettled disposition. UNSUPPORTED when the broker
    settled one (it did not hold it: nothing to resume)."""
    tags: dict[int, bytes] = {}
    for index in range(count):
        tag = f"{index:0{max(tag_octets, 1)}d}".encode()
        tags[probe.send_message(link, f"held-{index}".encode(), settled=False, tag=tag)] = tag
    outcomes = _outcomes(probe, set(tags))
    settled = [tags[i] for i, (done, _) in outcomes.items() if done]
    if settled or len(outcomes) < len(tags):
        raise Unsupported(
            f"the broker did not hold the {count} publishes unsettled (rcv-settle-mode "
            f"second): settled {len(settled)}, answered {len(outcomes)} of {count}"
        )
    return {tags[i]: state for i, (_, state) in outcomes.items()}


def _resume(probe: Probe, session: Session, old: Link, **fields: object) -> tuple[Link, object]:
    """Suspend `old` and attach the same link again with `fields` (unsettled, ...): the new
    link and the broker's answer (its RemoteAttach, or the end or close that refused it)."""
    probe.detach(old, closed=False)
    target = Target(address=old.target.address, expiry_policy="never")
    link = session.attach_sender(
        old.name,
        Source(),
        target,
        snd_settle_mode=old.snd_settle_mode,
        rcv_settle_mode=old.rcv_settle_mode,
        **fields,
    )
    return link, attach_answer(probe, session, link, "the broker's attach resuming the link")


def _listed(attach) -> dict[bytes, object]:
    theirs = attach.unsettled if isinstance(attach.unsettled, dict) else {}
    return {bytes(tag): state for tag, state in theirs.items() if tag is not None}


def _queued(probe: Probe, ctx: CaseContext, session: Session, queue: str) -> list:
    receiver = probe.attach_receiver(session, ctx.source(queue), credit=HELD + 2)
    got = collect(probe, receiver, 0.3)
    settle_all(probe, receiver, got)
    return got


@case(
    "2.6.13/publisher-resume-held-delivery",
    MUST,
    "A publisher link in rcv-settle-mode second suspended with a publish the broker holds "
    "unsettled: the broker's attach resuming it lists that delivery (2.6.3: the attach "
    "frame MUST include its unsettled delivery state).",
    sentences=(ATTACH_UNSETTLED,),
    requires=RECOVERY,
    role="receiver",
)
def publisher_resume_held_delivery(probe, ctx):
    """After Broker-J's ResumeDeliveriesTest.resumeSendingLinkSingleUnsettledDelivery: a sender
    to a target with expiry-policy never, rcv-settle-mode second, one publish the broker
    answers unsettled; detach closed=false; the same link attached again with the tag in its
    map (null state): the broker's map lists the tag (its state of the kind the broker
    answered: recorded). The delivery is then resumed settled without its message ("The
    Sender MAY omit message data when the Delivery State of the Receiver indicates
    retransmission is unnecessary", 2.6.13) and the queue holds the message once
    (recorded)."""
    queue = ctx.queue()
    session = probe.open_session()
    link = _second_sender(probe, ctx, session, queue)
    held = _held(probe, link, 1)
    tag, state = next(iter(held.items()))
    again, answer = _resume(probe, session, link, unsettled={tag: None})
    if not isinstance(answer, RemoteAttach):
        raise Unsupported(f"the broker refused the resuming attach: {answer}")
    listed = _listed(answer.attach)
    ctx.must(
        tag in listed,
        f"expected the broker's attach resuming the link to list the delivery it holds "
        f"unsettled ({tag!r}, answered {state!r}); observed unsettled={answer.attach.unsettled!r}",
        ATTACH_UNSETTLED,
    )
    if type(listed[tag]) is not type(state):
        ctx.note(f"the broker listed {tag!r} with {listed[tag]!r}, having answered {state!r}")
    wait_credit(probe, again)
    again.send(b"", tag, settled=True, resume=True)
    probe.flush()
    copies = [d for d in _queued(probe, ctx, session, queue) if d.payload]
    ctx.note(f"the queue held the message {len(copies)} time(s) after the resume (recorded)")


def _incomplete_resume(ctx: CaseContext) -> tuple[Probe, Session, Link, set[bytes], object]:
    """Broker-J's setup: max-frame-size 512, rcv-settle-mode second, HELD publishes held
    unsettled under long tags; detach closed=false; the link attached again with an
    unsettled map of one of them, incomplete-unsettled=true. Returns the probe, session,
    new link, the tags and the broker's answer."""
    probe = small_frame_probe(ctx)
    queue = ctx.queue()
    session = probe.open_session()
    link = _second_sender(probe, ctx, session, queue)
    tags = set(_held(probe, link, HELD, TAG_OCTETS))
    first = min(tags)
    again, answer = _resume(
        probe, session, link, unsettled={first: None}, incomplete_unsettled=True
    )
    return probe, session, again, tags, answer


@case(
    "2.7.3/publisher-incomplete-unsettled-map",
    MUST,
    "A publisher link suspended with more unsettled deliveries than an attach of the agreed "
    "max-frame-size can list: the broker's resuming attach lists only deliveries it holds "
    "and says incomplete-unsettled=true (2.7.3 SHOULD; an end with frame-size-too-small "
    "is allowed), never a complete map that leaves some out (2.6.3 MUST).",
    sentences=(ATTACH_UNSETTLED, INCOMPLETE_SHOULD),
    requires=RECOVERY,
    role="receiver",
    pipelined=False,
)
def publisher_incomplete_unsettled_map(probe, ctx):
    """After Broker-J's ResumeDeliveriesTest.resumeSendingLinkWithIncompleteUnsettled (512
    publishes there; 24 under 40-octet tags here fill a 512-octet frame as surely)."""
    _, _, _, tags, answer = _incomplete_resume(ctx)
    if not isinstance(answer, RemoteAttach):
        ctx.should(
            False,
            f"expected an attach with an incomplete unsettled map rather than an error "
            f"(2.7.3 SHOULD); observed {answer}",
        )
        return
    attach = answer.attach
    ctx.must(
        attach.unsettled is not None,
        f"expected the broker's attach resuming the link to carry its unsettled map (it "
        f"holds {len(tags)} deliveries); observed unsettled=None",
        ATTACH_UNSETTLED,
    )
    listed = _listed(attach)
    if not attach.incomplete_unsettled:
        missing = sorted(tags - set(listed))
        ctx.must(
            not missing,
            f"expected a complete unsettled map (incomplete-unsettled not set) to list the "
            f"{len(tags)} deliveries the broker holds; observed {len(listed)}, missing "
            f"{len(missing)} (e.g. {missing[:2]})",
            ATTACH_UNSETTLED,
        )
    strangers = sorted(set(listed) - tags)
    if strangers or not listed:
        ctx.note(f"the broker's incomplete map lists {len(listed)} tags, unknown: {strangers}")


@case(
    "2.7.3/publisher-new-delivery-after-incomplete-map",
    MUST,
    "Having sent an incomplete unsettled map, the broker as receiving endpoint MUST detach "
    "with an error on receiving a transfer which does not have the resume flag set (2.7.3).",
    sentences=(INCOMPLETE,),
    requires=RECOVERY,
    role="receiver",
    pipelined=False,
)
def publisher_new_delivery_after_incomplete_map(probe, ctx):
    """After Broker-J's ResumeDeliveriesTest.rejectNewDeliveryWhilstUnsettledIncomplete: the
    setup of 2.7.3/publisher-incomplete-unsettled-map; when the broker's attach says
    incomplete-unsettled=true, a new transfer (resume not set) on the resumed link: the broker
    detaches it with an error (Broker-J expects amqp:illegal-state: the condition is
    recorded)."""
    probe, _, again, _, answer = _incomplete_resume(ctx)
    if not isinstance(answer, RemoteAttach) or not answer.attach.incomplete_unsettled:
        raise Unsupported(
            "the broker's resuming attach did not carry an incomplete unsettled map: the "
            f"detach rule binds a receiver which sent one; observed {answer}"
        )
    wait_credit(probe, again)
    since = probe.mark()
    probe.send_message(again, b"amqpspec-new", settled=False, tag=b"amqpspec-new-delivery")
    ending = probe.error_outcome(timeout=ANSWER_WAIT, since=since)
    ctx.must(
        ending.startswith("detach:") and ending != "detach:none",
        f"expected the broker, after its incomplete unsettled map, to detach the link with an "
        f"error on a transfer without resume; observed {ending}",
        INCOMPLETE,
    )
    if ending != "detach:amqp:illegal-state":
        ctx.note(f"detached with {ending} (Broker-J expects amqp:illegal-state)")


def _resume_point(ctx: CaseContext, state: object, sent: bytes) -> tuple[int, object]:
    """Where to resume the delivery from, as the broker's map states it: (offset, the state
    the first resumed transfer carries)."""
    if isinstance(state, Received):
        number, offset = int(state.section_number), int(state.section_offset)
        start = resume_offset(sent, number, offset)
        if start is not None:
            return start, Received(section_number=number, section_offset=offset)
        ctx.note(f"the broker's received state {state!r} lies past the {len(sent)} bytes sent")
    elif state is not None:
        ctx.note(f"the broker listed the partial delivery with {state!r}")
    return 0, None


@case(
    "2.6.13/publisher-resume-partial-delivery",
    MUST,
    "A publisher link suspended in the middle of a multi-frame delivery and attached again: "
    "the broker's map states how much of it it holds (2.6.3, 3.4.1 received), the delivery "
    "resumed from there completes the message, whose bare message keeps its exact encoding "
    "(3.2).",
    sentences=(ATTACH_UNSETTLED, BARE_ENCODING),
    requires=RECOVERY | {"multi-frame"},
    role="receiver",
)
def publisher_resume_partial_delivery(probe, ctx):
    """After Broker-J's ResumeDeliveriesTest.resumeSendingLinkSinglePartialDelivery: a sender to a
    target with expiry-policy never sends the first half of a message (properties and a
    data section) with more=true and detaches with closed=false; the same link attached
    again with the tag in its map: the broker lists the tag (UNSUPPORTED when it kept
    nothing of it), the probe resumes the delivery (resume=true) from the point the
    broker's received state gives (whole without one) and a receiver from the queue gets
    the message with its exact bare encoding."""
    queue = ctx.queue()
    session = probe.open_session()
    target = _target(ctx, queue)
    link = session.attach_sender(_name("resume-partial"), Source(), target)
    _attached(probe, session, link)
    wait_credit(probe, link)
    message = Message.of(b"amqpspec-partial-" + b"p" * 600)
    message.properties = Properties(message_id="amqpspec-partial")
    payload = message.encode()
    tag, cut = b"amqpspec-partial-delivery", len(payload) // 2
    send_head(probe, session, link, tag, payload[:cut], settled=False)  # the rest never follows
    again, answer = _resume(probe, session, link, unsettled={tag: None})
    if not isinstance(answer, RemoteAttach):
        raise Unsupported(f"the broker refused the resuming attach: {answer}")
    ctx.must(
        answer.attach.unsettled is not None,
        "expected the broker's attach resuming the link (its target kept: expiry-policy never) "
        f"to carry its unsettled map; observed unsettled={answer.attach.unsettled!r}",
        ATTACH_UNSETTLED,
    )
    listed = _listed(answer.attach)
    if tag not in listed:
        raise Unsupported(f"the broker kept nothing of the partial delivery: its map {listed!r}")
    start, state = _resume_point(ctx, listed[tag], payload[:cut])
    wait_credit(probe, again)
    again.send(payload[start:], tag, settled=False, state=state, resume=True)
    probe.flush()
    got = _queued(probe, ctx, session, queue)
    if not got:
        ctx.note("the resumed delivery was not queued (recorded)")
    bare = _bare(payload)
    for delivery in got:
        observed = _bare(delivery.payload)
        ctx.must(
            observed == bare,
            f"expected the message resumed from offset {start} ({state!r}) with its bare "
            f"message's exact encoding ({len(b''.join(bare or []))} octets); observed "
            f"{'undecodable' if observed is None else len(b''.join(observed))} octets "
            f"({len(delivery.payload)} in all)",
            BARE_ENCODING,
        )


def _bare(payload: bytes) -> list[bytes] | None:
    """The exact bytes of each bare-message section of `payload` (None: undecodable)."""
    try:
        return [section.raw for section in split_sections(payload) if section.bare]
    except DecodeError:
        return None
