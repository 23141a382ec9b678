"""Helpers for the reference broker's socket tests (tests/test_broker_*.py).

Owns: starting an in-process broker on ephemeral ports (`running_broker`), a management
client for it, the acceptance runs' routes (`ROUTES`, `ROUTE_IDS`), and `EngineClient`:
an amqp10 engine client over a real socket for tests that assert on frames (flows,
dispositions, detaches). Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.engine import ClientSasl, Connection, Event
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.monitor import ConnectionMonitor
from amqpspec.amqp10.origins import CLIENT, ORIGINS, SERVER
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.config import BrokerConfig, Limits
from amqpspec.reference_broker.faults.catalog import Faults
from amqpspec.reference_broker.runtime.process import BrokerProcess
from amqpspec.reference_broker.runtime.server import BrokerThread

WAIT = 10.0

# The acceptance runs' routes (tests/test_broker_acceptance.py, tests/test_broker_traced.py):
# a classic queue (cq), a durable queue (dq) and each amq.* exchange type.
# (name, target address, queues it fills, bindings (exchange, queue, key, arguments))
ROUTES = [
    ("classic", "/queues/cq", ["cq"], []),
    ("durable", "/queues/dq", ["dq"], []),
    ("direct", "/exchanges/amq.direct/k1", ["cq"], [("amq.direct", "cq", "k1", None)]),
    (
        "fanout",
        "/exchanges/amq.fanout",
        ["cq", "dq"],
        [("amq.fanout", "cq", "", None), ("amq.fanout", "dq", "", None)],
    ),
    ("topic", "/exchanges/amq.topic/a.b.c", ["cq"], [("amq.topic", "cq", "a.*.c", None)]),
    ("headers", "/exchanges/amq.headers", ["cq"], [("amq.headers", "cq", "", {})]),
]
ROUTE_IDS = [route[0] for route in ROUTES]


def body(event: Any) -> bytes:
    """The value of a received transfer's message (a TransferReceived)."""
    return Message.decode(event.payload).value


def assert_redelivered(transfers: list[Any], bodies: list[bytes]) -> None:
    """`transfers` carry `bodies`, each marked as not the first acquirer (3.2.1)."""
    assert [body(t) for t in transfers] == bodies
    for event in transfers:
        header = Message.decode(event.payload).header
        assert header is not None and header.first_acquirer is False  # 3.2.1


def broker_config(*, faults: tuple[str, ...] = (), limits: dict | None = None, **changes: Any):
    config = BrokerConfig(host="127.0.0.1", port=0, admin_port=0, faults=Faults(faults))
    if limits:
        config = config.replace(limits=Limits(**limits))
    return config.replace(**changes)


@contextlib.contextmanager
def running_broker(**kwargs: Any) -> Iterator[BrokerThread]:
    broker = BrokerThread(broker_config(**kwargs)).start()
    try:
        yield broker
    finally:
        broker.stop()


@contextlib.contextmanager
def running_broker_with_queue(queue: str = "q", **kwargs: Any) -> Iterator[BrokerThread]:
    """running_broker(**kwargs) with the non-durable queue `queue` declared."""
    with running_broker(**kwargs) as broker:
        management(broker).declare_queue(queue, durable=False)
        yield broker


def management(broker: BrokerThread) -> ManagementClient:
    return ManagementClient(f"http://127.0.0.1:{broker.admin_port}", "guest", "guest")


def url(broker: BrokerThread, user: str | None = None, password: str | None = None) -> str:
    auth = f"{user}:{password}@" if user else ""
    return f"amqp://{auth}127.0.0.1:{broker.port}"


class EngineClient:
    """An amqp10 engine client on a real socket; collects every event it gets."""

    def __init__(
        self,
        port: int,
        *,
        sasl: ClientSasl | None = None,
        timers: bool = True,
        liveness_bound: float | None = None,
        tls: ssl.SSLContext | None = None,
        **options: Any,
    ) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        if tls is not None:  # amqps: the TLS handshake while still blocking
            sock = tls.wrap_socket(sock, server_hostname="localhost")
        self.sock = sock
        self.sock.setblocking(False)
        self.conn = Connection("client", "engine-test-client", sasl=sasl, **options)
        self.events: list[Event] = []
        self.closed = False
        self.timers = timers  # False: never heartbeat (a silent peer)
        # every byte both ways goes through the connection monitor (the project's oracle)
        self.monitor = ConnectionMonitor(liveness_bound=liveness_bound)
        self.violations: list[Violation] = []  # what the checker found (complete after close())
        self.items: list = []  # every frame both ways, as the monitor decoded it (TraceItem)

    def open(self) -> None:
        self.conn.open()
        self.wait_for(lambda: self.conn.remote_open is not None, "open")

    def _trace(self, origin: str, data: bytes) -> None:
        if not self.monitor.finished:
            out = self.monitor.feed(origin, data, time.monotonic())
            self.items += out.items
            self.violations += out.violations

    def end_trace(self) -> None:
        """The trace ends here: the checker's end-of-trace rules run now; later bytes are
        not judged."""
        out = self.monitor.finish(time.monotonic())
        self.items += out.items
        self.violations += out.violations

    @property
    def wire_errors(self) -> list[str]:
        """Bytes the core could not decode, per direction."""
        errors = ((o, self.monitor.decode_error(o)) for o in ORIGINS)
        return [f"{origin}: {error}" for origin, error in errors if error is not None]

    def pump(self, timeout: float = 0.05) -> None:
        now = time.monotonic()
        data = self.conn.data_to_send(now)
        if data:
            self._send(data)
        pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()
        readable, _, _ = select.select([self.sock], [], [], 0 if pending else timeout)
        if readable or pending:
            try:
                chunk = self.sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                chunk = None
            except OSError:
                chunk = b""
            if chunk is not None:
                if not chunk:
                    self.closed = True
                else:
                    self._trace(SERVER, chunk)
                self.conn.receive_data(chunk, time.monotonic())
        due = self.conn.get_timer() if self.timers else None
        if due is not None and time.monotonic() >= due:
            self.conn.handle_timer(time.monotonic())
        self.events.extend(self.conn.events())
        data = self.conn.data_to_send(time.monotonic())
        if data:
            self._send(data)

    def _send(self, data: bytes) -> None:
        self._trace(CLIENT, data)
        view = memoryview(data)
        deadline = time.monotonic() + WAIT
        while view:
            try:
                sent = self.sock.send(view)
                view = view[sent:]
            except (BlockingIOError, ssl.SSLWantWriteError):
                if time.monotonic() > deadline:
                    raise TimeoutError("socket send stalled") from None
                select.select([], [self.sock], [], 0.05)
            except OSError:
                self.closed = True
                return

    def wait_for(self, predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result:
                return result
            if self.closed or time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; events: {self.events[-10:]}")
            self.pump()

    def wait_event(
        self,
        kind: type,
        what: str = "",
        *,
        where: Callable[[Any], bool] = bool,
        start: int = 0,
        timeout: float = WAIT,
    ) -> Any:
        def find() -> Any:
            for event in self.events[start:]:
                if isinstance(event, kind) and where(event):
                    return event
            return None

        return self.wait_for(find, what or kind.__name__, timeout)

    def settle(self, timeout: float = 0.3) -> None:
        """Pump for a while (to see that nothing more comes)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.closed:
            self.pump(0.02)

    def of(self, kind: type, start: int = 0) -> list[Any]:
        return [e for e in self.events[start:] if isinstance(e, kind)]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if not self.closed and self.conn.remote_open is not None:
                self.conn.close()
                self.pump()
                self.settle(0.1)
        self.sock.close()
        self.end_trace()


@contextlib.contextmanager
def connected_client(broker: BrokerThread, **options: Any) -> Iterator[EngineClient]:
    """EngineClient(broker.port, **options), opened; closed on leaving (also on failure)."""
    client = EngineClient(broker.port, **options)
    try:
        client.open()
        yield client
    finally:
        client.close()


@contextlib.contextmanager
def memory_session(broker: Any, name: str = "memory-client", **options: Any) -> Iterator[Any]:
    """On a reference_broker.runtime.memory.MemoryBroker: a monitored engine client (Connection
    options, e.g. sasl=...), opened, with one session begun: yields (connection, session);
    closes on leaving and asserts the checker found nothing either way."""
    conn = broker.connect(Connection("client", name, **options), monitor=True)
    conn.client.open()
    broker.pump()
    session = conn.client.begin()
    broker.pump()
    yield conn, session
    conn.client.close()
    broker.pump()
    assert [str(v) for v in conn.finish()] == []


# --- python-qpid-proton clients (Container + MessagingHandler), bounded by a timer ---------


def _proton():
    import proton
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    return proton, MessagingHandler, Container


class ProtonRun:
    """Outcome of a proton client run."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.messages: list[Any] = []
        self.accepted = 0
        self.released = 0
        self.rejected = 0
        self.error: str | None = None
        self.timed_out = False


def _bounded_handler(run: ProtonRun) -> type:
    """A MessagingHandler base for one run: `_done` cancels the run's timer (self.timer)
    and closes the connection; a link error is recorded in `run` and ends it too."""
    _, MessagingHandler, _ = _proton()

    class Bounded(MessagingHandler):
        def _done(self, event: Any) -> None:
            self.timer.cancel()
            event.connection.close()

        def on_link_error(self, event: Any) -> None:
            run.error = str(event.link.remote_condition)
            self._done(event)

    return Bounded


def proton_send(
    broker_url: str, target: str | None, bodies: list[Any], *, settled: bool = False, **message: Any
) -> ProtonRun:
    """Send every body (as fast as credit allows) to `target` (None: the anonymous
    terminus); wait for all outcomes. `message` are proton.Message fields."""
    proton, _, Container = _proton()
    run = ProtonRun()

    class Sender(_bounded_handler(run)):
        def __init__(self) -> None:
            super().__init__(auto_settle=True)
            self.sent = 0

        def on_start(self, event: Any) -> None:
            self.timer = event.container.schedule(WAIT * 3, self)
            self.conn = event.container.connect(broker_url)
            opts = proton.reactor.AtMostOnce() if settled else None
            event.container.create_sender(self.conn, target, options=opts)

        def on_sendable(self, event: Any) -> None:
            while event.sender.credit and self.sent < len(bodies):
                event.sender.send(proton.Message(body=bodies[self.sent], **message))
                self.sent += 1
            if settled and self.sent == len(bodies):
                self._done(event)

        def _count(self, event: Any) -> None:
            if run.accepted + run.released + run.rejected == len(bodies):
                self._done(event)

        def on_accepted(self, event: Any) -> None:
            run.accepted += 1
            self._count(event)

        def on_released(self, event: Any) -> None:
            run.released += 1
            self._count(event)

        def on_rejected(self, event: Any) -> None:
            run.rejected += 1
            self._count(event)

        def on_transport_error(self, event: Any) -> None:
            run.error = str(event.transport.condition)
            self.timer.cancel()

        def on_timer_task(self, event: Any) -> None:
            run.timed_out = True
            self.conn.close()

    Container(Sender()).run()
    return run


def proton_receive(
    broker_url: str,
    address: str,
    count: int | None,
    *,
    prefetch: int = 200,
    accept: bool = True,
    idle: float = 1.0,
) -> ProtonRun:
    """Receive `count` messages with MessagingHandler(prefetch=...) (it re-grants credit
    as messages are processed: the pattern of RabbitMQ #2597). count=None: everything,
    until nothing arrives for `idle` seconds."""
    _, _, Container = _proton()
    run = ProtonRun()

    class Receiver(_bounded_handler(run)):
        def __init__(self) -> None:
            super().__init__(prefetch=prefetch, auto_accept=accept)

        def on_start(self, event: Any) -> None:
            self.timer = event.container.schedule(WAIT * 3 if count else idle, self)
            self.conn = event.container.connect(broker_url)
            event.container.create_receiver(self.conn, address)

        def on_message(self, event: Any) -> None:
            run.bodies.append(event.message.body)
            run.messages.append(event.message)
            if count is None:
                self.timer.cancel()
                self.timer = event.container.schedule(idle, self)
            elif len(run.bodies) == count:
                self._done(event)

        def on_timer_task(self, event: Any) -> None:
            run.timed_out = count is not None
            self.conn.close()

    Container(Receiver()).run()
    return run


def recovered_after_restart(data_dir: str, address: str) -> list[Any]:
    """The bodies a broker process started again on `data_dir` gives a receiver of `address`
    (read until nothing arrives for a second); the broker is killed after."""
    broker = BrokerProcess("--data-dir", data_dir)
    try:
        return proton_receive(f"amqp://127.0.0.1:{broker.port}", address, None).bodies
    finally:
        broker.kill()
