"""The endpoint transition tables (transitions.py): every (state, input) pair of every
table either moves to the tabled next state or raises the tabled error, and random
input sequences never leave a table's states."""

from __future__ import annotations

from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpspec.amqp10.engine.transitions import (
    CONNECTION_TABLE,
    LINK_TABLE,
    SASL_TABLE,
    SESSION_TABLE,
    TABLES,
    ConnInput,
    ConnState,
    LinkInput,
    LinkState,
    SessInput,
    SessState,
    StateMachine,
    UsageError,
)
from amqpspec.amqp10.errors import ProtocolError
from amqpspec.amqp10.spec import Cond

ALL_PAIRS = [
    pytest.param(name, state, inp, table, errors, id=f"{name}-{state.value}-{inp.value}")
    for name, states, inputs, table, errors in TABLES
    for state, inp in product(states, inputs)
]


@pytest.mark.parametrize(("name", "state", "inp", "table", "errors"), ALL_PAIRS)
def test_every_pair(name, state, inp, table, errors):
    machine = StateMachine(name, table, errors, state)
    if (state, inp) in table:
        action = machine.process(inp)
        assert machine.state is table[state, inp].next_state
        assert action == table[state, inp].action
    elif inp.value.startswith("RECV"):
        condition, scope = errors[state, inp]
        with pytest.raises(ProtocolError) as raised:
            machine.process(inp)
        assert (raised.value.condition, raised.value.scope) == (condition, scope)
        assert machine.state is state  # a refused input changes nothing
    else:
        with pytest.raises(UsageError):
            machine.process(inp)
        assert machine.state is state


@pytest.mark.parametrize(("name", "states", "inputs", "table", "errors"), TABLES)
def test_tables_are_closed_and_every_refused_recv_has_an_error(name, states, inputs, table, errors):
    for (state, inp), transition in table.items():
        assert state in states and inp in inputs and transition.next_state in states
    refused_recv = {(s, i) for s, i in product(states, inputs) if i.value.startswith("RECV")} - set(
        table
    )
    assert set(errors) == refused_recv
    for condition, scope in errors.values():
        assert condition.startswith("amqp:") and scope in ("connection", "session", "link")


@pytest.mark.parametrize(("name", "states", "inputs", "table", "errors"), TABLES)
def test_every_state_is_reachable_from_the_start(name, states, inputs, table, errors):
    start = next(iter(states))
    seen, frontier = {start}, [start]
    while frontier:
        state = frontier.pop()
        for (s, _), transition in table.items():
            if s is state and transition.next_state not in seen:
                seen.add(transition.next_state)
                frontier.append(transition.next_state)
    assert seen == set(states)


def test_spec_diagram_edges_are_present():
    """A few edges straight from the 2.4.6 / 2.5.5 diagrams."""
    c, ci = ConnState, ConnInput
    assert CONNECTION_TABLE[c.HDR_SENT, ci.SEND_OPEN].next_state is c.OPEN_PIPE
    assert CONNECTION_TABLE[c.OPEN_PIPE, ci.SEND_CLOSE].next_state is c.OC_PIPE
    assert CONNECTION_TABLE[c.OC_PIPE, ci.RECV_HEADER].next_state is c.CLOSE_PIPE
    assert CONNECTION_TABLE[c.CLOSE_PIPE, ci.RECV_OPEN].next_state is c.CLOSE_SENT
    assert CONNECTION_TABLE[c.OPENED, ci.SEND_CLOSE_ERROR].next_state is c.DISCARDING
    s, si = SessState, SessInput
    assert SESSION_TABLE[s.BEGIN_SENT, si.RECV_BEGIN].next_state is s.MAPPED
    assert SESSION_TABLE[s.END_SENT, si.RECV_END].next_state is s.UNMAPPED
    assert SESSION_TABLE[s.DISCARDING, si.RECV_TRANSFER].action == "discard"
    k, ki = LinkState, LinkInput
    assert LINK_TABLE[k.ATTACH_SENT, ki.RECV_ATTACH].next_state is k.ATTACHED
    assert (k.ATTACHED, ki.RECV_ATTACH) not in LINK_TABLE
    assert len(SASL_TABLE) >= 10


def test_link_errors_name_the_spec_conditions():
    from amqpspec.amqp10.engine.transitions import LINK_ERRORS, SESSION_ERRORS

    assert LINK_ERRORS[LinkState.ATTACHED, LinkInput.RECV_ATTACH] == (Cond.HANDLE_IN_USE, "session")
    assert LINK_ERRORS[LinkState.DETACHED, LinkInput.RECV_TRANSFER] == (
        Cond.UNATTACHED_HANDLE,
        "session",
    )
    assert LINK_ERRORS[LinkState.ATTACH_RCVD, LinkInput.RECV_TRANSFER][0] == (
        Cond.TRANSFER_LIMIT_EXCEEDED
    )
    assert SESSION_ERRORS[SessState.MAPPED, SessInput.RECV_BEGIN] == (
        Cond.ILLEGAL_STATE,
        "connection",
    )


def _walk(table_entry):
    name, states, inputs, table, errors = table_entry
    return st.lists(st.sampled_from(list(inputs)), max_size=30).map(
        lambda seq: (name, states, table, errors, seq)
    )


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TABLES).flatmap(_walk))
def test_random_input_sequences_follow_the_table(case):
    name, states, table, errors, sequence = case
    start = next(iter(states))
    machine = StateMachine(name, table, errors, start)
    expected = start
    for inp in sequence:
        transition = table.get((expected, inp))
        try:
            machine.process(inp)
        except (ProtocolError, UsageError) as exc:
            assert transition is None
            assert isinstance(exc, ProtocolError) == inp.value.startswith("RECV")
        else:
            assert transition is not None
            expected = transition.next_state
        assert machine.state is expected
