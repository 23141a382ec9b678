"""3.5 terminus: a dynamic source gets an address from the broker and works as a node, and
the broker's attach reports the terminus it actually created (address, durability).

Owns the cases `3.5.*/terminus-*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Source, Target
from amqpspec.amqp10.engine import RemoteAttach, RemoteClose, RemoteDetach, RemoteEnd
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.deliveries import exactly
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.verdicts import CaseFailed, Unsupported


def _dynamic_receiver(probe, ctx):
    session = probe.open_session()
    link = session.attach_receiver(
        "amqpspec-dynamic", Source(dynamic=True, expiry_policy="link-detach"), Target()
    )
    probe.flush()
    event = probe.expect(
        lambda e: (
            (isinstance(e, RemoteAttach) and e.link is link)
            or (isinstance(e, RemoteEnd) and e.session is session)
            or isinstance(e, RemoteClose)
        ),
        what="attach",
    )
    if not isinstance(event, RemoteAttach):
        ctx.note(f"the broker answered the dynamic attach with {event}")
        raise Unsupported(f"the broker refuses dynamic sources ({type(event).__name__})")
    source = event.attach.source
    if source is None:
        probe.expect(lambda e: isinstance(e, RemoteDetach) and e.link is link, what="detach")
        raise Unsupported("the broker refuses dynamic sources (null source, then detach)")
    return session, link, source


@case(
    "3.5.3/terminus-dynamic-source-address",
    MUST,
    "dynamic: when set to true by the receiving link endpoint, this field constitutes a "
    "request for the sending peer to dynamically create a node; the address of the created "
    "node MUST be set in the source of the sending peer's attach.",
)
def dynamic_source_address(probe, ctx):
    """A receiver with a dynamic source: the broker's source has dynamic set and a
    non-empty address (UNSUPPORTED when the broker refuses dynamic nodes)."""
    _, _, source = _dynamic_receiver(probe, ctx)
    ctx.check(bool(source.address), f"dynamic source answered without an address: {source!r}")


@case(
    "3.5.3/terminus-dynamic-source-usable",
    SHOULD,
    "A dynamically created node (temporary queue) receives messages sent to its address "
    "(3.5.3 dynamic: the sending peer creates the node).",
)
def dynamic_source_usable(probe, ctx):
    """Dynamic source; a message published to its address reaches the receiver."""
    _, link, source = _dynamic_receiver(probe, ctx)
    if not source.address:  # 3.5.3/terminus-dynamic-source-address judges that
        raise CaseFailed(f"dynamic source answered without an address: {source!r}")
    other = ctx.probe()
    other_session = other.open_session()
    sender = other.attach_sender(other_session, source.address)
    other.publish(sender, 1, b"to-the-dynamic-node", timeout=5.0)
    probe.grant(link, 1)
    exactly(probe, link, 1)


@case(
    "3.5.3/terminus-source-address-reported",
    SHOULD,
    "The responding peer's attach carries the terminus it actually created; for an existing "
    "node it reports the address asked for (3.5.3 address).",
    requires={"queues"},
)
def source_address_reported(probe, ctx):
    """A receiver from a queue: the broker's source address is ours."""
    queue = ctx.queue()
    session = probe.open_session()
    link = probe.attach_receiver(session, ctx.source(queue))
    reported = link.remote_attach.source.address
    ctx.check(reported == ctx.source(queue), f"source address {reported!r}")


@case(
    "3.5.4/terminus-target-address-reported",
    SHOULD,
    "The responding peer's attach carries the target it actually created; for an existing "
    "node it reports the address asked for (3.5.4 address).",
    requires={"queues"},
)
def target_address_reported(probe, ctx):
    """A sender to a queue: the broker's target address is ours."""
    queue = ctx.queue()
    session = probe.open_session()
    link = probe.attach_sender(session, ctx.target_address(queue))
    reported = link.remote_attach.target.address
    ctx.check(reported == ctx.target_address(queue), f"target address {reported!r}")


@case(
    "3.5.3/terminus-durable-reported",
    MUST,
    "durable: the durability of the terminus, 0 none, 1 configuration, 2 unsettled-state; "
    "the responding peer reports what it supports (a terminus-durability value).",
    requires={"queues"},
)
def durable_reported(probe, ctx):
    """A receiver asking for a configuration-durable source (expiry never): the broker's
    source durable field is a valid terminus-durability (0, 1 or 2), and the link works."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 1)
    session = probe.open_session()
    link = probe.attach_receiver(
        session, Source(address=ctx.source(queue), durable=1, expiry_policy="never")
    )
    durable = link.remote_attach.source.durable
    ctx.check(durable in (None, 0, 1, 2), f"source durable {durable!r}")
    probe.grant(link, 1)
    exactly(probe, link, 1)
