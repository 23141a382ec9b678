"""More reusable steps for the cases added after the first set (the `*_more` modules, the
session, attach, message, terminus, alarm and error modules).

Owns: compositions of `Probe` calls those cases share — waiting for a publisher's credit,
publishing given messages, a message round trip through a queue, session flows crafted
from a session's state, raw frame bodies (headers built by `amqp10.frames`), and the
"did the broker end it" outcome with a bounded quiet period. Touches nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from amqp10.codec import encode
from amqp10.composites import Flow
from amqp10.engine import FlowReceived, Link, Session, TransferReceived
from amqp10.frames import FRAME_HEADER, FrameType
from amqp10.message import Message
from conformance.probe import Probe
from conformance.runner import CaseContext
from conformance.steps import collect, consumer
from conformance.verdicts import CaseFailed

SERIAL = 2**32


def advance(after: int, before: int) -> int:
    """Serial distance after - before (RFC 1982, 2^32)."""
    return (after - before) % SERIAL


def wait_credit(probe: Probe, sender: Link, timeout: float | None = None) -> None:
    """Wait until the broker (the receiver) grants `sender` some link-credit."""
    if sender.link_credit > 0:
        return
    probe.expect(
        lambda e: isinstance(e, FlowReceived) and e.link is sender and sender.link_credit > 0,
        timeout,
        "link credit for the sender",
    )


def publish_messages(
    probe: Probe, ctx: CaseContext, queue: str, messages: Iterable[Message], *, settled=False
) -> None:
    """Publish `messages` to `queue` on a sender of its own session (confirmed), then end."""
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    batch = list(messages)
    probe.publish(sender, len(batch), lambda i: batch[i], settled=settled)
    probe.detach(sender)
    probe.end(session)


def roundtrip(probe: Probe, ctx: CaseContext, message: Message) -> tuple[Message, bytes]:
    """Send `message` through a fresh queue and consume it: (decoded message, raw payload)."""
    queue = ctx.queue()
    publish_messages(probe, ctx, queue, [message])
    _, link = consumer(probe, ctx, queue, credit=1)
    delivery = probe.next_transfer(link)
    if not delivery.settled:
        probe.settle(link, delivery)
    return Message.decode(delivery.payload), delivery.payload


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


def raw_frame(body: bytes, channel: int = 0, doff: int = 2, extended: bytes = b"") -> bytes:
    """An AMQP frame around already-encoded body bytes (header from amqp10.frames)."""
    size = 8 + len(extended) + len(body)
    return FRAME_HEADER.pack(size, doff, FrameType.AMQP, channel) + extended + body


def raw_value_frame(value: Any, channel: int = 0) -> bytes:
    """A frame whose body is `value` encoded by the core codec (e.g. a Described list)."""
    return raw_frame(encode(value), channel)


def server_flows(probe: Probe, since: int, *, session_only: bool = False) -> list[Flow]:
    """Flows the broker sent after trace position `since` (only handle-less ones when
    `session_only`)."""
    flows = [t.item.performative for t in probe.frames_since(since, "flow")]
    return [f for f in flows if f.handle is None] if session_only else flows


def exactly(probe: Probe, link: Link, count: int, quiet: float = 0.5) -> list[TransferReceived]:
    """Receive exactly `count` deliveries (settling them), then `quiet` seconds of nothing;
    the failure names how many came."""
    got = probe.receive(link, count) if count else []
    extra = collect(probe, link, quiet)
    if extra:
        raise CaseFailed(
            f"{count + len(extra)} deliveries where {count} were due "
            f"(first extra delivery-id {extra[0].delivery_id})"
        )
    return got


def settle_all(probe: Probe, link: Link, deliveries: Iterable[TransferReceived]) -> None:
    for delivery in deliveries:
        if not delivery.settled:
            probe.settle(link, delivery)
