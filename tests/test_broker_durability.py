"""Durable queues survive `kill -9`: every publish the broker confirmed (accepted) is there
after a restart. The broker runs as a subprocess (`python -m amqpspec.reference_broker`) so it can
be SIGKILLed mid-stream; several rounds on the same data dir.
"""

from __future__ import annotations

import threading

import pytest
from broker_support import WAIT, recovered_after_restart
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from amqpspec.reference_broker.runtime.process import BrokerProcess

pytestmark = pytest.mark.proton

ROUNDS = 3
KILL_AFTER = 600  # confirmed publishes before the kill


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
        broker = BrokerProcess("--data-dir", data_dir)
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
    recovered = recovered_after_restart(data_dir, "/queues/durable-q")
    # every confirmed publish is back (unconfirmed ones may or may not be), once
    assert not all_confirmed - set(recovered)
    assert len(recovered) == len(set(recovered))
