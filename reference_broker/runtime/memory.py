"""The reference broker in memory: one broker, any number of client connections joined by
byte buffers, a clock that moves only when told. No sockets, no threads, no event loop.

Owns: `MemoryBroker` (the broker's BrokerContext on a scheduler.ManualScheduler, quiet
resource alarms, the pump that carries bytes until nothing moves) and `MemoryConnection`
(one broker connection and, unless raw, an `amqp10.engine.Connection` client on the other
end). May touch: protocol/connection.py through BrokerConnection's entry points, the engine client
it holds. For tests and in-process fuzzing (create the broker once, open many cheap
connections, push any bytes, pump until quiet, look at what came back):

    broker = MemoryBroker()
    broker.vhost.declare_queue("q", durable=False)
    conn = broker.connect()                  # an engine client, or connect(raw=True)
    conn.client.open(); broker.pump()
    session = conn.client.begin(); broker.pump()
    ...
    conn.send(b"AMQP\\x00\\x01\\x00\\x00garbage"); broker.pump()   # bytes as they are
    conn.output, conn.events, conn.broker_closed, conn.failure, broker.failures
    conn = broker.connect(monitor=True)      # both directions through amqp10.monitor:
    ...; conn.finish(); conn.items, conn.violations   # every frame, the checker's verdicts
    broker.advance(30.0)                     # timers: heartbeats, idle time-out, grace
"""

from __future__ import annotations

import itertools
from typing import Any

from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.engine import Connection, Event
from amqpspec.amqp10.monitor import ConnectionMonitor, MonitorOutput, TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER

from ..config import BrokerConfig
from ..features.alarms import ResourceAlarms
from ..protocol.connection import BrokerConnection
from ..protocol.context import BrokerContext
from .scheduler import ManualScheduler


def quiet_alarms() -> ResourceAlarms:
    """Alarms whose readings never trip (no /proc, no disk): raised by hand only."""
    return ResourceAlarms(
        memory_limit=1 << 62,
        disk_free_limit=0,
        read_memory=lambda: 0,
        read_disk_free=lambda: 1 << 62,
    )


class MemoryConnection:
    """One broker connection and its peer. With a `client` engine the pump carries bytes
    both ways and collects the client's `events`; raw (client None), what the broker
    writes gathers in `output` and `send()` is the only input. With a `monitor` every byte
    both ways goes through it as it moves: `items` (what crossed, decoded) and `violations`
    (the checker's, either side; `finish()` adds the end-of-trace rules)."""

    def __init__(
        self,
        broker: MemoryBroker,
        client: Connection | None,
        peer: tuple[str, int],
        monitor: ConnectionMonitor | None,
    ) -> None:
        self.memory = broker
        self.client = client
        self.events: list[Event] = []
        self.output = bytearray()  # what the broker wrote that no client has taken
        self.monitor = monitor
        self.items: list[TraceItem] = []
        self.violations: list[Violation] = []
        self.broker_closed = False  # the broker dropped the transport
        self.dropped = False  # our side dropped it (drop())
        self._eof_given = False
        self._input: list[bytes] = []
        self.broker = BrokerConnection(
            broker.context, self._broker_wrote, self._broker_closed, peer, ("memory", 5672)
        )

    # ------------------------------------------------------------------ the broker's side
    def _broker_wrote(self, data: bytes) -> None:
        self.output += data
        monitor = self.monitor
        if monitor is not None and not monitor.finished:  # finish() ends what is judged
            self._judged(monitor.feed(SERVER, bytes(data), self.memory.scheduler.now()))

    def _judged(self, out: MonitorOutput) -> None:
        self.items += out.items
        self.violations += out.violations

    def finish(self) -> list[Violation]:
        """End the monitor's trace (end-of-trace rules); every violation of the run."""
        if self.monitor is not None:  # a second call adds nothing
            self._judged(self.monitor.finish(self.memory.scheduler.now()))
        return self.violations

    def _broker_closed(self) -> None:
        self.broker_closed = True

    # ------------------------------------------------------------------ the peer's side
    def send(self, data: bytes) -> None:
        """Bytes for the broker exactly as given (malformed ones too); delivered by the
        next pump, after what the client engine has to send."""
        self._input.append(bytes(data))

    def take_output(self) -> bytes:
        data = bytes(self.output)
        self.output.clear()
        return data

    def drop(self) -> None:
        """The peer goes away without a close (TCP reset): the broker sees transport loss."""
        if not self.dropped:
            self.dropped = True
            self.broker.transport_lost(self.memory.scheduler.now())

    @property
    def alive(self) -> bool:
        """The broker still serves this connection."""
        return self.broker.open

    @property
    def failure(self) -> BaseException | None:
        """The internal error that made the broker close this connection, if any."""
        return self.broker.failure

    def of(self, kind: type, start: int = 0) -> list[Any]:
        return [e for e in self.events[start:] if isinstance(e, kind)]

    def _move(self, now: float) -> bool:
        """One round: client and raw bytes to the broker, the broker's bytes to the client."""
        moved = False
        client = self.client
        if client is not None:
            due = client.get_timer()
            if due is not None and due <= now:
                client.handle_timer(now)
            data = client.data_to_send(now)
            if data:
                self._input.insert(0, data)
        if self._input and not self.dropped:
            data = b"".join(self._input)
            self._input.clear()
            monitor = self.monitor
            if monitor is not None and not monitor.finished:
                self._judged(monitor.feed(CLIENT, data, now))
            self.broker.receive_data(data, now)
            moved = True
        if client is not None:
            if self.output:
                client.receive_data(self.take_output(), now)
                moved = True
            if self.broker_closed and not self._eof_given:
                self._eof_given = True
                client.receive_data(b"", now)  # the broker closed the socket
                moved = True
            event = client.next_event()
            while event is not None:
                self.events.append(event)
                event = client.next_event()
        return moved

    @property
    def finished(self) -> bool:
        return self.dropped or (self.broker_closed and (self.client is None or self._eof_given))


class MemoryBroker:
    """A reference broker (BrokerContext) on a ManualScheduler, and its connections."""

    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        start: float = 0.0,
        alarms: ResourceAlarms | None = None,
        housekeeping: bool = True,
    ) -> None:
        self.config = config or BrokerConfig(host="127.0.0.1", port=0, admin_port=-1)
        self.scheduler = ManualScheduler(start)
        self.context = BrokerContext.from_config(  # stream timestamps on the manual clock too
            self.config,
            self.scheduler,
            alarms if alarms is not None else quiet_alarms(),
            wall_clock=self.scheduler.now,
        )
        self.vhost = self.context.vhost
        self.alarms = self.context.alarms
        self.connections: list[MemoryConnection] = []
        self._ports = itertools.count(40000)
        if housekeeping:
            self.context.start_housekeeping()

    @property
    def now(self) -> float:
        return self.scheduler.now()

    @property
    def failures(self) -> list[BaseException]:
        """Internal errors anywhere in the broker (its connections' and the dispatch's)."""
        return self.context.failures

    def connect(
        self,
        client: Connection | None = None,
        *,
        raw: bool = False,
        monitor: bool = False,
        peer_host: str = "127.0.0.1",
        **client_options: Any,
    ) -> MemoryConnection:
        """A new connection to the broker: with `client` (or a fresh
        Connection("client", **client_options)) unless `raw`; `monitor`: checked both ways."""
        if client is None and not raw:
            client = Connection("client", **client_options)
        port = next(self._ports)  # the monitor's connection id too
        watch = ConnectionMonitor(port) if monitor else None
        connection = MemoryConnection(self, client, (peer_host, port), watch)
        self.connections.append(connection)
        return connection

    def pump(self, max_rounds: int = 10_000) -> int:
        """Carry bytes and run what is due until nothing moves; returns the rounds taken.
        Finished connections are forgotten (their objects keep what they collected)."""
        scheduler = self.scheduler
        for rounds in range(1, max_rounds + 1):
            moved = scheduler.run_due() > 0
            now = scheduler.now()
            for connection in self.connections:
                moved |= connection._move(now)
            if not moved:
                self.connections = [c for c in self.connections if not c.finished]
                return rounds
        raise RuntimeError(f"still moving after {max_rounds} rounds")

    def advance(self, seconds: float, step: float | None = None) -> None:
        """Move the clock forward, stopping at every broker and client timer on the way
        (or every `step` seconds, if smaller), and pump at each stop."""
        end = self.scheduler.now() + seconds
        self.pump()
        while True:
            now = self.scheduler.now()
            due = [self.scheduler.next_due()]
            due += [c.client.get_timer() for c in self.connections if c.client is not None]
            # what is due by now the pump has run; the next stop is strictly later
            stop = min((d for d in due if d is not None and d > now), default=end)
            if step is not None:
                stop = min(stop, now + step)
            stop = min(stop, end)
            self.scheduler.advance(stop - now)
            self.pump()
            if stop >= end:
                return

    def close(self) -> None:
        """Close every connection (amqp:connection:forced) and the vhost's store."""
        self.context.stop_housekeeping()
        now = self.scheduler.now()
        for connection in list(self.context.connections):
            connection.close_forced(now)
        self.pump()
        self.vhost.close()

    def __enter__(self) -> MemoryBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
