"""Link rules (2.6, 2.7.3-2.7.7): lifecycle, link credit with exact horizons, drain, echo,
settle modes on transfers (the time-based link rules: liveness.py).

Owns: `LinkRules`, the checker mixin for attach, detach and the link half of flow and
transfer. Credit verdicts come from `Horizons` (see horizons.py for the algorithm).
May touch: the state records.

Counting (2.6.7): delivery-count counts deliveries, not frames: only the first transfer
frame of a delivery is checked against credit and counted (azure-uamqp-c PR #383).
Aborted deliveries are counted leniently: the spec leaves open whether they consume
credit, so they are not counted for the credit verdict but are for the receiver's
delivery-count bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.checker.horizons import horizon_of
from amqpspec.amqp10.checker.state import Link, LinkEnd, Peer, SessionEnd
from amqpspec.amqp10.origins import other
from amqpspec.amqp10.serial import MASK, serial_add, serial_lt
from amqpspec.amqp10.spec import RcvSettleMode, SndSettleMode

if TYPE_CHECKING:
    from amqpspec.amqp10.checker.core import Checker
    from amqpspec.amqp10.frames import Frame


class LinkRules:
    # --- lifecycle ----------------------------------------------------------------------
    def _on_attach(self: Checker, origin: str, peer: Peer, frame: Frame, idx: int, time: Any):
        end = self._session_end(origin, peer, frame, idx)
        if end is None:
            return
        attach = frame.performative
        handle = attach.handle
        session = end.session
        self._attach_fields(origin, attach, idx)
        partner_end = session.ends.get(other(origin))
        if partner_end is not None and handle > partner_end.begin.handle_max:
            self._report(
                "link.attach.handle-max",
                idx,
                origin,
                f"attach on handle {handle}, partner's handle-max is "
                f"{partner_end.begin.handle_max}",
            )
        if handle in end.handles:
            self._report(
                "link.attach.handle-in-use",
                idx,
                origin,
                f"attach of {attach.name!r} on handle {handle}, in use by "
                f"{end.handles[handle].name!r}",
            )
            return
        sending = other(origin) if attach.role else origin  # the link's direction (2.6.1)
        key = (attach.name, sending)
        link = _first_joined(session.links.get(key), origin)
        if link is None:
            mirror = _first_joined(session.links.get((attach.name, other(sending))), origin)
            if mirror is not None:  # the peer's attach of this name, in the same role
                link = mirror
                remote = next(iter(link.ends.values()))
                role = "receiver" if attach.role else "sender"
                self._report(
                    "link.attach.role",
                    idx,
                    origin,
                    f"attach of {attach.name!r} as {role}, and the peer's attach (frame "
                    f"{remote.attach_idx}) is a {role} too",
                )
            else:
                link = Link(attach.name)
                session.links.setdefault(key, []).append(link)
                self._links[id(link)] = link
        link.ends[origin] = LinkEnd(attach, idx)
        end.handles[handle] = link
        end.detached_handles.discard(handle)
        if not attach.role:  # the sender's attach starts its delivery-count
            initial = attach.initial_delivery_count or 0
            link.delivery_count = initial
            for grant_idx, flow, _ in link.pending_flows:
                link.grants.grant(
                    grant_idx, horizon_of(initial, flow.link_credit), flow.link_credit, flow.drain
                )
            link.pending_flows.clear()

    def _link_of(
        self: Checker, origin: str, end: SessionEnd, handle: int, idx: int, what: str
    ) -> Link | None:
        link = end.handles.get(handle)
        if link is not None:
            return link
        if handle in end.detached_handles:
            self._report(
                "link.frame-after-detach",
                idx,
                origin,
                f"{what} on handle {handle} after this peer detached it",
            )
        else:
            self._report(
                "link.unattached-handle",
                idx,
                origin,
                f"{what} on handle {handle}, which this peer has not attached",
            )
        return None

    def _on_detach(self: Checker, origin: str, peer: Peer, frame: Frame, idx: int, time: Any):
        end = self._session_end(origin, peer, frame, idx)
        if end is None:
            return
        handle = frame.performative.handle
        link = self._link_of(origin, end, handle, idx, "detach")
        if link is None:
            return
        del end.handles[handle]
        end.detached_handles.add(handle)
        self._end_detached(end.session, link, origin)

    def _end_detached(self: Checker, session: Any, link: Link, origin: str) -> None:
        """`origin`'s end of `link` detached (its detach or end, 2.7.7, 2.7.8): a drain or
        echo request is owed no more. The link is forgotten once both ends attached and
        detached. An attach not yet answered stays answerable: "On receipt of the attach,
        the remote Session Endpoint creates a corresponding Link Endpoint [...] and an
        attach Frame is issued" (2.6.3), also when the detach or end crossed that answer,
        and the answering receiver's flow sets delivery-count, having seen the sender's
        attach (2.7.4, fields.py)."""
        link.ends[origin].detached = True
        link.drain_pending = None
        link.echo_pending.clear()
        if len(link.ends) == 2 and all(e.detached for e in link.ends.values()):
            self._forget_link(session, link)

    def _forget_link(self: Checker, session: Any, link: Link) -> None:
        """Both ends detached, or the session ended at both ends: the link's state can go
        (the name may be attached anew)."""
        self._links.pop(id(link), None)
        for key, links in list(session.links.items()):
            if link in links:
                links.remove(link)
                if not links:
                    del session.links[key]

    # --- flow (2.6.7, 2.7.4) ------------------------------------------------------------
    def _link_flow(self: Checker, origin: str, end: SessionEnd, flow: Any, idx: int, time: Any):
        link = self._link_of(origin, end, flow.handle, idx, "flow")
        if link is None:
            return
        link.echo_pending.pop(origin, None)  # any flow of ours answers a pending echo
        if flow.echo and _attached(link, other(origin)):
            link.echo_pending[other(origin)] = (idx, time)
        if link.ends[origin].role:
            self._receiver_flow(origin, link, flow, idx, time)
        else:
            self._sender_flow(origin, link, flow, idx, time)

    def _receiver_flow(self: Checker, origin: str, link: Link, flow: Any, idx: int, time: Any):
        self._receiver_count(origin, link, flow, idx)
        credit = flow.link_credit
        if credit is None:
            return  # no grant in this flow
        sender_count = link.delivery_count
        count = flow.delivery_count
        if count is not None and sender_count is not None:
            seen = serial_add(sender_count, 0)
            if serial_lt(seen, count):
                self._report(
                    "link.credit.receiver-delivery-count-ahead",
                    idx,
                    origin,
                    f"receiver's delivery-count {count:#x} on link {link.name!r} is ahead of "
                    f"the sender's {seen:#x}",
                )
        if count is None:
            if sender_count is None:  # the sender's attach is not in yet
                link.pending_flows.append((idx, flow, time))
                return
            sender_end = link.ends.get(other(origin))
            count = sender_end.attach.initial_delivery_count or 0 if sender_end else 0
        grants = link.grants
        lenient = self._lenient_count(link)
        was_outstanding = grants.last is not None and serial_lt(lenient, grants.last.horizon)
        horizon = horizon_of(count, credit)
        grants.grant(idx, horizon, credit, bool(flow.drain))
        if flow.drain:
            link.drain_grants.append(idx)
            # A reply is owed when there is credit to drain (2.6.7), by a sender still attached.
            owed = serial_lt(lenient, horizon) and _attached(link, other(origin))
            link.drain_pending = (idx, horizon, time) if owed else None
        else:
            link.drain_pending = None
        if not was_outstanding and serial_lt(lenient, horizon):
            link.progress_time = time
            link.stall_reported = False

    def _sender_flow(self: Checker, origin: str, link: Link, flow: Any, idx: int, time: Any):
        link.drain_pending = None  # the sender sent its state: the drain got its reply
        count = flow.delivery_count
        if flow.available is not None:
            if not link.available and flow.available > 0:
                link.progress_time = time
                link.stall_reported = False
            link.available = flow.available
        if count is None:
            self._sender_count_missing(origin, link, idx)
            return
        tracked = self._lenient_count(link)
        regressed = link.delivery_count is not None and serial_lt(count, tracked)
        self._sender_stated(link, count, idx, regressed)
        if regressed:
            self._report(
                "link.credit.sender-delivery-count-regressed",
                idx,
                origin,
                f"sender's delivery-count {count:#x} on link {link.name!r} is behind the "
                f"{tracked:#x} deliveries it sent",
            )
        # A regressed count is the sender's violation (above); its flow cannot take back
        # what it sent, so the receiver is still judged against the count it had learned.
        link.delivery_count = tracked if regressed else count
        link.aborted = 0
        credit = flow.link_credit
        if not credit and not (credit == 0 and flow.drain):
            return
        # The horizon the sender states names the receiver grant it applied (a proof).
        # Positive credit is exact. Zero credit is exact only for a drain reply: a sender
        # with credit used up (or overdrawn and clamped to 0) names no grant by it, and a
        # sender zeroing its credit (fe2o3-amqp#264) proves nothing and sets nothing.
        grant_idx = link.grants.earliest_with(horizon_of(count, credit))
        if grant_idx is None:
            return
        if credit == 0:
            if grant_idx not in link.drain_grants:
                return
            link.drain_done = grant_idx
        self._prove(origin, grant_idx)

    # --- transfer (2.6.7, 2.7.5, 2.8.2, 2.8.3) -----------------------------------------
    @staticmethod
    def _lenient_count(link: Link) -> int:
        count = link.delivery_count or 0
        return serial_add(count, -link.aborted) if link.aborted else count

    def _link_transfer(self: Checker, origin: str, end: SessionEnd, frame: Frame, idx: int, time):
        transfer = frame.performative
        link = self._link_of(origin, end, transfer.handle, idx, "transfer")
        if link is None:
            return
        sender = link.ends[origin]
        if sender.role:
            self._report(
                "link.transfer.wrong-role",
                idx,
                origin,
                f"transfer on handle {transfer.handle}, attached as receiver of {link.name!r}",
            )
            return
        if link.in_delivery:
            self._continuation(origin, end, link, sender, transfer, idx)
            return
        delivery_id = transfer.delivery_id
        if delivery_id is None or transfer.delivery_tag is None:
            missing = "delivery-id" if delivery_id is None else "delivery-tag"
            self._report(
                "link.transfer.first-frame-fields",
                idx,
                origin,
                f"first transfer of a delivery on handle {transfer.handle} without {missing}",
            )
        self._first_frame_format(origin, transfer, idx)
        self._check_credit(origin, link, transfer, idx)
        floor = self._lenient_count(link)  # the count before this delivery (fields.py)
        link.delivered(time)
        end.began((end.next_outgoing_id - 1) & MASK, delivery_id, link, floor)
        if delivery_id is not None:
            end.deliveries.sent(delivery_id, transfer.settled)
        self._check_rcv_settle_mode(origin, link, transfer, idx)
        link.delivery_id = delivery_id
        link.delivery_settled = bool(transfer.settled)
        if transfer.settled:
            link.settled_idx = idx
        if transfer.aborted:
            link.aborted += 1
            link.irregular = True
        elif transfer.more:
            link.in_delivery = True
        else:
            self._delivery_complete(origin, link, sender, idx)

    def _continuation(self: Checker, origin, end, link: Link, sender: LinkEnd, transfer, idx):
        if transfer.delivery_id is not None and transfer.delivery_id != link.delivery_id:
            self._report(
                "link.transfer.first-frame-fields",
                idx,
                origin,
                f"continuation transfer with delivery-id {transfer.delivery_id:#x}, the "
                f"delivery is {link.delivery_id!s}",
            )
        if transfer.settled:
            if not link.delivery_settled:
                link.settled_idx = idx
            link.delivery_settled = True
            if link.delivery_id is not None:
                end.deliveries.settle(link.delivery_id, "transfer")
        self._check_rcv_settle_mode(origin, link, transfer, idx)
        if transfer.aborted:
            link.in_delivery = False
            link.aborted += 1
            link.irregular = True
        elif not transfer.more:
            link.in_delivery = False
            self._delivery_complete(origin, link, sender, idx)

    def _delivery_complete(self: Checker, origin: str, link: Link, sender: LinkEnd, idx: int):
        """A delivery fully transferred, not aborted (2.7.5 settled: the settle mode rules
        hold "unless the delivery is aborted", so they are judged here)."""
        mode = sender.attach.snd_settle_mode
        if mode == SndSettleMode.SETTLED and not link.delivery_settled:
            self._report(
                "settlement.snd-settle-mode",
                idx,
                origin,
                f"unsettled delivery on {link.name!r}, whose snd-settle-mode is settled",
            )
        elif mode == SndSettleMode.UNSETTLED and link.delivery_settled:
            self._report(
                "settlement.snd-settle-mode",
                link.settled_idx if link.settled_idx >= 0 else idx,
                origin,
                f"settled transfer on {link.name!r}, whose snd-settle-mode is unsettled",
            )

    def _check_rcv_settle_mode(self: Checker, origin: str, link: Link, transfer: Any, idx: int):
        if transfer.rcv_settle_mode != RcvSettleMode.SECOND:
            return
        receiver = link.ends.get(other(origin))
        if receiver is not None and receiver.attach.rcv_settle_mode == RcvSettleMode.FIRST:
            self._report(
                "settlement.rcv-settle-mode",
                idx,
                origin,
                f"transfer with rcv-settle-mode second on {link.name!r}, negotiated first",
            )

    def _check_credit(self: Checker, origin: str, link: Link, transfer: Any, idx: int) -> None:
        grants = link.grants
        grants.prove(self.proven[origin])
        number = self._lenient_count(link)
        if not grants.beyond_every(number):
            return
        best = grants.best()
        last = grants.last
        did = transfer.delivery_id
        what = f"transfer delivery-id {did:#x}" if did is not None else "transfer"
        if best is None:
            self._report(
                "link.credit.transfer-without-credit",
                idx,
                origin,
                f"{what} on handle {transfer.handle} before the receiver granted any credit",
            )
        elif last is not None and link.drain_done >= 0 and last.idx == link.drain_done:
            self._report(
                "link.drain.transfer-after-drain",
                idx,
                origin,
                f"{what} on handle {transfer.handle} after the drain of frame "
                f"{link.drain_done} completed, no credit granted since",
            )
        elif best.credit == 0:
            self._report(
                "link.credit.transfer-without-credit",
                idx,
                origin,
                f"{what} on handle {transfer.handle}: every grant is zero credit "
                f"(horizon {best.horizon:#x} from frame {best.idx})",
            )
        else:
            self._report(
                "link.credit.transfer-beyond-credit",
                idx,
                origin,
                f"{what} on handle {transfer.handle} beyond every credit granted "
                f"(horizon {best.horizon:#x} from frame {best.idx})",
            )


def _first_joined(links: list[Link] | None, origin: str) -> Link | None:
    """The oldest of `links` that `origin`'s attach answers (see `_joins`), if any."""
    return next((link for link in links or () if _joins(link, origin)), None)


def _joins(link: Link | None, origin: str) -> bool:
    """`origin`'s attach answers `link`: the peer attached it, `origin` not yet. The peer
    may have detached or ended since: its attach is answered all the same (2.6.3; see
    `LinkRules._end_detached`)."""
    return link is not None and bool(link.ends) and origin not in link.ends


def _attached(link: Link, origin: str) -> bool:
    """`origin`'s end of `link` has not detached (or has not attached yet): a request
    (drain, echo) is owed an answer only by an attached end."""
    end = link.ends.get(origin)
    return end is None or not end.detached
