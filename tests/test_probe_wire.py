"""The probe's byte pump against a peer that never stops sending: every pump ends within
its bound (conformance/probe/wire.py, `ProbeWire._exchange`). A core unit test with a fake
peer on loopback (tests/peer_support.py)."""

from __future__ import annotations

import socket
import threading
import time

from peer_support import LoopbackPeer

from amqpspec.amqp10.frames import AMQP_HEADER, EMPTY_FRAME
from amqpspec.conformance.probe.client import Probe


class FloodPeer(LoopbackPeer):
    """Answers the protocol header, then sends empty frames (2.3.1, heartbeats) until it
    is closed."""

    def _serve(self, conn: socket.socket) -> None:
        burst = EMPTY_FRAME * 4096
        with conn:
            try:
                conn.sendall(AMQP_HEADER.encode())
                while not self.stop.is_set():
                    conn.sendall(burst)
            except OSError:
                return


def test_a_pump_ends_while_the_peer_never_stops_sending() -> None:
    peer = FloodPeer()
    probe = Probe("127.0.0.1", peer.port, wait=1.0, connect_timeout=2.0)
    record = probe._record

    def slow_record(direction: str, data: bytes) -> None:  # a reader slower than the peer
        time.sleep(0.002)
        record(direction, data)

    probe._record = slow_record  # type: ignore[method-assign]
    pumped = threading.Event()

    def pump_twice() -> None:
        probe.pump(0)  # what is readable now: read for a moment, not until the peer stops
        probe.pump(0.05)
        pumped.set()

    thread = threading.Thread(target=pump_twice, daemon=True)
    try:
        thread.start()
        assert pumped.wait(10), "pump kept reading while the peer kept sending"
        assert probe.recording.chunks  # it did read
    finally:
        peer.close()
        probe.disconnect()
        thread.join(10)
