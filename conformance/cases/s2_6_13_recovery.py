"""2.6.13 Resuming Deliveries and the unsettled map (2.7.3), the broker as sender: a receiver
from a source asking for expiry-policy never (3.5.3: "The Terminus never expires") takes
deliveries unsettled, its link is suspended (detach closed=false, 2.6.4) or its connection
dropped, and the same link (container-id, name, role: 2.6.1) is attached again with the
receiver's unsettled map. What the text makes of the broker then:

- its attach carries the kept deliveries: "If either end of the Link is already associated
  with a Terminus, the attach frame MUST include its unsettled delivery state." (2.6.3);
- deliveries both ends hold unsettled: "Deliveries in this category MUST be resumed by the
  Sender." (2.6.13), "The resume flag of the transfer frame MUST be set to true when resuming
  a delivery." (2.6.13); with a null state at the receiver "the resent delivery MUST be sent
  with the resume flag set to true and the delivery-tag set to 4" (3.4.6, tag 4), with a
  terminal outcome "the sender MUST send a resuming transfer to associate delivery-tag 3
  with a delivery-id" (3.4.6) and "SHOULD set the delivery-state at the source";
- deliveries only the broker holds: "the sender MUST resend the message, however the
  delivery is not being resumed [...] so transfers MUST NOT have the resume flag set to
  true" (3.4.6, tag 1);
- deliveries only the receiver lists: "MUST be ignored by the Sender" (2.6.13).

Capability-gated (profile capability `link-recovery`): the text does not oblige a broker to
keep a terminus after its link goes (3.5.3 lets the broker "adjust the properties" of the
terminus it creates if it reports them, 2.6.3: an expiry-policy other than never reported
is UNSUPPORTED here too), and a broker with no terminus answers a re-attach as a new link,
which may carry a null unsettled map. A broker whose profile does not claim it is
UNSUPPORTED on those cases, never FAILED.

One case binds every sender, gated by nothing but queues: "On receipt of an incomplete
unsettled map a sending endpoint MUST NOT send any new deliveries (i.e. deliveries where
resume is not set to true) to its partner" (2.7.3 incomplete-unsettled), whether or not the
broker keeps termini.

Counters the receiving-link rows of Qpid Broker-J's ResumeDeliveriesTest
(resumeReceivingLinkEmptyUnsettled, resumeReceivingLinkWithSingleUnsettledAccepted,
resumeReceivingLinkOneUnsettledWithNoOutcome, incompleteUnsettledReceiving; all but the
first @Ignore("QPID-7845") upstream: Broker-J fails them). Broker-J's tests suspend a link
from a source with the default expiry-policy (session-end); these ask for never, which a
broker keeping termini reports (the reference broker applies session-end as link-detach,
reference_broker/features/recovery.py). Its sending-link rows (the broker as receiver) are in
s2_6_13_publisher_resume.py.

The broker as receiver (a publisher link from a target asking for expiry-policy never, same
gate): its resuming attach carries its unsettled map (2.6.3), and a resumed transfer of a
delivery not in it "MUST be ignored by the receiver" (2.6.13; 2.7.5 "The receiver MUST
ignore resumed deliveries that are not in its local unsettled map").

Owns the cases `2.6.13/*` of link recovery and `2.7.3/incomplete-unsettled-*`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.composites import Accepted, Source, Target
from amqpspec.amqp10.engine import (
    DispositionReceived,
    RemoteAttach,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import SndSettleMode
from amqpspec.conformance.run.registry import MUST, RunFunction, case
from amqpspec.conformance.steps.deliveries import collect
from amqpspec.conformance.steps.queues import fill, message_text
from amqpspec.conformance.steps.sentences import NOT_RESENT
from amqpspec.conformance.verdicts import Unsupported

ATTACH_UNSETTLED = "2.6.3/establishing-or-resuming-a-link.2"  # the attach carries its map
BOTH_RESUMED = "2.6.13/resuming-deliveries.3"  # held by both: resumed by the sender
RECEIVER_ONLY = "2.6.13/resuming-deliveries.2"  # held by the receiver only: ignored
RESUME_FLAG = "2.6.13/resuming-deliveries.7"  # resume=true when resuming
RESEND_NOT_RESUMED = "3.4.6/resuming-deliveries-using-delivery-states.1"  # tag 1
RESUMING_TRANSFER = "3.4.6/resuming-deliveries-using-delivery-states.3"  # tag 3
RESEND_RESUMED = "3.4.6/resuming-deliveries-using-delivery-states.6"  # tag 4
INCOMPLETE = "2.7.3/attach.incomplete-unsettled.1"  # no new deliveries
SOURCE_ONLY_RESUMED = "2.6.13/resuming-deliveries.1"  # a resumed one the receiver lacks: ignored
RESUME_IGNORED = "2.7.5/transfer.resume.1"  # not in its local unsettled map: ignored
RECOVERY = {"queues", "unsettled-deliveries", "link-recovery"}
COUNT = 3
UNKNOWN_TAG = b"amqpspec-unknown-tag"


def _source(ctx, queue: str) -> Source:
    return Source(address=ctx.source(queue), expiry_policy="never")


def _attach(probe, session, name: str, source: Source, **fields):
    """Attach a receiver `name` (unsettled deliveries asked for) and wait for the broker's
    attach: (link, the broker's attach); UNSUPPORTED when it refuses the source."""
    link = session.attach_receiver(
        name, source, Target(), snd_settle_mode=SndSettleMode.UNSETTLED, **fields
    )
    probe.flush()
    event = probe.expect(
        lambda e: (
            (isinstance(e, RemoteAttach | RemoteDetach) and e.link is link)
            or (isinstance(e, RemoteEnd) and e.session is session)
            or isinstance(e, RemoteClose)
        ),
        what="attach",
    )
    if not isinstance(event, RemoteAttach) or event.attach.source is None:
        raise Unsupported(f"the broker refuses the source {source!r}: {event}")
    return link, event.attach


def _kept(probe, ctx, *, suspend: bool = True):
    """COUNT messages taken unsettled from a source with expiry-policy never, the link then
    suspended (or, `suspend` False, left as it is): (session, queue, source, link name, the
    deliveries). UNSUPPORTED when the broker reports another expiry-policy (2.6.3)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, COUNT)
    session = probe.open_session()
    name = f"amqpspec-recovery-{uuid.uuid4().hex[:12]}"
    source = _source(ctx, queue)
    link, attach = _attach(probe, session, name, source)
    policy = attach.source.expiry_policy
    if policy is None or str(policy) != "never":
        raise Unsupported(f"the broker reported expiry-policy {policy!r}, not never (2.6.3)")
    probe.grant(link, COUNT)
    got = probe.receive(link, COUNT, settle=False)
    if suspend:
        probe.detach(link, closed=False)
    return session, queue, source, name, got


def _tags(deliveries) -> list[bytes]:
    return [bytes(d.delivery_tag) for d in deliveries]


def _settle_all(probe, link, deliveries) -> None:
    for delivery in deliveries:
        if not delivery.settled:
            link.disposition(delivery.delivery_id, settled=True, state=Accepted())
    probe.flush()


def _broker_map(ctx, attach, tags: list[bytes]) -> None:
    """The broker's resuming attach names every kept delivery (2.6.3)."""
    theirs = attach.unsettled if isinstance(attach.unsettled, dict) else {}
    listed = {bytes(tag) for tag in theirs if tag is not None}
    missing = [tag for tag in tags if tag not in listed]
    ctx.must(
        not missing,
        f"expected the broker's attach resuming the link to carry in its unsettled map the "
        f"{len(tags)} deliveries it sent unsettled before the link was suspended; observed "
        f"unsettled={attach.unsettled!r} (missing {missing})",
        ATTACH_UNSETTLED,
    )


def _resume_case(
    case_id: str, sentence: str, *sentences: str, **options: Any
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a MUST of link recovery (2.6.13) on the broker as the sender of the
    deliveries left unsettled (`sentences`; `options` as `case`'s), on a broker that
    recovers links (RECOVERY)."""
    return case(
        case_id, MUST, sentence, sentences=sentences, role="sender", requires=RECOVERY, **options
    )


@_resume_case(
    "2.6.13/reattach-unsettled-map",
    "A suspended link attached again: the broker's attach carries the unsettled deliveries "
    "of the terminus it kept (2.6.3: the attach frame MUST include its unsettled delivery "
    "state).",
    ATTACH_UNSETTLED,
)
def reattach_unsettled_map(probe, ctx):
    """After Broker-J's ResumeDeliveriesTest.resumeReceivingLinkEmptyUnsettled (which settles
    its one delivery first and expects an empty map), with deliveries left unsettled: 3
    deliveries unsettled from a source with expiry-policy never, detach closed=false, the
    same link attached again with an empty unsettled map: the broker's attach lists the 3
    delivery-tags."""
    session, _, source, name, got = _kept(probe, ctx)
    link, attach = _attach(probe, session, name, source, unsettled={})
    _broker_map(ctx, attach, _tags(got))
    probe.grant(link, COUNT)
    _settle_all(probe, link, collect(probe, link, 0.3))


@_resume_case(
    "2.6.13/resume-both-unsettled",
    "Deliveries both ends consider unsettled MUST be resumed by the sender (2.6.13), with "
    "the resume flag set to true and their delivery-tag (2.6.13, 3.4.6 tag 4); a tag only "
    "the receiver lists MUST be ignored by the sender (2.6.13).",
    BOTH_RESUMED,
    RESUME_FLAG,
    RESEND_RESUMED,
    RECEIVER_ONLY,
    ATTACH_UNSETTLED,
)
def resume_both_unsettled(probe, ctx):
    """Counters Broker-J's ResumeDeliveriesTest.resumeReceivingLinkOneUnsettledWithNoOutcome:
    3 deliveries unsettled, detach closed=false, attached again with an unsettled map naming
    the 3 (null state) and one tag the broker never sent: the 3 come again under their tags
    with resume=true and their messages; nothing under the unknown tag."""
    session, _, source, name, got = _kept(probe, ctx)
    tags = _tags(got)
    theirs = {tag: None for tag in tags}
    theirs[UNKNOWN_TAG] = None
    link, attach = _attach(probe, session, name, source, unsettled=theirs)
    _broker_map(ctx, attach, tags)
    probe.grant(link, COUNT + 1)
    again = collect(probe, link, 0.5)
    by_tag = {bytes(d.delivery_tag): d for d in again}
    ctx.must(
        UNKNOWN_TAG not in by_tag,
        f"expected nothing under the tag only the receiver listed ({UNKNOWN_TAG!r}); "
        f"observed a transfer {by_tag.get(UNKNOWN_TAG)}",
        RECEIVER_ONLY,
    )
    missing = [tag for tag in tags if tag not in by_tag]
    ctx.must(
        not missing,
        f"expected the {len(tags)} deliveries both ends hold unsettled resumed under their "
        f"tags {tags}; observed transfers with tags {list(by_tag)} (missing {missing})",
        BOTH_RESUMED,
    )
    not_resumed = [tag for tag in tags if not by_tag[tag].resume]
    ctx.must(
        not not_resumed,
        f"expected resume=true on the transfers resuming {tags}; observed resume=false on "
        f"{not_resumed}",
        RESUME_FLAG,
        RESEND_RESUMED,
    )
    wrong = [
        tag for tag, before in zip(tags, got) if message_text(by_tag[tag]) != message_text(before)
    ]
    ctx.must(
        not wrong,
        f"expected each resumed delivery to carry its message again (the receiver's state "
        f"is null: the whole message); observed other messages under {wrong}",
        RESEND_RESUMED,
    )
    _settle_all(probe, link, again)


@_resume_case(
    "2.6.13/resume-receiver-outcome",
    "A delivery the receiver lists with a terminal outcome: the sender MUST send a resuming "
    "transfer for its tag (3.4.6, tag 3) and SHOULD set the state at the source; an "
    "accepted message is never sent again (3.5.2).",
    RESUMING_TRANSFER,
    RESUME_FLAG,
    NOT_RESENT,
)
def resume_receiver_outcome(probe, ctx):
    """Counters Broker-J's ResumeDeliveriesTest.resumeReceivingLinkWithSingleUnsettledAccepted:
    3 deliveries unsettled, detach closed=false, attached again with the first listed as
    accepted and the other two as null: a resuming transfer for the first (its state
    accepted: SHOULD), and its message not sent again."""
    session, _, source, name, got = _kept(probe, ctx)
    tags = _tags(got)
    theirs = {tag: None for tag in tags}
    theirs[tags[0]] = Accepted()
    link, attach = _attach(probe, session, name, source, unsettled=theirs)
    _broker_map(ctx, attach, tags)
    probe.grant(link, COUNT)
    again = collect(probe, link, 0.5)
    first = [d for d in again if bytes(d.delivery_tag) == tags[0]]
    ctx.must(
        bool(first) and first[0].resume,
        f"expected a resuming transfer (resume=true) for the delivery the receiver listed "
        f"as accepted ({tags[0]!r}); observed {first or 'none'}",
        RESUMING_TRANSFER,
        RESUME_FLAG,
    )
    if first:
        ctx.should(
            isinstance(first[0].state, Accepted),
            f"expected the resuming transfer for {tags[0]!r} to carry the state at the source "
            f"(accepted, 3.4.6 SHOULD); observed state={first[0].state!r}",
        )
    _settle_all(probe, link, again)
    accepted = message_text(got[0])
    resent = [d for d in again if not d.resume and message_text(d) == accepted]
    resent += [d for d in collect(probe, link, 0.3) if message_text(d) == accepted]
    ctx.must(
        not resent,
        f"expected the message the receiver accepted ({accepted!r}) never sent again; "
        f"observed it in {resent}",
        NOT_RESENT,
    )


@_resume_case(
    "2.6.13/resume-sender-only-resent",
    "Deliveries only the sender holds unsettled (the receiver's map is complete and empty): "
    "the sender MUST resend the messages, with the resume flag not set (3.4.6, tag 1).",
    RESEND_NOT_RESUMED,
    ATTACH_UNSETTLED,
)
def resume_sender_only_resent(probe, ctx):
    """The 3.4.6 table's delivery-tag 1 (no Broker-J counterpart): 3 deliveries unsettled, detach
    closed=false, attached again with an empty unsettled map: the 3 messages come again, none
    marked resume."""
    session, _, source, name, got = _kept(probe, ctx)
    link, attach = _attach(probe, session, name, source, unsettled={})
    _broker_map(ctx, attach, _tags(got))
    probe.grant(link, COUNT)
    again = collect(probe, link, 0.5)
    _settle_all(probe, link, again)
    expected = sorted(message_text(d) for d in got)
    observed = sorted(message_text(d) for d in again)
    ctx.must(
        observed == expected,
        f"expected the {COUNT} messages only the broker held unsettled sent again; observed "
        f"{observed}",
        RESEND_NOT_RESUMED,
    )
    resumed = [d for d in again if d.resume]
    ctx.must(
        not resumed,
        f"expected them sent as new deliveries (the receiver does not know their tags: "
        f"resume not set); observed resume=true on {resumed}",
        RESEND_NOT_RESUMED,
    )


@_resume_case(
    "2.6.13/resume-after-connection-loss",
    "A link from a source with expiry-policy never outlives its connection dropped without "
    "a close: the same link attached on a new connection of the same container carries the "
    "unsettled deliveries (2.6.3) and resumes them (2.6.13).",
    ATTACH_UNSETTLED,
    BOTH_RESUMED,
    RESUME_FLAG,
    pipelined=False,
)
def resume_after_connection_loss(probe, ctx):
    """Link recovery across connections (no Broker-J counterpart): 3 deliveries unsettled, the TCP
    connection dropped (no detach, no close); a new connection with the same container-id
    attaches the same link with the 3 tags in its map: the broker's attach lists them and
    resumes them (resume=true)."""
    container = f"amqpspec-recovery-{uuid.uuid4().hex[:12]}"
    first = ctx.probe()
    first.open(container_id=container)
    _, _, source, name, got = _kept(first, ctx, suspend=False)
    first.disconnect()
    tags = _tags(got)
    other = ctx.probe()
    other.open(container_id=container)
    session = other.open_session()
    link, attach = _attach(other, session, name, source, unsettled=dict.fromkeys(tags))
    _broker_map(ctx, attach, tags)
    other.grant(link, COUNT)
    again = collect(other, link, 0.5)
    by_tag = {bytes(d.delivery_tag): d for d in again}
    missing = [tag for tag in tags if tag not in by_tag or not by_tag[tag].resume]
    ctx.must(
        not missing,
        f"expected the {COUNT} deliveries resumed (resume=true, their tags) on the new "
        f"connection; observed {[(bytes(d.delivery_tag), d.resume) for d in again]}",
        BOTH_RESUMED,
        RESUME_FLAG,
    )
    _settle_all(other, link, again)


@_resume_case(
    "2.6.13/resume-incomplete-map",
    "A suspended link resumed with an incomplete unsettled map: the deliveries it lists are "
    "resumed (2.6.13) and nothing new is sent, neither the deliveries it does not list nor "
    "messages queued since (2.7.3 incomplete-unsettled MUST NOT).",
    BOTH_RESUMED,
    RESUME_FLAG,
    INCOMPLETE,
)
def resume_incomplete_map(probe, ctx):
    """After Broker-J's ResumeDeliveriesTest.incompleteUnsettledReceiving: 3 deliveries
    unsettled, detach closed=false, one more message queued; the link attached again with an
    unsettled map naming only the first delivery (null state), incomplete-unsettled=true:
    that delivery is resumed (resume=true, its tag), and no transfer with resume not set
    comes."""
    session, queue, source, name, got = _kept(probe, ctx)
    fill(probe, ctx, queue, 1)
    tags = _tags(got)
    link, attach = _attach(
        probe, session, name, source, unsettled={tags[0]: None}, incomplete_unsettled=True
    )
    _broker_map(ctx, attach, tags)
    probe.grant(link, COUNT + 1)
    again = collect(probe, link, 0.5)
    _settle_all(probe, link, again)
    first = [d for d in again if bytes(d.delivery_tag) == tags[0]]
    ctx.must(
        bool(first) and first[0].resume,
        f"expected the delivery both maps hold ({tags[0]!r}) resumed with resume=true; "
        f"observed {[(bytes(d.delivery_tag), d.resume) for d in again]}",
        BOTH_RESUMED,
        RESUME_FLAG,
    )
    new = [d for d in again if not d.resume]
    ctx.must(
        not new,
        f"expected no new delivery (resume not set) after an attach with "
        f"incomplete-unsettled=true; observed {len(new)}: "
        f"{[(bytes(d.delivery_tag), message_text(d)) for d in new]}",
        INCOMPLETE,
    )


@case(
    "2.7.3/incomplete-unsettled-no-new-deliveries",
    MUST,
    "On receipt of an incomplete unsettled map a sending endpoint MUST NOT send any new "
    "deliveries (i.e. deliveries where resume is not set to true) to its partner (2.7.3).",
    sentences=(INCOMPLETE,),
    requires={"queues"},
    role="sender",
)
def incomplete_unsettled_no_new_deliveries(probe, ctx):
    """Part of Broker-J's ResumeDeliveriesTest.incompleteUnsettledReceiving (the broker as sender;
    that test also expects the resumed delivery): one message in the queue; a receiver attaches
    with an empty unsettled map marked incomplete and grants credit: no transfer with resume not
    set."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1)
    session = probe.open_session()
    name = f"amqpspec-incomplete-{uuid.uuid4().hex[:12]}"
    link, _ = _attach(
        probe,
        session,
        name,
        Source(address=ctx.source(queue)),
        unsettled={},
        incomplete_unsettled=True,
    )
    probe.grant(link, 1)
    got = collect(probe, link, 0.5)
    new = [d for d in got if not d.resume]
    _settle_all(probe, link, got)
    ctx.must(
        not new,
        f"expected no new delivery (resume not set) after the receiver's attach with "
        f"incomplete-unsettled=true; observed {len(new)}: "
        f"{[(bytes(d.delivery_tag), message_text(d)) for d in new]}",
        INCOMPLETE,
    )


@case(
    "2.6.13/publisher-resume-not-in-map-ignored",
    MUST,
    "A publisher link suspended and attached again: the broker's attach carries its "
    "unsettled map (2.6.3), and a resumed transfer of a delivery it settled (not in that map) "
    "MUST be ignored by the receiver (2.6.13, 2.7.5): the message is not queued twice.",
    sentences=(ATTACH_UNSETTLED, SOURCE_ONLY_RESUMED, RESUME_IGNORED),
    requires={"queues", "link-recovery"},
    role="receiver",
)
def publisher_resume_not_in_map_ignored(probe, ctx):
    """After Broker-J's ResumeDeliveriesTest.resumeSendingLinkSingleUnsettledDelivery (which
    needs rcv-settle-mode second: amqpspec takes the broker's settlement as it comes): a
    sender to a target with expiry-policy never sends one message, the broker settles it;
    detach closed=false; the same link attached again with its tag in the unsettled map: the
    broker's attach carries an unsettled map; the message sent again as resumed
    (resume=true, same tag) is ignored: a receiver from the queue gets it once."""
    queue = ctx.queue()
    session = probe.open_session()
    name = f"amqpspec-recovery-pub-{uuid.uuid4().hex[:12]}"
    target = Target(address=ctx.target_address(queue), expiry_policy="never")
    link = session.attach_sender(name, Source(), target)
    probe.flush()
    probe.wait_attached(link)
    tag = b"amqpspec-resumed-publish"
    body = Message.of(b"amqpspec-once")
    sent = probe.send_message(link, body, settled=False, tag=tag)
    probe.expect(
        lambda e: isinstance(e, DispositionReceived) and e.settled and e.first <= sent <= e.last,
        what="the broker's settlement of the publish",
    )
    probe.detach(link, closed=False)
    again = session.attach_sender(name, Source(), Target(), unsettled={tag: None})
    probe.flush()
    attach = probe.wait_attached(again)
    ctx.must(
        attach.unsettled is not None,
        "expected the broker's attach resuming the publisher link (its target kept: "
        f"expiry-policy never) to carry its unsettled map; observed unsettled={attach.unsettled!r}",
        ATTACH_UNSETTLED,
    )
    if attach.target is None or attach.target.address != target.address:
        raise Unsupported(f"the broker did not resume the target {target.address!r}: {attach}")
    if again.link_credit <= 0:
        probe.expect(
            lambda e: again.link_credit > 0, what="link-credit for the resumed publisher link"
        )
    again.send(body.encode(), tag, settled=False, resume=True)
    probe.flush()
    receiver = probe.attach_receiver(session, ctx.source(queue), credit=2)
    got = collect(probe, receiver, 0.5)
    _settle_all(probe, receiver, got)
    ctx.must(
        len(got) == 1,
        f"expected the resumed transfer of the delivery the broker had settled ignored (the "
        f"message queued once); a receiver from the queue got {len(got)}: "
        f"{[message_text(d) for d in got]}",
        SOURCE_ONLY_RESUMED,
        RESUME_IGNORED,
    )
