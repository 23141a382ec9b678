"""3.5 terminus: a dynamic source the broker created carries its address in the broker's
attach (3.5.3 MUST; a broker that answers dynamic=false created none: UNSUPPORTED, 2.6.3
lets it adjust the terminus); the attach reports the terminus as created, its address and
durability (2.6.3 MUST); whether the dynamic node routes messages is recorded.

Owns the cases `3.5.*/terminus-*`.
"""

from __future__ import annotations

from collections.abc import Callable

from amqpspec.amqp10.composites import Source, Target
from amqpspec.amqp10.engine import RemoteAttach, RemoteDetach
from amqpspec.conformance.run.registry import MAY, MUST, RunFunction, case, case_function
from amqpspec.conformance.steps.deliveries import exactly
from amqpspec.conformance.steps.links import attach_answer
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.verdicts import Unsupported

DYNAMIC_ADDRESS = "3.5.3/source.address.2"  # set by the sender when dynamic is true
AS_CREATED = "2.6.3/establishing-or-resuming-a-link.3"  # report the terminus as created


def _dynamic_receiver(probe, ctx):
    session = probe.open_session()
    link = session.attach_receiver(
        "amqpspec-dynamic", Source(dynamic=True, expiry_policy="link-detach"), Target()
    )
    event = attach_answer(probe, session, link, "attach")
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
    "The address of the source MUST be set when sent on a attach frame sent by the sending "
    "Link Endpoint where the dynamic flag is set to true.",
    sentences=(DYNAMIC_ADDRESS,),
    role="sender",
)
def dynamic_source_address(probe, ctx):
    """A receiver with a dynamic source: the broker's source has dynamic set and a
    non-empty address (UNSUPPORTED when the broker refuses dynamic nodes)."""
    _, _, source = _dynamic_receiver(probe, ctx)
    if not source.dynamic:  # 2.6.3: it may adjust the terminus; it created no dynamic node
        raise Unsupported(f"the broker answered dynamic=false (no dynamic node): {source!r}")
    ctx.check(
        source.address is not None,
        f"expected an address in the broker's dynamic source; observed {source!r}",
    )


@case(
    "3.5.3/terminus-dynamic-source-usable",
    MAY,
    "A dynamically created node (temporary queue) receives messages sent to its address "
    "(3.5.3 dynamic: the sending peer creates the node; no keyword).",
)
def dynamic_source_usable(probe, ctx):
    """Dynamic source; a message published to its address reaches the receiver."""
    _, link, source = _dynamic_receiver(probe, ctx)
    if not source.address:  # 3.5.3/terminus-dynamic-source-address judges that
        raise Unsupported(f"the dynamic source has no address to send to: {source!r}")
    other = ctx.probe()
    other_session = other.open_session()
    sender = other.attach_sender(other_session, source.address)
    other.publish(sender, 1, b"to-the-dynamic-node", timeout=5.0)
    probe.grant(link, 1)
    exactly(probe, link, 1)


def _as_created_case(case_id: str, what: str) -> Callable[[RunFunction], RunFunction]:
    """`case` for 2.6.3's report of the terminus as created (`what`: which property)."""
    return case(
        case_id,
        MUST,
        "In this case the endpoint MUST report the actual properties of the terminus as "
        f"created: {what}",
        sentences=(AS_CREATED,),
        requires={"queues"},
    )


def _address_reported_case(section: str, terminus: str, doc: str) -> None:
    """Declare `<section>/terminus-<terminus>-address-reported`: a link to or from a queue
    (a receiver for its source, a sender for its target); the broker's attach reports the
    address we asked for."""

    def run(probe, ctx):
        queue = ctx.queue()
        session = probe.open_session()
        if terminus == "source":
            address = ctx.source(queue)
            link = probe.attach_receiver(session, address)
        else:
            address = ctx.target_address(queue)
            link = probe.attach_sender(session, address)
        reported = getattr(link.remote_attach, terminus).address
        ctx.check(
            reported == address,
            f"expected {terminus} address {address!r}; observed {reported!r}",
        )

    declare = _as_created_case(
        f"{section}/terminus-{terminus}-address-reported",
        f"for an existing node, the {terminus} address asked for.",
    )
    declare(case_function(run, f"{terminus}_address_reported", doc, __name__))


_address_reported_case(
    "3.5.3", "source", "A receiver from a queue: the broker's source address is ours."
)
_address_reported_case(
    "3.5.4", "target", "A sender to a queue: the broker's target address is ours."
)


@_as_created_case(
    "3.5.3/terminus-durable-reported",
    "durable, a terminus-durability (0 none, 1 configuration, 2 unsettled-state).",
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
    ctx.check(
        durable in (None, 0, 1, 2),
        f"expected a terminus-durability (0, 1, 2) in the source; observed {durable!r}",
    )
    probe.grant(link, 1)
    exactly(probe, link, 1)
