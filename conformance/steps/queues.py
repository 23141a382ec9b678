"""Steps for messages and queues: numbered message bodies, filling a queue through a sender
of its own session, and reading a delivery's body or header back.

Owns compositions of `Probe` calls and message helpers only; registers no case. Touches
nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from amqpspec.amqp10.engine import TransferReceived
from amqpspec.amqp10.message import Message
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext


def body(index: int, size: int = 0) -> Message:
    """Message number `index` (`amqpspec-<index>`, padded with dots to `size` bytes)."""
    text = f"amqpspec-{index}".encode()
    return Message.of(text + b"." * max(0, size - len(text)))


def publish_messages(
    probe: Probe, ctx: CaseContext, queue: str, messages: Iterable[Message], *, settled=False
) -> None:
    """Publish `messages` to `queue` on a sender of its own session (confirmed unless
    `settled`), then detach it and end the session (not waiting for the answers)."""
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    batch = list(messages)
    probe.publish(sender, len(batch), lambda i: batch[i], settled=settled)
    probe.detach(sender, wait=False)  # set-up: the answers are no case's check
    probe.end(session, wait=False)


def fill(
    probe: Probe, ctx: CaseContext, queue: str, count: int, *, size: int = 0, settled: bool = False
) -> None:
    """Put `count` numbered messages (`body(i, size)`) on `queue`."""
    messages = (body(index, size) for index in range(count))
    publish_messages(probe, ctx, queue, messages, settled=settled)


def message_text(delivery: TransferReceived) -> bytes:
    """The body of a delivery's message as bytes."""
    message = Message.decode(delivery.payload)
    value = message.body[0].value if message.body else b""
    return bytes(value) if isinstance(value, bytes | bytearray) else str(value).encode()


def texts(deliveries: list[TransferReceived]) -> list[bytes]:
    """The sorted message bodies of `deliveries` (to compare sets of messages)."""
    return sorted(message_text(d) for d in deliveries)


def header_of(delivery: TransferReceived) -> Any:
    """The header section of a delivery's message (None when it has none)."""
    return Message.decode(delivery.payload).header
