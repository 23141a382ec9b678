"""Interop: our sans-IO engine against python-qpid-proton over real 127.0.0.1 sockets.

1. Our engine as CLIENT (SASL ANONYMOUS) against a proton Container listening as a
   server: we send messages to it and receive messages from it.
2. Our engine as SERVER (SASL PLAIN) and a proton BlockingConnection client that sends
   and receives.

The socket pump below is test-only; the engine stays sans-IO. Every wait is bounded.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

proton = pytest.importorskip(
    "proton", reason="python-qpid-proton missing: pip install -e '.[test]' (a base dependency)"
)
from proton.handlers import MessagingHandler  # noqa: E402
from proton.reactor import Container  # noqa: E402
from proton.utils import BlockingConnection  # noqa: E402

from amqpspec.amqp10.composites import Accepted, Source, Target  # noqa: E402
from amqpspec.amqp10.engine import (  # noqa: E402
    ClientSasl,
    Connection,
    DispositionReceived,
    FlowReceived,
    RemoteAttach,
    RemoteBegin,
    RemoteClose,
    RemoteOpen,
    SaslAuthenticated,
    ServerSasl,
    TransferReceived,
)
from amqpspec.amqp10.message import Message  # noqa: E402
from amqpspec.amqp10.spec import SaslCode  # noqa: E402
from amqpspec.reference_broker.runtime.process import free_port  # noqa: E402

pytestmark = [pytest.mark.proton, pytest.mark.timeout(60)]
WAIT = 15.0  # seconds: the bound on every wait in this file


class SocketPump:
    """Test-only I/O loop: socket <-> Connection, with monotonic time passed in."""

    def __init__(self, sock: socket.socket, conn: Connection) -> None:
        self.sock = sock
        self.conn = conn
        sock.settimeout(0.05)

    def flush(self) -> None:
        data = self.conn.data_to_send(time.monotonic())
        if data:
            self.sock.sendall(data)

    def step(self) -> list:
        """Send what is pending, read what arrived, fire timers; return the events."""
        self.flush()
        now = time.monotonic()
        timer = self.conn.get_timer()
        if timer is not None and now >= timer:
            self.conn.handle_timer(now)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            data = None
        except OSError:
            data = b""
        if data is not None:
            self.conn.receive_data(data, time.monotonic())
        events = list(self.conn.events())
        self.flush()
        return events

    def run_until(self, done, on_event=lambda e: None, limit: float = WAIT) -> None:
        deadline = time.monotonic() + limit
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"engine pump: condition not reached in {limit}s")
            for event in self.step():
                on_event(event)
            if self.conn.finished:
                self.flush()
                return


# --- 1. our client, proton server ---------------------------------------------------------


class ProtonServer(MessagingHandler):
    """Accepts everything; stores messages sent to it; sends `outgoing` to receivers."""

    def __init__(self, url: str, outgoing: list[str]) -> None:
        super().__init__()
        self.url = url
        self.outgoing = list(outgoing)
        self.received: list[object] = []
        self.ready = threading.Event()
        self.stop_requested = threading.Event()
        self.acceptor = None

    def on_start(self, event) -> None:
        self.acceptor = event.container.listen(self.url)
        event.container.schedule(0.05, self)
        self.ready.set()

    def on_timer_task(self, event) -> None:
        if self.stop_requested.is_set():
            self.acceptor.close()
            event.container.stop()
        else:
            event.container.schedule(0.05, self)

    def on_sendable(self, event) -> None:
        while event.sender.credit and self.outgoing:
            event.sender.send(proton.Message(body=self.outgoing.pop(0)))

    def on_message(self, event) -> None:
        self.received.append(event.message.body)


@pytest.fixture
def proton_server():
    port = free_port()
    handler = ProtonServer(f"127.0.0.1:{port}", ["from-proton-1", "from-proton-2"])
    container = Container(handler)
    thread = threading.Thread(target=container.run, daemon=True)
    thread.start()
    assert handler.ready.wait(WAIT)
    yield port, handler
    handler.stop_requested.set()
    thread.join(WAIT)
    assert not thread.is_alive()


def test_engine_client_against_proton_server(proton_server):
    port, handler = proton_server
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    conn = Connection("client", "amqp10-client", sasl=ClientSasl(), idle_timeout_ms=10000)
    pump = SocketPump(sock, conn)
    seen: list = []
    got: list = []
    receiver = None

    def on_event(event):
        seen.append(event)
        if isinstance(event, TransferReceived):
            assert event.link is receiver
            got.append(Message.decode(event.payload).value)
            receiver.disposition(event.delivery_id, settled=True, state=Accepted())

    def acked():
        return sum(e.last - e.first + 1 for e in seen if isinstance(e, DispositionReceived))

    try:
        conn.open()
        pump.run_until(lambda: conn.can_begin, on_event)  # after SASL (5.3.2)
        session = conn.begin()
        sender = session.attach_sender("to-proton", Source(address="me"), Target(address="q"))
        receiver = session.attach_receiver("from-proton", Source(address="q"), Target())
        receiver.flow(link_credit=10)
        pump.run_until(lambda: sender.link_credit > 0, on_event)
        assert any(isinstance(e, RemoteOpen) for e in seen)
        assert conn.remote_max_frame_size == conn.remote_open.max_frame_size >= 512

        for i in range(3):
            sender.send(Message.of(f"to-proton-{i}").encode())
        # a multi-frame delivery: split at proton's max-frame-size, paced by its window
        sender.send(Message.of("x" * 300_000).encode())
        pump.run_until(lambda: len(got) == 2 and acked() >= 4, on_event)
        assert got == ["from-proton-1", "from-proton-2"]
        assert all(
            isinstance(e.state, Accepted) for e in seen if isinstance(e, DispositionReceived)
        )
        conn.close()
        pump.run_until(lambda: conn.finished, seen.append)
        assert any(isinstance(e, RemoteClose) for e in seen)
    finally:
        sock.close()
    deadline = time.monotonic() + WAIT
    while len(handler.received) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert handler.received == ["to-proton-0", "to-proton-1", "to-proton-2", "x" * 300_000]


# --- 2. our server, proton client -----------------------------------------------------


class EngineServer:
    """One-connection server on our engine: a queue; the client's sender fills it,
    the client's receiver drains it. Runs in a thread; every wait bounded."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.listener.settimeout(WAIT)
        self.port = self.listener.getsockname()[1]
        self.queue: list[bytes] = []
        self.events: list = []
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            sock, _ = self.listener.accept()
            with sock:
                conn = Connection(
                    "server",
                    "amqp10-server",
                    sasl=ServerSasl(("PLAIN",), verify_plain=lambda z, u, p: p == "secret"),
                )
                self.senders = []
                SocketPump(sock, conn).run_until(lambda: False, lambda e: self._on(conn, e))
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.finished.set()

    def _on(self, conn: Connection, event) -> None:
        self.events.append(event)
        if isinstance(event, RemoteOpen):
            conn.open()
        elif isinstance(event, RemoteBegin) and event.session.remote_channel is not None:
            event.session.accept()
        elif isinstance(event, RemoteAttach):
            link = event.link
            link.accept()
            if link.is_sender:
                self.senders.append(link)
            else:
                link.flow(link_credit=100)
        elif isinstance(event, TransferReceived):
            self.queue.append(event.payload)
            event.link.disposition(event.delivery_id, settled=True, state=Accepted())
        if isinstance(event, (FlowReceived, TransferReceived)):
            for sender in self.senders:
                while sender.link_credit > 0 and self.queue:
                    sender.send(self.queue.pop(0), settled=False)

    def close(self) -> None:
        self.finished.wait(WAIT)
        self.listener.close()


def test_proton_client_against_engine_server():
    server = EngineServer()
    try:
        client = BlockingConnection(
            f"127.0.0.1:{server.port}",
            timeout=WAIT,
            user="guest",
            password="secret",
            allowed_mechs="PLAIN",
            allow_insecure_mechs=True,
        )
        try:
            sender = client.create_sender("q")
            for i in range(3):
                sender.send(proton.Message(body=f"via-engine-{i}"))  # waits for acceptance
            sender.send(proton.Message(body="y" * 200_000))  # multi-frame both ways
            receiver = client.create_receiver("q", credit=10)
            bodies = [receiver.receive(timeout=WAIT).body for _ in range(4)]
            receiver.accept()
            assert bodies == ["via-engine-0", "via-engine-1", "via-engine-2", "y" * 200_000]
        finally:
            client.close()
    finally:
        server.close()
    assert server.error is None, server.error
    auth = [e for e in server.events if isinstance(e, SaslAuthenticated)]
    assert [(a.mechanism, a.username, a.code) for a in auth] == [("PLAIN", "guest", SaslCode.OK)]
    assert any(isinstance(e, RemoteClose) for e in server.events)
    dispositions = [e for e in server.events if isinstance(e, DispositionReceived)]
    assert dispositions and all(isinstance(d.state, Accepted) for d in dispositions)
