"""The probe's transfers: send and publish messages, take deliveries, settle them.

Owns: `ProbeTransfers` (send_message, publish: a sender's messages and their settlement,
2.7.5 rcv-settle-mode first graded on the way; next_transfer, transfers, receive, settle)
and `SETTLE_FIRST`, the sentence that grades a broker that does not settle on arrival.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.composites import Accepted
from amqpspec.amqp10.engine import (
    DispositionReceived,
    Event,
    FlowReceived,
    Link,
    ProtocolErrorRaised,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    TransferReceived,
    TransportClosed,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.probe.waits import ProbeWaits
from amqpspec.conformance.probe.wire import WaitTimeout
from amqpspec.conformance.verdicts import CaseFailed, NoDelivery

# 2.7.5 transfer rcv-settle-mode: "If first, this indicates that the Receiver MUST settle
# the delivery once it has arrived without waiting for the Sender to settle first."
SETTLE_FIRST = "2.7.5/transfer.rcv-settle-mode.1"


def _settles_first(link: Link) -> bool:
    """The broker, the receiver of our sender `link`, agreed to rcv-settle-mode first (the
    default)."""
    attach = link.remote_attach
    mode = attach.rcv_settle_mode if attach is not None else None
    return mode is None or int(mode) == 0


class ProbeTransfers(ProbeWaits):
    """Deliveries both ways on the probe's links."""

    def send_message(
        self,
        link: Link,
        body: bytes | Message = b"x",
        *,
        settled: bool | None = None,
        tag: bytes | None = None,
        wait_credit: bool = True,
        timeout: float | None = None,
    ) -> int:
        """Sender: one message (waits for credit); returns its delivery-id."""
        message = body if isinstance(body, Message) else Message.of(body)
        if wait_credit and link.link_credit <= 0:
            try:
                self.expect(
                    lambda e: (
                        isinstance(e, FlowReceived) and e.link is link and link.link_credit > 0
                    ),
                    timeout,
                    "flow granting link credit",
                )
            except WaitTimeout as exc:
                raise NoDelivery(str(exc)) from exc
        delivery_id = link.send(message.encode(), tag or f"t{self._unique()}".encode(), settled)
        self.flush()
        return delivery_id

    def publish(
        self,
        link: Link,
        count: int,
        body: Callable[[int], bytes | Message] | bytes = b"x",
        *,
        settled: bool = False,
        confirm: bool = True,
        timeout: float = 30.0,
    ) -> None:
        """Send `count` messages; with `confirm` wait until every one is settled by the broker."""
        waited_from = self.mark()
        sent: set[int] = set()
        for index in range(count):
            payload = body(index) if callable(body) else body
            sent.add(self.send_message(link, payload, settled=settled, timeout=timeout))
            if len(self.inbox) > 256:
                self._drop_dispositions(sent)
        if confirm and not settled:
            end = time.monotonic() + timeout
            while sent:
                self._drop_dispositions(sent)
                if not sent:
                    break
                if time.monotonic() > end or self.closed or self._left() <= 0:
                    message = (
                        f"expected a settled disposition for each of {count} messages; "
                        f"{len(sent)} unsettled, {self.observed(waited_from)}"
                    )
                    if _settles_first(link) and not self.closed:  # 2.7.5: settle on arrival
                        raise CaseFailed(message, level="MUST", sentences=(SETTLE_FIRST,))
                    raise WaitTimeout(message)
                self.pump(0.2)

    def _drop_dispositions(self, pending: set[int]) -> None:
        keep: list[Event] = []
        for event in self.inbox:
            if isinstance(event, DispositionReceived) and event.role == Role.RECEIVER:
                if event.settled:
                    pending.difference_update(range(event.first, event.last + 1))
                continue
            keep.append(event)
        self.inbox = keep

    def next_transfer(self, link: Link, timeout: float | None = None) -> TransferReceived:
        """The next delivery on `link`; fails at once when the link, session or connection
        ends instead (a broker error, or our engine refusing a broker frame)."""

        def match(event: Event) -> bool:
            return (
                (isinstance(event, TransferReceived | RemoteDetach) and event.link is link)
                or isinstance(event, ProtocolErrorRaised | RemoteClose | TransportClosed)
                or (isinstance(event, RemoteEnd) and event.session is link.session)
            )

        since = self.mark()
        try:
            event = self.expect(match, timeout, "transfer")
        except WaitTimeout as exc:
            raise NoDelivery(str(exc)) from exc
        if isinstance(event, TransferReceived):
            return event
        self.inbox.insert(0, event)
        if isinstance(event, ProtocolErrorRaised):
            raise NoDelivery(
                f"expected a transfer; our engine refused the broker's frame ({event.condition}: "
                f"{event.description}); {self.observed(max(0, since - 1))}"
            )
        raise NoDelivery(f"expected a transfer; {self.observed(self._ended_from(since))}")

    def transfers(self, link: Link) -> list[TransferReceived]:
        """Take every delivery already received on `link` (no waiting)."""
        taken = [e for e in self.inbox if isinstance(e, TransferReceived) and e.link is link]
        self.inbox = [e for e in self.inbox if e not in taken]
        return taken

    def settle(self, link: Link, delivery: TransferReceived | int, state: Any = None) -> None:
        """Receiver: settle one delivery with `state` (default accepted)."""
        delivery_id = delivery if isinstance(delivery, int) else delivery.delivery_id
        link.disposition(delivery_id, settled=True, state=Accepted() if state is None else state)
        self.flush()

    def receive(
        self,
        link: Link,
        count: int,
        *,
        settle: bool = True,
        regrant: int | None = None,
        timeout: float | None = None,
        on_delivery: Callable[[TransferReceived], None] | None = None,
    ) -> list[TransferReceived]:
        """Receive `count` deliveries; settle each (accepted); with `regrant`, grant
        link-credit=regrant after every delivery (proton's prefetch pattern)."""
        received: list[TransferReceived] = []
        for _ in range(count):
            delivery = self.next_transfer(link, timeout)
            received.append(delivery)
            if on_delivery is not None:
                on_delivery(delivery)
            self.fail_if_gone(link)
            if settle and not delivery.settled:
                link.disposition(delivery.delivery_id, settled=True, state=Accepted())
            if regrant is not None:
                link.flow(link_credit=regrant)
            self.flush()
        return received
