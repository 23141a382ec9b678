"""Crafted transfers the engine would hold back: transfer frames beyond the broker's session
window (2.5.6) or as one delivery of many one-byte frames, sent in one burst through the
engine (`Probe.send_frame`), which records each as sent (transfer-ids, delivery-ids,
credit), so its state follows the wire.

Owns composing those transfers; malformed frames come from `amqp10.builder` in the case
modules. Registers no case. Touches nothing else.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Transfer
from amqpspec.amqp10.engine import Link, Session
from amqpspec.amqp10.message import Message
from amqpspec.conformance.probe import Probe


def crafted_transfer(sender: Link, delivery_id: int, tag: bytes, **fields: Any) -> Transfer:
    """The first (or only) transfer of delivery `delivery_id` on `sender`, message-format 0
    (`fields`: its other fields), for a case to send as it is."""
    return Transfer(
        handle=sender.handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, **fields
    )


def send_transfers(
    probe: Probe, session: Session, sender: Link, tags: list[bytes], **fields: Any
) -> None:
    """Single-frame transfers on `sender`, one per delivery tag, with the next delivery-ids,
    sent at once (the engine would wait for the broker's window; these may exceed it)."""
    payload = Message.of(b"x").encode()
    for tag in tags:
        transfer = Transfer(
            handle=sender.handle,
            delivery_id=session.next_delivery_id,
            delivery_tag=tag,
            message_format=0,
            **fields,
        )
        probe.send_frame(transfer, session.channel, payload, flush=False)
    probe.flush()


def send_head(
    probe: Probe,
    session: Session,
    sender: Link,
    tag: bytes,
    payload: bytes,
    *,
    flush: bool = True,
    **fields: Any,
) -> None:
    """The first transfer of a delivery on `sender` (more=true: the rest follows, or not)."""
    head = Transfer(
        handle=sender.handle,
        delivery_id=session.next_delivery_id,
        delivery_tag=tag,
        message_format=0,
        more=True,
        **fields,
    )
    probe.send_frame(head, session.channel, payload, flush=flush)


def send_one_delivery(probe: Probe, session: Session, sender: Link, tag: bytes, count: int) -> None:
    """One delivery of `count` one-byte transfer frames (more=true throughout), sent at once."""
    send_head(probe, session, sender, tag, b"\x00", flush=False)
    rest = Transfer(handle=sender.handle, more=True)
    for _ in range(count - 1):
        probe.send_frame(rest, session.channel, b"\x00", flush=False)
    probe.flush()
