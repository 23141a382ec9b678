"""A tiny queue broker on python-qpid-proton's Container (the shape of proton's
examples/python/broker.py, which Debian 12 no longer ships): a real third-party AMQP 1.0
implementation for the traces tests to record. Usage: python proton_broker.py PORT.
Prints 'ready' when listening. Stops on SIGTERM.
"""

from __future__ import annotations

import collections
import sys

from proton.handlers import MessagingHandler
from proton.reactor import Container


class Queue:
    def __init__(self) -> None:
        self.messages: collections.deque = collections.deque()
        self.consumers: list = []

    def dispatch(self) -> None:
        for consumer in self.consumers:
            while self.messages and consumer.credit > 0:
                consumer.send(self.messages.popleft())


class Broker(MessagingHandler):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.queues: dict[str, Queue] = collections.defaultdict(Queue)

    def on_start(self, event) -> None:
        event.container.listen(self.url)
        print("ready", flush=True)

    def on_link_opening(self, event) -> None:
        if event.link.is_sender:
            address = event.link.remote_source.address
            event.link.source.address = address
            self.queues[address].consumers.append(event.link)
        else:
            event.link.target.address = event.link.remote_target.address

    def _unsubscribe(self, link) -> None:
        if link.is_sender and link.source.address in self.queues:
            consumers = self.queues[link.source.address].consumers
            if link in consumers:
                consumers.remove(link)

    def on_link_closing(self, event) -> None:
        self._unsubscribe(event.link)

    def on_connection_closing(self, event) -> None:
        for link in list(self.queues.values()):
            link.consumers = [c for c in link.consumers if c.connection != event.connection]

    def on_disconnected(self, event) -> None:
        for queue in self.queues.values():
            queue.consumers = [c for c in queue.consumers if c.connection != event.connection]

    def on_sendable(self, event) -> None:
        self.queues[event.link.source.address].dispatch()

    def on_message(self, event) -> None:
        queue = self.queues[event.link.target.address]
        queue.messages.append(event.message)
        queue.dispatch()


if __name__ == "__main__":
    Container(Broker(f"127.0.0.1:{int(sys.argv[1])}")).run()
