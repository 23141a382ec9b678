"""The reference broker's link recovery for publisher links (the broker as receiver): the
publishes it holds unsettled in rcv-settle-mode second, the delivery a suspended link was in
the middle of, the broker's unsettled map when the same link is attached again and what it
does with each transfer of the resumed link (2.6.13 Resuming Deliveries, 2.7.3 unsettled
and incomplete-unsettled, 3.4.1 received).

Owns: `Held` (what one publisher link holds: delivery-tag -> the outcome the broker sent,
and the partly received delivery), the broker's unsettled map built from a kept target's
`Held` (`unsettled_map`), `Resumed` (what the resumed link still knows) and its verdict on
each transfer (`Resumed.judge`). Touches nothing else: the delivery handler
(protocol/delivery_handler.py) routes, answers or detaches as the verdict says, the link
handler (protocol/link_handler.py) hands a suspended link's `Held` to the kept target
(features/recovery.py) and builds a resumed link's `Resumed` from it.

rcv-settle-mode second (2.8.3: "The Receiver will only settle after sending the disposition
to the Sender and receiving a disposition indicating settlement of the delivery from the
sender"): a publisher attaching with second gets second (config `settle_second`, on by
default; off, every publisher gets first as before). The broker routes each publish as it
arrives, sends its outcome unsettled and forgets the delivery when the sender settles it
(protocol/sessions.py). So a suspended link's target keeps, per delivery-tag, the outcome
the broker sent (null while a durable publish awaits its fsync): its message is in the
queue already.

Resuming (the broker's map `ours`, the sender's `theirs`; 2.6.13):
- `ours` lists every held delivery with the outcome sent and the partly received delivery
  with received(section-number, section-offset), the first byte it lacks (3.4.1: "At the
  target the received state indicates the furthest point in the payload of the message
  which the target will not need to have resent"); cut to what the sender's max-frame-size
  holds and marked incomplete (2.7.3 SHOULD);
- a resumed transfer of a held delivery is not routed again: the broker restates its
  outcome (unsettled in mode second) or, the sender settling it, forgets it ("The Sender
  MAY omit message data when the Delivery State of the Receiver indicates retransmission is
  unnecessary");
- a resumed transfer of the partly received delivery completes it: its payload starts where
  the received state on its first transfer says (3.4.1: "it indicates the offset in the
  payload at which the first resumed delivery is starting"), at the start without one; a
  start past the bytes the broker has detaches the link (amqp:illegal-state);
- a resumed transfer of anything else "MUST be ignored by the receiver" (2.6.13, 2.7.5);
- after an incomplete map on either side a transfer without resume detaches the link with
  amqp:illegal-state: the broker's own incomplete map makes it a MUST ("a receiving
  endpoint which sent an incomplete unsettled map MUST detach with an error on receiving a
  transfer which does not have the resume flag set to true", 2.7.3), the sender's alone
  the prose's "Only when both sides have complete unsettled maps may new unsettled state be
  created by the sending of non-resuming transfers" (2.6.13).
The `accept-new-after-incomplete-map` fault routes such a transfer as a new publish.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import Accepted, Received
from amqpspec.amqp10.message import received_point, resume_offset


@dataclass(slots=True)
class Partial:
    """A delivery a suspended publisher link was in the middle of (2.6.14: more=true)."""

    tag: bytes
    payload: bytes  # the bytes received so far


@dataclass(slots=True)
class Held:
    """What a publisher link holds: delivery-tag -> the outcome the broker sent unsettled
    (None: not yet sent), and the partly received delivery."""

    outcomes: dict[bytes, Any] = field(default_factory=dict)
    partial: Partial | None = None


def with_partial(held: Held, pending: tuple[Any, bytes] | None) -> Held:
    """`held` with the delivery a link goes in the middle of (its first transfer and the
    bytes so far: TransferAssembler.pending). A resumed delivery cut off again leaves the
    partial one held before as it was."""
    if pending is not None:
        first, payload = pending
        if not first.resume and first.delivery_tag is not None:
            held.partial = Partial(bytes(first.delivery_tag), payload)
    return held


def received_state(partial: Partial) -> Received:
    """3.4.1 received for `partial`: the first section and byte it lacks."""
    number, offset = received_point(partial.payload)
    return Received(section_number=number, section_offset=offset)


def unsettled_map(held: Held, room: int) -> tuple[dict[bytes, Any], bool]:
    """The broker's unsettled map for a resumed publisher link (2.7.3 unsettled), the
    partly received delivery first, then the held ones in arrival order, as many as `room`
    octets hold, and whether it is incomplete (2.7.3: "The endpoint SHOULD make use of the
    ability to send an incomplete unsettled map [...] to avoid sending an error")."""
    entries: list[tuple[bytes, Any]] = []
    if held.partial is not None:
        entries.append((held.partial.tag, received_state(held.partial)))
    entries += list(held.outcomes.items())
    ours: dict[bytes, Any] = {}
    for tag, state in entries:
        size = len(codec.encode(tag)) + len(codec.encode(state))
        if size > room:
            return ours, True
        room -= size
        ours[tag] = state
    return ours, False


class Verdict(Enum):
    ROUTE = "route"  # a publish: route it (the payload `Judged.payload`)
    RESTATE = "restate"  # a held delivery resumed: its outcome again, not routed
    FORGET = "forget"  # a held delivery resumed settled: nothing to answer
    IGNORE = "ignore"  # resumed, not in the broker's map (2.6.13, 2.7.5)
    DETACH = "detach"  # a new delivery after an incomplete map, or a bad resume point


@dataclass(slots=True, frozen=True)
class Judged:
    verdict: Verdict
    payload: bytes = b""
    state: Any = None
    reason: str = ""


ROUTE_AS_SENT = Judged(Verdict.ROUTE)


@dataclass(slots=True)
class Resumed:
    """A resumed publisher link's memory of its kept target: the held deliveries, the
    partly received one, and whether either unsettled map was incomplete (`strict`)."""

    held: Held
    strict: bool
    ours_incomplete: bool

    def judge(self, tag: bytes, resume: bool, settled: bool, state: Any, payload: bytes) -> Judged:
        """What the broker does with one whole delivery on the resumed link (module doc)."""
        if not resume:
            if self.strict:
                return Judged(Verdict.DETACH, reason=self._strict_reason())
            return ROUTE_AS_SENT
        outcomes, partial = self.held.outcomes, self.held.partial
        if tag in outcomes:
            outcome = outcomes.pop(tag)
            if settled:
                return Judged(Verdict.FORGET)
            return Judged(Verdict.RESTATE, state=outcome if outcome is not None else Accepted())
        if partial is not None and tag == partial.tag:
            self.held.partial = None
            start = 0
            if isinstance(state, Received):
                start = resume_offset(
                    partial.payload, int(state.section_number), int(state.section_offset)
                )
                if start is None:
                    reason = f"resumed at {state!r}, past the {len(partial.payload)} bytes held"
                    return Judged(Verdict.DETACH, reason=reason)
            return Judged(Verdict.ROUTE, payload=partial.payload[:start] + payload)
        return Judged(Verdict.IGNORE)

    def _strict_reason(self) -> str:
        if self.ours_incomplete:
            return "a transfer without resume after the broker's incomplete unsettled map (2.7.3)"
        return "a transfer without resume after an incomplete unsettled map (2.6.13)"
