"""Public engine hooks for crafted traffic (issue 8 §2): a session begun with a chosen
first transfer-id, `Session.send_begin()` for a session made directly, and event
observers that see (or consume) every event as the engine raises it.

An in-memory ConnectionPair: what one engine sends, the other decodes and checks.
"""

from __future__ import annotations

import pytest

from amqp10.engine import (
    DispositionReceived,
    RemoteBegin,
    Session,
    SessState,
    UsageError,
)
from amqp10.engine.testing import ConnectionPair
from amqp10.spec import Role


def _pair() -> ConnectionPair:
    pair = ConnectionPair()
    pair.open()
    pair.take("client")
    pair.take("server")
    return pair


def test_begin_with_initial_outgoing_id_near_the_wrap():
    """2.5.6: transfer-ids are serial numbers; our begin's next-outgoing-id starts them."""
    pair = _pair()
    session = pair.client.begin(initial_outgoing_id=0xFFFFFFFE)
    pair.pump()
    remote = next(e for e in pair.take("server") if isinstance(e, RemoteBegin))
    assert remote.begin.next_outgoing_id == 0xFFFFFFFE
    assert remote.session.next_incoming_id == 0xFFFFFFFE
    assert session.initial_outgoing_id == session.next_outgoing_id == 0xFFFFFFFE


def test_send_begin_for_a_session_made_directly():
    pair = _pair()
    session = Session(pair.client, incoming_window=7, initial_outgoing_id=5)
    assert session.state is SessState.UNMAPPED
    session.send_begin()
    assert session.state is SessState.BEGIN_SENT
    pair.pump()
    remote = next(e for e in pair.take("server") if isinstance(e, RemoteBegin))
    assert (remote.begin.next_outgoing_id, remote.begin.incoming_window) == (5, 7)
    remote.session.accept()
    pair.pump()
    assert session.state is SessState.MAPPED
    with pytest.raises(UsageError):
        session.send_begin()  # a second begin is not the application's to ask for


def test_observer_sees_every_event_and_may_consume_it():
    pair = _pair()
    seen, dropped = [], []

    def observe(event):
        seen.append(event)
        if isinstance(event, DispositionReceived):
            dropped.append(event)
            return True  # consumed: never queued
        return None

    pair.client.add_observer(observe)
    session = pair.client.begin()
    pair.pump()
    server_session = next(e for e in pair.take("server") if isinstance(e, RemoteBegin)).session
    server_session.accept()
    pair.pump()
    server_session.disposition(Role.RECEIVER, 0, 3, True)
    pair.pump()
    queued = pair.take("client")
    assert any(isinstance(e, RemoteBegin) and e.session is session for e in queued)
    assert not any(isinstance(e, DispositionReceived) for e in queued)
    assert [(d.first, d.last, d.settled) for d in dropped] == [(0, 3, True)]
    assert [type(e) for e in seen] == [RemoteBegin, DispositionReceived]
    pair.client.remove_observer(observe)
    server_session.disposition(Role.RECEIVER, 4, None, True)
    pair.pump()
    assert any(isinstance(e, DispositionReceived) for e in pair.take("client"))
    assert len(seen) == 2
