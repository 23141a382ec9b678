"""Durable queues survive `kill -9`: every publish the broker confirmed (accepted) is there
after a restart. The broker runs as a subprocess (`python -m reference_broker`) so it can
be SIGKILLed mid-stream; several rounds on the same data dir.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading

import pytest
from broker_support import WAIT, proton_receive
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

pytestmark = pytest.mark.proton

ROUNDS = 3
KILL_AFTER = 600  # confirmed publishes before the kill


class Broker:
    def __init__(self, data_dir: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reference_broker",
                "--port",
                "0",
                "--admin-port",
                "-1",
                "--data-dir",
                data_dir,
            ],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.port = self._wait_ready()

    def _wait_ready(self) -> int:
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stderr, selectors.EVENT_READ)
        while True:
            assert selector.select(WAIT), "broker not ready"
            line = self.proc.stderr.readline()
            assert line, "broker exited"
            if "ready on 127.0.0.1:" in line:
                return int(line.rsplit("ready on 127.0.0.1:", 1)[1].split()[0])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT)
        self.proc.stderr.close()


class ConfirmedPublisher(MessagingHandler):
    """Publishes numbered durable messages to the queue; records what was accepted and
    kills the broker once `kill_after` are confirmed (while more are in flight)."""

    def __init__(self, url: str, start: int, kill_after: int, on_kill) -> None:
        super().__init__()
        self.url = url
        self.next = start
        self.kill_after = kill_after
        self.on_kill = on_kill
        self.confirmed: list[int] = []
        self.killed = False

    def on_start(self, event) -> None:
        self.timer = event.container.schedule(WAIT * 2, self)
        conn = event.container.connect(self.url, reconnect=False)
        event.container.create_sender(conn, "/queue/durable-q")  # v1: declares it durable

    def on_sendable(self, event) -> None:
        while event.sender.credit and not self.killed:
            msg = Message(body=self.next, durable=True)
            delivery = event.sender.send(msg)
            delivery.number = self.next
            self.next += 1

    def on_accepted(self, event) -> None:
        self.confirmed.append(event.delivery.number)
        if len(self.confirmed) >= self.kill_after and not self.killed:
            self.killed = True
            self.on_kill()

    def on_transport_error(self, event) -> None:
        self.timer.cancel()
        event.container.stop()  # the broker is gone: no reconnect, no lingering

    def on_timer_task(self, event) -> None:
        self.killed = True
        event.container.stop()


def test_confirmed_messages_survive_sigkill(tmp_path):
    data_dir = str(tmp_path / "data")
    all_confirmed: set[int] = set()
    start = 0
    for _ in range(ROUNDS):
        broker = Broker(data_dir)
        try:
            publisher = ConfirmedPublisher(
                f"amqp://127.0.0.1:{broker.port}", start, KILL_AFTER, broker.kill
            )
            runner = threading.Thread(target=Container(publisher).run, daemon=True)
            runner.start()
            runner.join(WAIT * 3)
            assert not runner.is_alive(), "publisher did not finish"
            assert len(publisher.confirmed) >= KILL_AFTER
            all_confirmed.update(publisher.confirmed)
            start = publisher.next
        finally:
            broker.kill()
    broker = Broker(data_dir)
    try:
        url = f"amqp://127.0.0.1:{broker.port}"
        recovered = proton_receive(url, "/queues/durable-q", None).bodies
        # every confirmed publish is back (unconfirmed ones may or may not be), once
        assert not all_confirmed - set(recovered)
        assert len(recovered) == len(set(recovered))
    finally:
        broker.kill()
