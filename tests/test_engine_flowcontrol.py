"""The 2.5.6 / 2.6.7 formulas of amqp10.engine.flowcontrol, across the 2**32 wrap."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from amqpspec.amqp10.engine.flowcontrol import (
    credit_horizon,
    remote_incoming_horizon,
    sender_link_credit,
    window_left,
)

u32 = st.integers(0, 2**32 - 1)
small = st.integers(0, 10_000)


@settings(max_examples=300)
@given(u32, small, small)
def test_sender_credit_matches_the_formula_across_the_wrap(receiver_dc, credit, sent):
    """2.6.7: link-credit(snd) = delivery-count(flow) + link-credit(flow) - delivery-count(snd)."""
    sender_dc = (receiver_dc + min(sent, credit)) % 2**32  # the sender is ahead by what it sent
    assert sender_link_credit(receiver_dc, credit, sender_dc, 0) == credit - min(sent, credit)


@given(u32, small)
def test_flow_without_delivery_count_uses_initial_delivery_count(initial, credit):
    assert sender_link_credit(None, credit, initial, initial) == credit


@given(u32, small)
def test_credit_never_negative(dc, credit):
    """A receiver that shrank its grant below what was sent leaves the sender at 0."""
    assert sender_link_credit(dc, credit, (dc + credit + 5) % 2**32, 0) == 0


@given(u32, small, small)
def test_remote_incoming_window(next_incoming, window, sent):
    """2.5.6: remote-incoming-window = next-incoming-id(flow) + incoming-window(flow)
    - next-outgoing-id(endpoint)."""
    horizon = remote_incoming_horizon(next_incoming, window, 0)
    next_outgoing = (next_incoming + min(sent, window)) % 2**32
    assert window_left(horizon, next_outgoing) == window - min(sent, window)
    assert remote_incoming_horizon(None, window, next_incoming) == horizon


def test_credit_horizon_wraps():
    assert credit_horizon(2**32 - 1, 2) == 1
