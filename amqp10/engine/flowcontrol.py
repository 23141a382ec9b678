"""Flow-control arithmetic of sessions (2.5.6) and links (2.6.7), as pure functions.

Owns: the formulas only, in RFC 1982 serial arithmetic (amqp10.serial); the Session
and Link objects keep the state and call these. Nothing here sends or records frames.
"""

from __future__ import annotations

from amqpspec.amqp10.serial import serial_add, serial_diff


def remote_incoming_horizon(
    flow_next_incoming_id: int | None, flow_incoming_window: int, initial_outgoing_id: int
) -> int:
    """2.5.6: the first transfer-id the peer does NOT accept.

    remote-incoming-window = next-incoming-id(flow) + incoming-window(flow)
    - next-outgoing-id(endpoint); with next-incoming-id unset (the peer has not seen our
    begin) initial-outgoing-id(endpoint) stands in. Keeping the horizon (not the window)
    lets the window shrink by one per transfer frame sent without extra bookkeeping.
    """
    base = initial_outgoing_id if flow_next_incoming_id is None else flow_next_incoming_id
    return serial_add(base, flow_incoming_window)


def window_left(horizon: int, next_id: int) -> int:
    """Transfer frames still allowed before `horizon` (never negative)."""
    return max(0, serial_diff(next_id, horizon))


def sender_link_credit(
    flow_delivery_count: int | None,
    flow_link_credit: int,
    sender_delivery_count: int,
    initial_delivery_count: int,
) -> int:
    """2.6.7: link-credit(snd) = delivery-count(flow) + link-credit(flow)
    - delivery-count(snd); a flow without delivery-count means the receiver has not seen
    our attach yet, so initial-delivery-count stands in. Never below zero."""
    base = initial_delivery_count if flow_delivery_count is None else flow_delivery_count
    return max(0, serial_diff(sender_delivery_count, serial_add(base, flow_link_credit)))


def credit_horizon(delivery_count: int, link_credit: int) -> int:
    """The delivery-count the sender must not reach: delivery-count + link-credit."""
    return serial_add(delivery_count, link_credit)
