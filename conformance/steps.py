"""Reusable steps for cases: fill a queue, attach a consumer, collect deliveries, settle.

Owns: small compositions of `Probe` calls that many cases share (so a case reads as its
scenario). Touches nothing else.
"""

from __future__ import annotations

from typing import Any

from amqp10.composites import Flow
from amqp10.engine import Link, Session, TransferReceived
from amqp10.message import Message
from amqp10.spec import SndSettleMode
from conformance.probe import Probe
from conformance.runner import CaseContext
from conformance.verdicts import CaseFailed


def body(index: int, size: int = 0) -> Message:
    text = f"amqpspec-{index}".encode()
    return Message.of(text + b"." * max(0, size - len(text)))


def fill(
    probe: Probe, ctx: CaseContext, queue: str, count: int, *, size: int = 0, settled: bool = False
) -> None:
    """Put `count` messages on `queue` through a sender on its own session, then end it."""
    session = probe.open_session()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    probe.publish(sender, count, lambda i: body(i, size), settled=settled)
    probe.detach(sender)
    probe.end(session)


def consumer(
    probe: Probe,
    ctx: CaseContext,
    queue: str,
    *,
    credit: int = 0,
    session: Session | None = None,
    **attach: Any,
) -> tuple[Session, Link]:
    session = session or probe.open_session()
    link = probe.attach_receiver(session, ctx.source(queue), credit=credit, **attach)
    return session, link


def unsettled_consumer(
    probe: Probe, ctx: CaseContext, queue: str, *, credit: int = 0
) -> tuple[Session, Link]:
    """A receiver that asks for unsettled deliveries (at-least-once)."""
    return consumer(probe, ctx, queue, credit=credit, snd_settle_mode=SndSettleMode.UNSETTLED)


def collect(probe: Probe, link: Link, quiet: float = 0.5) -> list[TransferReceived]:
    """Every delivery that arrives on `link` until nothing came for `quiet` seconds."""
    got: list[TransferReceived] = []
    while True:
        got += probe.transfers(link)
        if probe.closed or not probe.pump(quiet):
            got += probe.transfers(link)
            return got


def expect_count(
    probe: Probe, link: Link, count: int, *, quiet: float = 0.5, settle: bool = True
) -> list[TransferReceived]:
    """Receive exactly `count` deliveries: waits for them, then for `quiet` seconds
    more to see that no extra one comes."""
    got = probe.receive(link, count, settle=settle)
    extra = collect(probe, link, quiet)
    if extra:
        raise CaseFailed(
            f"{count + len(extra)} deliveries for a grant of {count} "
            f"(extra delivery-id {extra[0].delivery_id})"
        )
    return got


def drain_reply(probe: Probe, link: Link, since: int, timeout: float | None = None) -> Flow:
    """The broker's flow for `link` with link-credit 0 after trace position `since`; the
    failure names the last flow the broker did send for the link."""
    try:
        frame = probe.wait_for_frame(
            "flow",
            timeout,
            lambda f: (
                f.performative.handle == link.remote_handle and f.performative.link_credit == 0
            ),
            since=since,
        )
    except CaseFailed as exc:
        flows = probe.link_flows(link, since)
        seen = (
            f"; the broker's last flow for the link: delivery-count {flows[-1].delivery_count}, "
            f"link-credit {flows[-1].link_credit}, drain {flows[-1].drain} (credit not used up)"
            if flows
            else "; no flow for the link at all"
        )
        raise CaseFailed(f"no drain reply (flow with link-credit 0): {exc}{seen}") from exc
    return frame.performative


def redelivered_bodies(deliveries: list[TransferReceived]) -> list[bytes]:
    return [message_text(d) for d in deliveries]


def message_text(delivery: TransferReceived) -> bytes:
    message = Message.decode(delivery.payload)
    value = message.body[0].value if message.body else b""
    return bytes(value) if isinstance(value, bytes | bytearray) else str(value).encode()


def header_of(delivery: TransferReceived) -> Any:
    return Message.decode(delivery.payload).header
