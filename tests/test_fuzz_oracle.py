"""The oracle against a scripted broker (a socket server on a free port, frames built by
amqp10.builder) that behaves as real brokers were seen to: a login refused late and the
socket held (RabbitMQ 3.10: outcome after 3 s, drop 3 s later) is no hang; a SASL answer
that can never come (a cut sasl-init) is not waited for."""

from __future__ import annotations

import socket
import time

import pytest
from peer_support import LoopbackPeer, closed_after

from amqpspec.amqp10.builder import build_frame, sasl_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.frames import SASL_HEADER
from amqpspec.amqp10.types import symbol
from amqpspec.fuzz.case import Step, step
from amqpspec.fuzz.model import Conversation, Handshake
from amqpspec.fuzz.oracle import HANG, Bounds, Target, run_case

C = COMPOSITE_CLASSES


class ScriptedBroker(LoopbackPeer):
    """Answers the SASL header with its own and sasl-mechanisms; then, if `refuse`, a
    failed sasl-outcome `delay` seconds after the next bytes; then holds the socket,
    reading and answering nothing."""

    def __init__(self, refuse: bool, delay: float = 0.1) -> None:
        self.refuse, self.delay = refuse, delay
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        with conn:
            if not self._read(conn):
                return
            mechanisms = C["sasl-mechanisms"](sasl_server_mechanisms=[symbol("PLAIN")])
            conn.sendall(SASL_HEADER.encode() + sasl_frame(mechanisms))
            if self.refuse and self._read(conn):
                time.sleep(self.delay)
                conn.sendall(sasl_frame(C["sasl-outcome"](code=1)))
            while not self.stop.is_set() and self._read(conn) is not None:
                pass

    def _read(self, conn: socket.socket) -> bytes | None:
        """Some bytes; b"" after a quiet spell; None at EOF or when stopping."""
        while not self.stop.is_set():
            try:
                data = conn.recv(4096)
            except TimeoutError:
                return b""
            except OSError:
                return None
            return data or None
        return None


@pytest.fixture
def scripted():
    bounds = Bounds(reply=0.6, liveness=1.0, restart_wait=0.5)
    with closed_after(ScriptedBroker) as make:
        yield lambda **kw: Target("127.0.0.1", make(**kw).port, Handshake(), bounds)


def _login(password: str) -> list[Step]:
    conv = Conversation(Handshake(password=password)).open()
    return conv.steps()


def test_a_login_refused_late_with_the_socket_held_is_no_hang(scripted):
    target = scripted(refuse=True, delay=0.3)  # the outcome late, the socket left open
    outcome = run_case(target, _login("wrong"))
    names = [t.item.name for t in outcome.recording.items if hasattr(t.item, "name")]
    assert "sasl-outcome" in names
    assert outcome.verdict is None  # nothing is owed after a failed login


def test_a_broker_silent_after_the_mechanisms_is_a_hang(scripted):
    # the control: same broker, no outcome at all (a whole sasl-init went unanswered)
    target = scripted(refuse=False)
    outcome = run_case(target, _login("guest"))
    assert outcome.verdict is not None and outcome.verdict.kind in (HANG, "crash")


def test_no_wait_for_a_sasl_answer_that_cannot_come(scripted):
    target = scripted(refuse=False)
    init = _login("guest")[1]
    assert init.label == "sasl-init"
    cut = step(init.data[:10], "sasl-init[cut to 10B]")
    started = time.monotonic()
    outcome = run_case(target, [_login("guest")[0], cut])
    elapsed = time.monotonic() - started
    assert outcome.verdict is None  # the stream ends inside a frame: nothing is judged
    assert elapsed < target.bounds.sasl * 0.7  # the 1 s SASL wait was not waited out
    assert build_frame(C["close"]()) in b"".join(
        c.data for c in outcome.recording.chunks if c.direction == "client"
    )
