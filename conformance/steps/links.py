"""Steps for sessions and links: receivers and senders on a queue, waiting for a sender's
credit, session and link flows crafted from the engine's state, and a connection opened
with a small max-frame-size, the broker's answer to an attach (its attach, or the end or
close that refused it).

Owns compositions of `Probe` calls only; registers no case. Touches nothing else.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Flow
from amqpspec.amqp10.engine import (
    FlowReceived,
    Link,
    RemoteAttach,
    RemoteClose,
    RemoteEnd,
    Session,
)
from amqpspec.amqp10.spec import SndSettleMode
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.verdicts import CaseFailed, NoDelivery


def consumer(
    probe: Probe,
    ctx: CaseContext,
    queue: str,
    *,
    credit: int = 0,
    session: Session | None = None,
    **attach: Any,
) -> tuple[Session, Link]:
    """A receiver from `queue` (on `session`, or a new one) granted `credit`."""
    session = session or probe.open_session()
    link = probe.attach_receiver(session, ctx.source(queue), credit=credit, **attach)
    return session, link


def unsettled_consumer(
    probe: Probe, ctx: CaseContext, queue: str, *, credit: int = 0
) -> tuple[Session, Link]:
    """A receiver that asks for unsettled deliveries (at-least-once)."""
    return consumer(probe, ctx, queue, credit=credit, snd_settle_mode=SndSettleMode.UNSETTLED)


def wait_credit(probe: Probe, sender: Link, timeout: float | None = None) -> None:
    """Wait until the broker (the receiver) grants `sender` some link-credit."""
    if sender.link_credit > 0:
        return
    try:
        probe.expect(
            lambda e: isinstance(e, FlowReceived) and e.link is sender and sender.link_credit > 0,
            timeout,
            "flow granting our sender link credit",
        )
    except CaseFailed as exc:  # no sentence makes a receiver grant credit: a shortfall
        raise NoDelivery(str(exc)) from exc


def publisher(
    probe: Probe, ctx: CaseContext, queue: str, *, session: Session | None = None, **attach: Any
) -> tuple[Session, Link]:
    """A sender to `queue` (on `session`, or a new one; `attach` fields for its attach),
    once the broker granted it credit."""
    session = session or probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue), **attach)
    wait_credit(probe, sender)
    return session, sender


def session_flow(session: Session, **changes: Any) -> Flow:
    """A session flow (no handle) from `session`'s current state, with `changes`."""
    fields: dict[str, Any] = {
        "next_incoming_id": session.next_incoming_id,
        "incoming_window": session.incoming_window,
        "next_outgoing_id": session.next_outgoing_id,
        "outgoing_window": session.outgoing_window,
    }
    fields.update(changes)
    return Flow(**fields)


def link_flow(session: Session, link: Link, **changes: Any) -> Flow:
    """A link flow for `link` from the session's and link's state, with `changes`."""
    fields: dict[str, Any] = {
        "handle": link.handle,
        "delivery_count": link.delivery_count,
        "link_credit": link.link_credit,
    }
    fields.update(changes)
    return session_flow(session, **fields)


def small_frame_probe(ctx: CaseContext, max_frame_size: int = 512) -> Probe:
    """A new connection opened with a small max-frame-size, so deliveries come in pieces."""
    receiver = ctx.probe()
    receiver.open(max_frame_size=max_frame_size)
    return receiver


def attach_answer(probe: Probe, session: Session, link: Link, what: str = "attach") -> Any:
    """Flush the attach of `link` and wait for the broker's answer: its RemoteAttach, or the
    RemoteEnd of `session` or the RemoteClose that refused it."""
    probe.flush()
    return probe.expect(
        lambda e: (
            (isinstance(e, RemoteAttach) and e.link is link)
            or (isinstance(e, RemoteEnd) and e.session is session)
            or isinstance(e, RemoteClose)
        ),
        what=what,
    )
