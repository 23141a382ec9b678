"""Crafted frames: bytes the engine would not send — an AMQP frame around any body bytes
(doff and extended header given), a body that is any encoded value, and transfer frames
whose delivery-ids our engine's window bookkeeping does not see (so they may exceed the
broker's window).

Owns building those bytes from core encodings (`amqp10.frames`, `amqp10.codec`); sends
nothing, registers no case. Touches nothing else.
"""

from __future__ import annotations

from typing import Any

from amqp10.codec import encode
from amqp10.composites import Transfer
from amqp10.engine import Link, Session
from amqp10.frames import FRAME_HEADER, FrameType, encode_frame
from amqp10.message import Message


def raw_frame(body: bytes, channel: int = 0, doff: int = 2, extended: bytes = b"") -> bytes:
    """An AMQP frame around already-encoded body bytes (header from amqp10.frames)."""
    size = 8 + len(extended) + len(body)
    return FRAME_HEADER.pack(size, doff, FrameType.AMQP, channel) + extended + body


def raw_value_frame(value: Any, channel: int = 0) -> bytes:
    """A frame whose body is `value` encoded by the core codec (e.g. a Described list)."""
    return raw_frame(encode(value), channel)


def transfer_frames(session: Session, sender: Link, tags: list[bytes], **fields: Any) -> bytes:
    """Crafted single-frame transfers on `sender`, one per delivery tag, with the next
    delivery-ids (our engine's window bookkeeping does not see them: the frames may exceed
    the broker's window)."""
    return b"".join(
        encode_frame(
            Transfer(
                handle=sender.handle,
                delivery_id=session.next_delivery_id + index,
                delivery_tag=tag,
                message_format=0,
                **fields,
            ),
            session.channel,
            Message.of(b"x").encode(),
        )
        for index, tag in enumerate(tags)
    )


def one_delivery_frames(session: Session, sender: Link, tag: bytes, count: int) -> bytes:
    """A crafted delivery of `count` one-byte transfer frames (more=true throughout)."""
    head = Transfer(
        handle=sender.handle,
        delivery_id=session.next_delivery_id,
        delivery_tag=tag,
        message_format=0,
        more=True,
    )
    rest = encode_frame(Transfer(handle=sender.handle, more=True), session.channel, b"\x00")
    return encode_frame(head, session.channel, b"\x00") + rest * (count - 1)
