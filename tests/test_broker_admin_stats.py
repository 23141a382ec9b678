"""Connection statistics of the reference broker's admin API (GET /api/connections):
recv_cnt / send_cnt (frames) and recv_oct / send_oct (bytes), over a real socket.

Owns: these tests. The client is frame-level (bytes built and decoded with the amqp10
core), so the test knows exactly how many frames and bytes crossed each way. Also the
engine counters the broker reads (`Connection.frames_received` / `frames_sent`).
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import pytest
from broker_support import management, running_broker

from amqpspec.amqp10.composites import Begin, Open
from amqpspec.amqp10.engine.testing import ConnectionPair
from amqpspec.amqp10.frames import AMQP_HEADER, EMPTY_FRAME, Frame, FrameDecoder, encode_frame

WAIT = 10.0


class CountingPeer:
    """Sends what it is told and keeps every byte both ways."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.decoder = FrameDecoder(expect_header=True)
        self.sent = bytearray()
        self.received = bytearray()
        self.frames: list[Frame] = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.sent += data

    def wait_frame(self, name: str) -> Frame:
        deadline = time.monotonic() + WAIT
        while True:
            for frame in self.frames:
                if frame.name == name:
                    self.frames.remove(frame)
                    return frame
            left = deadline - time.monotonic()
            assert left > 0, f"no {name} from the broker"
            ready, _, _ = select.select([self.sock], [], [], left)
            data = self.sock.recv(65536) if ready else b""
            assert data or not ready, "the broker closed the connection"
            self.received += data
            self.decoder.feed(data)
            while (item := self.decoder.next_item()) is not None:
                if isinstance(item, Frame):
                    self.frames.append(item)


@pytest.fixture(scope="module")
def broker():
    with running_broker() as b:
        yield b


@pytest.fixture
def peer(broker) -> Iterator[CountingPeer]:
    client = CountingPeer(broker.port)
    try:
        yield client
    finally:
        client.sock.close()


def _stats(broker, container_id: str) -> dict:
    with management(broker) as admin:
        found = [c for c in admin.connections() if c["container_id"] == container_id]
    assert len(found) == 1, found
    return found[0]


def _begin(channel: int = 0) -> bytes:
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    return encode_frame(begin, channel)


@pytest.mark.parametrize("heartbeats", [0, 7, 300])
def test_connection_counts_frames_and_bytes_both_ways(broker, peer, heartbeats: int) -> None:
    """Header + open, N empty frames, begin (its answer proves the broker has read all
    before it): recv_cnt = N + 2 frames, recv_oct = every byte we sent; send_cnt = 2
    (open, begin), send_oct = every byte we got (its header included)."""
    container = f"stats-{heartbeats}"
    peer.send(AMQP_HEADER.encode() + encode_frame(Open(container_id=container)))
    peer.wait_frame("open")
    peer.send(EMPTY_FRAME * heartbeats + _begin())
    peer.wait_frame("begin")
    stats = _stats(broker, container)
    assert stats["recv_cnt"] == heartbeats + 2
    assert stats["recv_oct"] == len(peer.sent)
    assert stats["send_cnt"] == 2
    assert stats["send_oct"] == len(peer.received)


def test_counts_move_with_later_traffic(broker, peer) -> None:
    peer.send(AMQP_HEADER.encode() + encode_frame(Open(container_id="stats-later")))
    peer.wait_frame("open")
    peer.send(_begin())
    peer.wait_frame("begin")
    before = _stats(broker, "stats-later")
    peer.send(EMPTY_FRAME * 5 + _begin(1))  # and a second session
    peer.wait_frame("begin")
    after = _stats(broker, "stats-later")
    assert after["recv_cnt"] - before["recv_cnt"] == 6
    assert after["recv_oct"] - before["recv_oct"] == 5 * len(EMPTY_FRAME) + len(_begin(1))
    assert after["send_cnt"] - before["send_cnt"] == 1
    assert after["send_oct"] == len(peer.received)


def test_engine_counters_match_across_a_pair() -> None:
    """What one engine counts as sent the other counts as received (heartbeats too)."""
    pair = ConnectionPair(idle_timeout_ms=1000)
    pair.client.open()
    pair.pump(0.0)
    pair.server.open()
    pair.pump(0.0)
    pair.client.begin()
    pair.pump(0.0)
    pair.server_events[-1].session.accept()
    pair.pump(0.0)
    for now in (0.6, 1.2, 1.8):  # half the peer's idle-time-out: one empty frame each
        pair.client.handle_timer(now)
        pair.server.handle_timer(now)
        pair.pump(now)
    assert pair.client.frames_sent == pair.server.frames_received
    assert pair.server.frames_sent == pair.client.frames_received
    # open + begin + 3 heartbeats from the client; open + begin + 3 from the server
    assert pair.client.frames_sent == 5
    assert pair.server.frames_sent == 5
