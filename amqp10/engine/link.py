"""The link endpoint (2.6): attach/detach, link credit (2.6.7), transfers in and out,
multi-frame reassembly, settlement modes.

Owns: one link's state (LINK_TABLE), its flow-control state (delivery-count,
link-credit, available, drain) and its transfer reassembler. May touch: its Session (to
send frames, allocate handles and delivery-ids, emit events through the connection).

Credit bookkeeping, receiver side: every flow we send grants up to the horizon
delivery-count + link-credit; a new delivery at or past the highest horizon granted is
`amqp:link:transfer-limit-exceeded` (2.6.7). A lowered grant does not shrink the horizon,
because transfers already in flight against the older grant are legal.

Sender side: the receiver's latest grant fixes the horizon delivery-count(flow) +
link-credit(flow); `send()` refuses a delivery without credit (UsageError). A sender
whose credit is kept by the application (a broker queue, RabbitMQ's credit API v2)
copies its state in with `set_flow_state()`, which refuses state beyond that horizon.

Echo (2.7.4): with the connection's `policy.auto_echo` (default) a flow with echo=true is
answered with our flow state at once, or, when it arrives before our attach (ATTACH_RCVD),
right after our attach. With auto_echo off the application answers it
(`send_flow_state()`), so it can also decline to (fault injection).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import Attach, Coordinator, Detach, Flow, Source, Target, Transfer
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.conditions import as_error
from amqpspec.amqp10.engine.flowcontrol import credit_horizon, sender_link_credit, window_left
from amqpspec.amqp10.engine.transitions import (
    ATTACH_THEN_DETACH,
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
from amqpspec.amqp10.serial import HALF, serial_add, serial_gt, serial_lt, serial_max
from amqpspec.amqp10.serial import MASK as SERIAL_MASK
from amqpspec.amqp10.spec import Cond, Role, SndSettleMode
from amqpspec.amqp10.types import Described

if TYPE_CHECKING:
    from amqpspec.amqp10.composites import Error
    from amqpspec.amqp10.engine.session import Session

_ECHO = object()  # accept(): "answer with the peer's terminus"
# send()'s fast lane states as plain constants (an Enum member lookup costs several times more)
_OPENED = ConnState.OPENED
_MAPPED = SessState.MAPPED
_ATTACHED = LinkState.ATTACHED
_TAG = struct.Struct(">I")


class Link:
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

    # --- attach -------------------------------------------------------------------

    def _check(self, link_input: LinkInput, session_input: SessInput) -> None:
        """Refuse before any side effect: the connection, session and link tables must
        all allow the frame (UsageError otherwise)."""
        self.session.connection.check_can_send()
        self.session.machine.refuse_unless(session_input)
        self.machine.refuse_unless(link_input)

    def attach(self, fields: dict[str, Any]) -> None:
        self._check(LinkInput.SEND_ATTACH, SessInput.SEND_ATTACH)
        self.handle = self.session.allocate_handle(self)
        self.max_message_size = fields.get("max_message_size")
        self.machine.process(LinkInput.SEND_ATTACH)
        self.session.write_attach(self.attach_frame(fields))
        if self.state is LinkState.ATTACH_SENT:
            self.session.await_attach(self)

    def attach_frame(self, fields: dict[str, Any]) -> Attach:
        return Attach(
            name=self.name,
            handle=self.handle,
            role=self.role,
            snd_settle_mode=self.snd_settle_mode,
            rcv_settle_mode=self.rcv_settle_mode,
            source=self.source,
            target=self.target,
            initial_delivery_count=self.initial_delivery_count if self.is_sender else None,
            **fields,
        )

    def accept(
        self,
        source: Any = _ECHO,
        target: Any = _ECHO,
        *,
        snd_settle_mode: int | None = None,
        rcv_settle_mode: int | None = None,
        initial_delivery_count: int = 0,
        **attach_fields: Any,
    ) -> None:
        """Answer the peer's attach (ATTACH_RCVD) with ours (2.6.3). source/target
        default to the peer's; pass None for a null terminus. Settle modes default to
        the peer's."""
        self.machine.refuse_unless(LinkInput.SEND_ATTACH)
        remote = self.remote_attach
        if remote is None:
            raise UsageError("accept() answers a peer's attach; this link was attached by us")
        self.source = remote.source if source is _ECHO else source
        self.target = remote.target if target is _ECHO else target
        self.snd_settle_mode = (
            remote.snd_settle_mode if snd_settle_mode is None else snd_settle_mode
        )
        self.rcv_settle_mode = (
            remote.rcv_settle_mode if rcv_settle_mode is None else rcv_settle_mode
        )
        if self.is_sender:
            self.start_delivery_count(initial_delivery_count)
        self.attach(attach_fields)
        if self._echo_owed:  # 2.7.4: an echo that came before our attach, answered now
            self._echo_owed = False
            self._send_flow()

    def reject(self, error: Error | str | None = None, description: str | None = None) -> None:
        """Refuse the peer's attach: our attach with a null local terminus, then a
        closing detach carrying `error` (2.6.3)."""
        if self.is_sender:
            self.source = None
        else:
            self.target = None
        self.detach(closed=True, error=error, description=description)

    def receive_attach(self, attach: Attach) -> None:
        self.machine.process(LinkInput.RECV_ATTACH)
        self.remote_attach = attach
        self.remote_handle = attach.handle
        if self.snd_settle_mode is None:  # an incoming link: take the peer's modes
            self.snd_settle_mode = attach.snd_settle_mode
            self.rcv_settle_mode = attach.rcv_settle_mode
        if not self.is_sender:
            self._learn_initial_delivery_count(attach)
        problem = terminus_problem(attach)
        if problem is not None:  # refused here: the application never sees the link
            self.fail(
                ProtocolError(
                    Cond.INVALID_FIELD,
                    problem,
                    "link",
                    ErrorKind.INVALID_TERMINUS,
                    performative="attach",
                )
            )
            return
        if self.state is LinkState.ATTACH_RCVD:
            self.session.connection.answer_due = True  # accept() or reject() first
        self.session.connection.emit(ev.RemoteAttach(self, attach))

    def _learn_initial_delivery_count(self, attach: Attach) -> None:
        """2.6.7: the receiver's delivery-count starts at the sender's
        initial-delivery-count; credit granted before then counts from it."""
        initial = attach.initial_delivery_count or 0
        self.initial_delivery_count = self.delivery_count = initial
        if self.granted_horizon is None and self.link_credit:
            self.granted_horizon = credit_horizon(initial, self.link_credit)
            self._latest_horizon = self.granted_horizon

    # --- credit (2.6.7) ---------------------------------------------------------------

    @property
    def credit(self) -> int:
        return self.link_credit

    def flow(
        self,
        link_credit: int | None = None,
        drain: bool = False,
        echo: bool = False,
        available: int | None = None,
        properties: dict[Any, Any] | None = None,
    ) -> None:
        """Send a link flow. A receiver grants `link_credit` (and may ask to `drain`);
        a sender reports `available` (2.6.7). `properties`: the flow's link state
        properties (2.7.4), e.g. a `txn-id` for transactional acquisition (4.4.3)."""
        self._check(LinkInput.SEND_FLOW, SessInput.SEND_FLOW)
        if self.is_sender:
            if link_credit is not None or drain:
                raise UsageError("only the receiver sets link-credit and drain (2.6.7)")
            if available is not None:
                self.available = available
        else:
            if link_credit is not None:
                self.grant(link_credit)
            self.drain = drain
        self._send_flow(echo, properties)

    def grant(self, link_credit: int) -> None:
        self.link_credit = link_credit
        if self.delivery_count is None:
            return  # the horizon is fixed when the sender's attach arrives
        horizon = self._latest_horizon = credit_horizon(self.delivery_count, link_credit)
        if self.granted_horizon is None:
            self.granted_horizon = horizon
        else:
            self.granted_horizon = serial_max(self.granted_horizon, horizon)

    def send_flow_state(self, echo: bool = False) -> None:
        """Send our flow state as it is (2.7.4), e.g. to answer an echo when the
        connection's policy has auto_echo off. Unlike flow(), it changes nothing: a receiver
        keeps its drain flag and grant, a sender reports its current `available`."""
        self._check(LinkInput.SEND_FLOW, SessInput.SEND_FLOW)
        self._send_flow(echo)

    def set_flow_state(
        self,
        *,
        delivery_count: int | None = None,
        link_credit: int | None = None,
        drain: bool | None = None,
        available: int | None = None,
    ) -> None:
        """Sender whose credit is kept by the application (a broker queue with credit
        API v2): copy its 2.6.7 state into the link; nothing is sent (send_flow_state()
        or send() follow). With the connection's policy.check_credit (default) the state
        must stay within the receiver's latest grant: delivery-count never goes back and
        delivery-count + link-credit never passes delivery-count(flow) + link-credit(flow);
        UsageError otherwise."""
        if not self.is_sender:
            raise UsageError("set_flow_state() is for a sender; a receiver grants with flow()")
        new_count = self.delivery_count if delivery_count is None else delivery_count
        new_credit = self.link_credit if link_credit is None else link_credit
        if self.session.connection.policy.check_credit:
            if new_count is None:
                raise UsageError("no delivery-count before our attach")
            if link_credit is not None and link_credit < 0:
                raise UsageError("link-credit is never negative (2.6.7)")
            if self.delivery_count is not None and serial_lt(new_count, self.delivery_count):
                raise UsageError(f"delivery-count {new_count} goes back (2.6.7)")
            horizon = self._credit_horizon
            if horizon is None:
                horizon = self.delivery_count  # no grant yet: no credit
            elif self.delivery_count is not None:
                # transfers sent under an earlier, larger grant may already stand past a
                # reduced one (2.6.7: they were legal in flight); the state may keep them
                # but add no credit beyond the latest grant
                horizon = serial_max(horizon, self.delivery_count)
            if horizon is None or serial_gt(serial_add(new_count, new_credit), horizon):
                raise UsageError(
                    f"delivery-count {new_count} + link-credit {new_credit} beyond the "
                    f"receiver's grant (2.6.7)"
                )
        self.delivery_count = new_count
        self.link_credit = new_credit
        if drain is not None:
            self.drain = drain
        if available is not None:
            self.available = available

    def _send_flow(self, echo: bool = False, properties: dict[Any, Any] | None = None) -> None:
        self.machine.process(LinkInput.SEND_FLOW)
        self.session.write_flow(self, echo, properties)

    def flow_fields(self) -> dict[str, Any]:
        return {
            "handle": self.handle,
            "delivery_count": self.delivery_count,
            "link_credit": self.link_credit,
            "available": self.available if self.is_sender else None,
            "drain": self.drain,
        }

    def drained(self) -> bool:
        """Sender in drain mode with nothing more to send: use up the credit
        (delivery-count += link-credit, link-credit = 0) and report it in a flow
        (2.6.7). Returns False (and sends nothing) when drain was not asked for."""
        if not self.is_sender:
            raise UsageError("drained() is the sender's answer to drain")
        if not self.drain:
            return False
        self._check(LinkInput.SEND_FLOW, SessInput.SEND_FLOW)  # refused: nothing changes
        self.delivery_count = serial_add(self.delivery_count, self.link_credit)
        self.link_credit = 0
        self._send_flow()
        return True

    def receive_flow(self, flow: Flow) -> None:
        if self.machine.process(LinkInput.RECV_FLOW) == DISCARD:
            return
        if self.is_sender:
            self._sender_flow(flow)
        else:
            self._receiver_flow(flow)
        if flow.echo and self.session.connection.policy.auto_echo:
            if not self.session.machine.allows(SessInput.SEND_FLOW):
                pass  # our end is out: nothing more on this session (2.7.8)
            elif self.machine.allows(LinkInput.SEND_FLOW):
                self._send_flow()  # 2.7.4 echo: our flow state, promptly
            elif self.state is LinkState.ATTACH_RCVD:
                self._echo_owed = True  # answered right after our attach (accept())

    def start_delivery_count(self, initial_delivery_count: int) -> None:
        """Sender, on our attach (accept(), or a crafted attach): delivery-count starts at
        initial-delivery-count (2.6.7), and credit granted before our attach applies now."""
        self.initial_delivery_count = self.delivery_count = initial_delivery_count
        if self._last_flow is not None:
            self._sender_flow(self._last_flow)

    def _sender_flow(self, flow: Flow) -> None:
        self._last_flow = flow
        if self.delivery_count is None:
            return  # not attached by us yet: computed in accept()
        if flow.link_credit is not None:
            base = flow.delivery_count
            if base is None:  # the receiver had not seen our attach: initial stands in
                base = self.initial_delivery_count
            self._credit_horizon = credit_horizon(base, flow.link_credit)
            self.link_credit = sender_link_credit(
                flow.delivery_count,
                flow.link_credit,
                self.delivery_count,
                self.initial_delivery_count,
            )
        self.drain = flow.drain

    def _receiver_flow(self, flow: Flow) -> None:
        if flow.delivery_count is not None:
            self.delivery_count = flow.delivery_count
        self.available = flow.available or 0
        if self._latest_horizon is not None and self.delivery_count is not None:
            # our credit is what is left of our latest grant (2.6.7)
            self.link_credit = window_left(self._latest_horizon, self.delivery_count)

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
        """Send one delivery (split into frames at the peer's max-frame-size, 2.6.14).
        Needs link-credit (2.6.7); returns its delivery-id. `settled` defaults from
        snd-settle-mode (settled for SETTLED, else unsettled). A connection whose policy
        has check_credit off sends even without credit (deliberate misbehaviour).
        `resume`: a delivery of a resumed link sent again under its old `delivery_tag`
        (2.6.13: "The resume flag of the transfer frame MUST be set to true when resuming a
        delivery")."""
        if self.role != Role.SENDER:  # not is_sender
            raise UsageError("send() on a receiving link")
        session = self.session
        connection = session.connection
        # the fast lane: in these states SEND_FRAME / SEND_TRANSFER are the tables'
        # self-loops, so the checks and transitions below are skipped (connection.py)
        lane = (
            connection.fast_lanes
            and connection.machine.state is _OPENED
            and session.machine.state is _MAPPED
            and self.machine.state is _ATTACHED
        )
        if not lane:
            self._check(LinkInput.SEND_TRANSFER, SessInput.SEND_TRANSFER)
        # 2.6.7: no transfer without credit
        if self.link_credit <= 0 and connection.policy.check_credit:
            raise UsageError(f"no link-credit on {self.name!r}")
        settled = self._settled_flag(settled)
        limit = self.remote_attach.max_message_size if self.remote_attach else None
        if limit and len(payload) > limit:
            raise UsageError(f"{len(payload)} bytes > the peer's max-message-size {limit} (2.7.3)")
        delivery_id = session.next_delivery_id  # the session's, 2.7.5
        session.next_delivery_id = (delivery_id + 1) & SERIAL_MASK
        if delivery_tag is None:
            delivery_tag = _TAG.pack(delivery_id)
        frame = transfer = None
        if (
            state is None
            and not batchable
            and not resume
            and type(delivery_tag) is bytes
            and len(delivery_tag) <= MAX_FAST_TAG
            and type(message_format) is int
            and 0 <= message_format <= 0xFFFFFFFF
        ):  # the common one-frame delivery, encoded without a Transfer object
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
            transfer = Transfer(
                handle=self.handle,
                delivery_id=delivery_id,
                delivery_tag=delivery_tag,
                message_format=message_format,
                settled=settled,
                state=state,
                batchable=batchable,
                resume=resume or None,
            )
        if not lane:
            self.machine.process(LinkInput.SEND_TRANSFER)
        session.write_transfer(transfer, payload, frame, lane)
        # 2.6.7: each delivery advances delivery-count and uses one credit
        self.delivery_count = (self.delivery_count + 1) & SERIAL_MASK  # serial_add(..., 1)
        if self.link_credit > 0:
            self.link_credit -= 1
        return delivery_id

    def _settled_flag(self, settled: bool | None) -> bool:
        mode = self.snd_settle_mode
        if settled is None:
            return mode == SndSettleMode.SETTLED
        if mode == SndSettleMode.SETTLED and not settled:
            raise UsageError("snd-settle-mode settled: every delivery is sent settled (2.8.2)")
        if mode == SndSettleMode.UNSETTLED and settled:
            raise UsageError("snd-settle-mode unsettled: deliveries are sent unsettled (2.8.2)")
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

    # --- detach ---------------------------------------------------------------------

    def detach(
        self, closed: bool = True, error: Error | str | None = None, description: str | None = None
    ) -> None:
        """Send detach (2.7.7); closed=False only suspends the link."""
        self._check(LinkInput.SEND_DETACH, SessInput.SEND_DETACH)
        never_attached = self.handle is None  # the peer's attach is still unanswered
        if never_attached:  # refusing it: our attach needs a handle
            self.handle = self.session.allocate_handle(self)
        action = self.machine.process(LinkInput.SEND_DETACH)
        # 2.6.3: our attach goes first, also when the peer's detach came before we answered
        # its attach (both in one read: DETACH_RCVD)
        if action == ATTACH_THEN_DETACH or never_attached:
            if self.is_sender and self.initial_delivery_count is None:
                self.initial_delivery_count = self.delivery_count = 0  # 2.7.3: a sender's
            self.session.write_attach(self.attach_frame({}))
        detach = Detach(handle=self.handle, closed=closed, error=as_error(error, description))
        self.session.write_detach(detach)
        self.maybe_detached()

    def receive_detach(self, detach: Detach) -> None:
        self.machine.process(LinkInput.RECV_DETACH)
        self.remote_detach = detach
        self.session.remote_link_detached(self)
        self.session.connection.emit(ev.RemoteDetach(self, detach.closed, detach.error))
        if self.session.connection.auto_reply:
            answer = lambda: self._answer_detach(detach.closed)  # noqa: E731
            self.session.connection.reply_when_sendable(answer, self.session)
        self.maybe_detached()

    def _answer_detach(self, closed: bool) -> None:
        if self.machine.allows(LinkInput.SEND_DETACH) and self.session.state in _CAN_REPLY:
            self.detach(closed=closed)  # 2.6.6: answer with our detach

    def maybe_detached(self) -> None:
        if self.state is LinkState.DETACHED:
            self.session.link_detached(self)

    def fail(self, exc: ProtocolError) -> None:
        """The peer broke a link rule: report it and detach with its condition."""
        self.session.connection.emit(ev.ProtocolErrorRaised.of(exc, "link", self.session, self))
        session = self.session
        session.connection.reply_when_sendable(lambda: self._send_error(exc), session)

    def _send_error(self, exc: ProtocolError) -> None:
        """Detach with `exc` (2.6.3), or end the session when the link cannot be detached."""
        session = self.session
        if not session.machine.allows(SessInput.SEND_DETACH):
            return  # the session is ending: the end settles the link too (2.6.1)
        if self.machine.allows(LinkInput.SEND_DETACH):
            self.detach(closed=True, error=exc.condition, description=exc.description)
        else:  # the link cannot be detached (2.6.3): the session goes with it
            session.fail(exc.rescoped("session"))


_CAN_REPLY = frozenset({SessState.MAPPED, SessState.BEGIN_RCVD})
_SOURCE_ARCHETYPE = (Source,)
_TARGET_ARCHETYPE = (Target, Coordinator)


def terminus_problem(attach: Attach) -> str | None:
    """3.5.3 / 3.5.4 / 4.5.1: an attach's source must provide the `source` archetype
    (Source) and its target the `target` archetype (Target, Coordinator), or be null.
    The codec already refuses a known composite of another archetype (decode-error); a
    described value of an unknown type cannot be used as a terminus, so the link is
    refused with amqp:invalid-field. Returns what is wrong, or None."""
    source, target = attach.source, attach.target
    if source is not None and not isinstance(source, _SOURCE_ARCHETYPE):
        return f"attach source is {_kind(source)}, not a source (3.5.3)"
    if target is not None and not isinstance(target, _TARGET_ARCHETYPE):
        return f"attach target is {_kind(target)}, not a target (3.5.4)"
    return None


def _kind(value: Any) -> str:
    if isinstance(value, Described):
        return f"a described value with descriptor {value.descriptor!r}"
    return f"a {type(value).__name__}"
