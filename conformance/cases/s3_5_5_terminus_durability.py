"""3.5.5 terminus-durability and 3.5.6 terminus-expiry-policy across a broker restart: a
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

Owns the cases of 3.5.5 across a restart: `3.5.5/dynamic-node-persisted`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Data, DeleteOnClose, Header, Source, Target
from amqpspec.amqp10.engine import RemoteAttach, RemoteClose, RemoteEnd
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol, uint
from amqpspec.conformance.run.registry import MODEL, case
from amqpspec.conformance.steps.deliveries import collect
from amqpspec.conformance.steps.restarts import BACK_QUIET, restart
from amqpspec.conformance.verdicts import Unsupported

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
