"""Checked steps for session windows under resource alarms (2.5.6): a memory alarm raised
and always cleared, waiting for the broker's flow that closes or reopens a window, and
crafted transfer frames that may exceed the window (the engine would hold them back).

Owns no case. Touches nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from amqp10.composites import Flow, Transfer
from amqp10.engine import Link, Session
from amqp10.frames import encode_frame
from amqp10.message import Message
from conformance.probe import Probe
from conformance.runner import CaseContext
from conformance.verdicts import CaseFailed, Unsupported


@contextmanager
def memory_alarm(ctx: CaseContext) -> Iterator[None]:
    """A memory alarm raised through the admin adapter, cleared whatever happens."""
    ctx.admin.raise_alarm("memory")
    try:
        yield
    finally:
        ctx.admin.clear_alarm("memory")


def window_flow(
    probe: Probe,
    since: int,
    wanted: Callable[[Any], bool],
    timeout: float,
    channel: int | None = None,
) -> Flow:
    """The broker's first flow after `since` (on `channel`, if given) whose incoming-window
    satisfies `wanted`."""
    return probe.wait_for_frame(
        "flow",
        timeout,
        lambda f: (
            (channel is None or f.channel == channel) and wanted(f.performative.incoming_window)
        ),
        since=since,
    ).performative


def window_closed_or_unsupported(
    probe: Probe,
    since: int,
    timeout: float,
    refusal: str,
    *,
    see: str = "",
    channel: int | None = None,
) -> None:
    """Wait for the broker's flow with incoming-window 0 (on `channel`, if given) after an
    alarm. Without one the case cannot go on: UNSUPPORTED "`refusal` (why); see `see`"."""
    try:
        window_flow(probe, since, lambda w: w == 0, timeout, channel)
    except CaseFailed as exc:
        raise Unsupported(f"{refusal} ({exc})" + (f"; see {see}" if see else "")) from exc


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
