"""Events the engine reports to its driver (broker, probe client, tests).

Owns: the frozen, slotted dataclasses `Connection.next_event()` returns. Each names what
the PEER did (Remote*, *Received) or what the engine concluded (ProtocolErrorRaised,
IdleTimeout). Session and link events carry the engine's Session / Link object so the
driver can answer on it; the decoded performative is attached where it has more to say
than the event's own fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import Attach, Begin, Error, Flow, Open
from amqpspec.amqp10.errors import ErrorKind, ProtocolError, kept

if TYPE_CHECKING:
    from amqpspec.amqp10.engine.link import Link
    from amqpspec.amqp10.engine.session import Session


class Event:
    """Base class of every engine event."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ProtocolHeaderReceived(Event):
    """The peer's 8-byte protocol header (2.2); protocol_id 0 AMQP, 3 SASL."""

    protocol_id: int
    supported: bool


@dataclass(frozen=True, slots=True)
class SaslMechanismsOffered(Event):
    """Client side: the server's sasl-mechanisms (5.3.3.1)."""

    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SaslOutcomeReceived(Event):
    """Client side: the server's sasl-outcome (5.3.3.6); code 0 = ok, 1 = auth."""

    code: int
    additional_data: bytes | None


@dataclass(frozen=True, slots=True)
class SaslAuthenticated(Event):
    """Server side: a sasl-init was judged; `code` is the outcome code sent."""

    mechanism: str
    username: str | None
    code: int


@dataclass(frozen=True, slots=True)
class RemoteOpen(Event):
    """The peer's open (2.7.1); the negotiated limits are on the Connection."""

    open: Open


@dataclass(frozen=True, slots=True)
class RemoteClose(Event):
    """The peer's close (2.7.9); error is None for a clean close."""

    error: Error | None


@dataclass(frozen=True, slots=True)
class RemoteBegin(Event):
    """The peer's begin (2.7.2). For a session we began, session.state is MAPPED;
    for a new one (BEGIN_RCVD) answer with session.accept() or session.end()."""

    session: Session
    begin: Begin


@dataclass(frozen=True, slots=True)
class RemoteEnd(Event):
    session: Session
    error: Error | None


@dataclass(frozen=True, slots=True)
class RemoteAttach(Event):
    """The peer's attach (2.7.3). For a link we attached, link.state is ATTACHED; for
    a new one (ATTACH_RCVD) answer with link.accept(...) or link.reject(error)."""

    link: Link
    attach: Attach


@dataclass(frozen=True, slots=True)
class RemoteDetach(Event):
    link: Link
    closed: bool
    error: Error | None


@dataclass(frozen=True, slots=True)
class FlowReceived(Event):
    """A flow (2.7.4). `link` is None for a session-only flow. The link's credit state
    (link.link_credit, link.delivery_count, link.drain) is already updated (2.6.7).
    With a connection policy whose auto_echo is off, a flow with echo=true is the
    application's to answer (`link.send_flow_state()` / `session.flow()`); otherwise the
    engine has."""

    session: Session
    link: Link | None
    flow: Flow


@dataclass(frozen=True, slots=True)
class TransferReceived(Event):
    """One whole delivery on a receiving link: every frame of a multi-frame transfer
    reassembled (2.6.14). `settled` is the sender's settled flag; `state` its state."""

    link: Link
    delivery_id: int
    delivery_tag: bytes
    payload: bytes = field(repr=False)
    settled: bool
    state: Any
    message_format: int
    frame_count: int  # how many transfer frames carried it
    resume: bool = False  # the first frame's resume flag: a resumed delivery (2.6.13)


@dataclass(frozen=True, slots=True)
class DeliveryAborted(Event):
    """The sender aborted a delivery (2.7.5 aborted=true); its frames are dropped."""

    link: Link
    delivery_id: int | None
    delivery_tag: bytes | None


@dataclass(frozen=True, slots=True)
class DispositionReceived(Event):
    """A disposition (2.7.6) for delivery-ids first..last; `role` is the PEER's role
    (Role.RECEIVER when it settles/updates deliveries we sent)."""

    session: Session
    role: bool
    first: int
    last: int
    settled: bool
    state: Any
    batchable: bool


@dataclass(frozen=True, slots=True)
class ProtocolErrorRaised(Event):
    """The peer broke a rule; the engine has sent close/end/detach with `condition`
    (or, when already closing, only reports it). scope: connection, session, link.
    `session` is the Session it concerns (None for connection scope); `link` the Link
    (None unless scope is link), so a driver can release exactly what went with it.
    `error` is the ProtocolError itself: its `kind` (ErrorKind) and structured facts
    (performative, field, counts, channel) are what a driver keys on; `description` is
    for humans."""

    condition: str
    description: str
    scope: str
    session: Session | None = None
    link: Link | None = None
    error: ProtocolError | None = None

    @property
    def kind(self) -> str:
        """The error's ErrorKind (UNSPECIFIED when raised without one)."""
        return ErrorKind.UNSPECIFIED if self.error is None else self.error.kind

    @classmethod
    def of(
        cls,
        exc: ProtocolError,
        scope: str,
        session: Session | None = None,
        link: Link | None = None,
    ) -> ProtocolErrorRaised:
        """The event reporting `exc` (its condition, description, kind and facts)."""
        return cls(exc.condition, exc.description, scope, session, link, kept(exc))


@dataclass(frozen=True, slots=True)
class IdleTimeout(Event):
    """Nothing arrived within our idle-time-out (2.4.5); the engine sent close with
    amqp:resource-limit-exceeded."""

    timeout_ms: int


@dataclass(frozen=True, slots=True)
class TransportClosed(Event):
    """receive_data(b"") was called: the byte stream ended. `clean` is True when the
    connection had reached END (close exchanged or header refused)."""

    clean: bool


def _set_slots_init(cls: type[Event]) -> None:
    """Give a frozen, slotted event class a faster __init__ (one
    TransferReceived per message): dataclass's frozen __init__ sets each field through
    object.__setattr__ (about 0.25 us a field); this one calls each slot's descriptor
    directly. Same parameters and defaults; still frozen (setattr raises
    FrozenInstanceError), same eq, hash and repr."""
    fields = dataclasses.fields(cls)
    scope: dict[str, Any] = {}
    params, lines = [], []
    for f in fields:
        if f.default_factory is not dataclasses.MISSING or not f.init:
            return  # not the simple case: keep dataclass's own
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            scope[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        scope[f"_s_{f.name}"] = cls.__dict__[f.name].__set__
        lines.append(f"    _s_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(lines or ["    pass"])
    exec(source, scope)
    scope["__init__"].__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = scope["__init__"]  # type: ignore[misc]


for _cls in [c for c in list(globals().values()) if isinstance(c, type) and Event in c.__mro__]:
    if _cls is not Event and dataclasses.is_dataclass(_cls):
        _set_slots_init(_cls)
