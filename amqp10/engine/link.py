"""The link endpoint (2.6): transfers in and out, multi-frame reassembly, settlement
modes; the hub that composes the link's parts.

Owns: one link's state machine (LINK_TABLE), its 2.6.7 state (delivery-count,
link-credit, available, drain: the transfer paths use up the credit), its transfer
reassembler, `send()` with its fast lane and the receiver's transfer checks (credit,
max-message-size, delivery-id and tag). Its parts, each in a module of its own:
link_lifecycle.py (attach, detach, link errors, the terminus check) and link_credit.py
(grants, drain, available, echo, flow frames). May touch: its Session through the
documented engine methods (`write_transfer`, `next_delivery_id`, `machine`) and the
connection's (`emit`, `check_can_send`, `policy`).

Credit, receiver side: every flow we send grants up to the horizon delivery-count +
link-credit; a new delivery at or past the highest horizon granted is
`amqp:link:transfer-limit-exceeded` (2.6.7). Sender side: the receiver's latest grant fixes
the horizon delivery-count(flow) + link-credit(flow); `send()` refuses a delivery without
credit (UsageError). A sender whose credit is kept by the application (a broker queue,
RabbitMQ's credit API v2) copies its state in with `set_flow_state()` (link_credit.py).

Echo (2.7.4): with the connection's `policy.auto_echo` (default) a flow with echo=true is
answered with our flow state at once, or, when it arrives before our attach (ATTACH_RCVD),
right after our attach. With auto_echo off the application answers it
(`send_flow_state()`), so it can also decline to (fault injection).

`send()` is hot (one call per message sent): local bindings, serial arithmetic with
amqp10.serial's MASK, no call layer added (docs/engine.md, "Changing a rule").
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import Attach, Detach, Flow, Transfer
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.link_credit import LinkCredit
from amqpspec.amqp10.engine.link_lifecycle import LinkLifecycle
from amqpspec.amqp10.engine.transitions import (
    DISCARD,
    ConnState,
    LinkInput,
    LinkState,
    SessInput,
    SessState,
    UsageError,
    link_machine,
)
from amqpspec.amqp10.errors import ErrorKind, ProtocolError
from amqpspec.amqp10.frames import MAX_FAST_TAG, Frame, encode_transfer_frame
from amqpspec.amqp10.message import TransferAssembler
from amqpspec.amqp10.serial import HALF
from amqpspec.amqp10.serial import MASK as SERIAL_MASK
from amqpspec.amqp10.spec import Cond, Role, SndSettleMode

if TYPE_CHECKING:
    from amqpspec.amqp10.engine.session import Session

# send()'s fast lane states as plain constants (an Enum member lookup costs several times more)
_OPENED = ConnState.OPENED
_MAPPED = SessState.MAPPED
_ATTACHED = LinkState.ATTACHED
_TAG = struct.Struct(">I")


class Link(LinkLifecycle, LinkCredit):
    """One link endpoint. `role` is ours: Role.SENDER (False) or Role.RECEIVER (True)."""

    def __init__(
        self,
        session: Session,
        name: str,
        role: bool,
        source: Any,
        target: Any,
        snd_settle_mode: int | None,
        rcv_settle_mode: int | None,
    ) -> None:
        self.session = session
        self.name = name
        self.role = role
        self.source = source
        self.target = target
        self.snd_settle_mode = snd_settle_mode
        self.rcv_settle_mode = rcv_settle_mode
        self.max_message_size: int | None = None
        self.machine = link_machine()
        self.machine.visited = session.connection.transitions
        self.handle: int | None = None
        self.remote_handle: int | None = None
        self.remote_attach: Attach | None = None
        self.remote_detach: Detach | None = None
        # 2.6.7 flow-control state
        self.initial_delivery_count: int | None = None
        self.delivery_count: int | None = None  # a receiver learns it from the attach
        self.link_credit = 0
        self.available = 0
        self.drain = False
        self.granted_horizon: int | None = None  # receiver: highest dc + credit granted
        self._latest_horizon: int | None = None  # receiver: dc + credit of the last grant
        self._last_flow: Flow | None = None  # sender: the receiver's latest flow
        self._credit_horizon: int | None = None  # sender: dc + credit of the latest grant
        self._echo_owed = False  # an echo arrived before our attach (auto_echo)
        self.assembler = TransferAssembler()
        self.frames_in_delivery = 0
        self.sending_more = False  # a crafted multi-frame delivery is under way (crafted.py)
        self.bytes_in_delivery = 0

    @property
    def state(self) -> LinkState:
        return self.machine.state

    @property
    def is_sender(self) -> bool:
        return self.role is Role.SENDER or self.role == Role.SENDER

    def __repr__(self) -> str:
        role = "sender" if self.is_sender else "receiver"
        return f"<Link {self.name!r} {role} handle={self.handle} {self.state.value}>"

    def _check(self, link_input: LinkInput, session_input: SessInput) -> None:
        """Refuse before any side effect: the connection, session and link tables must
        all allow the frame (UsageError otherwise)."""
        self.session.connection.check_can_send()
        self.session.machine.refuse_unless(session_input)
        self.machine.refuse_unless(link_input)

    # --- transfers --------------------------------------------------------------------

    def send(
        self,
        payload: bytes,
        delivery_tag: bytes | None = None,
        settled: bool | None = None,
        message_format: int = 0,
        *,
        state: Any = None,
        batchable: bool = False,
        resume: bool = False,
    ) -> int:
        """Send one delivery (split at the peer's max-frame-size, 2.6.14); returns its
        delivery-id. Needs link-credit (2.6.7) unless the policy's check_credit is off.
        `settled` defaults from snd-settle-mode. `resume`: a delivery of a resumed link sent
        again under its old tag (2.6.13: "The resume flag ... MUST be set to true")."""
        if self.role != Role.SENDER:  # not is_sender
            raise UsageError("send() on a receiving link")
        session = self.session
        connection = session.connection
        # the fast lane: in these states SEND_FRAME / SEND_TRANSFER are the tables'
        # self-loops, so the checks and transitions below are skipped (connection.py)
        lane = connection.fast_lanes and connection.machine.state is _OPENED
        lane = lane and session.machine.state is _MAPPED and self.machine.state is _ATTACHED
        if not lane:
            self._check(LinkInput.SEND_TRANSFER, SessInput.SEND_TRANSFER)
        # 2.6.7: no transfer without credit
        if self.link_credit <= 0 and connection.policy.check_credit:
            raise UsageError(f"no link-credit on {self.name!r}")
        settled = self._checked_delivery(settled, payload)
        delivery_id = session.next_delivery_id  # the session's, 2.7.5
        session.next_delivery_id = (delivery_id + 1) & SERIAL_MASK
        if delivery_tag is None:
            delivery_tag = _TAG.pack(delivery_id)
        frame = transfer = None
        plain = state is None and not batchable and not resume and type(delivery_tag) is bytes
        plain = plain and len(delivery_tag) <= MAX_FAST_TAG and type(message_format) is int
        if plain and 0 <= message_format <= 0xFFFFFFFF:  # one frame, without a Transfer object
            frame = encode_transfer_frame(
                session.channel,
                self.handle,
                delivery_id,
                delivery_tag,
                message_format,
                settled,
                payload,
            )
            if len(frame) > connection.remote_max_frame_size:
                frame = None  # 2.6.14: split, from the Transfer
        if frame is None:
            transfer = self._transfer(
                delivery_id, delivery_tag, message_format, settled, state, batchable, resume
            )
        if not lane:
            self.machine.process(LinkInput.SEND_TRANSFER)
        session.write_transfer(transfer, payload, frame, lane, self)
        # 2.6.7: each delivery advances delivery-count and uses one credit
        self.delivery_count = (self.delivery_count + 1) & SERIAL_MASK  # serial_add(..., 1)
        if self.link_credit > 0:
            self.link_credit -= 1
        return delivery_id

    def _transfer(self, delivery_id: int, tag: Any, *fields: Any) -> Transfer:
        """The Transfer of a delivery the one-frame encoding does not take (send()):
        `fields` are message-format, settled, state, batchable, resume."""
        message_format, settled, state, batchable, resume = fields
        return Transfer(
            handle=self.handle,
            delivery_id=delivery_id,
            delivery_tag=tag,
            message_format=message_format,
            settled=settled,
            state=state,
            batchable=batchable,
            resume=resume or None,
        )

    def _checked_delivery(self, settled: bool | None, payload: bytes) -> bool:
        """send()'s refusals before anything changes: the settled flag against
        snd-settle-mode (2.8.2) and the peer's max-message-size (2.7.3). Returns the flag."""
        mode = self.snd_settle_mode
        if settled is None:
            settled = mode == SndSettleMode.SETTLED
        elif mode == SndSettleMode.SETTLED and not settled:
            raise UsageError("snd-settle-mode settled: every delivery is sent settled (2.8.2)")
        elif mode == SndSettleMode.UNSETTLED and settled:
            raise UsageError("snd-settle-mode unsettled: deliveries are sent unsettled (2.8.2)")
        limit = self.remote_attach.max_message_size if self.remote_attach else None
        if limit and len(payload) > limit:
            raise UsageError(f"{len(payload)} bytes > the peer's max-message-size {limit} (2.7.3)")
        return settled

    def disposition(
        self,
        first: int,
        last: int | None = None,
        settled: bool = False,
        state: Any = None,
        batchable: bool = False,
    ) -> None:
        """A disposition with our role for delivery-ids first..last (2.7.6)."""
        self.session.disposition(self.role, first, last, settled, state, batchable)

    def receive_transfer(self, frame: Frame) -> None:
        try:
            if self.machine.process(LinkInput.RECV_TRANSFER) == DISCARD:
                return
            self._accept_transfer(frame)
        except ProtocolError as exc:
            if exc.scope != "link":
                raise
            self.fail(exc)

    def _accept_transfer(self, frame: Frame) -> None:
        transfer: Transfer = frame.performative
        if self.is_sender:
            raise ProtocolError(
                Cond.ILLEGAL_STATE,
                "transfer sent to a sender",
                "link",
                ErrorKind.TRANSFER_TO_SENDER,
                performative="transfer",
            )
        starting = not self.assembler.in_progress
        if starting:
            self._first_frame(transfer)
            self.bytes_in_delivery = 0
        self.frames_in_delivery += 1
        self.bytes_in_delivery += len(frame.payload)
        if self.max_message_size and self.bytes_in_delivery > self.max_message_size:
            raise ProtocolError(  # 2.7.3 max-message-size: ours, as we attached with it
                Cond.MESSAGE_SIZE_EXCEEDED,
                f"delivery larger than max-message-size {self.max_message_size}",
                "link",
                ErrorKind.MESSAGE_SIZE_EXCEEDED,
                performative="transfer",
                declared=self.bytes_in_delivery,
                limit=self.max_message_size,
            )
        if starting and not transfer.more and not transfer.aborted:
            first, payload = transfer, frame.payload  # a whole delivery in one frame
        else:
            done = self.assembler.feed(transfer, frame.payload)
            if done is None:
                return
            first, payload = done
        frames, self.frames_in_delivery = self.frames_in_delivery, 0
        emit = self.session.connection.emit
        if transfer.aborted:  # 2.6.14: an aborted delivery is discarded
            emit(ev.DeliveryAborted(self, first.delivery_id, first.delivery_tag))
            return
        settled = bool(first.settled or transfer.settled)
        state = transfer.state if transfer.state is not None else first.state
        emit(
            ev.TransferReceived(
                self,
                first.delivery_id,
                first.delivery_tag,
                payload,
                settled,
                state,
                first.message_format or 0,
                frames,
                bool(first.resume),
            )
        )

    def _first_frame(self, transfer: Transfer) -> None:
        """2.7.5: the first frame of a delivery names it; 2.6.7: it takes one credit."""
        if transfer.delivery_id is None or transfer.delivery_tag is None:
            raise ProtocolError(
                Cond.INVALID_FIELD,
                "first transfer of a delivery without id or tag",
                "link",
                ErrorKind.DELIVERY_WITHOUT_ID,
                performative="transfer",
            )
        horizon = self.granted_horizon  # no credit: serial_ge(delivery-count, horizon), inlined
        if horizon is None or not 0 < ((horizon - self.delivery_count) & SERIAL_MASK) <= HALF:
            raise ProtocolError(
                Cond.TRANSFER_LIMIT_EXCEEDED,
                f"delivery {transfer.delivery_id} with no link-credit",
                "link",
                ErrorKind.NO_LINK_CREDIT,
                performative="transfer",
            )
        self.delivery_count = (self.delivery_count + 1) & SERIAL_MASK  # serial_add(..., 1)
        self.link_credit = max(0, self.link_credit - 1)
