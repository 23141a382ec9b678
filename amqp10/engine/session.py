"""The session endpoint (2.5): session flow control (2.5.6), transfers in and out,
dispositions; the hub that composes the session's parts.

Owns: the session window state (next-incoming-id, incoming-window, next-outgoing-id,
outgoing-window, remote-incoming-window as a horizon, the grants the peer may have seen),
the queue of transfer frames waiting for the peer's window, delivery-ids, the dispatch of
the peer's frames after SESSION_TABLE (`receive`), and the fast lane for a received
one-frame transfer (`fast_transfer`). Its parts, each in a module of its own:
session_lifecycle.py (begin, end, session errors) and session_links.py (attach, detach,
the handle maps). May touch: its Connection through the documented engine methods
(`write_frame`, `emit`, `check_can_send`, `grants_pending`, ...) and its Links through
theirs (`receive_transfer`, `receive_flow`, `flow_fields`, and in the fast lane their
2.6.7 state). Every state change goes through SESSION_TABLE.

The per-transfer paths (`fast_transfer`, `write_transfer`, `_pump`, `_on_flow`) are hot:
local bindings, serial arithmetic inlined with amqp10.serial's HALF/MASK, no call layer
added (docs/engine.md, "Changing a rule").

Window policy: with `auto_window=True` the incoming window is re-granted (a session
flow) whenever it falls below half of `incoming_window`; with False the application
refills it with `session.flow(incoming_window=n)`. Outgoing transfer frames wait in
order while the peer's remote-incoming-window is 0 (2.5.6: never sent beyond it).

Window check (2.5.6, the connection's `policy.enforce_window`): a transfer beyond every
window the peer could have seen ends the session with amqp:session:window-violation. A
grant (begin or flow) counts from the moment its bytes leave the engine
(`Connection.data_to_send()`), not when it is queued: transfers handled in the same
receive_data() as a re-grant were sent before the peer could know it, so a burst beyond
the advertised window is a violation with auto_window too. A lowered window never
shrinks what was granted before. `EndpointPolicy(enforce_window=False)` switches the check
off (fault injection).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

from amqpspec.amqp10.composites import (
    Attach,
    Begin,
    Detach,
    Disposition,
    End,
    Flow,
    Transfer,
)
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.flowcontrol import remote_incoming_horizon, window_left
from amqpspec.amqp10.engine.link import Link
from amqpspec.amqp10.engine.session_lifecycle import SessionLifecycle
from amqpspec.amqp10.engine.session_links import SessionLinks
from amqpspec.amqp10.engine.transitions import (
    DISCARD,
    LinkState,
    SessInput,
    SessState,
    session_machine,
)
from amqpspec.amqp10.errors import ErrorKind, ProtocolError
from amqpspec.amqp10.frames import Frame, encode_frame
from amqpspec.amqp10.message import transfer_frames
from amqpspec.amqp10.serial import HALF, serial_add, serial_max
from amqpspec.amqp10.serial import MASK as SERIAL_MASK
from amqpspec.amqp10.spec import Cond, Role

if TYPE_CHECKING:
    from amqpspec.amqp10.composites import Error
    from amqpspec.amqp10.engine.connection import Connection

# the fast lane's states and role as plain module constants (an Enum member lookup on its
# class costs several times a global's)
_MAPPED = SessState.MAPPED
_ATTACHED = LinkState.ATTACHED
_SENDER = Role.SENDER

_INPUT_OF = {
    Attach: SessInput.RECV_ATTACH,
    Flow: SessInput.RECV_FLOW,
    Transfer: SessInput.RECV_TRANSFER,
    Disposition: SessInput.RECV_DISPOSITION,
    Detach: SessInput.RECV_DETACH,
    End: SessInput.RECV_END,
}


class SessionOptions(TypedDict, total=False):
    """Session's keywords that Connection.begin passes on as they are (defaults: Session's)."""

    auto_window: bool
    properties: dict | None
    offered_capabilities: list[str] | None
    desired_capabilities: list[str] | None
    initial_outgoing_id: int


class Session(SessionLifecycle, SessionLinks):
    """One session endpoint. Create with Connection.begin(); incoming sessions arrive
    in a RemoteBegin event and are answered with accept() or end()."""

    def __init__(
        self,
        connection: Connection,
        *,
        incoming: bool = False,
        incoming_window: int = 2048,
        outgoing_window: int = 2048,
        handle_max: int = 0xFFFFFFFF,
        auto_window: bool = True,
        properties: dict | None = None,
        offered_capabilities: list[str] | None = None,
        desired_capabilities: list[str] | None = None,
        initial_outgoing_id: int = 0,
    ) -> None:
        self.connection = connection
        self.machine = session_machine()
        self.machine.visited = connection.transitions
        self.channel: int | None = None if incoming else connection.allocate_channel(self)
        self.remote_channel: int | None = None
        self.remote_begin: Begin | None = None
        self.remote_end_error: Error | None = None
        self._configure(incoming_window, outgoing_window, handle_max, auto_window)
        self.properties = properties
        self.offered_capabilities = offered_capabilities
        self.desired_capabilities = desired_capabilities
        # 2.5.6 session state
        self.initial_outgoing_id = initial_outgoing_id  # our begin's next-outgoing-id
        self.next_outgoing_id = initial_outgoing_id
        self.next_incoming_id: int | None = None  # learned from the peer's begin
        self.incoming_window = incoming_window
        # 2.5.6 as horizons (serial numbers), read by tests and tools: the first transfer-id
        # beyond every window of ours the peer can have seen (None before our first grant
        # is out), and the first transfer-id the peer's window does not admit
        self.enforced_horizon: int | None = None
        self._pending_horizon: int | None = None  # granted, not yet handed to data_to_send()
        self.remote_horizon = 0
        self.remote_outgoing_window = 0
        self.remote_handle_max = 0xFFFFFFFF
        self.next_delivery_id = 0
        self.links: dict[int, Link] = {}  # our handle -> link
        self.links_by_remote_handle: dict[int, Link] = {}  # peer's handle -> link
        # (name, our role) -> our link awaiting the peer's attach: a link is its name and
        # direction (2.6.1), so a sender and a receiver may share a name (a link pair)
        self._attaching: dict[tuple[str, bool], Link] = {}
        # (frame or a maker of it, is_transfer, its link or None): transfers waiting for the
        # peer's window and the frames that must stay behind them
        self._queue: deque[tuple[bytes | Callable[[], bytes], bool, Link | None]] = deque()
        self._handlers = {  # peer frame type -> its handler, after the table (receive)
            Attach: self._on_attach,
            Flow: self._on_flow,
            Transfer: self._on_transfer,
            Disposition: self._on_disposition,
            Detach: self._on_detach,
            End: self._on_end,
        }

    def __repr__(self) -> str:
        return f"<Session channel={self.channel} remote={self.remote_channel} {self.state.value}>"

    @property
    def state(self) -> SessState:
        return self.machine.state

    @property
    def remote_incoming_window(self) -> int:
        """2.5.6: transfer frames the peer still admits."""
        return window_left(self.remote_horizon, self.next_outgoing_id)

    @property
    def queued_frames(self) -> int:
        """Frames waiting for the peer's incoming window (transfers and what follows)."""
        return len(self._queue)

    def drop_queued(self) -> None:
        """Drop the frames waiting for the peer's window: our end is going out (2.5.6, 2.7.8)."""
        self._queue.clear()

    def drop_queued_of(self, link: Link) -> int:
        """Drop the frames of `link` still waiting for the peer's window (its transfers and
        flows: never sent), when the link is destroyed at both ends; returns how many."""
        before = len(self._queue)
        self._queue = deque(entry for entry in self._queue if entry[2] is not link)
        return before - len(self._queue)

    # --- actions ----------------------------------------------------------------------

    def flow(self, incoming_window: int | None = None, echo: bool = False) -> None:
        """Send a session flow (2.7.4), optionally with a new incoming-window."""
        if incoming_window is not None:
            self.incoming_window_max = self.incoming_window = incoming_window
        self.write_flow(None, echo)

    def disposition(
        self,
        role: bool,
        first: int,
        last: int | None = None,
        settled: bool = False,
        state: Any = None,
        batchable: bool = False,
    ) -> None:
        """Send a disposition (2.7.6) for our deliveries first..last; `role` is OUR
        role (Role.RECEIVER settles/updates what the peer sent us)."""
        self._send_checked(
            SessInput.SEND_DISPOSITION,
            Disposition(
                role=role, first=first, last=last, settled=settled, state=state, batchable=batchable
            ),
        )

    # --- engine-internal: sending ------------------------------------------------

    def _send_checked(self, inp: SessInput, performative: Any) -> None:
        self.connection.check_can_send()
        self.machine.process(inp)
        self.connection.write_frame(encode_frame(performative, self.channel))

    def flow_fields(self) -> dict[str, Any]:
        self.grant_window()
        return {
            "next_incoming_id": self.next_incoming_id,
            "incoming_window": self.incoming_window,
            "next_outgoing_id": self.next_outgoing_id,
            "outgoing_window": self.outgoing_window,
        }

    def grant_window(self, seen: bool = False) -> None:
        """Record the window we are about to advertise (2.5.6). It is enforced once the
        peer can have seen it: when data_to_send() hands its frame out (`seen` when the
        peer has answered it already). A reduced window does not shrink what in-flight
        transfers may already use."""
        if self.next_incoming_id is None:
            return
        horizon = serial_add(self.next_incoming_id, self.incoming_window)
        if seen:
            enforced = self.enforced_horizon
            self.enforced_horizon = horizon if enforced is None else serial_max(enforced, horizon)
            return
        pending = self._pending_horizon
        if pending is None:
            self._pending_horizon = horizon
            self.connection.grants_pending.append(self)
        else:
            self._pending_horizon = serial_max(pending, horizon)

    def grant_sent(self) -> None:
        """data_to_send() handed out our latest grant: from now on the peer may use it."""
        horizon, self._pending_horizon = self._pending_horizon, None
        if horizon is not None:
            enforced = self.enforced_horizon
            self.enforced_horizon = horizon if enforced is None else serial_max(enforced, horizon)

    def write_flow(
        self, link: Link | None, echo: bool = False, properties: dict[Any, Any] | None = None
    ) -> None:
        if properties:  # a link flow's properties (2.7.4): sent as they are
            assert link is not None
            link_fields = {**link.flow_fields(), "properties": properties}
            self.connection.check_can_send()
            self.machine.process(SessInput.SEND_FLOW)
            self.connection.write_frame(self._flow_frame(link_fields, echo))
            return
        if link is not None and link.is_sender and self._queue:
            # 2.6.7: a sender's delivery-count already counts its queued deliveries, so
            # its flow goes out behind them; the session fields are taken when it does
            self.connection.check_can_send()
            self.machine.process(SessInput.SEND_FLOW)
            link_fields = link.flow_fields()
            self._queue.append((lambda: self._flow_frame(link_fields, echo), False, link))
            return
        self.connection.check_can_send()
        self.machine.process(SessInput.SEND_FLOW)
        self.connection.write_frame(self._flow_frame(link.flow_fields() if link else {}, echo))

    def _flow_frame(self, link_fields: dict[str, Any], echo: bool) -> bytes:
        return encode_frame(Flow(echo=echo, **self.flow_fields(), **link_fields), self.channel)

    def write_transfer(
        self,
        transfer: Transfer | None,
        payload: bytes,
        frame: bytes | None = None,
        lane: bool = False,
        link: Link | None = None,
    ) -> None:
        """One delivery from Link.send, which has checked the connection (SEND_FRAME):
        `frame` already encoded (it fits max-frame-size), or `transfer` to encode/split.
        `lane`: Link.send's fast lane, in MAPPED where SEND_TRANSFER is a self-loop."""
        if not lane:
            self.machine.process(SessInput.SEND_TRANSFER)
        if frame is not None:
            if lane and not self._queue:  # _pump for this one frame, if the window admits it
                following = self._next_transfer_id_admitted()
                if following is not None:
                    self.next_outgoing_id = following
                    self.connection.write_frame(frame)
                    return
            self._queue.append((frame, True, link))
            self._pump()
            return
        max_frame_size = self.connection.remote_max_frame_size
        frame = encode_frame(transfer, self.channel, payload)  # the common, one-frame case
        if len(frame) <= max_frame_size:
            self._queue.append((frame, True, link))
        else:  # 2.6.14: split at the peer's max-frame-size
            frames = transfer_frames(transfer, payload, max_frame_size, self.channel)
            self._queue.extend((f, True, link) for f in frames)
        self._pump()

    def _pump(self) -> None:
        """Release queued frames while the peer's incoming window admits transfers."""
        queue, write = self._queue, self.connection.write_frame
        while queue:
            frame, is_transfer, _ = queue[0]
            if is_transfer:
                following = self._next_transfer_id_admitted()
                if following is None:
                    return
                self.next_outgoing_id = following
            queue.popleft()
            write(frame if isinstance(frame, bytes) else frame())

    def _next_transfer_id_admitted(self) -> int | None:
        """next-outgoing-id + 1 when the peer's incoming window admits one more transfer
        frame (2.5.6: serial_ge(remote horizon, next-outgoing-id + 1), inlined), else None."""
        following = (self.next_outgoing_id + 1) & SERIAL_MASK
        horizon = self.remote_horizon
        if horizon == following or 0 < ((horizon - following) & SERIAL_MASK) < HALF:
            return following
        return None

    def _regrant_window_if_low(self) -> None:
        """auto_window (module docstring): re-grant the incoming window once it falls below
        half, if a session flow may be sent now."""
        if (
            self.auto_window
            and self.incoming_window * 2 < self.incoming_window_max
            and self.machine.allows(SessInput.SEND_FLOW)
        ):
            self.incoming_window = self.incoming_window_max
            self.write_flow(None)

    # --- receiving --------------------------------------------------------------------

    def receive(self, frame: Frame) -> None:
        """One frame for this session: the table first, then the handler."""
        performative = frame.performative
        try:
            if self.machine.process(_INPUT_OF[type(performative)]) == DISCARD:
                return
            self._handlers[type(performative)](frame)
        except ProtocolError as exc:
            if exc.scope == "connection":
                raise
            self.fail(exc)

    def _on_flow(self, frame: Frame) -> None:
        flow: Flow = frame.performative
        # 2.5.6: remote-incoming-window from the flow
        self.remote_horizon = remote_incoming_horizon(
            flow.next_incoming_id, flow.incoming_window, self.initial_outgoing_id
        )
        self.remote_outgoing_window = flow.outgoing_window
        if flow.next_outgoing_id is not None and self.next_incoming_id is not None:
            # 2.5.6: the next-incoming-id is updated directly from the flow's
            # next-outgoing-id (equal to ours unless the peer rewound or skipped ids)
            self.next_incoming_id = flow.next_outgoing_id
        link = None
        if flow.handle is not None:
            link = self._link_for(flow.handle, "flow")
            link.receive_flow(flow)
        elif (
            flow.echo
            and self.connection.policy.auto_echo
            and self.machine.allows(SessInput.SEND_FLOW)
        ):
            # 2.7.4 echo on the session: our session state; not once our end is out (2.7.8)
            self.write_flow(None)
        self.connection.emit(ev.FlowReceived(self, link, flow))
        self._pump()

    def _on_transfer(self, frame: Frame) -> None:
        transfer: Transfer = frame.performative
        # 2.7.5: the handle first (which link the frame is for, whenever it arrived), then
        # 2.5.6: each transfer frame takes one id of our incoming window
        link = self._link_for(transfer.handle, "transfer")
        horizon = self.enforced_horizon  # beyond it: serial_ge(next-incoming-id, horizon)
        if self.connection.policy.enforce_window and (
            horizon is None or not 0 < ((horizon - self.next_incoming_id) & SERIAL_MASK) <= HALF
        ):
            raise ProtocolError(
                Cond.WINDOW_VIOLATION,
                f"transfer-id {self.next_incoming_id} beyond the incoming-window",
                "session",
                ErrorKind.WINDOW_VIOLATION,
                performative="transfer",
            )
        self.next_incoming_id = (self.next_incoming_id + 1) & SERIAL_MASK  # serial_add(..., 1)
        self.incoming_window = max(0, self.incoming_window - 1)
        link.receive_transfer(frame)
        self._regrant_window_if_low()

    def fast_transfer(self, frame: Frame) -> bool:
        """The fast lane (Connection._on_frame) for a whole one-frame delivery on an attached
        receiving link of a mapped session, within our incoming window (2.5.6), the link's
        credit (2.6.7) and max-message-size (2.7.3), not aborted: handled exactly as the
        general path (receive -> _on_transfer -> Link.receive_transfer) would, True; else
        untouched, for the general path and the spec's errors it raises, False."""
        transfer: Transfer = frame.performative
        if self.machine.state is not _MAPPED:
            return False
        link = self.links_by_remote_handle.get(transfer.handle)
        if (
            link is None
            or link.machine.state is not _ATTACHED
            or link.role == _SENDER  # Link.is_sender
            or transfer.more
            or transfer.aborted
            or transfer.resume  # a resumed delivery (2.6.13): the general path says so
            or transfer.delivery_id is None
            or transfer.delivery_tag is None
            or link.assembler.in_progress
        ):
            return False
        next_id = self.next_incoming_id
        horizon = self.enforced_horizon  # as in _on_transfer
        if (
            horizon is None or not 0 < ((horizon - next_id) & SERIAL_MASK) <= HALF
        ) and self.connection.policy.enforce_window:
            return False
        count = link.delivery_count
        horizon = link.granted_horizon  # as in Link._first_frame (link.py)
        if horizon is None or not 0 < ((horizon - count) & SERIAL_MASK) <= HALF:
            return False
        payload = frame.payload
        size = len(payload)  # once: for max-message-size and bytes_in_delivery
        limit = link.max_message_size
        if limit and size > limit:
            return False
        self.next_incoming_id = (next_id + 1) & SERIAL_MASK
        window = self.incoming_window
        self.incoming_window = window - 1 if window > 0 else 0  # max(0, window - 1)
        link.delivery_count = (count + 1) & SERIAL_MASK
        credit = link.link_credit
        link.link_credit = credit - 1 if credit > 0 else 0
        link.bytes_in_delivery = size
        frames, link.frames_in_delivery = link.frames_in_delivery + 1, 0
        self.connection.emit(
            ev.TransferReceived(
                link,
                transfer.delivery_id,
                transfer.delivery_tag,
                payload,
                bool(transfer.settled),
                transfer.state,
                transfer.message_format or 0,
                frames,
            )
        )
        if self.incoming_window * 2 < self.incoming_window_max:  # else nothing to re-grant
            self._regrant_window_if_low()  # an observer of the event may have granted already
        return True

    def _on_disposition(self, frame: Frame) -> None:
        d: Disposition = frame.performative
        last = d.first if d.last is None else d.last
        self.connection.emit(
            ev.DispositionReceived(self, d.role, d.first, last, d.settled, d.state, d.batchable)
        )
