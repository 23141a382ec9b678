"""Endpoint state machines as data: (state, input) -> (action, next state).

Rule 1 (after h11's `_state.py`): every state transition of the connection (2.4.6),
session (2.5.5), link (2.6) and SASL (5.3.2) endpoints lives in the tables of this file.
The engine asks a `StateMachine` to apply an input before it acts; a pair missing from a
table is refused:

- a RECV_x input raises `ProtocolError(condition, description, scope)`, with the spec's
  condition looked up in the matching *_ERRORS table (default amqp:illegal-state);
- a SEND_x input raises `UsageError`: the local application asked for something the
  endpoint's state does not allow.

The one exception: the engine's fast lanes (`Session.fast_transfer` for a received
one-frame transfer, `Link.send` for a sent one) skip the lookups in (connection OPENED,
session MAPPED, link ATTACHED), where every transfer input of these tables is a self-loop
"process". A change that makes any of those pairs do something else must also change the
lanes' entry tests: docs/engine.md, "Changing a rule", has the checklist.

Tables are plain dicts, exported so tests and the diagram tool (amqp10.engine.diagram,
`amqpspec engine diagram`) can walk every pair:
CONNECTION_TABLE, SESSION_TABLE, LINK_TABLE, SASL_TABLE (pairs -> Transition) and
CONNECTION_ERRORS, SESSION_ERRORS, LINK_ERRORS, SASL_ERRORS (every refused RECV pair ->
(condition, scope)). `TABLES` lists them with their state and input enums.

Actions are strings the engine acts upon: "process" (handle the frame / send it),
"discard" (drop an incoming frame silently), and a few compound ones named after what
they send ("open-then-close", "begin-then-end", "attach-then-detach",
"header-then-end").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from itertools import product

from amqpspec.amqp10.errors import AMQPError, ErrorKind, ProtocolError
from amqpspec.amqp10.spec import Cond


class UsageError(AMQPError):
    """The local application asked an endpoint for something its state forbids
    (a SEND_x input missing from a table, a transfer without credit, ...)."""


PROCESS = "process"
DISCARD = "discard"
OPEN_THEN_CLOSE = "open-then-close"
BEGIN_THEN_END = "begin-then-end"
ATTACH_THEN_DETACH = "attach-then-detach"
HEADER_THEN_END = "header-then-end"
END = "end"


class _Enum(Enum):
    """Members are singletons: identity hashing keeps the per-frame table lookups in C
    (Enum's own __hash__ is a Python function)."""

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class Transition:
    action: str
    next_state: Enum


# --- connection (2.4.6) ---------------------------------------------------------------


class ConnState(_Enum):
    START = "START"
    HDR_RCVD = "HDR_RCVD"
    HDR_SENT = "HDR_SENT"
    HDR_EXCH = "HDR_EXCH"
    OPEN_PIPE = "OPEN_PIPE"
    OC_PIPE = "OC_PIPE"
    OPEN_RCVD = "OPEN_RCVD"
    OPEN_SENT = "OPEN_SENT"
    CLOSE_PIPE = "CLOSE_PIPE"
    OPENED = "OPENED"
    CLOSE_RCVD = "CLOSE_RCVD"
    CLOSE_SENT = "CLOSE_SENT"
    DISCARDING = "DISCARDING"
    END = "END"


class ConnInput(_Enum):
    SEND_HEADER = "SEND_HEADER"
    RECV_HEADER = "RECV_HEADER"
    RECV_BAD_HEADER = "RECV_BAD_HEADER"  # a header we do not speak (2.2)
    SEND_OPEN = "SEND_OPEN"
    RECV_OPEN = "RECV_OPEN"
    SEND_CLOSE = "SEND_CLOSE"
    SEND_CLOSE_ERROR = "SEND_CLOSE_ERROR"  # close with an error: enter DISCARDING (2.4.6)
    RECV_CLOSE = "RECV_CLOSE"
    SEND_FRAME = "SEND_FRAME"  # any session-scoped performative (begin..end)
    RECV_FRAME = "RECV_FRAME"
    TRANSPORT_CLOSED = "TRANSPORT_CLOSED"  # the byte stream ended


def _conn_table() -> dict[tuple[ConnState, ConnInput], Transition]:
    s, i = ConnState, ConnInput
    t: dict[tuple[ConnState, ConnInput], Transition] = {}

    def add(state: ConnState, inp: ConnInput, nxt: ConnState, action: str = PROCESS) -> None:
        t[state, inp] = Transition(action, nxt)

    # 2.4.6 header exchange; a header we do not speak is answered with ours, then the
    # connection ends (2.2).
    add(s.START, i.SEND_HEADER, s.HDR_SENT)
    add(s.START, i.RECV_HEADER, s.HDR_RCVD)
    add(s.START, i.RECV_BAD_HEADER, s.END, HEADER_THEN_END)
    add(s.HDR_RCVD, i.SEND_HEADER, s.HDR_EXCH)
    add(s.HDR_SENT, i.RECV_HEADER, s.HDR_EXCH)
    add(s.HDR_SENT, i.RECV_BAD_HEADER, s.END, END)
    add(s.HDR_SENT, i.SEND_OPEN, s.OPEN_PIPE)
    add(s.HDR_EXCH, i.SEND_OPEN, s.OPEN_SENT)
    add(s.HDR_EXCH, i.RECV_OPEN, s.OPEN_RCVD)
    # close before the peer's open: our open goes first (2.4.6: open is always sent)
    add(s.HDR_EXCH, i.SEND_CLOSE, s.CLOSE_PIPE, OPEN_THEN_CLOSE)
    add(s.HDR_EXCH, i.SEND_CLOSE_ERROR, s.CLOSE_PIPE, OPEN_THEN_CLOSE)
    # pipelined open (2.4.2): header and open sent before the peer's header arrived
    add(s.OPEN_PIPE, i.RECV_HEADER, s.OPEN_SENT)
    add(s.OPEN_PIPE, i.RECV_BAD_HEADER, s.END, END)
    add(s.OPEN_PIPE, i.SEND_CLOSE, s.OC_PIPE)
    add(s.OPEN_PIPE, i.SEND_CLOSE_ERROR, s.OC_PIPE)
    add(s.OPEN_PIPE, i.SEND_FRAME, s.OPEN_PIPE)
    add(s.OC_PIPE, i.RECV_HEADER, s.CLOSE_PIPE)
    add(s.OC_PIPE, i.RECV_BAD_HEADER, s.END, END)
    add(s.OPEN_RCVD, i.SEND_OPEN, s.OPENED)
    add(s.OPEN_RCVD, i.RECV_FRAME, s.OPEN_RCVD)  # the peer pipelines begin after open
    add(s.OPEN_RCVD, i.RECV_CLOSE, s.CLOSE_RCVD)
    add(s.OPEN_RCVD, i.SEND_CLOSE, s.CLOSE_SENT, OPEN_THEN_CLOSE)
    add(s.OPEN_RCVD, i.SEND_CLOSE_ERROR, s.DISCARDING, OPEN_THEN_CLOSE)
    add(s.OPEN_SENT, i.RECV_OPEN, s.OPENED)
    add(s.OPEN_SENT, i.SEND_CLOSE, s.CLOSE_PIPE)
    add(s.OPEN_SENT, i.SEND_CLOSE_ERROR, s.CLOSE_PIPE)
    add(s.OPEN_SENT, i.SEND_FRAME, s.OPEN_SENT)
    add(s.CLOSE_PIPE, i.RECV_OPEN, s.CLOSE_SENT)
    add(s.OPENED, i.SEND_FRAME, s.OPENED)
    add(s.OPENED, i.RECV_FRAME, s.OPENED)
    add(s.OPENED, i.SEND_CLOSE, s.CLOSE_SENT)
    add(s.OPENED, i.SEND_CLOSE_ERROR, s.DISCARDING)
    add(s.OPENED, i.RECV_CLOSE, s.CLOSE_RCVD)
    add(s.CLOSE_RCVD, i.SEND_CLOSE, s.END)
    add(s.CLOSE_RCVD, i.SEND_CLOSE_ERROR, s.END)
    add(s.CLOSE_SENT, i.RECV_FRAME, s.CLOSE_SENT, DISCARD)  # in flight; we are closing
    add(s.CLOSE_SENT, i.RECV_CLOSE, s.END)
    # 2.4.6 DISCARDING: incoming frames are silently discarded until the peer's close
    add(s.DISCARDING, i.RECV_FRAME, s.DISCARDING, DISCARD)
    add(s.DISCARDING, i.RECV_OPEN, s.DISCARDING, DISCARD)
    add(s.DISCARDING, i.RECV_CLOSE, s.END)
    for state in ConnState:  # the transport can always go away
        add(state, i.TRANSPORT_CLOSED, s.END, END)
    return t


CONNECTION_TABLE = _conn_table()


# --- session (2.5.5) ------------------------------------------------------------------


class SessState(_Enum):
    UNMAPPED = "UNMAPPED"
    BEGIN_SENT = "BEGIN_SENT"
    BEGIN_RCVD = "BEGIN_RCVD"
    MAPPED = "MAPPED"
    END_SENT = "END_SENT"
    END_RCVD = "END_RCVD"
    DISCARDING = "DISCARDING"


class SessInput(_Enum):
    SEND_BEGIN = "SEND_BEGIN"
    RECV_BEGIN = "RECV_BEGIN"
    SEND_END = "SEND_END"
    SEND_END_ERROR = "SEND_END_ERROR"  # end with an error: enter DISCARDING (2.5.5)
    RECV_END = "RECV_END"
    SEND_ATTACH = "SEND_ATTACH"
    RECV_ATTACH = "RECV_ATTACH"
    SEND_FLOW = "SEND_FLOW"
    RECV_FLOW = "RECV_FLOW"
    SEND_TRANSFER = "SEND_TRANSFER"
    RECV_TRANSFER = "RECV_TRANSFER"
    SEND_DISPOSITION = "SEND_DISPOSITION"
    RECV_DISPOSITION = "RECV_DISPOSITION"
    SEND_DETACH = "SEND_DETACH"
    RECV_DETACH = "RECV_DETACH"


_SESSION_TRAFFIC = ("ATTACH", "FLOW", "TRANSFER", "DISPOSITION", "DETACH")


def _sess_table() -> dict[tuple[SessState, SessInput], Transition]:
    s, i = SessState, SessInput
    t: dict[tuple[SessState, SessInput], Transition] = {}

    def add(state: SessState, inp: SessInput, nxt: SessState, action: str = PROCESS) -> None:
        t[state, inp] = Transition(action, nxt)

    def traffic(state: SessState, direction: str, action: str = PROCESS, skip=()) -> None:
        for name in _SESSION_TRAFFIC:
            if name not in skip:
                add(state, SessInput[f"{direction}_{name}"], state, action)

    add(s.UNMAPPED, i.SEND_BEGIN, s.BEGIN_SENT)
    add(s.UNMAPPED, i.RECV_BEGIN, s.BEGIN_RCVD)
    add(s.BEGIN_SENT, i.RECV_BEGIN, s.MAPPED)
    add(s.BEGIN_SENT, i.SEND_END, s.END_SENT)
    add(s.BEGIN_SENT, i.SEND_END_ERROR, s.DISCARDING)
    # pipelining: links may be attached before the peer's begin arrives; a transfer
    # needs credit, which needs the peer's begin.
    traffic(s.BEGIN_SENT, "SEND", skip=("TRANSFER", "DISPOSITION"))
    add(s.BEGIN_RCVD, i.SEND_BEGIN, s.MAPPED)
    add(s.BEGIN_RCVD, i.SEND_END, s.END_SENT, BEGIN_THEN_END)  # refuse: begin, then end
    add(s.BEGIN_RCVD, i.SEND_END_ERROR, s.DISCARDING, BEGIN_THEN_END)
    add(s.BEGIN_RCVD, i.RECV_END, s.END_RCVD)
    traffic(s.BEGIN_RCVD, "RECV")  # the peer may pipeline attach/flow after begin
    traffic(s.MAPPED, "SEND")
    traffic(s.MAPPED, "RECV")
    add(s.MAPPED, i.SEND_END, s.END_SENT)
    add(s.MAPPED, i.SEND_END_ERROR, s.DISCARDING)
    add(s.MAPPED, i.RECV_END, s.END_RCVD)
    traffic(s.END_SENT, "RECV")  # still processed: window and ids stay in step (2.5.6)
    # ended before the peer's begin arrived: its begin maps the channel, its end follows
    add(s.END_SENT, i.RECV_BEGIN, s.END_SENT)
    add(s.DISCARDING, i.RECV_BEGIN, s.DISCARDING)
    add(s.END_SENT, i.RECV_END, s.UNMAPPED)
    add(s.END_RCVD, i.SEND_END, s.UNMAPPED)
    add(s.END_RCVD, i.SEND_END_ERROR, s.UNMAPPED)
    traffic(s.DISCARDING, "RECV", DISCARD)  # 2.5.5: discarded until the peer's end
    add(s.DISCARDING, i.RECV_END, s.UNMAPPED)
    return t


SESSION_TABLE = _sess_table()


# --- link (2.6) -----------------------------------------------------------------------


class LinkState(_Enum):
    DETACHED = "DETACHED"
    ATTACH_SENT = "ATTACH_SENT"
    ATTACH_RCVD = "ATTACH_RCVD"
    ATTACHED = "ATTACHED"
    DETACH_SENT = "DETACH_SENT"
    DETACH_RCVD = "DETACH_RCVD"


class LinkInput(_Enum):
    SEND_ATTACH = "SEND_ATTACH"
    RECV_ATTACH = "RECV_ATTACH"
    SEND_FLOW = "SEND_FLOW"
    RECV_FLOW = "RECV_FLOW"
    SEND_TRANSFER = "SEND_TRANSFER"
    RECV_TRANSFER = "RECV_TRANSFER"
    SEND_DETACH = "SEND_DETACH"
    RECV_DETACH = "RECV_DETACH"


def _link_table() -> dict[tuple[LinkState, LinkInput], Transition]:
    s, i = LinkState, LinkInput
    t: dict[tuple[LinkState, LinkInput], Transition] = {}

    def add(state: LinkState, inp: LinkInput, nxt: LinkState, action: str = PROCESS) -> None:
        t[state, inp] = Transition(action, nxt)

    add(s.DETACHED, i.SEND_ATTACH, s.ATTACH_SENT)
    add(s.DETACHED, i.RECV_ATTACH, s.ATTACH_RCVD)
    add(s.ATTACH_SENT, i.RECV_ATTACH, s.ATTACHED)
    add(s.ATTACH_SENT, i.SEND_FLOW, s.ATTACH_SENT)  # a receiver may grant credit at once
    add(s.ATTACH_SENT, i.SEND_DETACH, s.DETACH_SENT)
    add(s.ATTACH_RCVD, i.SEND_ATTACH, s.ATTACHED)
    add(s.ATTACH_RCVD, i.RECV_FLOW, s.ATTACH_RCVD)
    add(s.ATTACH_RCVD, i.RECV_DETACH, s.DETACH_RCVD)
    # refusing a link: an attach (null terminus) then the detach (2.6.3)
    add(s.ATTACH_RCVD, i.SEND_DETACH, s.DETACH_SENT, ATTACH_THEN_DETACH)
    for inp in (i.SEND_FLOW, i.RECV_FLOW, i.SEND_TRANSFER, i.RECV_TRANSFER):
        add(s.ATTACHED, inp, s.ATTACHED)
    add(s.ATTACHED, i.SEND_DETACH, s.DETACH_SENT)
    add(s.ATTACHED, i.RECV_DETACH, s.DETACH_RCVD)
    # after our detach, frames the peer sent before seeing it are dropped
    add(s.DETACH_SENT, i.RECV_FLOW, s.DETACH_SENT, DISCARD)
    add(s.DETACH_SENT, i.RECV_TRANSFER, s.DETACH_SENT, DISCARD)
    add(s.DETACH_SENT, i.RECV_DETACH, s.DETACHED)
    # detached before the peer's attach arrived: its attach, then its detach (2.6.3)
    add(s.DETACH_SENT, i.RECV_ATTACH, s.DETACH_SENT)
    add(s.DETACH_RCVD, i.SEND_DETACH, s.DETACHED)
    return t


LINK_TABLE = _link_table()


# --- SASL (5.3.2) ---------------------------------------------------------------------


class SaslState(_Enum):
    START = "START"
    HDR_SENT = "HDR_SENT"
    HDR_RCVD = "HDR_RCVD"
    HDR_EXCH = "HDR_EXCH"
    MECHS_SENT = "MECHS_SENT"
    MECHS_RCVD = "MECHS_RCVD"
    INIT_SENT = "INIT_SENT"
    INIT_RCVD = "INIT_RCVD"
    DONE = "DONE"


class SaslInput(_Enum):
    SEND_HEADER = "SEND_HEADER"
    RECV_HEADER = "RECV_HEADER"
    SEND_MECHANISMS = "SEND_MECHANISMS"
    RECV_MECHANISMS = "RECV_MECHANISMS"
    SEND_INIT = "SEND_INIT"
    RECV_INIT = "RECV_INIT"
    SEND_CHALLENGE = "SEND_CHALLENGE"
    RECV_CHALLENGE = "RECV_CHALLENGE"
    SEND_RESPONSE = "SEND_RESPONSE"
    RECV_RESPONSE = "RECV_RESPONSE"
    SEND_OUTCOME = "SEND_OUTCOME"
    RECV_OUTCOME = "RECV_OUTCOME"


def _sasl_table() -> dict[tuple[SaslState, SaslInput], Transition]:
    s, i = SaslState, SaslInput
    t: dict[tuple[SaslState, SaslInput], Transition] = {}

    def add(state: SaslState, inp: SaslInput, nxt: SaslState) -> None:
        t[state, inp] = Transition(PROCESS, nxt)

    # 5.3.2: header exchange, mechanisms (server), init (client), [challenge/response]*,
    # outcome (server). Challenge/response is in the table though ANONYMOUS and PLAIN
    # never use it.
    add(s.START, i.SEND_HEADER, s.HDR_SENT)
    add(s.START, i.RECV_HEADER, s.HDR_RCVD)
    add(s.HDR_SENT, i.RECV_HEADER, s.HDR_EXCH)
    add(s.HDR_RCVD, i.SEND_HEADER, s.HDR_EXCH)
    add(s.HDR_EXCH, i.SEND_MECHANISMS, s.MECHS_SENT)
    add(s.HDR_EXCH, i.RECV_MECHANISMS, s.MECHS_RCVD)
    add(s.MECHS_SENT, i.RECV_INIT, s.INIT_RCVD)
    add(s.MECHS_RCVD, i.SEND_INIT, s.INIT_SENT)
    add(s.INIT_RCVD, i.SEND_CHALLENGE, s.MECHS_SENT)
    add(s.INIT_RCVD, i.SEND_OUTCOME, s.DONE)
    add(s.MECHS_SENT, i.RECV_RESPONSE, s.INIT_RCVD)
    add(s.INIT_SENT, i.RECV_CHALLENGE, s.MECHS_RCVD)
    add(s.MECHS_RCVD, i.SEND_RESPONSE, s.INIT_SENT)
    add(s.INIT_SENT, i.RECV_OUTCOME, s.DONE)
    return t


SASL_TABLE = _sasl_table()


# --- the errors for refused RECV pairs ------------------------------------------------

ErrorSpec = tuple[str, str]  # (condition, scope)


def _errors(
    table: dict, states: type[Enum], inputs: type[Enum], pick: object
) -> dict[tuple[Enum, Enum], ErrorSpec]:
    return {
        (state, inp): pick(state, inp)  # type: ignore[operator]
        for state, inp in product(states, inputs)
        if inp.value.startswith("RECV") and (state, inp) not in table
    }


_AWAITING_HEADER = frozenset(
    {ConnState.START, ConnState.HDR_SENT, ConnState.OPEN_PIPE, ConnState.OC_PIPE}
)


def _conn_error(state: ConnState, inp: ConnInput) -> ErrorSpec:
    if inp in (ConnInput.RECV_HEADER, ConnInput.RECV_BAD_HEADER):
        return Cond.FRAMING_ERROR, "connection"  # a second header mid-stream (2.2)
    if state in _AWAITING_HEADER:
        return Cond.FRAMING_ERROR, "connection"  # a frame where the header must be (2.2)
    return Cond.ILLEGAL_STATE, "connection"


def _sess_error(state: SessState, inp: SessInput) -> ErrorSpec:
    # A frame for a channel the peer has not begun (or has ended) cannot reach a
    # session: the connection is at fault (2.5.1).
    if state in (SessState.UNMAPPED, SessState.BEGIN_SENT, SessState.END_RCVD):
        return Cond.ILLEGAL_STATE, "connection"
    if inp is SessInput.RECV_BEGIN:
        return Cond.ILLEGAL_STATE, "connection"  # a second begin on a mapped channel
    return Cond.ILLEGAL_STATE, "session"


def _link_error(state: LinkState, inp: LinkInput) -> ErrorSpec:
    # 2.6.2/2.8.16: handles are per session; misuse of them is a session error.
    if inp is LinkInput.RECV_ATTACH:
        return Cond.HANDLE_IN_USE, "session"
    if state in (LinkState.DETACHED, LinkState.ATTACH_SENT, LinkState.DETACH_RCVD):
        return Cond.UNATTACHED_HANDLE, "session"
    if inp is LinkInput.RECV_TRANSFER and state is LinkState.ATTACH_RCVD:
        return Cond.TRANSFER_LIMIT_EXCEEDED, "link"  # no credit can have been granted
    return Cond.ILLEGAL_STATE, "link"


def _sasl_error(state: SaslState, inp: SaslInput) -> ErrorSpec:
    return Cond.ILLEGAL_STATE, "connection"


CONNECTION_ERRORS = _errors(CONNECTION_TABLE, ConnState, ConnInput, _conn_error)
SESSION_ERRORS = _errors(SESSION_TABLE, SessState, SessInput, _sess_error)
LINK_ERRORS = _errors(LINK_TABLE, LinkState, LinkInput, _link_error)
SASL_ERRORS = _errors(SASL_TABLE, SaslState, SaslInput, _sasl_error)

# (name, state enum, input enum, table, errors) for tools that walk every pair
TABLES = (
    ("connection", ConnState, ConnInput, CONNECTION_TABLE, CONNECTION_ERRORS),
    ("session", SessState, SessInput, SESSION_TABLE, SESSION_ERRORS),
    ("link", LinkState, LinkInput, LINK_TABLE, LINK_ERRORS),
    ("sasl", SaslState, SaslInput, SASL_TABLE, SASL_ERRORS),
)


class StateMachine:
    """One endpoint's state, advanced only through its table."""

    __slots__ = ("errors", "kind", "state", "table", "visited")

    def __init__(self, kind: str, table: dict, errors: dict, state: Enum) -> None:
        self.kind = kind
        self.table = table
        self.errors = errors
        self.state = state
        self.visited: set | None = None  # a set: every (kind, state, input) applied goes in

    def process(self, inp: Enum) -> str:
        """Apply `inp`; returns the action. Raises ProtocolError / UsageError if refused."""
        transition = self.table.get((self.state, inp))
        if transition is None:
            self.refuse(inp)
        if self.visited is not None:
            self.visited.add((self.kind, self.state.value, inp.value))
        self.state = transition.next_state
        return transition.action

    def refuse_unless(self, inp: Enum) -> None:
        """Check `inp` without applying it (before side effects such as allocation)."""
        if (self.state, inp) not in self.table:
            self.refuse(inp)

    def allows(self, inp: Enum) -> bool:
        return (self.state, inp) in self.table

    def refuse(self, inp: Enum) -> None:
        error = self.errors.get((self.state, inp))
        if error is not None:
            condition, scope = error
            raise ProtocolError(
                condition,
                f"{inp.value} in {self.kind} state {self.state.value}",
                scope,
                ErrorKind.STATE_REFUSED,
                refused_input=inp.value,
            )
        raise UsageError(f"{self.kind} cannot {inp.value} in state {self.state.value}")


def connection_machine() -> StateMachine:
    return StateMachine("connection", CONNECTION_TABLE, CONNECTION_ERRORS, ConnState.START)


def session_machine() -> StateMachine:
    return StateMachine("session", SESSION_TABLE, SESSION_ERRORS, SessState.UNMAPPED)


def link_machine() -> StateMachine:
    return StateMachine("link", LINK_TABLE, LINK_ERRORS, LinkState.DETACHED)


def sasl_machine() -> StateMachine:
    return StateMachine("sasl", SASL_TABLE, SASL_ERRORS, SaslState.START)
