"""2.8.15 / 2.8.18 error conditions a client can make a broker send, one case each: a
transfer after the sender spent its link-credit (amqp:link:transfer-limit-exceeded), a
first transfer without delivery-id (amqp:invalid-field), a transaction coordinator on a
broker without transactions (amqp:not-implemented, 4.5; attached, stating
amqp:local-transactions, by one with them), a consumer's queue deleted
under it (amqp:resource-deleted), a link to the default exchange (amqp:not-allowed), a
connection closed through the admin adapter (amqp:connection:forced), a receiver and a
sender attached by a user without rights, created through the admin adapter
(amqp:unauthorized-access; a sender the broker attaches has its message refused), a
consumer of a queue another connection declared exclusive through RabbitMQ 4's /management
node (amqp:resource-locked), a message without `to` on the anonymous terminus
(amqp:precondition-failed), and the /management node's 409 to a conflicting redeclaration
(precondition-failed as an HTTP-over-AMQP status, no AMQP error). Conditions no client can
provoke are listed with the reason in `conformance.coverage.NO_CLIENT_CAN`. The error
definitions (2.8.15-18) carry no MUST: a receiver MAY detach a link that sends beyond its
credit (2.6.7), the probe breaks the sender's MUST in the invalid-field case (2.7.5), so
those answers are recorded (MAY); an operator's close is a close frame before the TCP close
(2.4.3 MUST); the conditions RabbitMQ 4's addresses, permissions, exclusive queues,
anonymous terminus and /management node give are RabbitMQ 4's model (DIFFERS).

Owns the cases `2.8.15/*`, `2.8.16/*` and `2.8.18/*`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import quote

from amqpspec.amqp10.composites import Coordinator, Target, Transfer
from amqpspec.amqp10.engine import (
    RemoteAttach,
    RemoteClose,
    RemoteEnd,
    Session,
    TransportClosed,
)
from amqpspec.amqp10.message import Message
from amqpspec.conformance.admin.management_node import ManagementNodeAdmin
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.run.registry import MAY, MODEL, MUST, case
from amqpspec.conformance.steps.frames import crafted_transfer
from amqpspec.conformance.steps.links import link_flow, publisher
from amqpspec.conformance.steps.refusals import (
    published_answer,
    sent_transfer_outcome,
)
from amqpspec.conformance.steps.sentences import (
    ANY_END,
    CLOSE_FIRST,
    LINK_CREDIT_ILLEGAL,
    RABBITMQ4,
)
from amqpspec.conformance.verdicts import CaseFailed, Unsupported

ANY_DETACH = {"detach:*"} | ANY_END
# the coordinator attached, stating amqp:local-transactions (4.5.1): a broker with them
HAS_TRANSACTIONS = "attach:amqp:local-transactions"
_users = itertools.count(1)
# a refusal for want of rights, whichever endpoint the broker ends (2.8.15)
UNAUTHORIZED = frozenset(
    f"{ending}:amqp:unauthorized-access" for ending in ("detach", "end", "close")
)
FIRST_TRANSFER_ID = "2.7.5/transfer.delivery-id.1"  # binds the sender (the probe here)


@case(
    "2.8.18/transfer-limit-exceeded",
    MAY,
    "With no link-credit it is illegal to send more messages (binds the sender, the probe "
    "here); the Receiver MAY either handle the excess messages normally or detach the Link "
    "with a transfer-limit-exceeded error code (2.6.7): any answer is recorded.",
    sentences=(LINK_CREDIT_ILLEGAL,),
    role="receiver",
    requires={"queues", "sender-spends-credit"},
    serial=True,  # a broker that mishandles the flow may stop granting credit to every link
    outcomes={
        "detach:amqp:link:transfer-limit-exceeded",
        "end:amqp:link:transfer-limit-exceeded",
        "close:amqp:link:transfer-limit-exceeded",
    },
)
def transfer_limit_exceeded(probe, ctx):
    """A sender granted credit spends it with a flow (delivery-count advanced by the whole
    link-credit: only the sender modifies it, 2.6.7), then sends one transfer: the broker
    refuses it (unless it granted new credit in between, which makes the case moot)."""
    session, sender = publisher(probe, ctx, ctx.queue())
    spent = sender.delivery_count + sender.link_credit
    since = probe.mark()
    flow = link_flow(session, sender, delivery_count=spent, link_credit=0)
    probe.send_frame(flow, session.channel, strict=False, flush=False)
    transfer = crafted_transfer(sender, session.next_outgoing_id, b"over", settled=True)
    outcome = sent_transfer_outcome(probe, session, transfer, timeout=2.0)
    # a grant sent before the broker counted our transfer (its delivery-count still at
    # `spent`) covers it: the case is moot; one counting it (delivery-count past `spent`)
    # came after it, and the broker took the excess message as 2.6.7 allows
    flows = probe.link_flows(sender, since)
    regrants = [f for f in flows if f.link_credit and f.delivery_count in (None, spent)]
    if outcome == "timeout" and regrants:
        raise Unsupported(
            f"the broker granted new credit (link-credit {regrants[0].link_credit} at "
            f"delivery-count {spent}) before our transfer: the transfer was in it"
        )
    if outcome == "timeout" and flows:
        ctx.note(f"the broker took the transfer beyond credit and then granted: {flows[-1]}")
    ctx.outcome(outcome)


@case(
    "2.8.15/invalid-field-first-transfer",
    MAY,
    "The delivery-id MUST be supplied on the first transfer (binds the sender, the probe "
    "here); no sentence says how the receiver answers (amqp:invalid-field names the error).",
    sentences=(FIRST_TRANSFER_ID,),
    role="receiver",
    requires={"queues"},
    outcomes={
        "detach:amqp:invalid-field",
        "end:amqp:invalid-field",
        "close:amqp:invalid-field",
        "close:amqp:connection:framing-error",
        "close:amqp:decode-error",
    },
)
def invalid_field_first_transfer(probe, ctx):
    """A sender granted credit, then a transfer with neither delivery-id nor delivery-tag
    (the first frame of a delivery): refused with amqp:invalid-field."""
    session, sender = publisher(probe, ctx, ctx.queue())
    transfer = Transfer(handle=sender.handle, message_format=0, settled=True)
    ctx.outcome(sent_transfer_outcome(probe, session, transfer, timeout=2.0))


@case(
    "2.8.15/not-implemented-coordinator",
    MAY,
    "amqp:not-implemented: the peer tried to use functionality that is not implemented in "
    "this endpoint; a broker without transactions refuses a link to a coordinator (4.5; a "
    "definition: recorded).",
    outcomes={
        "detach:amqp:not-implemented",
        "end:amqp:not-implemented",
        "close:amqp:not-implemented",
        HAS_TRANSACTIONS,
    },
)
def not_implemented_coordinator(probe, ctx):
    """A sender to a transaction coordinator: a broker without transactions refuses it with
    amqp:not-implemented (a detach; ending the session or connection with it is the same
    answer, heavier). A broker that attaches it stating amqp:local-transactions has
    transactions (4.5.1: recorded, OK; s4_transactions.py tests them); one that attaches it
    stating nothing attaches any target (UNSUPPORTED)."""
    session = probe.open_session()
    since = probe.mark()
    link = probe.attach_sender(session, Coordinator(), wait=False)
    try:  # the broker's first answer: an attach, or the end of the session or connection
        first = probe.expect(
            lambda e: (
                (isinstance(e, RemoteAttach) and e.link is link)
                or isinstance(e, RemoteEnd | RemoteClose | TransportClosed)
            ),
            2.0,
            "an answer to the coordinator attach",
        )
        probe.inbox.insert(0, first)
    except WaitTimeout:
        pass
    if _states_local_transactions(probe, since):
        ctx.outcome(HAS_TRANSACTIONS)  # it has transactions (s4_transactions.py)
        return
    _refused_attach(
        probe,
        ctx,
        lambda: None,  # attached above
        Unsupported("the broker attached the coordinator (transactions, or any target)"),
        since=since,
    )


def _states_local_transactions(probe, since: int) -> bool:
    """Did the broker attach a coordinator whose capabilities name local transactions?"""
    for item in probe.frames_since(since, "attach"):
        target = item.item.performative.target
        if not isinstance(target, Coordinator):
            continue
        capabilities = target.capabilities
        if isinstance(capabilities, str):
            capabilities = [capabilities]
        if "amqp:local-transactions" in [str(c) for c in capabilities or ()]:
            return True
    return False


@case(
    "2.8.15/resource-deleted-source",
    MAY,
    "amqp:resource-deleted: a server entity the client is working with has been deleted; "
    "a consumer's queue deleted under it ends its link (a definition: recorded).",
    requires={"queues", "declare-queues"},
    outcomes={"detach:amqp:resource-deleted"},
)
def resource_deleted_source(probe, ctx):
    """A receiver on a fresh queue, then the queue deleted through the admin API: the
    broker detaches the link with amqp:resource-deleted."""
    queue = ctx.queue()
    session = probe.open_session()
    probe.attach_receiver(session, ctx.source(queue), credit=5)
    since = probe.mark()
    ctx.admin.delete_queue(queue)
    ctx.outcome(probe.error_outcome(since=since))


@case(
    "2.8.15/not-allowed-default-exchange",
    MODEL,
    "amqp:not-allowed: the peer tried to use something in a manner the endpoint does not "
    "allow; an address scheme that reserves the default exchange (RabbitMQ's v2 addresses) "
    "refuses a link that names it (RabbitMQ 4's model).",
    model=RABBITMQ4,
    requires={"exchanges"},
    outcomes={"detach:amqp:not-allowed", "end:amqp:not-allowed", "close:amqp:not-allowed"},
)
def not_allowed_default_exchange(probe, ctx):
    """A sender to the exchange address of `amq.default`: refused with amqp:not-allowed
    (a broker whose address scheme allows it attaches the link: UNSUPPORTED)."""
    session = probe.open_session()
    address = ctx.profile.exchange("amq.default", "amqpspec")
    _refused_attach(
        probe,
        ctx,
        lambda: probe.attach_sender(session, address, wait=False),
        Unsupported("the broker attached a link to the default exchange"),
    )


def _refused_attach(
    probe, ctx, attach: Callable[[], object], if_attached: Exception, since: int | None = None
) -> None:
    """`attach()` (not waiting), then grade how the broker refused the link (the case's
    outcomes); `if_attached` is raised when it attached the link instead. `since`: the
    trace position before the attach, when the caller sent it already."""
    since = probe.mark() if since is None else since
    attach()
    outcome = probe.error_outcome(timeout=2.0, since=since)
    if outcome == "timeout" and _attached(probe, since):
        raise if_attached
    ctx.outcome(outcome)


def _attached(probe, since: int) -> bool:
    """Did the broker attach a link (non-null target or source) after `since`?"""
    return any(
        item.item.performative.target is not None or item.item.performative.source is not None
        for item in probe.frames_since(since, "attach")
    )


@case(
    "2.8.16/connection-forced",
    MUST,
    "Prior to closing a Connection, each peer MUST write a close frame with a code "
    "indicating the reason for closing: an operator's close is a close frame (its "
    "condition, amqp:connection:forced, recorded), not a bare TCP close.",
    sentences=(CLOSE_FIRST,),
    outcomes={"close:*"},
    pipelined=False,  # the admin adapter needs the broker to know the connection first
)
def connection_forced(probe, ctx):
    """An open connection with a session, closed through the admin adapter (an operator):
    the broker's close carries amqp:connection:forced."""
    probe.open_session()
    since = probe.mark()
    ctx.admin.close_connection(ctx.broker_side_port(probe))
    if not probe.wait_closed():  # the admin did not close it: nothing to judge
        ctx.note(f"the connection stayed open; {probe.observed(since)}")
        return
    closes = list(probe.frames_since(since, "close"))
    if closes:
        error = closes[0].item.performative.error
        ctx.note(f"closed with {error.condition if error is not None else 'no error'}")
        return
    ctx.outcome("tcp-close")


@case(
    "2.8.15/unauthorized-access-attach",
    MODEL,
    "amqp:unauthorized-access: the client attempted to work with a server entity to which it "
    "has no access due to security settings; a user without rights attaches to a queue.",
    model=RABBITMQ4,
    requires={"queues", "user-admin"},
    outcomes=UNAUTHORIZED,
)
def unauthorized_access_attach(probe, ctx):
    """A user with no rights on the vhost (configure, write, read "^$"), created through the
    admin adapter, logs in with SASL PLAIN and attaches a receiver to a fresh queue: the
    broker refuses the link with amqp:unauthorized-access. A broker that refuses the login
    itself cannot be asked (UNSUPPORTED); one that attaches the link FAILS. The user is
    deleted at the end."""
    queue = ctx.queue()
    with _restricted_session(probe, ctx) as session:
        _refused_attach(
            probe,
            ctx,
            lambda: probe.attach_receiver(session, ctx.source(queue), credit=1, wait=False),
            CaseFailed("the broker attached a receiver for a user without read rights"),
        )


@contextmanager
def _restricted_session(probe, ctx) -> Iterator[Session]:
    """A session of a user with no rights (configure, write, read "^$") created through
    the admin adapter, logged in with SASL PLAIN (UNSUPPORTED when the broker refuses the
    login itself); the user is deleted at the end."""
    ctx.require("sasl-plain")
    name = f"amqpspec-norights-{os.getpid()}-{next(_users)}"
    probe.username, probe.password = ctx.admin.restricted_user(name)
    probe.sasl_mechanism = "PLAIN"
    try:
        try:
            session = probe.open_session()
        except Exception:
            if probe.conn is not None and probe.conn.sasl_outcome not in (None, 0):
                raise Unsupported("the broker refused the restricted user's login") from None
            raise
        yield session
    finally:
        ctx.admin.delete_user(name)


@case(
    "2.8.15/unauthorized-access-sender",
    MODEL,
    "amqp:unauthorized-access: the client attempted to work with a server entity to which it "
    "has no access due to security settings; a user without write rights publishes to a "
    "queue: the link is refused, or the message rejected, with that condition.",
    model=RABBITMQ4,
    requires={"queues", "user-admin"},
    outcomes=UNAUTHORIZED | {"rejected:amqp:unauthorized-access"},
)
def unauthorized_access_sender(probe, ctx):
    """A user with no rights (configure, write, read "^$") attaches a sender to a queue
    that exists: refused with amqp:unauthorized-access (RabbitMQ 4 at the attach: write on
    the default exchange). A broker that attaches the link is sent one unsettled message,
    which must be refused the same way (rejected, or the link, session or connection
    ended); one it accepts differs from the model. The user is deleted at the end."""
    queue = ctx.queue()
    with _restricted_session(probe, ctx) as session:
        since = probe.mark()
        sender = probe.attach_sender(session, ctx.target_address(queue), wait=False)
        outcome = probe.error_outcome(timeout=2.0, since=since)
        if outcome == "timeout" and _attached(probe, since):  # the message must be refused
            outcome = published_answer(probe, sender, Message.of(b"amqpspec-unauthorized"))
        ctx.outcome(outcome)


@case(
    "2.8.15/resource-locked-exclusive-queue",
    MODEL,
    "amqp:resource-locked: the client attempted to work with a server entity to which it has "
    "no access because another client is working with it; a queue declared exclusive by "
    "another connection refuses a consumer.",
    model=RABBITMQ4,
    requires={"queues", "management-node"},
    outcomes={
        "detach:amqp:resource-locked",
        "end:amqp:resource-locked",
        "close:amqp:resource-locked",
    },
)
def resource_locked_exclusive_queue(probe, ctx):
    """A second connection declares a queue exclusive through the /management node (PUT
    /queues/:q, "exclusive": true, as RabbitMQ 4's clients do); this connection attaches a
    receiver to it: refused with amqp:resource-locked (RabbitMQ 4 detaches the link, 4.0
    ended the session). A broker that attaches it FAILS; the queue goes with its owner."""
    queue = ctx.queue(declare=False)
    node = ManagementNodeAdmin.over(ctx.probe())
    spec = {"durable": False, "exclusive": True, "auto_delete": False, "arguments": {}}
    status, reply = node.request("PUT", f"/queues/{quote(queue, safe='')}", spec)
    if status not in (200, 201):
        raise Unsupported(f"the /management node refused an exclusive queue: {status} {reply}")
    session = probe.open_session()
    _refused_attach(
        probe,
        ctx,
        lambda: probe.attach_receiver(session, ctx.source(queue), credit=1, wait=False),
        CaseFailed("the broker attached a consumer to another connection's exclusive queue"),
    )


@case(
    "2.8.15/precondition-failed-anonymous-to",
    MODEL,
    "amqp:precondition-failed: the client made a request that was not allowed because some "
    "precondition failed; a message without `to` on the anonymous terminus (a null target: "
    "each message's `to` routes it) is rejected with it.",
    model=RABBITMQ4,
    requires={"anonymous-terminus"},
    outcomes={"rejected:amqp:precondition-failed"},
)
def precondition_failed_anonymous_to(probe, ctx):
    """A sender to the anonymous terminus (target without address), then one unsettled
    message without properties.to: the broker cannot route it and rejects it with
    amqp:precondition-failed (RabbitMQ 4, after the anonymous terminus spec's routing
    errors). Only for profiles with the anonymous terminus: Proton's C example broker
    crashes on a null target. A broker that refuses the null target has none
    (UNSUPPORTED); one that accepts the message FAILS."""
    session = probe.open_session()
    since = probe.mark()
    sender = probe.attach_sender(session, Target(), wait=False)
    try:
        probe.wait_for_frame("attach", 2.0, since=since)
    except WaitTimeout:
        pass  # RabbitMQ 3.10 ends the session instead, Proton's C example drops the socket
    if not _attached(probe, since):
        answer = probe.error_outcome(timeout=0.1, since=since)
        raise Unsupported(f"the broker refused a link to the anonymous terminus ({answer})")
    since = probe.mark()
    delivery_id = probe.send_message(sender, b"nowhere", settled=False)

    def answers(frame) -> bool:
        disposition = frame.performative
        last = disposition.first if disposition.last is None else disposition.last
        return bool(disposition.role) and disposition.first <= delivery_id <= last

    try:
        frame = probe.wait_for_frame("disposition", 2.0, answers, since)
    except WaitTimeout:
        ctx.outcome(probe.error_outcome(timeout=0.5, since=since))
        return
    ctx.outcome(_state_name(frame.performative.state))


def _state_name(state) -> str:
    """A delivery state as an outcome: 'accepted', 'released', 'rejected:<condition>'..."""
    name = type(state).__name__.lower() if state is not None else "none"
    error = getattr(state, "error", None)
    if name == "rejected":
        return f"rejected:{error.condition if error is not None else 'none'}"
    return name


@case(
    "2.8.15/precondition-failed-redeclare-status",
    MODEL,
    "amqp:precondition-failed: the client made a request that was not allowed because some "
    "precondition failed; RabbitMQ 4's /management node answers a queue redeclared with "
    "other properties with the HTTP-over-AMQP status 409 (no AMQP error on the wire).",
    model=RABBITMQ4,
    requires={"queues", "management-node"},
    outcomes={"status:409"},
)
def precondition_failed_redeclare_status(probe, ctx):
    """Through the /management node on this connection: declare a durable classic queue,
    then the same name not durable: the node answers 409 (precondition failed) and the
    queue is unchanged."""
    queue = ctx.queue(declare=False)
    node = ManagementNodeAdmin.over(probe)
    path = f"/queues/{quote(queue, safe='')}"
    durable = {"durable": True, "exclusive": False, "auto_delete": False, "arguments": {}}
    status, reply = node.request("PUT", path, durable)
    ctx.check(status in (200, 201), f"the first declaration was answered {status} {reply}")
    status, reply = node.request("PUT", path, dict(durable, durable=False))
    ctx.note(f"redeclared not durable: {status} {reply}")
    try:
        ctx.outcome(f"status:{status}")
    finally:
        node.request("DELETE", path)
