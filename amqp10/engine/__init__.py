"""amqp10.engine: sans-IO AMQP 1.0 endpoints (h11 / aioquic style).

Bytes in, events out, bytes to send; time is passed in (`now`, any monotonic seconds),
never read. No sockets, no clock, no threads. The driver (broker, probe client, tests)
owns the I/O loop:

    conn = Connection(role="client", container_id="c1", max_frame_size=65536,
                      channel_max=65535, idle_timeout_ms=30000, sasl=ClientSasl())
    conn.open()
    loop:
        send(conn.data_to_send(now))
        conn.receive_data(recv(), now)           # b"" when the peer closed the socket
                                                 # (max_frames=n + receive_buffered: steps)
        for event in conn.events(): ...          # or conn.next_event() -> Event | None
        timer = conn.get_timer(); ... conn.handle_timer(now) once it passes
        stop when conn.finished (after flushing data_to_send())

Endpoints (every state change goes through the tables in `transitions`):
- Connection(role, container_id, *, hostname, max_frame_size, channel_max,
  idle_timeout_ms, sasl, properties, offered_capabilities, desired_capabilities,
  auto_reply=True, policy=EndpointPolicy()): open(), close(error=None, description=None),
  begin(..., auto_window=True, initial_outgoing_id=0) -> Session,
  add_observer(fn) / remove_observer(fn) (see, or consume, every event as it is raised).
  Crafted traffic (conformance cases, fuzzers; frames from amqp10.builder):
  send_performative(p, channel, payload, raw=None, strict=True) -> Session | Link | None
  (recorded as sent: the state follows the wire), send_raw(data) (bytes in order, no
  state change).
- Session: attach_sender(name, source, target, ...) -> Link, attach_receiver(...) ->
  Link, accept(...) (answer a RemoteBegin), end(error=None), flow(incoming_window=None,
  echo=False), disposition(role, first, last, settled, state, batchable), send_begin()
  (for a Session(connection, ...) made directly).
- Link: accept(source, target, ...) / reject(error) (answer a RemoteAttach),
  flow(link_credit, drain, echo, available), send(payload, delivery_tag, settled,
  message_format) -> delivery-id, drained(), set_flow_state(...)
  (sender credit kept by the application), send_flow_state(echo=False),
  disposition(first, last, settled, state), detach(closed=True, error=None).

State/negotiation: conn.state, conn.finished (flush, then close the socket),
conn.can_begin (our open is out; with SASL after the outcome), conn.remote_open,
remote_max_frame_size, remote_channel_max, remote_idle_timeout_ms; frames_received /
frames_sent (counters, heartbeats included, protocol headers not); Session and Link
expose their 2.5.6 / 2.6.7 state as attributes. Tables: `transitions.TABLES`. In-memory
client/server pair for tests: `amqp10.engine.testing.ConnectionPair`. Reference:
docs/engine.md.

With auto_reply=True (default) the engine answers the peer's close, end and detach
with its own at once; with policy.auto_echo (default) echo flows are answered (after our
attach when they come before it). Peer misbehaviour becomes the spec's error condition
on a close / end / detach and a ProtocolErrorRaised event (naming its session / link);
local misuse raises UsageError. A window grant is enforced once data_to_send() has
handed it out (2.5.6).
"""

from amqpspec.amqp10.engine.connection import Connection
from amqpspec.amqp10.engine.events import (
    DeliveryAborted,
    DispositionReceived,
    Event,
    FlowReceived,
    IdleTimeout,
    ProtocolErrorRaised,
    ProtocolHeaderReceived,
    RemoteAttach,
    RemoteBegin,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    RemoteOpen,
    SaslAuthenticated,
    SaslMechanismsOffered,
    SaslOutcomeReceived,
    TransferReceived,
    TransportClosed,
)
from amqpspec.amqp10.engine.link import Link
from amqpspec.amqp10.engine.policy import STRICT, EndpointPolicy
from amqpspec.amqp10.engine.sasl import ClientSasl, ServerSasl
from amqpspec.amqp10.engine.session import Session
from amqpspec.amqp10.engine.transitions import (
    TABLES,
    ConnInput,
    ConnState,
    LinkInput,
    LinkState,
    SaslInput,
    SaslState,
    SessInput,
    SessState,
    UsageError,
)

__all__ = [
    "STRICT",
    "TABLES",
    "ClientSasl",
    "ConnInput",
    "ConnState",
    "Connection",
    "DeliveryAborted",
    "DispositionReceived",
    "EndpointPolicy",
    "Event",
    "FlowReceived",
    "IdleTimeout",
    "Link",
    "LinkInput",
    "LinkState",
    "ProtocolErrorRaised",
    "ProtocolHeaderReceived",
    "RemoteAttach",
    "RemoteBegin",
    "RemoteClose",
    "RemoteDetach",
    "RemoteEnd",
    "RemoteOpen",
    "SaslAuthenticated",
    "SaslInput",
    "SaslMechanismsOffered",
    "SaslOutcomeReceived",
    "SaslState",
    "ServerSasl",
    "SessInput",
    "SessState",
    "Session",
    "TransferReceived",
    "TransportClosed",
    "UsageError",
]
