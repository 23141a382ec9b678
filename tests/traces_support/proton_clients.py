"""python-qpid-proton sender and receiver used by the traces tests and bench.

`python proton_clients.py send URL ADDRESS COUNT` / `... receive URL ADDRESS COUNT
[PREFETCH]`. Prints one JSON line at the end: {"count": N, "seconds": S}.
"""

from __future__ import annotations

import json
import sys
import time

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container


class Client(MessagingHandler):
    """Connects to `url` at the start (the clock starts then) and opens its one link on
    `address` (`open_link`); `count` is how many messages it is done after."""

    def __init__(self, url: str, address: str, count: int, **options) -> None:
        super().__init__(**options)
        self.url, self.address, self.count = url, address, count
        self.start = 0.0

    def on_start(self, event) -> None:
        self.start = time.perf_counter()
        self.open_link(event.container, event.container.connect(self.url))

    def open_link(self, container: Container, connection) -> None:
        raise NotImplementedError


class Sender(Client):
    def __init__(self, url: str, address: str, count: int) -> None:
        super().__init__(url, address, count)
        self.sent = self.confirmed = 0

    def open_link(self, container: Container, connection) -> None:
        container.create_sender(connection, self.address)

    def on_sendable(self, event) -> None:
        while event.sender.credit and self.sent < self.count:
            event.sender.send(Message(body=f"message {self.sent}"))
            self.sent += 1

    def on_accepted(self, event) -> None:
        self.confirmed += 1
        if self.confirmed == self.count:
            event.connection.close()


class Receiver(Client):
    def __init__(self, url: str, address: str, count: int, prefetch: int) -> None:
        super().__init__(url, address, count, prefetch=prefetch)
        self.received = 0

    def open_link(self, container: Container, connection) -> None:
        container.create_receiver(connection, self.address)

    def on_message(self, event) -> None:
        self.received += 1
        if self.received == self.count:
            event.receiver.close()
            event.connection.close()


def main(argv: list[str]) -> int:
    role, url, address, count = argv[0], argv[1], argv[2], int(argv[3])
    if role == "send":
        handler: Sender | Receiver = Sender(url, address, count)
    else:
        handler = Receiver(url, address, count, int(argv[4]) if len(argv) > 4 else 10)
    Container(handler).run()
    done = handler.confirmed if role == "send" else handler.received  # type: ignore[union-attr]
    print(json.dumps({"count": done, "seconds": time.perf_counter() - handler.start}))
    return 0 if done == count else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
