"""The probe client: a frame-level AMQP 1.0 client on the `amqp10` engine over a real socket.

Owns: `Probe` (one TCP connection: blocking socket, every wait bounded by a per-wait
timeout and by the case's deadline), its recording (every byte both directions, given to
an `amqp10.monitor.ConnectionMonitor` as it crosses: timestamped TraceItems and the
broker's violations, kept in a `Recording`), and helpers for the cases: open/begin/attach,
grant credit, send and settle messages, wait for events or frames, and send crafted frames
(negative cases) through the engine, which records them as sent so its state follows the
wire (`Connection.send_performative`), or as bytes (`send_raw`: headers, malformed frames,
and every frame of a probe with no engine, after `raw_handshake`). Pipelined
(`pipelined=True`): after SASL, nothing is written until the case's first
wait, so every frame up to the first one that needs a reply goes out in one write (open,
begin, attach and the case's crafted frames), as clients that pipeline do (2.4.1, 2.5.1);
open() and begin() then return without waiting for the broker's open and begin. Builds
frames only through `amqp10` (builder, composites, Message). Touches nothing else; the
runner owns traces on disk.
"""

from __future__ import annotations

from amqpspec.conformance.probe.connection import ProbeConnection
from amqpspec.conformance.probe.links import ProbeLinks
from amqpspec.conformance.probe.transfers import ProbeTransfers
from amqpspec.conformance.probe.waits import EVENT_NAMES
from amqpspec.conformance.probe.wire import DEFAULT_WAIT, WaitTimeout

__all__ = ["DEFAULT_WAIT", "EVENT_NAMES", "Probe", "WaitTimeout"]


class Probe(ProbeConnection, ProbeLinks, ProbeTransfers):
    """One client connection to the broker under test.

    Created connected (TCP) but not opened; `open()` / `open_session()` start the AMQP
    layer on the engine. `deadline` (monotonic seconds) caps every wait of the case.
    `pipelined`: hold what the case sends after SASL until its first wait (one write).
    Each concern is its own class: `wire.ProbeWire` (socket, engine, recording, raw and
    crafted frames), `waits.ProbeWaits`, `connection.ProbeConnection`, `links.ProbeLinks`,
    `transfers.ProbeTransfers`.
    """
