"""Field rules of the performatives (2.7.3-2.7.5) that a frame shows on its own or with
what its sender provably knew: checked on every frame, both directions.

Owns: `FieldRules`, the checker mixin for
- attach (2.7.3): a sender's initial-delivery-count set; no null key in unsettled;
- flow (2.7.4): no link field in a session flow; delivery-count set by a sender; from a
  receiver, set once it saw the sender's attach, not before, and not behind a value of
  the sender's delivery-count it provably knew;
- transfer (2.7.5): message-format on the first transfer of a delivery.
Called from sessions.py, links.py and settlement.py. May touch: the state records.

What a receiver "has seen" (2.7.4), proven only:
- its attach answered the sender's (it came after the sender's attach in the trace, the
  establishing sequence of 2.6.3; two attaches of one name crossing on the wire would
  look the same, which no peer answering a link does), also when the sender's detach or
  end came in between (a crossing: the link is kept until both ends attached and
  detached, links.py), or it provably read that far (`Checker.proven`);
- a flow of its session whose next-incoming-id is past a transfer frame of the link ("the
  expected transfer-id of the next incoming transfer frame", 2.7.4), or its disposition of
  a delivery of the link: it read that transfer, so the attach and every frame the sender
  sent before it. Its delivery-count then is at least the sender's before that delivery
  (aborted deliveries not counted: the spec leaves open whether they count).
A receiver's delivery-count is behind when it is below (serial arithmetic, 2.8.9 / RFC 1982)
one of these known values: the sender's initial-delivery-count once the attach was seen,
a delivery-count the sender stated in a flow the receiver provably read, the count before
a delivery it provably read, its own earlier delivery-count (unless aborted deliveries or
a regressed sender make the counts the spec leaves open). Transfers still in flight only
raise the sender's count, never these floors, so they cannot make a receiver look behind.
Ahead of the sender is `link.credit.receiver-delivery-count-ahead` (links.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.origins import other
from amqpspec.amqp10.serial import HALF, MASK, serial_lt

if TYPE_CHECKING:
    from amqpspec.amqp10.checker.core import Checker
    from amqpspec.amqp10.checker.state import Link, LinkEnd, SessionEnd

_LINK_FIELDS = ("delivery_count", "link_credit", "available")

# the rules of this module that judge a frame by its own fields alone (and, for a receiver's
# flow, the sender's attach it answered: a fact no later frame undoes), so no frame of the
# other peer sent meanwhile (a detach, an end, a close still unread) can excuse it. Not here:
# receiver-delivery-count-before-attach and -behind, and first-frame-message-format, which
# rest on link and delivery state that such a frame changes in the checker's view
FRAME_CONTENT_RULES = frozenset(
    {
        "link.attach.initial-delivery-count",
        "link.attach.unsettled-null-key",
        "link.flow.receiver-delivery-count-missing",
        "link.flow.sender-delivery-count-missing",
        "session.flow.link-fields",
    }
)


class FieldRules:
    # --- attach (2.7.3) -------------------------------------------------------------------
    def _attach_fields(self: Checker, origin: str, attach: Any, idx: int) -> None:
        if not attach.role and attach.initial_delivery_count is None:
            self._report(
                "link.attach.initial-delivery-count",
                idx,
                origin,
                f"attach of {attach.name!r} as sender without initial-delivery-count",
            )
        unsettled = attach.unsettled
        if isinstance(unsettled, dict) and None in unsettled:
            self._report(
                "link.attach.unsettled-null-key",
                idx,
                origin,
                f"attach of {attach.name!r} with a null key in its unsettled map",
            )

    # --- flow (2.7.4) ---------------------------------------------------------------------
    def _session_flow_fields(self: Checker, origin: str, flow: Any, idx: int) -> None:
        """A flow without handle: delivery-count, link-credit, available and drain
        ("When the handle field is not set, this field MUST NOT be set"). drain false
        decodes like an absent drain: only drain true is certainly set."""
        present = [
            name.replace("_", "-") for name in _LINK_FIELDS if getattr(flow, name) is not None
        ]
        if flow.drain:
            present.append("drain")
        if present:
            self._report(
                "session.flow.link-fields",
                idx,
                origin,
                f"flow without handle sets {', '.join(present)}",
            )

    def _sender_count_missing(self: Checker, origin: str, link: Link, idx: int) -> None:
        self._report(
            "link.flow.sender-delivery-count-missing",
            idx,
            origin,
            f"sender's flow on link {link.name!r} without delivery-count",
        )

    def _receiver_count(self: Checker, origin: str, link: Link, flow: Any, idx: int) -> None:
        """2.7.4 delivery-count of a flow from the receiving end `origin` of `link`."""
        count = flow.delivery_count
        sender = link.ends.get(other(origin))
        if sender is None or sender.role:
            if count is not None and sender is None:
                self._report(
                    "link.flow.receiver-delivery-count-before-attach",
                    idx,
                    origin,
                    f"receiver's flow on link {link.name!r} sets delivery-count {count:#x} "
                    f"before the sender's attach",
                )
            return
        if not link.rcv_seen and (
            link.ends[origin].attach_idx > sender.attach_idx
            or self.proven[origin] >= sender.attach_idx
        ):
            link.rcv_seen = True
        if count is None:
            if link.rcv_seen:
                self._report(
                    "link.flow.receiver-delivery-count-missing",
                    idx,
                    origin,
                    f"receiver's flow on link {link.name!r} without delivery-count, after "
                    f"the sender's attach (frame {sender.attach_idx}, initial-delivery-count "
                    f"{_hex(sender.attach.initial_delivery_count)}) "
                    f"{self._seen_how(link, origin, sender)}",
                )
            return
        floor = self._receiver_floor(origin, link, sender)
        if floor is not None and serial_lt(count, floor[0]):
            self._report(
                "link.flow.receiver-delivery-count-behind",
                idx,
                origin,
                f"receiver's flow on link {link.name!r} sets delivery-count {count:#x}, "
                f"behind {floor[0]:#x}: {_why(floor)}",
            )
            return
        tracked = link.delivery_count
        if not link.irregular and (tracked is None or not serial_lt(tracked, count)):
            _raise_floor(link, (count, ("own", idx)))

    def _seen_how(self: Checker, link: Link, origin: str, sender: LinkEnd) -> str:
        own = link.ends[origin].attach_idx
        if own > sender.attach_idx:
            return f"that its attach (frame {own}) answered"
        return "that it provably read"

    def _receiver_floor(
        self: Checker, origin: str, link: Link, sender: LinkEnd
    ) -> tuple[int, tuple] | None:
        """The highest value of the sender's delivery-count the receiver provably knows:
        (value, how we know it; `_why` words it)."""
        best = link.rcv_floor
        initial = sender.attach.initial_delivery_count
        if link.rcv_seen and initial is not None:
            best = _higher(best, (initial, ("initial", sender.attach_idx)))
        stated = link.stated
        if stated is not None and self.proven[origin] >= stated[0]:
            best = _higher(best, (stated[1], ("stated", stated[0])))
        return best

    def _sender_stated(self: Checker, link: Link, count: int, idx: int, regressed: bool) -> None:
        """The sender's flow stated `count`; a regressed count leaves every floor open."""
        if regressed:
            link.irregular = True
            link.rcv_floor = None
            link.stated = None
        else:
            link.stated = (idx, count)

    # --- proofs of reading (see the module header) --------------------------------------
    def _incoming_read(self: Checker, origin: str, end: SessionEnd, next_id: int, idx: int):
        """`origin`'s flow says next-incoming-id `next_id`: it read every transfer frame
        its peer sent on the session before that transfer-id."""
        sent_by = end.session.ends.get(other(origin))
        if sent_by is None or not sent_by.started:
            return
        started = sent_by.started
        newest = started[-1]
        if sent_by.started_link is not None and 0 < ((next_id - newest[0]) & MASK) < HALF:
            started.clear()  # one link, every delivery read: the newest is what counts
            self._delivery_read(origin, newest, ("incoming", idx, newest[0]))
            return
        last = None
        while started:
            entry = started[0]
            if not 0 < ((next_id - entry[0]) & MASK) < HALF:  # serial_lt inlined
                break
            started.popleft()
            if last is not None and last[2] is not entry[2]:
                self._delivery_read(origin, last, ("incoming", idx, last[0]))
            last = entry
        if last is not None:
            self._delivery_read(origin, last, ("incoming", idx, last[0]))

    def _disposition_read(self: Checker, origin: str, sent_by: SessionEnd, last: int, idx: int):
        """`origin` (role receiver) disposed of deliveries up to `last` that `sent_by` sent
        (the range is known: settlement.py checked it): it read the transfer of `last`, so
        every delivery begun before it (delivery-ids rise in the order deliveries begin)."""
        started = sent_by.started
        if not started:
            return
        newest = started[-1]
        if sent_by.started_link is not None and newest[1] == last:
            started.clear()  # one link, the newest delivery disposed of
            self._delivery_read(origin, newest, ("disposition", idx, last))
            return
        read = None
        while started:
            entry = started[0]
            delivery_id = entry[1]
            if delivery_id is None or 0 < ((delivery_id - last) & MASK) < HALF:
                break  # serial_lt(last, delivery_id) inlined: not read yet
            started.popleft()
            if read is not None and read[2] is not entry[2]:
                self._delivery_read(origin, read, ("disposition", idx, last))
            read = entry
        if read is not None:
            self._delivery_read(origin, read, ("disposition", idx, last))

    def _delivery_read(self: Checker, origin: str, entry: tuple, how: tuple) -> None:
        """`origin` read the delivery of `entry` and every one before it: the latest per
        link is what counts (a link's floors only rise in the order deliveries begin)."""
        _transfer_id, _delivery_id, link, floor = entry
        if id(link) not in self._links:
            return
        mine = link.ends.get(origin)
        if mine is None or not mine.role or mine.detached:
            return
        link.rcv_seen = True
        _raise_floor(link, (floor, how))

    # --- transfer (2.7.5) -----------------------------------------------------------------
    def _first_frame_format(self: Checker, origin: str, transfer: Any, idx: int) -> None:
        if transfer.message_format is None:
            self._report(
                "link.transfer.first-frame-message-format",
                idx,
                origin,
                f"first transfer of a delivery on handle {transfer.handle} without message-format",
            )


def _hex(value: int | None) -> str:
    return "unset" if value is None else f"{value:#x}"


def _why(floor: tuple[int, tuple]) -> str:
    """How we know the receiver knew `floor`'s value (the reason of a violation)."""
    value, how = floor
    kind = how[0]
    if kind == "initial":
        return f"the sender's initial-delivery-count (attach frame {how[1]})"
    if kind == "stated":
        return f"the sender's flow of frame {how[1]}, which the receiver provably read"
    if kind == "own":
        return f"its own flow of frame {how[1]} said {value:#x}"
    if kind == "incoming":
        return (
            f"its flow of frame {how[1]} has next-incoming-id past transfer-id {how[2]:#x}, "
            f"a delivery the sender began at delivery-count {value:#x}"
        )
    return (
        f"its disposition of frame {how[1]} names delivery-id {how[2]:#x}: it read the "
        f"deliveries begun up to delivery-count {value:#x}"
    )


def _higher(a: tuple[int, tuple] | None, b: tuple[int, tuple]) -> tuple[int, tuple]:
    return b if a is None or serial_lt(a[0], b[0]) else a


def _raise_floor(link: Link, floor: tuple[int, tuple]) -> None:
    link.rcv_floor = _higher(link.rcv_floor, floor)
