"""A scripted peer for the engine tests (tests/test_engine_errors.py, test_engine_hooks.py):
crafted frames (amqp10.frames.encode_frame + composites) written into a real engine, and
what the engine sends back decoded with amqp10.frames.FrameDecoder.

Owns: `Peer`, `server_peer` (engine as server, both opened), `with_session`,
`with_receiving_link`, `transfer`, and the `close_condition` / `end_condition` readers.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Attach, Begin, Close, End, Open, Source, Target, Transfer
from amqpspec.amqp10.engine import (
    Connection,
    ConnState,
    ProtocolErrorRaised,
    RemoteAttach,
    RemoteBegin,
)
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, FrameDecoder, ProtocolHeader, encode_frame
from amqpspec.amqp10.spec import Role


class Peer:
    """A scripted peer: writes crafted frames into the engine, decodes what it sends."""

    def __init__(self, engine: Connection) -> None:
        self.engine = engine
        self.decoder = FrameDecoder()
        self.received: list[ProtocolHeader | Frame] = []
        self.now = 0.0

    def send(self, *chunks: bytes) -> None:
        self.engine.receive_data(b"".join(chunks), self.now)

    def frame(self, performative, channel: int = 0, payload: bytes = b"") -> None:
        self.send(encode_frame(performative, channel, payload))

    def read(self) -> list[ProtocolHeader | Frame]:
        self.decoder.feed(self.engine.data_to_send(self.now))
        new = list(self.decoder)
        self.received.extend(new)
        return new

    def performatives(self, kind) -> list:
        self.read()
        return [
            item.performative
            for item in self.received
            if isinstance(item, Frame) and isinstance(item.performative, kind)
        ]

    def errors(self) -> list[ProtocolErrorRaised]:
        return [e for e in self.engine.events() if isinstance(e, ProtocolErrorRaised)]


def server_peer(**engine_args) -> Peer:
    """The engine is the server; the peer has sent header + open and both are open."""
    peer = Peer(Connection("server", "engine", **engine_args))
    peer.send(AMQP_HEADER.encode(), encode_frame(Open(container_id="peer")))
    peer.engine.open()
    assert peer.engine.state is ConnState.OPENED
    peer.read()
    return peer


def with_session(peer: Peer, **accept) -> object:
    peer.frame(Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100))
    session = next(e for e in peer.engine.events() if isinstance(e, RemoteBegin)).session
    session.accept(**accept)
    peer.read()
    return session


def with_receiving_link(peer: Peer, credit: int | None = None, handle: int = 0):
    """The peer attaches a sender; the engine's receiver accepts and grants credit."""
    peer.frame(
        Attach(
            name=f"l{handle}",
            handle=handle,
            role=Role.SENDER,
            source=Source(address="s"),
            target=Target(address="q"),
            initial_delivery_count=0,
        )
    )
    link = next(e for e in peer.engine.events() if isinstance(e, RemoteAttach)).link
    link.accept()
    if credit is not None:
        link.flow(link_credit=credit)
    peer.read()
    return link


def transfer(delivery_id: int, handle: int = 0) -> Transfer:
    return Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=b"%d" % delivery_id)


def close_condition(peer: Peer) -> str:
    closes = peer.performatives(Close)
    assert len(closes) == 1, peer.received
    return closes[0].error.condition


def end_condition(peer: Peer) -> str:
    ends = peer.performatives(End)
    assert len(ends) == 1, peer.received
    return ends[0].error.condition
