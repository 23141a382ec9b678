"""A fake peer on loopback for the fuzz oracle's unit tests (a core unit test may use one;
the fuzzer's real evidence comes from the brokers). Owns `LoopbackPeer`: a server socket on
a free port of 127.0.0.1 whose connections are each served on a thread of their own by the
subclass's `_serve(conn)`; `close()` stops accepting (every wait in it is bounded). Also
`chunks`: what a served connection delivers, read until the peer stops or the socket ends;
`closed_after`: the peers a test makes, each closed when it ends (a fixture's teardown)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar


def chunks(conn: socket.socket, stop: threading.Event, size: int = 65536) -> Iterator[bytes]:
    """`conn`'s bytes as they arrive, until `stop` is set, the peer's EOF or a socket error;
    each read bounded by the timeout the caller set on `conn` (a quiet spell reads again)."""
    while not stop.is_set():
        try:
            data = conn.recv(size)
        except TimeoutError:
            continue
        except OSError:
            return
        if not data:
            return
        yield data


class LoopbackPeer:
    """Subclasses set their own attributes, then call `super().__init__()`, which starts
    accepting at once."""

    def __init__(self, accept_poll: float = 0.2) -> None:
        self.accept_poll = accept_poll
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self.threads.append(accept)

    def _accept(self) -> None:
        self.server.settimeout(self.accept_poll)
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.stop.set()
        self.server.close()


P = TypeVar("P", bound=LoopbackPeer)


@contextlib.contextmanager
def closed_after(make: Callable[..., P]) -> Iterator[Callable[..., P]]:
    """`make` (a LoopbackPeer subclass), each peer it makes recorded and closed when the
    block ends: a fixture yields a maker from it, and its teardown closes them all."""
    made: list[P] = []

    def tracked(**kw: Any) -> P:
        peer = make(**kw)
        made.append(peer)
        return peer

    try:
        yield tracked
    finally:
        for peer in made:
            peer.close()
