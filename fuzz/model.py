"""The reference model: legal client conversations and the server state they reach, from
the amqp10 engine in memory (no sockets, no clock).

Owns: `Handshake` (how the client logs in and which addresses it attaches to),
`Conversation` (a client engine joined to a permissive server engine by
`amqp10.engine.testing.ConnectionPair`: open, begin, attach, send, grant, drain, echo,
settle, detach, end, close as the engine does them; `steps()` is the client's side as
fuzz steps, one per header or frame), `answer` (the permissive server application:
open, begin, attach and credit back), and `ServerModel` (a server engine fed a case's
client steps: the (connection, session, link) state each step arrives in, for
signatures and for (state, input) coverage of the engine's transition tables), and each
connection's own container-id (`case_container_id`, `with_container_id`: 2.6.1 names a
link by container and name, so concurrent cases sharing a container-id would steal each
other's links).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from amqpspec.amqp10 import malformed
from amqpspec.amqp10.builder import FrameParts, Mutation, read_frame
from amqpspec.amqp10.composites import Source, Target
from amqpspec.amqp10.engine import (
    ClientSasl,
    Connection,
    RemoteAttach,
    RemoteBegin,
    RemoteOpen,
    ServerSasl,
    UsageError,
)
from amqpspec.amqp10.engine.link import Link
from amqpspec.amqp10.engine.session import Session
from amqpspec.amqp10.engine.testing import ConnectionPair
from amqpspec.amqp10.engine.transitions import TABLES
from amqpspec.amqp10.errors import AMQPError
from amqpspec.amqp10.frames import Frame, ProtocolHeader
from amqpspec.amqp10.monitor import ConnectionMonitor, TraceItem
from amqpspec.amqp10.origins import CLIENT
from amqpspec.fuzz.case import FRAME, HEADER, Step, decoded

SASL_NONE = "none"
POOL_OPENS = 1024  # open frames whose parts `with_container_id` remembers


FUZZ_QUEUE = "amqpspec-fuzz"  # the queue every campaign and in-process target talks to
FUZZ_CONTAINER = "amqpspec-fuzz"  # a conversation's container-id until a case sets its own
DEFAULT_BODY = malformed.amqp_value("fuzz")  # Conversation.send's body


@dataclass(frozen=True, slots=True)
class Handshake:
    """`sasl`: 'PLAIN', 'ANONYMOUS' or 'none' (straight to the AMQP header)."""

    sasl: str = "PLAIN"
    username: str = "guest"
    password: str = "guest"
    hostname: str | None = None
    source: str = FUZZ_QUEUE
    target: str = FUZZ_QUEUE
    max_frame_size: int = 65536


# the fuzz queue by its RabbitMQ 4 / reference-broker v2 address
QUEUE_HANDSHAKE = Handshake(source=f"/queues/{FUZZ_QUEUE}", target=f"/queues/{FUZZ_QUEUE}")


def _permissive_server(sasl: bool = True) -> Connection:
    """Accepts any login; with `sasl` False the client goes straight to the AMQP header."""
    layer = ServerSasl(("PLAIN", "ANONYMOUS"), verify_plain=lambda *_: True) if sasl else None
    return Connection("server", "amqpspec-fuzz-model", sasl=layer)


def answer(server: Connection, event: object, credit: int = 0) -> None:
    """The permissive server application: open back, accept every begin and attach,
    grant `credit` to every sender that attaches (end, detach, close: the engine's
    auto-reply). An answer the engine's state no longer allows (it closed on a later
    frame of the same read) is skipped, as the reference broker skips it (UsageError)."""
    try:
        if isinstance(event, RemoteOpen) and server.state.name == "OPEN_RCVD":
            server.open()
        elif isinstance(event, RemoteBegin) and event.session.state.name == "BEGIN_RCVD":
            event.session.accept()
        elif isinstance(event, RemoteAttach) and event.link.state.name == "ATTACH_RCVD":
            event.link.accept()
            if not event.link.is_sender and credit:
                event.link.flow(link_credit=credit)
    except UsageError:
        return


class Conversation:
    """A legal client conversation, made by the engine against a permissive server.

    The server accepts every attach and grants `server_credit` to the client's senders.
    Methods drive the client engine and pump; `steps()` returns what the client sent."""

    def __init__(
        self, handshake: Handshake, server_credit: int = 100, container_id: str = FUZZ_CONTAINER
    ) -> None:
        sasl = None
        if handshake.sasl != SASL_NONE:
            sasl = ClientSasl(
                handshake.sasl, handshake.username, handshake.password, hostname=handshake.hostname
            )
        self.handshake = handshake
        self.client = Connection(
            "client",
            container_id,
            hostname=handshake.hostname,
            max_frame_size=handshake.max_frame_size,
            sasl=sasl,
        )
        self.server_credit = server_credit
        self.pair = ConnectionPair(self.client, _permissive_server(sasl is not None))
        self._names = 0

    def pump(self) -> None:
        self.pair.pump()
        for event in self.pair.take("server"):
            answer(self.pair.server, event, self.server_credit)
        self.pair.pump()
        self.pair.take("client")

    def open(self) -> Conversation:
        self.client.open()
        self.pump()
        return self

    def begin(self, incoming_window: int = 2048, outgoing_window: int = 2048) -> Session:
        session = self.client.begin(incoming_window, outgoing_window)
        self.pump()
        return session

    def _name(self, kind: str) -> str:
        self._names += 1
        return f"amqpspec-fuzz-{kind}-{self._names}"

    def attach_sender(self, session: Session, **fields: object) -> Link:
        target = Target(address=self.handshake.target)
        link = session.attach_sender(self._name("sender"), Source(), target, **fields)
        self.pump()
        return link

    def attach_receiver(self, session: Session, credit: int = 0, **fields: object) -> Link:
        source = Source(address=self.handshake.source)
        link = session.attach_receiver(self._name("receiver"), source, Target(), **fields)
        self.pump()
        if credit:
            self.flow(link, credit)
        return link

    def send(self, link: Link, body: bytes = DEFAULT_BODY, settled: bool = False) -> int:
        """One delivery (the default body: an amqp-value section holding the str8 'fuzz')."""
        delivery_id = link.send(body, f"t{self._names}-{link.delivery_count}".encode(), settled)
        self._names += 1
        self.pump()
        return delivery_id

    def flow(
        self, link: Link, credit: int | None = None, *, drain: bool = False, echo: bool = False
    ) -> None:
        link.flow(link_credit=credit, drain=drain, echo=echo)
        self.pump()

    def settle(self, link: Link, delivery_id: int) -> None:
        link.disposition(delivery_id, settled=True)
        self.pump()

    def detach(self, link: Link, closed: bool = True) -> None:
        link.detach(closed=closed)
        self.pump()

    def end(self, session: Session) -> None:
        session.end()
        self.pump()

    def close(self) -> None:
        self.client.close()
        self.pump()

    def steps(self) -> list[Step]:
        """Everything the client sent, one step per protocol header or frame (as the
        core's connection monitor reads the client's bytes)."""
        monitor = ConnectionMonitor(check=False)
        steps: list[Step] = []
        for direction, data in self.pair.wire:
            if direction == "c>s":
                steps += [_step(item) for item in monitor.feed(CLIENT, data, 0.0).items]
        return steps


def case_container_id(seed: object, index: int) -> str:
    """The container-id case `index` of campaign `seed` opens with: its own, so that two
    cases running at once never attach the same link (2.6.1: (container-id, link name,
    direction) is one link, attached again it is stolen), and the same on every replay."""
    return f"{FUZZ_CONTAINER}-{seed}-{index}"


def with_container_id(steps: list[Step], container_id: str) -> list[Step]:
    """`steps` with the container-id of their first open frame set to `container_id` (the
    rest of its encoding, and every other step, unchanged; no open, no change)."""
    for index, s in enumerate(steps):
        if s.kind != FRAME or s.malformed is not None:
            continue
        frame, _error = decoded(s.data)
        if frame is None or frame.name != "open":
            continue
        parts = _open_parts(s.data)
        if parts is None or not isinstance(parts.body, Mutation):
            return steps
        body = parts.body.copy()  # the remembered parts stay as read
        body.set_field("container-id", container_id)
        changed = Step(replace(parts, body=body).build(), s.label, s.kind, s.malformed)
        return [*steps[:index], changed, *steps[index + 1 :]]
    return steps


@functools.lru_cache(maxsize=POOL_OPENS)
def _open_parts(data: bytes) -> FrameParts | None:
    """`read_frame` of an open step, remembered: a campaign's every case sets the
    container-id of one of its pool's few opens (fuzz.seeds). Copy its body to change it."""
    return read_frame(data)


def _step(item: TraceItem) -> Step:
    if isinstance(item.item, ProtocolHeader):
        return Step(item.raw, f"protocol-header {item.item.protocol_id}.1.0.0", HEADER)
    if isinstance(item.item, Frame):
        return Step(item.raw, item.name, FRAME)
    raise AssertionError(f"the client engine sent bytes the core cannot decode: {item.raw!r}")


# ----------------------------------------------------------------- the server's view

_RECV_INPUTS = {
    kind: {inp for inp in inputs if inp.name.startswith("RECV_")}
    for kind, _states, inputs, _table, _errors in TABLES
}
# Every (machine, state, RECV input) pair of the engine's tables: the coverage universe.
COVERAGE_UNIVERSE = frozenset(
    (kind, state.name, inp.name)
    for kind, states, _inputs, _table, _errors in TABLES
    for state in states
    for inp in _RECV_INPUTS[kind]
)
_PERFORMATIVE_INPUT = {
    "open": ("connection", "RECV_OPEN"),
    "close": ("connection", "RECV_CLOSE"),
    "begin": ("session", "RECV_BEGIN"),
    "end": ("session", "RECV_END"),
    "attach": ("link", "RECV_ATTACH"),
    "detach": ("link", "RECV_DETACH"),
    "flow": ("link", "RECV_FLOW"),
    "transfer": ("link", "RECV_TRANSFER"),
    "disposition": ("session", "RECV_DISPOSITION"),
}


class ServerModel:
    """A permissive server engine fed one case's client steps, one at a time.

    `state_before(step)` names the state each step arrives in ('OPENED/MAPPED/ATTACHED',
    '-' where the frame addresses no session or link); `covered` collects the (machine,
    state, RECV input) pairs of the engine tables the steps exercised."""

    def __init__(self) -> None:
        self.server: Connection | None = None  # made at the first step (SASL or not)
        self.covered: set[tuple[str, str, str]] = set()
        self.dead = False

    def state_of(self, frame: Frame | None) -> str:
        if self.server is None:
            return "START/-/-"
        conn = self.server.state.name if not self.dead else "END"
        session = link = None
        if frame is not None and not self.dead:
            session = self.server.sessions_by_remote_channel.get(frame.channel)
            handle = getattr(frame.performative, "handle", None)
            if session is not None and handle is not None:
                link = session.links_by_remote_handle.get(handle)
        sess_state = session.state.name if session is not None else "-"
        link_state = link.state.name if link is not None else "-"
        return f"{conn}/{sess_state}/{link_state}"

    def feed(self, step: Step) -> str:
        """Feed one step; returns the state it arrived in."""
        frame = None
        if step.kind == FRAME and step.malformed is None:
            frame, _error = decoded(step.data)
        state = self.state_of(frame)
        if self.server is None:
            self.server = _permissive_server(malformed.starts_sasl(step.data))
        if frame is not None and frame.name in _PERFORMATIVE_INPUT:
            kind, inp = _PERFORMATIVE_INPUT[frame.name]
            part = {"connection": 0, "session": 1, "link": 2}[kind]
            current = state.split("/")[part]
            if current == "-":  # no endpoint yet: the machine's initial state
                current = "UNMAPPED" if kind == "session" else "DETACHED"
            self.covered.add((kind, current, inp))
        if not self.dead:
            try:
                self.server.receive_data(step.data, 0.0)
                for event in self.server.events():
                    answer(self.server, event)
                self.server.data_to_send(0.0)
            except AMQPError:
                self.dead = True
        return state


def states(steps: list[Step]) -> list[str]:
    """The state each step of a case arrives in (see ServerModel)."""
    model = ServerModel()
    return [model.feed(s) for s in steps]
