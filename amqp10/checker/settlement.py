"""Settlement rules (2.6.12, 2.7.6): disposition ranges, known deliveries, settled stays settled.

Owns: `SettlementRules`, the checker mixin for disposition. Per session end the checker
keeps the range of delivery-ids that end sent and a capped memory of who settled which
(state.Deliveries); ranges longer than `_RANGE_LIMIT` are checked at their bounds only.
May touch: the state records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.checker.state import Peer
from amqpspec.amqp10.origins import other
from amqpspec.amqp10.serial import serial_add, serial_diff, serial_lt

if TYPE_CHECKING:
    from amqpspec.amqp10.checker.core import Checker
    from amqpspec.amqp10.frames import Frame

_RANGE_LIMIT = 1024


class SettlementRules:
    def _on_disposition(self: Checker, origin: str, peer: Peer, frame: Frame, idx: int, time: Any):
        end = self._session_end(origin, peer, frame, idx)
        if end is None:
            return
        disposition = frame.performative
        first = disposition.first
        last = first if disposition.last is None else disposition.last
        if serial_lt(last, first):
            self._report(
                "settlement.disposition-range",
                idx,
                origin,
                f"disposition first {first:#x} after last {last:#x}",
            )
            return
        # role receiver: about deliveries this peer received, i.e. the other end sent
        if disposition.role:
            sent_by = end.session.ends.get(other(origin))
            deliveries = sent_by.deliveries if sent_by is not None else None
        else:
            deliveries = end.deliveries
        role = "receiver" if disposition.role else "sender"
        if (
            deliveries is None
            or deliveries.low is None
            or serial_lt(first, deliveries.low)
            or serial_lt(deliveries.high, last)
        ):
            sent = (
                "none"
                if deliveries is None or deliveries.low is None
                else f"{deliveries.low:#x}..{deliveries.high:#x}"
            )
            self._report(
                "settlement.unknown-delivery",
                idx,
                origin,
                f"disposition (role {role}) of {first:#x}..{last:#x}, delivery-ids sent: {sent}",
            )
            return
        if disposition.role:
            self._disposition_read(origin, sent_by, last, idx)
        count = serial_diff(first, last) + 1
        if count > _RANGE_LIMIT:
            return
        settled_by = deliveries.settled_by
        if not disposition.settled:
            self._unsettled_again(origin, first, count, settled_by, idx)
            return
        for offset in range(count):
            delivery_id = serial_add(first, offset)
            if delivery_id not in settled_by:
                deliveries.settle(delivery_id, origin)

    def _unsettled_again(
        self: Checker, origin: str, first: int, count: int, settled_by: dict, idx: int
    ) -> None:
        """2.6.12: a settled delivery stays settled; an unsettled disposition of one that was
        sent settled, or that this peer settled already, is reported (the first only)."""
        for offset in range(count):
            delivery_id = serial_add(first, offset)
            by = settled_by.get(delivery_id)
            if by == "transfer" or by == origin:
                how = "was sent settled" if by == "transfer" else "was settled by this peer"
                self._report(
                    "settlement.settled-again-unsettled",
                    idx,
                    origin,
                    f"unsettled disposition of delivery-id {delivery_id:#x}, which {how}",
                )
                return
