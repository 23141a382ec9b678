"""A frame-level peer for the reference broker's socket tests (idle time-out, handshake
timeout, limits): bytes built and decoded with the amqp10 core, no engine, so a test
decides exactly what is sent and when the peer stays silent. Every wait is bounded.
"""

from __future__ import annotations

import select
import socket
import time

from amqpspec.amqp10.composites import Open
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, FrameDecoder, ProtocolHeader, encode_frame

WAIT = 15.0  # bound of every wait (generous: the box may be loaded)


class RawPeer:
    """A client that speaks frames through the amqp10 core and nothing else: it sends
    only what the test tells it to (no heartbeats of its own)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.decoder = FrameDecoder(expect_header=True)
        self.frames: list[Frame] = []
        self.header: ProtocolHeader | None = None
        self.eof = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def open(self, idle_time_out: int | None = None) -> Open:
        """AMQP header (no SASL: the broker lets loopback in anonymously) and open;
        returns the broker's open."""
        self.send(
            AMQP_HEADER.encode()
            + encode_frame(Open(container_id="idle-test", idle_time_out=idle_time_out))
        )
        return self.wait_frame("open").performative

    def read(self, timeout: float) -> None:
        """Whatever arrives within `timeout` (one recv), decoded into self.frames."""
        if self.eof:
            return
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready:
            return
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return
        self.decoder.feed(data)
        while (item := self.decoder.next_item()) is not None:
            if isinstance(item, ProtocolHeader):
                self.header = item
            else:
                self.frames.append(item)

    def wait_frame(self, name: str, start: int = 0, timeout: float = WAIT) -> Frame:
        deadline = time.monotonic() + timeout
        while True:
            for frame in self.frames[start:]:
                if frame.name == name:
                    return frame
            left = deadline - time.monotonic()
            assert left > 0 and not self.eof, f"no {name} frame; got {self.names(start)}"
            self.read(min(left, 0.1))

    def names(self, start: int = 0) -> list[str]:
        return [frame.name for frame in self.frames[start:]]

    def close(self) -> None:
        self.sock.close()

    def wait_eof(self, timeout: float = WAIT) -> None:
        """Read until the broker closes the socket; AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            assert left > 0, f"the broker kept the socket open; got {self.names()}"
            self.read(min(left, 0.1))
