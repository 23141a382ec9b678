"""A recording TCP relay, so cases can judge a real client library's traffic (python-qpid-proton).

Owns: `Relay` — the one relay of the project (traces.proxy.RecordingProxy, the engine of
`amqpspec capture`) run in a background thread on its own event loop, listening on
127.0.0.1 (ephemeral port) for one client connection and relaying it to the broker, and
`RecordingSink`, which records every relayed chunk like a `Probe` does (through the
broker-judging connection monitor) into a `Recording` the runner renders, checks and
writes as pcap. Never parses or builds AMQP itself. Stops (closing both sockets) on
`disconnect()`, at the deadline, or when either side closes (`close_on_eof`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time

from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.origins import CLIENT
from amqpspec.conformance.probe import Chunk, Recording, broker_monitor
from amqpspec.traces.proxy import RecordingProxy, new_event_loop

_relay_ids = itertools.count(10001)
READY_S = 5.0  # bound on the relay's event loop coming up (it only binds a local port)


class RecordingSink:
    """The proxy's record sink for one relayed connection: its chunks into `recording`,
    judged by the broker-judging monitor as they are recorded (traces.proxy.RecordSink)."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.monitor = broker_monitor(recording)
        self.closed = False

    def open_connection(self, connection_id: int, client: str, server: str, time: float) -> None:
        self.recording.client, self.recording.server = client, server
        self.recording.start = time

    def data(self, connection_id: int, direction: str, chunk: bytes, time: float) -> None:
        self.recording.chunks.append(Chunk(direction, chunk, time))
        self.recording.add(self.monitor.feed(direction, chunk, time))

    def close_connection(self, connection_id: int, time: float, closer: str = CLIENT) -> None:
        self.recording.end = time
        self.recording.add(self.monitor.finish())
        self.closed = True

    def flush(self) -> None:
        pass

    def close(self, time: float) -> None:
        pass


class Relay:
    """One recorded client connection through to the broker (the Probe-like interface the
    runner needs: recording, violations, closed, conn=None, disconnect())."""

    conn = None

    def __init__(self, host: str, port: int, deadline: float) -> None:
        self.upstream = (host, port)
        self.deadline = deadline
        self.recording = Recording(next(_relay_ids))
        self._sink = RecordingSink(self.recording)
        self._stopped = False
        self._proxy = RecordingProxy(
            "127.0.0.1", 0, host, port, self._sink, max_connections=1, close_on_eof=True
        )
        self._loop = new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="amqpspec-relay", daemon=True)
        self._thread.start()
        self._ready.wait(READY_S)
        if self._proxy.bound is None:
            self.disconnect()
            raise OSError("the relay could not listen on 127.0.0.1")
        self.port = self._proxy.bound[1]

    @property
    def violations(self) -> list[Violation]:
        return self.recording.violations

    @property
    def closed(self) -> bool:
        return self._stopped or self._sink.closed

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        except OSError:
            pass
        finally:
            self._ready.set()
            self._loop.close()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        ready.add_done_callback(lambda _: self._ready.set())
        loop.call_later(max(0.0, self.deadline - time.monotonic()), self._proxy.stop)
        await self._proxy.run(ready)

    def disconnect(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has ended already
            self._loop.call_soon_threadsafe(self._proxy.stop)
        self._thread.join(5)
        self._stopped = True
