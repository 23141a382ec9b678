"""Robustness: whatever frames a peer sends, in whatever order, the engine never raises
from receive_data(); it answers with the spec's errors and its output stays decodable."""

from __future__ import annotations

import performative_strategies as ps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10.composites import (
    Accepted,
    Close,
    End,
    Open,
    Source,
    Target,
    Transfer,
)
from amqpspec.amqp10.engine import Connection, RemoteAttach, RemoteBegin, RemoteOpen
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, FrameDecoder, encode_frame

small = st.integers(0, 3)
serial = st.sampled_from([0, 1, 2, 5, 0xFFFFFFFF, 0x7FFFFFFF])

performatives = st.one_of(
    ps.begins(serial, small),
    ps.attaches(
        serial, small, source=st.just(Source(address="s")), target=st.just(Target(address="t"))
    ),
    ps.flows(serial, small),
    ps.transfers(small, handle=small),
    ps.dispositions(small, state=ps.maybe(st.just(Accepted()))),
    ps.detaches(small),
    st.builds(End),
    st.builds(Close),
    st.builds(Open, container_id=st.just("again")),
)
frames = st.lists(st.tuples(performatives, small, st.binary(max_size=20)), max_size=25)


def _answer(conn: Connection) -> None:
    """A cooperative application: accept what arrives, grant some credit."""
    for event in conn.events():
        if isinstance(event, RemoteOpen) and conn.can_begin is False:
            conn.open()
        elif isinstance(event, RemoteBegin) and event.session.channel is None:
            event.session.accept()
        elif isinstance(event, RemoteAttach) and event.link.handle is None:
            event.link.accept()
            if not event.link.is_sender:
                event.link.flow(link_credit=2)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames, st.booleans())
def test_engine_never_raises_on_peer_frames(sequence, server):
    conn = Connection("server" if server else "client", "engine")
    if not server:
        conn.open()
    conn.receive_data(AMQP_HEADER.encode(), 0.0)
    conn.receive_data(encode_frame(Open(container_id="peer")), 0.0)
    _answer(conn)
    for performative, channel, payload in sequence:
        body = payload if isinstance(performative, Transfer) else b""
        conn.receive_data(encode_frame(performative, channel, body), 0.0)
        try:
            _answer(conn)
        except Exception as exc:  # the app may be refused, the engine must not break
            assert type(exc).__name__ == "UsageError", exc
    decoder = FrameDecoder()
    decoder.feed(conn.data_to_send(0.0))
    items = list(decoder)
    assert items[0] == AMQP_HEADER
    assert all(isinstance(i, Frame) for i in items[1:])
