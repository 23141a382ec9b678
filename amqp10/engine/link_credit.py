"""A link's flow control (2.6.7) and its flow frames (2.7.4): credit granted and used,
drain, available, echo.

Owns: the receiver's grants (the highest horizon delivery-count + link-credit granted, and
the latest), the sender's view of the receiver's latest grant, `flow()`, `grant()`,
`send_flow_state()`, `set_flow_state()` (a sender whose credit the application keeps),
`drained()`, the peer's flows (`receive_flow`, echo answered per the connection's
`policy.auto_echo`) and `flow_fields()` (what our flow says). Credit bookkeeping, receiver
side: a lowered grant does not shrink the horizon, because transfers already in flight
against the older grant are legal. A part of `Link` (link.py composes it; the hub's
transfer paths use up the credit). May touch: its Session through `write_flow` and the
session and connection tables (`machine`), the connection's `policy`.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Attach, Flow
from amqpspec.amqp10.engine.flowcontrol import credit_horizon, sender_link_credit, window_left
from amqpspec.amqp10.engine.transitions import DISCARD, LinkInput, LinkState, SessInput, UsageError
from amqpspec.amqp10.serial import serial_add, serial_gt, serial_lt, serial_max


class LinkCredit:
    """Credit, drain, available and flow frames (a part of Link)."""

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

    def _learn_initial_delivery_count(self, attach: Attach) -> None:
        """2.6.7: the receiver's delivery-count starts at the sender's
        initial-delivery-count; credit granted before then counts from it."""
        initial = attach.initial_delivery_count or 0
        self.initial_delivery_count = self.delivery_count = initial
        if self.granted_horizon is None and self.link_credit:
            self.granted_horizon = credit_horizon(initial, self.link_credit)
            self._latest_horizon = self.granted_horizon
