"""3.2.1 durable and 3.5.5 terminus-durability across a broker restart. 3.2.1: "Durable
Messages MUST NOT be lost even if an intermediary is unexpectedly terminated and
restarted." The broker is restarted through the profile's admin adapter (capability
`restart`: the reference broker's POST /api/restart with its --data-dir; a profile without
it is UNSUPPORTED, and the suite never restarts a shared RabbitMQ), between a publish the
broker accepted and a receiver's attach.

FAILED only for a durable message the broker accepted (3.4.2 accepted: it took the
message) into a durable queue (declared through the admin adapter) that no receiver took
before the restart and that no receiver gets after it. A broker that refuses durable
messages (rejected, or a detach: 3.2.1's second sentence lets a target that cannot keep
them refuse them) claims no durability: UNSUPPORTED. What becomes of a message sent with
durable false is recorded only: no sentence says it must go or stay.

The cases restart the broker, so they run alone (registry.BROKER_GLOBAL) and each waits
until the broker listens again before it goes on (the adapter's bounded wait).

The persistent dynamic node (`3.5.5/dynamic-node-persisted`, here so that every case
that restarts the broker runs in one serial stretch: one wait for the cases before them),
3.5.5 terminus-durability and 3.5.6 terminus-expiry-policy across a broker restart: a
dynamic node asked for by a receiver whose source never expires (expiry-policy never: "The
Terminus never expires") and is kept durably (durable configuration: "Only the existence and
configuration of the Terminus is retained durably"), with lifetime-policy delete-on-close
(3.5.10: deleted when "the Link which caused its creation ceases to exist"). The connection
is dropped without a detach (the link is suspended, never closed), then the broker is
restarted through the profile's admin adapter (capability `restart`): the node is still
there. Qpid Broker-J's DeleteOnCloseTest.dynamicNodeIsPersisted checks the same (its source
asks for no durability; this case asks for configuration, what the text needs for the
terminus to survive a restart).

No sentence says with a normative word that such a terminus, or its node, survives: graded
as the `termdur` model (DIFFERS, never FAILED), which the reference profile claims. A broker
that refuses dynamic nodes, or reports the terminus back with another expiry-policy or less
durability (2.6.3 lets it adjust: it then claims no persistence), is UNSUPPORTED.

Owns the cases `3.2.1/durable-*-restart`, `3.2.1/non-durable-message-restart` and
`3.5.5/dynamic-node-persisted`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Accepted, Data, DeleteOnClose, Header, Source, Target
from amqpspec.amqp10.engine import (
    DispositionReceived,
    RemoteAttach,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol, uint
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.run.registry import MAY, MODEL, MUST, case
from amqpspec.conformance.steps.deliveries import collect
from amqpspec.conformance.steps.links import unsettled_consumer
from amqpspec.conformance.steps.queues import message_text
from amqpspec.conformance.steps.restarts import BACK_QUIET, bodies_back, restart
from amqpspec.conformance.verdicts import Unsupported

DURABLE_KEPT = "3.2.1/header.durable.1"  # durable messages MUST NOT be lost at a restart


def _outcome(probe: Probe, sender, delivery_id: int) -> object:
    """The broker's answer to the delivery: its outcome, or the event that ended the link."""
    event = probe.expect(
        lambda e: (
            (isinstance(e, DispositionReceived) and e.first <= delivery_id <= e.last)
            or (isinstance(e, RemoteDetach) and e.link is sender)
            or (isinstance(e, RemoteEnd) and e.session is sender.session)
            or isinstance(e, RemoteClose)
        ),
        what="the outcome of the durable message",
    )
    return event.state if isinstance(event, DispositionReceived) else event


def publish_kept(probe: Probe, ctx: CaseContext, queue: str, bodies: list[bytes], durable=True):
    """Send each body to `queue` unsettled with header durable=`durable`; each must be
    accepted. A durable message refused (rejected, the link or more ended) is the broker
    saying it cannot keep it (3.2.1): UNSUPPORTED."""
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    for body in bodies:
        message = Message(header=Header(durable=durable), body=[Data(body)])
        answer = _outcome(probe, sender, probe.send_message(sender, message))
        if not isinstance(answer, Accepted):
            raise Unsupported(
                f"the broker did not accept a message with durable={durable} ({answer!r}): "
                "it claims no durable store (3.2.1 lets it refuse)"
            )
    probe.detach(sender, wait=False)


def _check_back(ctx: CaseContext, queue: str, expected: list[bytes], what: str) -> None:
    """After the restart a new connection's receiver gets every body in `expected`."""
    back = bodies_back(ctx, queue, len(expected))
    missing = sorted(set(expected) - set(back))
    ctx.must(
        not missing,
        f"expected the {what} back after the restart ({sorted(expected)}); observed "
        f"{back or 'no delivery'} from queue {queue!r}: lost {missing}",
        DURABLE_KEPT,
    )
    extra = sorted(set(back) - set(expected))
    if extra:
        ctx.note(f"also back after the restart: {extra} (settled before it)")


@case(
    "3.2.1/durable-message-survives-restart",
    MUST,
    "Durable messages the broker accepted into a durable queue are there after the broker "
    "is restarted.",
    sentences=(DURABLE_KEPT,),
    requires=("restart", "declare-queues"),
    pipelined=False,
)
def durable_message_survives_restart(probe, ctx):
    """Counters Qpid Broker-J's TransferTest durable rows' premise (a target that keeps
    durable messages): three messages with header durable=true, each accepted, into a
    durable queue; a receiver takes and accepts the first; the broker is restarted: a new
    connection's receiver gets the other two (a consumed one back is noted)."""
    queue = ctx.queue()
    bodies = [b"durable-1", b"durable-2", b"durable-3"]
    publish_kept(probe, ctx, queue, bodies)
    _, link = unsettled_consumer(probe, ctx, queue, credit=1)
    first = probe.receive(link, 1)[0]  # accepted and settled before the restart
    probe.close()
    restart(ctx)
    kept = [b for b in bodies if b != message_text(first)]
    _check_back(ctx, queue, kept, "durable messages no receiver took")


@case(
    "3.2.1/durable-unsettled-delivery-survives-restart",
    MUST,
    "A durable message delivered to a receiver that had not settled it when the broker "
    "restarted is there after the restart.",
    sentences=(DURABLE_KEPT,),
    requires=("restart", "declare-queues", "unsettled-deliveries"),
    pipelined=False,
)
def durable_unsettled_survives_restart(probe, ctx):
    """A durable message, accepted into a durable queue, delivered unsettled to a
    receiver that sends no outcome; the broker is restarted under it: a new connection's
    receiver gets the message (its consumption never completed)."""
    queue = ctx.queue()
    publish_kept(probe, ctx, queue, [b"durable-in-flight"])
    _, link = unsettled_consumer(probe, ctx, queue, credit=1)
    delivery = probe.receive(link, 1, settle=False)[0]
    if delivery.settled:
        raise Unsupported("the broker sent the delivery settled (no unsettled consumption)")
    restart(ctx)
    probe.disconnect()
    _check_back(ctx, queue, [b"durable-in-flight"], "durable message left unsettled")


@case(
    "3.2.1/non-durable-message-restart",
    MAY,
    "A message sent with durable false into a durable queue, the broker restarted: whether "
    "it is still there is recorded (3.2.1 says what durable messages must do, nothing of the "
    "others).",
    requires=("restart", "declare-queues"),
    outcomes={"kept", "lost"},
    pipelined=False,
)
def non_durable_message_restart(probe, ctx):
    """A message with header durable=false, accepted into a durable queue; the broker is
    restarted: whether a new connection's receiver gets it is recorded (RabbitMQ drops a
    classic queue's transient messages; the reference broker keeps a durable queue's)."""
    queue = ctx.queue()
    publish_kept(probe, ctx, queue, [b"transient"], durable=False)
    probe.close()
    restart(ctx)
    ctx.outcome("kept" if bodies_back(ctx, queue, 0) else "lost")


TERMDUR = "termdur"
CONFIGURATION = 1  # 3.5.5 terminus-durability: configuration
LIFETIME = symbol("lifetime-policy")


def _persistent_node(probe, ctx) -> str:
    """A receiver asking for a dynamic source (delete-on-close, expiry-policy never,
    durable configuration): the node's address, when the broker reports it as asked."""
    session = probe.open_session()
    source = Source(
        dynamic=True,
        durable=uint(CONFIGURATION),
        expiry_policy="never",
        dynamic_node_properties={LIFETIME: DeleteOnClose()},
    )
    link = session.attach_receiver("amqpspec-persistent-node", source, Target())
    probe.flush()
    event = probe.expect(
        lambda e: (
            (isinstance(e, RemoteAttach) and e.link is link)
            or isinstance(e, RemoteEnd | RemoteClose)
        ),
        what="attach",
    )
    reported = event.attach.source if isinstance(event, RemoteAttach) else None
    if reported is None or not reported.dynamic or not reported.address:
        raise Unsupported(f"the broker created no dynamic node ({event})")
    durable = int(reported.durable or 0)
    if str(reported.expiry_policy or "session-end") != "never" or durable < CONFIGURATION:
        raise Unsupported(
            f"the broker reports the node's source with expiry-policy {reported.expiry_policy}"
            f" and durable {durable} (2.6.3: as created): it claims no persistent terminus"
        )
    ctx.note(f"the broker created {reported.address!r}, reported as asked")
    queue = str(reported.address).removeprefix("/queues/")
    if queue != reported.address:  # deleted through the admin adapter when the case ends
        ctx.queues.append(queue)
    return str(reported.address)


@case(
    "3.5.5/dynamic-node-persisted",
    MODEL,
    "A delete-on-close dynamic node whose source never expires and is kept durably, its "
    "link suspended by a dropped connection, is still there after a broker restart.",
    model=TERMDUR,
    requires=("restart",),
    pipelined=False,
)
def dynamic_node_persisted(probe, ctx):
    """Counters Qpid Broker-J's DeleteOnCloseTest.dynamicNodeIsPersisted: the node (one
    durable message left in it, accepted) outlives the connection, dropped without a
    detach, and a restart: a receiver from its address on a new connection gets the
    message."""
    address = _persistent_node(probe, ctx)
    session = probe.open_session()
    sender = probe.attach_sender(session, address)
    message = Message(header=Header(durable=True), body=[Data(b"left-in-the-node")])
    probe.publish(sender, 1, message, timeout=5.0)
    probe.disconnect()  # no detach, no close: the link is suspended, never closed
    restart(ctx)
    other = ctx.probe()
    receiver = other.attach_receiver(other.open_session(), address, wait=False)
    event = other.expect(
        lambda e: isinstance(e, RemoteAttach) and e.link is receiver, what="attach"
    )
    got = []
    if event.attach.source is not None:
        other.grant(receiver, 1)
        got = collect(other, receiver, BACK_QUIET * 2)
    ctx.check(
        bool(got),
        f"expected node {address!r} (delete-on-close, its source expiry-policy never and "
        "durable configuration, its link never closed) there after the restart with the "
        f"message left in it; observed {'no delivery' if event.attach.source else 'a refusal'}",
    )
