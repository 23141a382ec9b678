"""The engine's fast lanes (Connection.fast_lanes: Session.fast_transfer for transfers in,
Link.send for transfers out) against the general path, which is the spec's reference: the
same peer frames and the same application answers fed to an engine with the lanes and
one without must give the same events, the same endpoint state and the same bytes out."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10 import composites
from amqpspec.amqp10.engine import Connection, RemoteAttach, RemoteBegin, RemoteOpen, UsageError
from amqpspec.amqp10.engine.link import Link
from amqpspec.amqp10.engine.policy import EndpointPolicy
from amqpspec.amqp10.engine.session import Session
from amqpspec.amqp10.errors import ProtocolError
from amqpspec.amqp10.frames import AMQP_HEADER, encode_frame

HANDLES = st.sampled_from([0, 0, 0, 0, 0, 1, 2])
SERIALS = st.sampled_from([0, 1, 2, 3, 7, 0x7FFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF])
PAYLOADS = st.sampled_from([b"", b"x", b"hello world!", bytes(40)])

transfers = st.builds(
    composites.Transfer,
    handle=st.sampled_from([0] * 20 + [1, 2]),
    delivery_id=st.sampled_from([1, 2, 3, 0xFFFFFFFF] * 5 + [None]),
    delivery_tag=st.sampled_from([b"t", b"", b"tag-0001"] * 6 + [None]),
    message_format=st.none() | st.sampled_from([0, 1]),
    settled=st.none() | st.booleans(),
    more=st.sampled_from([False] * 6 + [True]),
    aborted=st.sampled_from([False] * 9 + [True]),
    state=st.none() | st.just(composites.Accepted()),
)
transfer_frames = st.tuples(transfers, PAYLOADS)
other_frames = st.one_of(
    st.tuples(
        st.builds(
            composites.Attach,
            name=st.sampled_from(["b", "c"]),
            handle=st.sampled_from([1, 2]),
            role=st.sampled_from([False, False, True]),
            source=st.just(composites.Source(address="s")),
            target=st.just(composites.Target(address="t")),
            initial_delivery_count=st.none() | SERIALS,
        ),
        st.just(b""),
    ),
    st.tuples(
        st.builds(
            composites.Flow,
            next_incoming_id=st.none() | SERIALS,
            incoming_window=st.integers(0, 4),
            next_outgoing_id=SERIALS,
            outgoing_window=st.integers(0, 4),
            handle=st.sampled_from([None, 0, 1, 1, 2]),
            delivery_count=st.none() | SERIALS,
            link_credit=st.none() | st.integers(0, 4),
            echo=st.booleans(),
        ),
        st.just(b""),
    ),
    st.tuples(
        st.builds(composites.Disposition, role=st.booleans(), first=SERIALS, settled=st.booleans()),
        st.just(b""),
    ),
    st.tuples(
        st.builds(composites.Detach, handle=st.sampled_from([0, 1, 2]), closed=st.booleans()),
        st.just(b""),
    ),
    st.tuples(st.builds(composites.End), st.just(b"")),
)
# mostly transfers: the other frames change the state the next transfers meet
peer_frames = st.integers(0, 15).flatmap(lambda n: other_frames if n == 0 else transfer_frames)
# (frames of one read, then what the application does after it)
steps = st.lists(
    st.tuples(st.lists(peer_frames, min_size=1, max_size=6), st.integers(0, 3)),
    max_size=20,
)
setups = st.fixed_dictionaries(
    {
        "begin_id": SERIALS,
        "remote_window": st.sampled_from([0, 1, 3, 100]),
        "window": st.sampled_from([1, 2, 5, 40, 40, 40]),
        "auto_window": st.booleans(),
        "enforce": st.booleans(),
        "credit": st.sampled_from([0, 1, 3, 40, 40, 40]),
        "max_message_size": st.sampled_from([None, None, None, 1, 12]),
    }
)


def _plain(value):
    if isinstance(value, Link):
        return ("link", value.name, value.handle, value.is_sender)
    if isinstance(value, Session):
        return ("session", value.channel)
    if isinstance(value, ProtocolError):  # an exception compares by identity: compare its facts
        return ("error", value.kind, value.condition, value.description, value.scope)
    return value


def _event(event) -> tuple:
    fields = dataclasses.fields(event) if dataclasses.is_dataclass(event) else ()
    return (type(event).__name__, *(_plain(getattr(event, f.name)) for f in fields))


def _state(conn: Connection) -> tuple:
    out = [conn.state, conn.frames_received, conn.frames_sent]
    for channel, session in sorted(conn.sessions_by_channel.items()):
        out.append(
            (
                channel,
                session.state,
                session.next_incoming_id,
                session.incoming_window,
                session.enforced_horizon,
                session.next_outgoing_id,
                session.next_delivery_id,
            )
        )
        for handle, link in sorted(session.links.items()):
            out.append(
                (
                    handle,
                    link.state,
                    link.delivery_count,
                    link.link_credit,
                    link.granted_horizon,
                    link.frames_in_delivery,
                    link.bytes_in_delivery,
                    link.assembler.in_progress,
                )
            )
    return tuple(out)


class _App:
    """A deterministic application: the same answers on both engines."""

    def __init__(self, conn: Connection, setup: dict) -> None:
        self.conn = conn
        self.setup = setup
        self.sent = 0

    def answer(self, action: int) -> list[tuple]:
        seen = []
        conn, setup = self.conn, self.setup
        for event in conn.events():
            seen.append(_event(event))
            try:
                if isinstance(event, RemoteOpen):
                    conn.open()
                elif isinstance(event, RemoteBegin) and event.session.channel is None:
                    event.session.accept(
                        incoming_window=setup["window"], auto_window=setup["auto_window"]
                    )
                elif isinstance(event, RemoteAttach) and event.link.handle is None:
                    event.link.accept(max_message_size=setup["max_message_size"])
                    if not event.link.is_sender:
                        event.link.flow(link_credit=setup["credit"])
            except UsageError as exc:
                seen.append(("refused", str(exc)))
        for session in list(conn.sessions_by_channel.values()):
            for link in list(session.links.values()):
                try:
                    if action == 1 and not link.is_sender:
                        link.flow(link_credit=setup["credit"] + 1)
                    elif action == 2 and link.is_sender:
                        self.sent += 1
                        link.send(b"out-%d" % self.sent)
                    elif action == 3 and link.is_sender:
                        link.send(b"z", delivery_tag=b"tag", settled=True)
                except UsageError as exc:
                    seen.append(("refused", str(exc)))
            if action == 1:
                try:
                    session.flow(incoming_window=setup["window"])
                except UsageError as exc:
                    seen.append(("refused", str(exc)))
        return seen


def _engine(fast: bool, setup: dict) -> tuple[Connection, _App]:
    conn = Connection("server", "engine", policy=EndpointPolicy(enforce_window=setup["enforce"]))
    conn.fast_lanes = fast
    return conn, _App(conn, setup)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups, steps)
def test_fast_lanes_match_the_general_path(setup, sequence):
    engines = [_engine(True, setup), _engine(False, setup)]
    opening = AMQP_HEADER.encode() + encode_frame(composites.Open(container_id="peer"))
    opening += encode_frame(
        composites.Begin(next_outgoing_id=setup["begin_id"], incoming_window=3, outgoing_window=9)
    )
    # "r" is the engine's sending link: its transfers take Link.send's lane
    for name, handle, role in (("a", 0, False), ("r", 1, True)):
        attach = composites.Attach(
            name=name,
            handle=handle,
            role=role,
            source=composites.Source(address="s"),
            target=composites.Target(),
        )
        opening += encode_frame(attach)
    opening += encode_frame(
        composites.Flow(
            next_incoming_id=0,
            incoming_window=setup["remote_window"],
            next_outgoing_id=setup["begin_id"],
            outgoing_window=9,
            handle=1,
            delivery_count=0,
            link_credit=5,
        )
    )
    reads = [(opening, 0)] + [
        (b"".join(encode_frame(p, 0, body) for p, body in frames), action)
        for frames, action in sequence
    ]
    for data, action in reads:
        results = []
        for conn, app in engines:
            conn.receive_data(data, 0.0)
            seen = app.answer(action)
            results.append((seen, _state(conn), conn.data_to_send(0.0)))
        assert results[0] == results[1]


def test_fast_lane_takes_the_common_transfer(monkeypatch):
    """The lane is really taken for a plain one-frame transfer (so the comparison above
    compares two different paths), and not with fast_lanes off."""
    general = []
    original = Session.receive
    monkeypatch.setattr(
        Session, "receive", lambda self, frame: (general.append(frame), original(self, frame))
    )
    setup = {"window": 5, "auto_window": True, "enforce": True, "credit": 3}
    setup["max_message_size"] = None
    for fast, expected in ((True, 0), (False, 1)):
        conn, app = _engine(fast, setup)
        conn.receive_data(
            AMQP_HEADER.encode() + encode_frame(composites.Open(container_id="p")), 0.0
        )
        begin = composites.Begin(next_outgoing_id=0, incoming_window=5, outgoing_window=5)
        conn.receive_data(encode_frame(begin), 0.0)
        conn.receive_data(encode_frame(composites.Attach(name="a", handle=0, role=False)), 0.0)
        app.answer(0)
        conn.data_to_send(0.0)  # the window and the credit reach the peer (2.5.6)
        general.clear()
        conn.receive_data(
            encode_frame(composites.Transfer(handle=0, delivery_id=0, delivery_tag=b"t"), 0, b"m"),
            0.0,
        )
        received = [e for e in conn.events() if type(e).__name__ == "TransferReceived"]
        assert [e.payload for e in received] == [b"m"]
        assert (
            len([f for f in general if isinstance(f.performative, composites.Transfer)]) == expected
        )
