"""The real engine honours its tables: for every engine-reachable state of a connection,
session and link endpoint, and every input the peer or the application can produce
there, the engine moves to the tabled next state, or reports the tabled error (and
sends it in a close / end / detach when its state still allows), or raises UsageError.

States are found by breadth-first search over input sequences applied to a fresh engine;
each (state, input) case replays the shortest path to the state, then applies the input.
The peer is scripted with amqp10.frames.encode_frame + composites; what the engine sends
is decoded with FrameDecoder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from amqpspec.amqp10 import composites
from amqpspec.amqp10.engine import (
    Connection,
    ProtocolErrorRaised,
    RemoteAttach,
    RemoteBegin,
    UsageError,
)
from amqpspec.amqp10.engine.transitions import (
    CONNECTION_ERRORS,
    CONNECTION_TABLE,
    LINK_ERRORS,
    LINK_TABLE,
    SESSION_ERRORS,
    SESSION_TABLE,
    ConnInput,
    ConnState,
    LinkInput,
    LinkState,
    SessInput,
    SessState,
)
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, FrameDecoder, encode_frame
from amqpspec.amqp10.spec import Cond, Role


@dataclass
class Harness:
    """One engine under test and a scripted peer."""

    role: str
    conn: Connection = None
    decoder: FrameDecoder = field(default_factory=FrameDecoder)
    sent: list = field(default_factory=list)
    events: list = field(default_factory=list)
    session: object = None
    link: object = None
    channels: int = 0

    def __post_init__(self) -> None:
        self.conn = Connection(self.role, "engine", auto_reply=False)

    def feed(self, data: bytes) -> None:
        self.conn.receive_data(data, 0.0)
        self.collect()

    def frame(self, performative, channel: int = 0) -> None:
        self.feed(encode_frame(performative, channel))

    def collect(self) -> None:
        self.decoder.feed(self.conn.data_to_send(0.0))
        try:
            self.sent.extend(item for item in self.decoder if isinstance(item, Frame))
        except Exception:  # the engine never sends undecodable bytes: fail loudly
            raise
        for event in self.conn.events():
            self.events.append(event)
            if isinstance(event, RemoteBegin) and self.session is None:
                self.session = event.session
            if isinstance(event, RemoteAttach) and self.link is None:
                self.link = event.link

    def errors_sent(self, kind) -> list[str]:
        return [
            f.performative.error.condition
            for f in self.sent
            if isinstance(f.performative, kind) and f.performative.error is not None
        ]

    def reported(self) -> list[str]:
        return [e.condition for e in self.events if isinstance(e, ProtocolErrorRaised)]


@dataclass(frozen=True)
class Op:
    """An input as the engine sees it: what the test does, and the table input(s)."""

    inp: object
    run: Callable[[Harness], None]


def explore(start: Callable[[], Harness], ops: dict, observe, expandable, depth: int):
    """Shortest op path to every reachable observed state."""
    paths = {observe(start()): ()}
    frontier = [()]
    for _ in range(depth):
        next_frontier = []
        for path in frontier:
            for name in ops:
                h = replay(start, ops, (*path, name))
                if h is None or not expandable(h):
                    continue
                state = observe(h)
                if state not in paths:
                    paths[state] = (*path, name)
                    next_frontier.append((*path, name))
        frontier = next_frontier
    return paths


def replay(start, ops, path) -> Harness | None:
    h = start()
    for name in path:
        try:
            ops[name].run(h)
        except UsageError:
            return None
        h.collect()
    return h


# --- connection ---------------------------------------------------------------------------

C = ConnInput
_AWAITING_HEADER = {ConnState.START, ConnState.HDR_SENT, ConnState.OPEN_PIPE, ConnState.OC_PIPE}


def _next_begin(h: Harness) -> None:
    h.channels += 1
    h.frame(composites.Begin(next_outgoing_id=0, incoming_window=5, outgoing_window=5), h.channels)


CONN_OPS = {
    "open": Op(C.SEND_OPEN, lambda h: h.conn.open()),
    "close": Op(C.SEND_CLOSE, lambda h: h.conn.close()),
    "close-error": Op(C.SEND_CLOSE_ERROR, lambda h: h.conn.close(Cond.INTERNAL_ERROR)),
    "begin": Op(C.SEND_FRAME, lambda h: h.conn.begin()),
    "recv-header": Op(C.RECV_HEADER, lambda h: h.feed(AMQP_HEADER.encode())),
    "recv-bad-header": Op(C.RECV_BAD_HEADER, lambda h: h.feed(b"AMQP\x01\x01\x00\x00")),
    "recv-open": Op(C.RECV_OPEN, lambda h: h.frame(composites.Open(container_id="peer"))),
    "recv-close": Op(C.RECV_CLOSE, lambda h: h.frame(composites.Close())),
    "recv-begin": Op(C.RECV_FRAME, _next_begin),
    "transport-closed": Op(C.TRANSPORT_CLOSED, lambda h: h.feed(b"")),
}


def _conn_expect(state: ConnState, op: Op):
    """(expected state, error condition or None, close expected?) from the table.

    Engine facts the table alone does not show: open() in START sends the header
    first; a header received in START is answered with ours at once; while a header
    is awaited any bytes are read as a header (so a frame there is a bad header).
    """
    inp = op.inp
    if state in _AWAITING_HEADER and inp in (C.RECV_OPEN, C.RECV_CLOSE, C.RECV_FRAME):
        inp = C.RECV_BAD_HEADER
    steps = [C.SEND_HEADER, inp] if (state, inp) == (ConnState.START, C.SEND_OPEN) else [inp]
    current = state
    for step in steps:
        transition = CONNECTION_TABLE.get((current, step))
        if transition is None:
            return _refused(current, step, CONNECTION_TABLE, CONNECTION_ERRORS, C.SEND_CLOSE_ERROR)
        current = transition.next_state
    if current is ConnState.HDR_RCVD:  # 2.2: our header answers the peer's
        current = CONNECTION_TABLE[current, C.SEND_HEADER].next_state
    if inp is C.RECV_BAD_HEADER:  # reported, answered with our header, no close (2.2)
        return current, Cond.FRAMING_ERROR, False
    return current, None, False


def _refused(state, inp, table, errors, error_input):
    if not inp.value.startswith("RECV"):
        return state, UsageError, False
    condition, _ = errors[state, inp]
    answer = table.get((state, error_input))
    if answer is None:
        return state, condition, False
    return answer.next_state, condition, True


def _conn_cases():
    cases = []
    for role in ("client", "server"):
        paths = explore(
            lambda role=role: Harness(role),
            CONN_OPS,
            lambda h: h.conn.state,
            lambda h: not h.conn.finished,
            depth=5,
        )
        for state, path in paths.items():
            for name in CONN_OPS:
                cases.append(pytest.param(role, path, name, id=f"{role}-{state.value}-{name}"))
    return cases


CONN_CASES = _conn_cases()


def test_connection_exploration_reaches_the_spec_states():
    reached = {case.values[0] + ":" + case.id.split("-")[1] for case in CONN_CASES}
    for state in ("START", "HDR_EXCH", "OPEN_PIPE", "OPEN_SENT", "OPEN_RCVD", "OPENED"):
        assert f"client:{state}" in reached or f"server:{state}" in reached
    for state in ("OC_PIPE", "CLOSE_PIPE", "CLOSE_SENT", "CLOSE_RCVD", "DISCARDING"):
        assert any(r.endswith(":" + state) for r in reached), state


@pytest.mark.parametrize(("role", "path", "op_name"), CONN_CASES)
def test_connection_engine_follows_table(role, path, op_name):
    h = replay(lambda: Harness(role), CONN_OPS, path)
    state = h.conn.state
    op = CONN_OPS[op_name]
    expected, error, close_expected = _conn_expect(state, op)
    closes_before = len(h.errors_sent(composites.Close))
    reported_before = len(h.reported())
    if error is UsageError:
        with pytest.raises(UsageError):
            op.run(h)
        assert h.conn.state is state
        return
    op.run(h)
    h.collect()
    if error is None:
        assert h.conn.state is expected
        assert not h.reported()[reported_before:]
        return
    assert error in h.reported()[reported_before:]
    new_closes = h.errors_sent(composites.Close)[closes_before:]
    assert new_closes == ([error] if close_expected else [])
    assert h.conn.state is expected


# --- session ------------------------------------------------------------------------------

S = SessInput


def _opened(role: str = "client") -> Harness:
    h = Harness(role)
    h.conn.open()
    h.feed(AMQP_HEADER.encode() + encode_frame(composites.Open(container_id="peer")))
    assert h.conn.state is ConnState.OPENED
    h.sent.clear()
    return h


def _send_begin(h: Harness) -> None:
    if h.session is None:
        h.session = h.conn.begin()
    else:
        h.session.accept()


def _recv_begin(h: Harness) -> None:
    ours = None
    if h.session is not None:  # answer our begin (or, for the peer's own session, chan 0)
        ours = h.session.channel if h.session.channel is not None else 0
    h.frame(
        composites.Begin(
            remote_channel=ours, next_outgoing_id=0, incoming_window=5, outgoing_window=5
        )
    )


def _session(h: Harness):
    if h.session is None:
        raise UsageError("no session object yet")  # the app has nothing to call
    return h.session


def _recv_attach(h: Harness) -> None:
    h.channels += 1
    h.frame(composites.Attach(name=f"p{h.channels}", handle=h.channels, role=Role.RECEIVER))


def _send_attach(h: Harness) -> None:
    h.channels += 1
    _session(h).attach_sender(f"a{h.channels}")


SESSION_OPS = {
    "begin": Op(S.SEND_BEGIN, _send_begin),
    "recv-begin": Op(S.RECV_BEGIN, _recv_begin),
    "end": Op(S.SEND_END, lambda h: _session(h).end()),
    "end-error": Op(S.SEND_END_ERROR, lambda h: _session(h).end(Cond.INTERNAL_ERROR)),
    "recv-end": Op(S.RECV_END, lambda h: h.frame(composites.End())),
    "attach": Op(S.SEND_ATTACH, _send_attach),
    "recv-attach": Op(S.RECV_ATTACH, _recv_attach),
    "flow": Op(S.SEND_FLOW, lambda h: _session(h).flow()),
    "recv-flow": Op(
        S.RECV_FLOW,
        lambda h: h.frame(
            composites.Flow(
                next_incoming_id=0, incoming_window=5, next_outgoing_id=0, outgoing_window=5
            )
        ),
    ),
    "disposition": Op(S.SEND_DISPOSITION, lambda h: _session(h).disposition(Role.RECEIVER, 0)),
    "recv-disposition": Op(
        S.RECV_DISPOSITION, lambda h: h.frame(composites.Disposition(role=Role.SENDER, first=0))
    ),
}


def _session_state(h: Harness) -> SessState:
    return SessState.UNMAPPED if h.session is None else h.session.state


def _session_key(h: Harness) -> tuple[SessState, bool]:
    """The table state plus whether the peer's channel is mapped to the session: after
    our end raced the peer's begin (END_SENT / DISCARDING) it is not, yet."""
    session = h.session
    return _session_state(h), session is not None and (
        h.conn.sessions_by_remote_channel.get(session.remote_channel) is session
    )


def _session_expect(h: Harness, state: SessState, op: Op):
    """(expected state, error, end expected, error scope)."""
    mapped = _session_key(h)[1]
    if op.inp is not S.RECV_BEGIN and op.inp.value.startswith("RECV") and not mapped:
        state = SessState.UNMAPPED  # 2.5.1: a frame on a channel the peer never began
    if op.inp is S.RECV_BEGIN and mapped:
        state = SessState.MAPPED  # 2.5.1: a second begin on a channel in use
    transition = SESSION_TABLE.get((state, op.inp))
    if transition is None:
        scope = SESSION_ERRORS.get((state, op.inp), (None, None))[1]
        return (*_refused(state, op.inp, SESSION_TABLE, SESSION_ERRORS, S.SEND_END_ERROR), scope)
    return transition.next_state, None, False, None


def _session_cases():
    cases = []
    for role in ("client", "server"):
        paths = explore(
            lambda role=role: _opened(role),
            SESSION_OPS,
            _session_key,
            # a session that went back to UNMAPPED is over: its object is not reused
            lambda h: (
                h.conn.state is ConnState.OPENED
                and not (h.session is not None and h.session.state is SessState.UNMAPPED)
            ),
            depth=3,
        )
        for (state, mapped), path in paths.items():
            tag = f"{state.value}{'' if mapped else '~unmapped'}"
            for name in SESSION_OPS:
                cases.append(pytest.param(role, path, name, id=f"{role}-{tag}-{name}"))
    return cases


SESSION_CASES = _session_cases()


def test_session_exploration_reaches_every_state():
    reached = {case.id.split("-")[1].split("~")[0] for case in SESSION_CASES}
    assert reached == {s.value for s in SessState}


@pytest.mark.parametrize(("role", "path", "op_name"), SESSION_CASES)
def test_session_engine_follows_table(role, path, op_name):
    h = replay(lambda: _opened(role), SESSION_OPS, path)
    state = _session_state(h)
    op = SESSION_OPS[op_name]
    expected, error, answer_expected, scope = _session_expect(h, state, op)
    if error is UsageError:
        with pytest.raises(UsageError):
            op.run(h)
        assert _session_state(h) is state
        return
    before = (len(h.errors_sent(composites.End)), len(h.errors_sent(composites.Close)))
    reported_before = len(h.reported())
    op.run(h)
    h.collect()
    if error is None:
        assert _session_state(h) is expected
        assert not h.reported()[reported_before:]
        return
    assert error in h.reported()
    if scope == "connection":  # the connection closes with it
        assert h.errors_sent(composites.Close)[before[1] :] == [error]
    elif answer_expected:
        assert h.errors_sent(composites.End)[before[0] :] == [error]
        assert _session_state(h) is expected
    else:
        assert h.errors_sent(composites.End)[before[0] :] == []


# --- link -------------------------------------------------------------------------------

L = LinkInput


def _mapped(role: str = "client") -> Harness:
    h = _opened(role)
    h.session = h.conn.begin()
    h.frame(
        composites.Begin(
            remote_channel=h.session.channel,
            next_outgoing_id=0,
            incoming_window=50,
            outgoing_window=50,
        )
    )
    h.events.clear()
    h.sent.clear()
    return h


def _link(h: Harness):
    if h.link is None:
        raise UsageError("no link object yet")
    return h.link


def _send_attach_link(h: Harness) -> None:
    if h.link is None:
        h.link = h.session.attach_receiver("L")
    else:
        h.link.accept()


def _recv_transfer(h: Harness) -> None:
    h.channels += 1
    h.frame(composites.Transfer(handle=0, delivery_id=h.channels, delivery_tag=b"t%d" % h.channels))


# The engine's link is a receiver; the scripted peer is the sender, handle 0.
LINK_OPS = {
    "attach": Op(L.SEND_ATTACH, _send_attach_link),
    "recv-attach": Op(
        L.RECV_ATTACH,
        lambda h: h.frame(
            composites.Attach(name="L", handle=0, role=Role.SENDER, initial_delivery_count=0)
        ),
    ),
    "flow": Op(L.SEND_FLOW, lambda h: _link(h).flow(link_credit=100)),
    "recv-flow": Op(
        L.RECV_FLOW,
        lambda h: h.frame(
            composites.Flow(
                next_incoming_id=0,
                incoming_window=50,
                next_outgoing_id=0,
                outgoing_window=50,
                handle=0,
                delivery_count=0,
                link_credit=0,
            )
        ),
    ),
    "recv-transfer": Op(L.RECV_TRANSFER, _recv_transfer),
    "detach": Op(L.SEND_DETACH, lambda h: _link(h).detach()),
    "recv-detach": Op(L.RECV_DETACH, lambda h: h.frame(composites.Detach(handle=0, closed=True))),
}


def _link_state(h: Harness) -> LinkState:
    return LinkState.DETACHED if h.link is None else h.link.state


def _link_key(h: Harness) -> tuple[LinkState, bool]:
    """The table state plus whether the peer's handle maps to the link: not before the
    peer's attach, and no longer after its detach."""
    link = h.link
    return _link_state(h), link is not None and (
        h.session.links_by_remote_handle.get(link.remote_handle) is link
    )


def _link_expect(h: Harness, state: LinkState, op: Op):
    if op.inp.value.startswith("RECV") and not _link_key(h)[1]:
        if op.inp is L.RECV_ATTACH and state is LinkState.DETACH_RCVD:
            return state, "new-link", False  # a free handle: the peer attaches a new link
        state = LinkState.DETACHED if op.inp is not L.RECV_ATTACH else state
    transition = LINK_TABLE.get((state, op.inp))
    if transition is None:
        return _refused(state, op.inp, LINK_TABLE, LINK_ERRORS, L.SEND_DETACH)
    if op.inp is L.RECV_TRANSFER and transition.action == "process" and h.link.link_credit <= 0:
        # 2.6.7: a transfer the table admits can still break the credit rule
        return LINK_TABLE[state, L.SEND_DETACH].next_state, Cond.TRANSFER_LIMIT_EXCEEDED, True
    return transition.next_state, None, False


def _link_cases():
    paths = explore(
        _mapped,
        LINK_OPS,
        _link_key,
        lambda h: (
            h.session.state is SessState.MAPPED
            and not (h.link is not None and h.link.state is LinkState.DETACHED)
        ),
        depth=3,
    )
    return [
        pytest.param(path, name, id=f"{state.value}{'' if mapped else '~unmapped'}-{name}")
        for (state, mapped), path in paths.items()
        for name in LINK_OPS
    ]


LINK_CASES = _link_cases()


def test_link_exploration_reaches_every_state():
    reached = {case.id.split("-")[0].split("~")[0] for case in LINK_CASES}
    assert reached == {s.value for s in LinkState}


@pytest.mark.parametrize(("path", "op_name"), LINK_CASES)
def test_link_engine_follows_table(path, op_name):
    h = replay(_mapped, LINK_OPS, path)
    state = _link_state(h)
    op = LINK_OPS[op_name]
    expected, error, answer_expected = _link_expect(h, state, op)
    if error is UsageError:
        with pytest.raises(UsageError):
            op.run(h)
        assert _link_state(h) is state
        return
    before = (len(h.errors_sent(composites.Detach)), len(h.errors_sent(composites.End)))
    reported_before = len(h.reported())
    old_link = h.link
    op.run(h)
    h.collect()
    if error == "new-link":
        attaches = [e.link for e in h.events if isinstance(e, RemoteAttach)]
        assert attaches[-1] is not old_link and old_link.state is state
        return
    if error is None:
        assert _link_state(h) is expected
        assert not h.reported()[reported_before:]
        return
    assert error in h.reported()[reported_before:]
    if error == Cond.TRANSFER_LIMIT_EXCEEDED:
        scope = "link"
    elif not _link_key(h)[1] and op.inp is not L.RECV_ATTACH:
        scope = "session"  # unattached-handle
    else:
        scope = LINK_ERRORS[state, op.inp][1]
    if scope == "session":  # handle errors end the session (2.8.16)
        assert h.errors_sent(composites.End)[before[1] :] == [error]
    elif answer_expected:
        assert h.errors_sent(composites.Detach)[before[0] :] == [error]
        assert _link_state(h) is expected
