"""The checker's fast lane: the common flow, transfer and disposition frames, same verdicts.

Owns: `FastLane`, a checker mixin.
- `_fast_frame` takes a flow, transfer or disposition whose framing rules pass (AMQP layer
  open, no idle timeout 2.4.5, frame shape and size within the partner's max-frame-size
  2.2, 2.3, 2.7.1, mandatory fields present) straight to its rules, skipping the general
  dispatch of `core.py`.
- `_fast_transfer` judges a transfer on a known, attached sending link whose every rule
  passes: first frame of a delivery with delivery-id, delivery-tag and message-format
  (2.7.5), within the session's incoming-window (2.5.6) and the link's credit (2.6.7),
  settle modes kept (2.7.5, 2.8.2, 2.8.3). It first proves that no rule of `sessions.py`
  and `links.py` would report (read-only, apart from the idempotent `Horizons.admits` proof
  bookkeeping the general path does alike), then applies the same state changes, with
  locals and inlined serial arithmetic.
Anything else (a violation to report, a continuation, an abort, a settle mode to check, an
unknown handle) returns False and the caller runs the general rule code from scratch,
which gives every verdict and reason: the lane changes no verdict
(tests/test_checker_fastlane.py runs both over the same frames). May touch: the state
records, as the rule mixins do. Pure; no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.checker.state import Peer
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.serial import MASK
from amqpspec.amqp10.spec import MIN_MAX_FRAME_SIZE, RcvSettleMode, SndSettleMode

if TYPE_CHECKING:
    from amqpspec.amqp10.checker.core import Checker
    from amqpspec.amqp10.frames import Frame

_OTHER = {CLIENT: SERVER, SERVER: CLIENT}
_UNSETTLED = SndSettleMode.UNSETTLED
_SETTLED = SndSettleMode.SETTLED
_SECOND = RcvSettleMode.SECOND


class FastLane:
    def _fast_frame(
        self: Checker,
        origin: str,
        peer: Peer,
        frame: Frame,
        performative: Any,
        mandatory: tuple[str, ...],
        handler: Any,
        time: Any,
        idx: int,
    ) -> bool:
        """core._on_frame's checks of a flow, transfer or disposition, proven silent
        without changing anything, then its rules: `handler` (the general rule code), or
        None for a transfer (`_fast_transfer`). False: not taken, nothing changed."""
        if peer.tls or peer.closed or peer.layer != "amqp" or peer.open is None:
            return False
        partner = self.peers[_OTHER[origin]]
        partner_open = partner.open
        if partner_open is None:
            return False  # core._check_frame_shape's pre-open size rule
        if time is not None and not partner.closed:  # core._check_idle
            timeout_ms = partner_open.idle_time_out
            if timeout_ms:
                last = peer.last_time
                opened = partner.open_time
                start = opened if last is None else last if opened is None else max(last, opened)
                if start is not None and time - start > timeout_ms / 1000:
                    return False
        raw = frame.raw  # core._check_frame_shape
        length = len(raw)
        if length >= 8:
            doff = raw[4]
            if doff < 2 or 4 * doff > length:
                return False
        if frame.type != 0:  # FrameType.AMQP
            return False
        size = frame.size or length
        if size:
            limit = partner_open.max_frame_size
            if limit is not None and size > limit and size > MIN_MAX_FRAME_SIZE:
                return False
        for name in mandatory:  # core._complete
            if getattr(performative, name) is None:
                return False
        if handler is None:
            return self._fast_transfer(origin, peer, frame, performative, time, idx)
        handler(self, origin, peer, frame, idx, time)
        return True

    def _fast_transfer(
        self: Checker, origin: str, peer: Peer, frame: Frame, transfer: Any, time: Any, idx: int
    ) -> bool:
        """Judge a transfer that breaks no rule and apply its state; False: not taken
        (nothing changed), run the general path. Its framing passed `_fast_frame`."""
        handle = transfer.handle
        # --- sessions._on_transfer: the session window -------------------------------------
        end = peer.sessions.get(frame.channel)
        if end is None:
            return False
        transfer_id = end.next_outgoing_id
        receiver = end.session.ends.get(_OTHER[origin])
        proven = self.proven[origin]
        if receiver is not None and not receiver.incoming.admits(transfer_id, proven):
            return False
        # --- links._link_transfer: link, role, first-frame fields, credit, settle modes ----
        link = end.handles.get(handle)
        if link is None or link.in_delivery:
            return False
        sender = link.ends[origin]
        if sender.role:
            return False
        delivery_id = transfer.delivery_id
        if (
            delivery_id is None
            or transfer.delivery_tag is None
            or transfer.message_format is None  # fields._first_frame_format
            or transfer.aborted
        ):
            return False
        count = link.delivery_count or 0
        aborted = link.aborted
        lenient = (count - aborted) & MASK if aborted else count  # links._lenient_count
        if not link.grants.admits(lenient, proven):  # links._check_credit
            return False
        settled = transfer.settled
        mode = sender.attach.snd_settle_mode
        more = transfer.more
        if settled and mode == _UNSETTLED and not more:  # links._delivery_complete
            return False
        if not more and not settled and mode == _SETTLED:  # links._delivery_complete
            return False
        if transfer.rcv_settle_mode == _SECOND:  # links._check_rcv_settle_mode
            return False
        # --- every rule passed: the general path's state changes, in its order ----------
        end.next_outgoing_id = (transfer_id + 1) & MASK  # serial_add
        link.delivered(time)
        started = end.started  # state.SessionEnd.began, inlined
        if link is not end.started_link:
            end.started_link = None if started else link
        started.append((transfer_id, delivery_id, link, lenient))
        end.deliveries.sent(delivery_id, settled)
        link.delivery_id = delivery_id
        link.delivery_settled = bool(settled)
        if settled:
            link.settled_idx = idx
        if more:
            link.in_delivery = True
        return True
