"""amqp10.monitor: one connection's bytes, both directions -> items -> the checker.

Unit tests (whole, byte by byte and in random chunks; SASL switch 5.3.2; a client's AMQP
header pipelined after its last SASL frame; raw recording after a decode error and a
capture gap; sniffing the start; the origin filter; frame-log items through `observe`).
The engine pair test drives `amqp10.engine.testing.ConnectionPair` through random legal
traffic and feeds both directions, in any chunking, to the monitor: zero violations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_event
from hypothesis import strategies as st
from traces_support.crafted import session_frames

from amqpspec.amqp10.composites import (
    Accepted,
    Close,
    Open,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    Source,
    Transfer,
)
from amqpspec.amqp10.engine import (
    ClientSasl,
    Connection,
    DeliveryAborted,
    DispositionReceived,
    Link,
    LinkState,
    ProtocolErrorRaised,
    RemoteAttach,
    RemoteBegin,
    RemoteDetach,
    ServerSasl,
    Session,
    SessState,
    TransferReceived,
    UsageError,
)
from amqpspec.amqp10.engine.testing import ConnectionPair
from amqpspec.amqp10.frames import (
    AMQP_HEADER,
    SASL_HEADER,
    Frame,
    FrameType,
    ProtocolHeader,
    encode_frame,
)
from amqpspec.amqp10.monitor import (
    KIND_FRAME,
    KIND_HEADER,
    KIND_RAW,
    ConnectionMonitor,
    MonitorOutput,
)
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.spec import Role, SndSettleMode
from amqpspec.amqp10.types import symbol


def sasl(performative) -> bytes:
    return encode_frame(performative, frame_type=FrameType.SASL)


SASL_CLIENT = [
    SASL_HEADER.encode(),
    sasl(SaslInit(mechanism=symbol("ANONYMOUS"))),
]
SASL_SERVER = [
    SASL_HEADER.encode(),
    sasl(SaslMechanisms(sasl_server_mechanisms=[symbol("ANONYMOUS")])),
    sasl(SaslOutcome(code=0)),
]
OPEN_CLIENT = [AMQP_HEADER.encode(), encode_frame(Open(container_id="c"))]
OPEN_SERVER = [AMQP_HEADER.encode(), encode_frame(Open(container_id="s"))]


def run(steps, chunking=None, **options) -> tuple[ConnectionMonitor, MonitorOutput]:
    """Feed (direction, bytes) steps, cut by `chunking(data)`; everything it produced."""
    monitor = ConnectionMonitor(7, **options)
    total = MonitorOutput()
    for time, (direction, data) in enumerate(steps):
        for piece in chunking(data) if chunking else [data]:
            _add(total, monitor.feed(direction, piece, float(time)))
    _add(total, monitor.finish())
    return monitor, total


def _add(total: MonitorOutput, out: MonitorOutput) -> None:
    total.items += out.items
    total.violations += out.violations
    total.notes += out.notes


def byte_by_byte(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def random_cuts(seed: int):
    rng = random.Random(seed)

    def cut(data: bytes) -> list[bytes]:
        pieces, start = [], 0
        while start < len(data):
            size = rng.randint(1, 9)
            pieces.append(data[start : start + size])
            start += size
        return pieces

    return cut


def summary(out: MonitorOutput) -> list[tuple]:
    return [(i.direction, i.index, i.name, i.raw) for i in out.items]


# --- decoding ------------------------------------------------------------------------
def test_items_carry_origin_index_time_and_the_exact_bytes():
    steps = session_frames(credit=2, transfers=2)
    monitor, out = run(steps)
    assert [i.index for i in out.items] == list(range(len(out.items)))
    assert all(i.connection_id == 7 for i in out.items)
    assert [i.name for i in out.items if i.direction == SERVER] == [
        "protocol-header",
        "open",
        "begin",
        "attach",
        "transfer",
        "transfer",
    ]
    for direction in (CLIENT, SERVER):
        sent = b"".join(data for d, data in steps if d == direction)
        assert b"".join(i.raw for i in out.items if i.direction == direction) == sent
    assert out.items[0].kind == KIND_HEADER and out.items[1].kind == KIND_FRAME
    assert out.items[-1].time == len(steps) - 1
    assert out.violations == [] and out.notes == []
    assert monitor.next_index == len(out.items)


@pytest.mark.parametrize("chunking", [byte_by_byte, random_cuts(1), random_cuts(2)])
def test_any_chunking_gives_the_same_items_and_verdicts(chunking):
    steps = session_frames(credit=1, transfers=3)  # two transfers beyond credit
    _, whole = run(steps)
    _, cut = run(steps, chunking)
    assert summary(cut) == summary(whole)
    assert cut.violations == whole.violations
    assert [v.rule_id for v in whole.violations] == ["link.credit.transfer-beyond-credit"] * 2


def sasl_steps() -> list[tuple[str, bytes]]:
    return [
        (CLIENT, SASL_CLIENT[0]),
        (SERVER, SASL_SERVER[0] + SASL_SERVER[1]),
        (CLIENT, SASL_CLIENT[1]),
        (SERVER, SASL_SERVER[2] + OPEN_SERVER[0]),
        (CLIENT, b"".join(OPEN_CLIENT)),
        (SERVER, OPEN_SERVER[1]),
    ]


@pytest.mark.parametrize("chunking", [None, byte_by_byte])
def test_sasl_outcome_switches_both_directions_to_a_protocol_header(chunking):
    """5.3.2: after the sasl-outcome both peers continue with a protocol header."""
    _, out = run(sasl_steps(), chunking)
    names = [(i.direction, i.name) for i in out.items]
    assert names == [
        (CLIENT, "protocol-header"),
        (SERVER, "protocol-header"),
        (SERVER, "sasl-mechanisms"),
        (CLIENT, "sasl-init"),
        (SERVER, "sasl-outcome"),
        (SERVER, "protocol-header"),
        (CLIENT, "protocol-header"),
        (CLIENT, "open"),
        (SERVER, "open"),
    ]
    headers = [i.item for i in out.items if i.kind == KIND_HEADER]
    assert headers == [SASL_HEADER, SASL_HEADER, AMQP_HEADER, AMQP_HEADER]
    assert out.violations == [] and out.notes == []


@pytest.mark.parametrize("chunking", [None, byte_by_byte])
def test_a_client_header_pipelined_after_its_last_sasl_frame_is_a_header(chunking):
    """A client may send its AMQP header and open right after sasl-init, before the
    outcome arrives (5.3.2): the monitor reads a header there, not junk."""
    steps = [
        (CLIENT, b"".join(SASL_CLIENT + OPEN_CLIENT)),
        (SERVER, b"".join(SASL_SERVER + OPEN_SERVER)),
    ]
    _, out = run(steps, chunking)
    client = [i.name for i in out.items if i.direction == CLIENT]
    assert client == ["protocol-header", "sasl-init", "protocol-header", "open"]
    assert KIND_RAW not in {i.kind for i in out.items}
    assert out.violations == []


def test_junk_after_a_decode_error_is_kept_raw_and_the_other_direction_goes_on():
    steps = session_frames(credit=5, transfers=0)
    junk = b"\x00\x00\x00\x09\x01\x00\x00\x00\xff"  # DOFF 1: not a frame (2.3.1)
    steps += [(CLIENT, junk), (CLIENT, b"more bytes"), (CLIENT, encode_frame(Close()))]
    steps.append((SERVER, encode_frame(Close())))
    steps.append((SERVER, encode_frame(Close())))  # a second close: a violation after raw
    monitor, out = run(steps)
    raw = [i for i in out.items if i.kind == KIND_RAW]
    assert [r.raw for r in raw] == [junk, b"more bytes", encode_frame(Close())]
    assert monitor.decode_error(CLIENT) is not None and monitor.decode_error(SERVER) is None
    # every byte of the client is still in the items, in order
    sent = b"".join(data for d, data in steps if d == CLIENT)
    assert b"".join(i.raw for i in out.items if i.direction == CLIENT) == sent
    assert [n.index for n in out.notes] == [raw[0].index]
    assert "client bytes from here on could not be decoded (9 bytes: " in out.notes[0].text
    # violations cite the item index, raw items included
    (after_close,) = out.violations
    assert after_close.rule_id == "connection.frame-after-close"
    assert out.items[after_close.frame_index].raw == encode_frame(Close())
    assert after_close.frame_index == out.items[-1].index


def test_a_frame_bigger_than_max_frame_size_is_raw_not_buffered():
    big = encode_frame(
        Transfer(handle=0, delivery_id=0, delivery_tag=b"t", message_format=0), payload=b"x" * 600
    )
    steps = [(CLIENT, b"".join(OPEN_CLIENT)), (CLIENT, big[:100])]
    monitor, out = run(steps, max_frame_size=512)
    assert out.items[-1].kind == KIND_RAW and out.items[-1].raw == big[:100]
    assert "512" in str(monitor.decode_error(CLIENT))


def test_a_capture_gap_turns_the_rest_of_that_direction_raw():
    monitor = ConnectionMonitor()
    frame = encode_frame(Open(container_id="c"))
    out = monitor.feed(CLIENT, AMQP_HEADER.encode() + frame[:5], 1.0)
    assert [i.name for i in out.items] == ["protocol-header"]
    lost = monitor.lose(CLIENT, 2.0)
    assert [(i.kind, i.raw, i.time) for i in lost.items] == [(KIND_RAW, frame[:5], 2.0)]
    assert "capture gap" in lost.notes[0].text
    later = monitor.feed(CLIENT, frame, 3.0)
    assert [(i.kind, i.raw) for i in later.items] == [(KIND_RAW, frame)]
    assert later.notes == []  # one note per direction
    assert monitor.feed(SERVER, b"".join(OPEN_SERVER), 4.0).items[1].name == "open"


def test_finish_returns_the_undecoded_tail_and_runs_the_end_of_trace_rules():
    monitor = ConnectionMonitor(liveness_bound=1.0)
    steps = session_frames(credit=1, transfers=0)
    for direction, data in [*steps, (CLIENT, encode_frame(Close()))]:
        monitor.feed(direction, data, 10.0)
    tail = encode_frame(Close())[:3]
    monitor.feed(SERVER, tail, 10.5)
    out = monitor.finish(30.0)
    assert [(i.kind, i.raw, i.time) for i in out.items] == [(KIND_RAW, tail, 30.0)]
    assert "(3 bytes); not checked" in out.notes[0].text
    # liveness at the end: the server never answered the client's close (2.4.3)
    assert [(v.rule_id, v.origin) for v in out.violations] == [
        ("connection.close-unanswered", SERVER)
    ]
    assert monitor.finish(40.0) == MonitorOutput()
    with pytest.raises(RuntimeError):
        monitor.feed(CLIENT, b"\x00", 41.0)


def test_the_origin_filter_keeps_one_peers_violations():
    steps = [
        (CLIENT, b"".join(OPEN_CLIENT) + encode_frame(Open(container_id="again"))),
        (SERVER, b"".join(OPEN_SERVER) + encode_frame(Open(container_id="again"))),
    ]
    _, both = run(steps)
    assert sorted(v.origin for v in both.violations) == [CLIENT, SERVER]
    broker, only = run(steps, violations_of=SERVER)
    assert [v.origin for v in only.violations] == [SERVER]
    assert broker.checker is not None and len(broker.checker.violations) == 2
    with pytest.raises(ValueError):
        ConnectionMonitor(violations_of="broker")


# --- the start of a connection -------------------------------------------------------
@pytest.mark.parametrize("chunking", [None, byte_by_byte])
def test_sniffing_reads_a_header_start_as_a_header(chunking):
    _, out = run(session_frames(credit=1, transfers=1), chunking, expect_header=None)
    _, known = run(session_frames(credit=1, transfers=1), chunking)
    assert summary(out) == summary(known) and out.notes == []


@pytest.mark.parametrize("chunking", [None, byte_by_byte])
def test_a_connection_captured_mid_way_is_decoded_but_not_judged(chunking):
    steps = session_frames(credit=1, transfers=3)[4:]  # no headers, no open
    monitor, out = run(steps, chunking, expect_header=None)
    assert [i.name for i in out.items][:2] == ["begin", "begin"]
    assert KIND_RAW not in {i.kind for i in out.items}
    assert monitor.unchecked and out.violations == []
    assert [(n.index, "mid-connection" in n.text) for n in out.notes] == [(0, True)]


def test_frames_where_a_header_is_due_are_raw_when_the_start_is_known():
    steps = session_frames(credit=1, transfers=1)[4:]
    _, out = run(steps)
    assert {i.kind for i in out.items} == {KIND_RAW}
    assert len(out.notes) == 2


def test_check_false_only_decodes():
    monitor, out = run(session_frames(credit=1, transfers=3), check=False)
    assert monitor.checker is None and out.violations == [] and out.notes == []
    assert len(out.items) == 12


def test_observe_judges_items_decoded_elsewhere_like_feed():
    steps = session_frames(credit=1, transfers=3)
    _, fed = run(steps)
    monitor = ConnectionMonitor(7)
    observed = MonitorOutput()
    for item in fed.items:
        _add(observed, monitor.observe(item))
    _add(observed, monitor.finish())
    assert observed.items == fed.items
    assert observed.violations == fed.violations


@pytest.mark.parametrize("start", [0, 1])  # 1: the capture missed the header (unchecked)
def test_judge_run_judges_a_run_like_judge_per_item(start):
    steps = [
        *session_frames(credit=1, transfers=3),
        (CLIENT, encode_frame(Open(container_id="again"))),
        (SERVER, encode_frame(Open(container_id="again"))),
    ]
    _, fed = run(steps)
    fed.items.append(dataclasses.replace(fed.items[-1], index=len(fed.items), item=None))
    items = fed.items[start:]
    single, batched = ConnectionMonitor(7), ConnectionMonitor(7)
    one = [(p, out) for p, item in enumerate(items) if (out := single.judge(item)) is not None]
    runs = [(p, out) for p, out in batched.judge_run(items[:5])]
    runs += [(p + 5, out) for p, out in batched.judge_run(items[5:])]
    assert runs == one
    if start == 0:  # the repeated opens and the raw tail: violations and a note
        assert any(out.violations for _, out in runs) and runs[-1][1].notes
    else:
        assert "mid-connection" in runs[0][1].notes[0].text
    assert (batched.next_index, batched.last_time) == (single.next_index, single.last_time)
    assert batched.finish() == single.finish()


def test_a_protocol_header_item_is_its_own_encoding():
    _, out = run([(CLIENT, AMQP_HEADER.encode())])
    (item,) = out.items
    assert isinstance(item.item, ProtocolHeader) and item.raw == AMQP_HEADER.encode()
    assert not isinstance(item.item, Frame)


# --- the engine pair under random legal traffic -------------------------------------
class _App:
    """One side's application: answers what arrives, remembers what it may settle."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.begun: list[Session] = []  # sessions the peer began, not answered yet
        self.attached: list[Link] = []  # links the peer attached, not answered yet
        self.links: list[Link] = []
        # delivery-ids we received unsettled / sent unsettled, per session, with the link
        self.incoming: dict[Session, dict[int, Link]] = {}
        self.outgoing: dict[Session, dict[int, Link]] = {}
        self.errors: list[ProtocolErrorRaised] = []

    def take(self, events) -> None:
        for event in events:
            if isinstance(event, RemoteBegin) and event.session.state is SessState.BEGIN_RCVD:
                self.begun.append(event.session)
            elif isinstance(event, RemoteAttach) and event.link.state is LinkState.ATTACH_RCVD:
                self.attached.append(event.link)
            elif isinstance(event, TransferReceived) and not event.settled:
                session = event.link.session
                self.incoming.setdefault(session, {})[event.delivery_id] = event.link
            elif isinstance(event, DispositionReceived) and event.settled:
                mine = self.outgoing if event.role == Role.RECEIVER else self.incoming
                ids = mine.get(event.session, {})
                for delivery_id in range(event.first, event.last + 1):
                    ids.pop(delivery_id, None)
            elif isinstance(event, RemoteDetach | DeliveryAborted):
                self.forget(event.link)
            elif isinstance(event, ProtocolErrorRaised):
                self.errors.append(event)

    def forget(self, link: Link) -> None:
        for table in (self.incoming, self.outgoing):
            for ids in table.values():
                for delivery_id in [d for d, owner in ids.items() if owner is link]:
                    del ids[delivery_id]

    def sessions(self) -> list[Session]:
        return [s for s in self.conn.sessions_by_channel.values() if s.state is SessState.MAPPED]

    def live_links(self, sender: bool | None = None) -> list[Link]:
        return [
            link
            for link in self.links
            if link.state is LinkState.ATTACHED
            and link.session.state is SessState.MAPPED
            and (sender is None or link.is_sender == sender)
        ]


def _actions(app: _App, draw, names) -> list[tuple[str, Callable[[], object]]]:
    """What `app` may do now, by name; the engine refuses the rest (UsageError). The
    actions that move traffic along are listed more than once (weights)."""
    actions: list[tuple[str, Callable[[], object]]] = []

    def add(name: str, action: Callable[[], object], weight: int = 1) -> None:
        actions.extend([(name, action)] * weight)

    if app.conn.can_begin and len(app.conn.sessions_by_channel) < 3:
        add("begin", lambda: app.conn.begin(incoming_window=draw(st.sampled_from(WINDOWS))), 4)
    if app.conn.can_begin and draw(st.integers(0, 39)) == 0:
        add("close", app.conn.close)  # either side, now and then: the rest is refused
    for session in app.begun:
        add("accept-begin", lambda s=session: (app.begun.remove(s), s.accept()), 8)
    for session in app.sessions():
        if len(session.links) < 3:
            add("attach", lambda s=session: _attach(app, s, draw, next(names)), 6)
        add("session-flow", lambda s=session: s.flow(echo=draw(st.booleans())), 2)
        add("end", session.end)
    for link in app.attached:
        add("answer-attach", lambda link=link: _answer_attach(app, link, draw), 8)
    for link in app.live_links(sender=False):
        add("grant", lambda link=link: _grant(link, draw), 8)
    for link in app.live_links(sender=True):
        if link.credit > 0:
            add("send", lambda link=link: _send(app, link, draw), 16)
        if link.drain:
            add("drained", link.drained, 4)
        add("available", lambda link=link: _available(link, draw), 2)
    for link in app.live_links():
        add("detach", lambda link=link: (link.detach(closed=draw(st.booleans())), app.forget(link)))
    for table, role in ((app.incoming, Role.RECEIVER), (app.outgoing, Role.SENDER)):
        for session, ids in table.items():
            if ids and session.state is SessState.MAPPED:
                add("dispose", lambda s=session, i=ids, r=role: _dispose(s, i, r, draw), 10)
    return actions


WINDOWS = [1, 2, 5, 2048]
SND_SETTLE_MODES = [SndSettleMode.MIXED, SndSettleMode.SETTLED, SndSettleMode.UNSETTLED]


def _attach(app: _App, session: Session, draw, name: str) -> None:
    attach = session.attach_sender if draw(st.booleans()) else session.attach_receiver
    mode = draw(st.sampled_from(SND_SETTLE_MODES))
    app.links.append(attach(name, source=Source(address=name), target=name, snd_settle_mode=mode))


def _answer_attach(app: _App, link: Link, draw) -> None:
    app.attached.remove(link)
    if draw(st.integers(0, 9)) == 0:
        link.reject("amqp:not-found")
    else:
        link.accept()
        app.links.append(link)


def _available(link: Link, draw) -> None:
    link.flow(available=draw(st.integers(0, 3)), echo=draw(st.booleans()))


def _grant(link: Link, draw) -> None:
    credit = draw(st.integers(0, 4))
    link.flow(link_credit=credit, drain=draw(st.booleans()), echo=draw(st.booleans()))


def _send(app: _App, link: Link, draw) -> None:
    settled = draw(st.booleans())
    delivery_id = link.send(b"m" * draw(st.sampled_from([0, 10, 700, 1500])), settled=settled)
    if not settled:
        app.outgoing.setdefault(link.session, {})[delivery_id] = link


def _dispose(session: Session, ids: dict[int, Link], role: bool, draw) -> None:
    """A disposition for a run of our unsettled deliveries (2.7.6): the receiver's
    outcome (settled or not), or the sender settling."""
    first = draw(st.sampled_from(sorted(ids)))
    last = first
    while last + 1 in ids:
        last += 1
    last = draw(st.integers(first, last))
    settled = role == Role.SENDER or draw(st.booleans())
    session.disposition(role, first, last, settled=settled, state=Accepted())
    if settled:
        for delivery_id in range(first, last + 1):
            ids.pop(delivery_id, None)


def _answer_drains(app: _App) -> None:
    """A sender asked to drain with nothing more to send says so (2.6.7), unless its
    connection is closing already (then the engine refuses)."""
    for link in app.live_links(sender=True):
        if link.drain and link.credit:
            with contextlib.suppress(UsageError):
                link.drained()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_legal_engine_traffic_has_no_violations(data):
    draw = data.draw
    use_sasl = draw(st.booleans())
    options = {"max_frame_size": draw(st.sampled_from([512, 65536]))}
    pair = ConnectionPair(
        Connection("client", "client", sasl=ClientSasl() if use_sasl else None, **options),
        Connection("server", "server", sasl=ServerSasl() if use_sasl else None, **options),
        chunk_size=draw(st.sampled_from([None, 1, 7, 100])),
    )
    cut = random_cuts(draw(st.integers(0, 2**16)))
    monitor = ConnectionMonitor()
    violations: list = []
    fed = 0
    apps = {CLIENT: _App(pair.client), SERVER: _App(pair.server)}

    def pump() -> None:
        nonlocal fed
        pair.now += draw(st.sampled_from([0.0, 0.001, 0.5]))
        pair.pump()
        apps[CLIENT].take(pair.take(CLIENT))
        apps[SERVER].take(pair.take(SERVER))
        for direction, chunk in pair.wire[fed:]:
            origin = CLIENT if direction == "c>s" else SERVER
            for piece in cut(chunk):
                violations.extend(monitor.feed(origin, piece, pair.now).violations)
        fed = len(pair.wire)

    names = (f"link-{n}" for n in itertools.count())
    pair.open()
    pump()
    for _ in range(draw(st.integers(10, 120))):
        side = draw(st.sampled_from([CLIENT, SERVER]))
        actions = _actions(apps[side], draw, names)
        if actions:
            name, action = actions[draw(st.integers(0, len(actions) - 1))]
            with contextlib.suppress(UsageError):  # refused before any side effect
                action()
                note_event(name)
        if draw(st.integers(0, 2)):
            pump()
    pump()
    for app in apps.values():
        _answer_drains(app)
    pump()
    with contextlib.suppress(UsageError):
        pair.client.close()
    pump()
    violations.extend(monitor.finish().violations)
    assert violations == [], "\n".join(map(str, violations))
    assert apps[CLIENT].errors == apps[SERVER].errors == []
    assert pair.client.finished and pair.server.finished


def _remote(kind, events):
    (event,) = [e for e in events if isinstance(e, kind)]
    return event


@pytest.mark.parametrize("stop", ["detach", "end"])
def test_an_answer_crossing_the_senders_detach_or_end_has_no_violations(stop):
    """The race the random traffic found, fixed: the client attaches a sender and detaches
    it (or ends its session) before the server answers; the server's attach and its grant
    cross that frame on the wire. The grant sets delivery-count: the server saw the
    sender's attach (2.7.4), its own attach answers it (2.6.3)."""
    pair = ConnectionPair()
    pair.open()
    session = pair.client.begin()
    pair.pump()
    _remote(RemoteBegin, pair.take(SERVER)).session.accept()
    pair.pump()
    sender = session.attach_sender("l", source=Source(address="l"), target="l")
    pair.pump()
    receiver = _remote(RemoteAttach, pair.take(SERVER)).link
    sender.detach() if stop == "detach" else session.end()
    receiver.accept()
    receiver.flow(link_credit=4, echo=True)
    pair.pump()
    pair.client.close()
    pair.pump()
    monitor = ConnectionMonitor()
    out = MonitorOutput()
    for direction, data in pair.wire:
        _add(out, monitor.feed(CLIENT if direction == "c>s" else SERVER, data, 0.0))
    _add(out, monitor.finish())
    names = [(item.direction, item.name) for item in out.items]
    assert names.index((CLIENT, stop)) < names.index((SERVER, "attach"))  # the race
    flows = [i.item.performative for i in out.items if i.name == "flow"]
    grant = next(flow for flow in flows if flow.link_credit is not None)
    assert grant.delivery_count == 0 and grant.link_credit == 4
    assert out.violations == []
    assert pair.client.finished and pair.server.finished
