"""Crafted frames the engine records as sent, so its state stays what the wire says.

Owns: `record_sent(connection, performative, channel, frame, strict)`, behind
`Connection.send_performative`. For each performative it applies the same SEND inputs of
the transition tables as the application's own calls (open(), begin(), attach, flow,
send(), disposition, detach, end, close, the SASL frames) and updates the endpoint state
the performative sets: a begin makes a session BEGIN_SENT (or MAPPED) with the begin's
next-outgoing-id and windows, an attach maps its handle, a flow grants its window and
credit, a transfer takes a transfer-id, a delivery-id and (on a sender) one credit.
Frames a compound action puts first (the header before an open, our open before a
close, our begin before an end, our attach before a detach) are written too, as the
application's calls would. The frame's bytes are `frame` exactly (any crafted encoding).

strict=True: what the tables refuse raises UsageError and nothing is written.
strict=False: a refused performative is written anyway and changes no state (a
deliberate protocol violation: our endpoint did not move, the peer is expected to
object). Checks run before any change, so a refusal never leaves half an update.

May touch: the Connection, Session and Link engine internals (`_machine`, maps, flow
state); no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.engine.link import Link
from amqpspec.amqp10.engine.session import Session
from amqpspec.amqp10.engine.transitions import (
    ATTACH_THEN_DETACH,
    BEGIN_THEN_END,
    CONNECTION_TABLE,
    OPEN_THEN_CLOSE,
    SASL_TABLE,
    ConnInput,
    LinkInput,
    LinkState,
    SaslInput,
    SaslState,
    SessInput,
    UsageError,
)
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER
from amqpspec.amqp10.serial import serial_add, serial_ge

if TYPE_CHECKING:
    from amqpspec.amqp10.engine.connection import Connection

Endpoint = Session | Link | None


def record_sent(
    conn: Connection, performative: Any, channel: int, frame: bytes, strict: bool
) -> Endpoint:
    """Apply `performative` to the endpoints as sent and write `frame`; returns the
    Session or Link it was recorded on (None for connection and SASL frames, and for a
    refused frame sent with strict=False)."""
    recorder = _RECORDERS.get(getattr(performative, "NAME", None))
    try:
        if recorder is None:
            raise UsageError(f"no endpoint records a {type(performative).__name__}")
        return recorder(conn, performative, channel, frame)
    except UsageError:
        if strict:
            raise
        conn.write_frame(frame)
        return None


# --- connection (2.4, 2.7.1, 2.7.9) ---------------------------------------------------


def _not_in_sasl(conn: Connection, name: str) -> None:
    if conn.in_sasl:
        raise UsageError(f"{name} before the SASL outcome (5.3.2)")


def _open(conn: Connection, open_: Any, channel: int, frame: bytes) -> Endpoint:
    _not_in_sasl(conn, "open")
    machine = conn.machine
    header = machine.allows(ConnInput.SEND_HEADER)
    state = CONNECTION_TABLE[machine.state, ConnInput.SEND_HEADER].next_state if header else None
    if (state or machine.state, ConnInput.SEND_OPEN) not in CONNECTION_TABLE:
        machine.refuse(ConnInput.SEND_OPEN)
    if header:
        machine.process(ConnInput.SEND_HEADER)
        conn.send_raw(AMQP_HEADER.encode())
    machine.process(ConnInput.SEND_OPEN)
    conn.open_requested = True
    conn.container_id = open_.container_id
    conn.hostname = open_.hostname
    conn.max_frame_size = open_.max_frame_size
    conn.channel_max = open_.channel_max
    conn.idle_timeout_ms = open_.idle_time_out
    conn.offered_capabilities = open_.offered_capabilities
    conn.desired_capabilities = open_.desired_capabilities
    conn.properties = open_.properties
    conn.write_open(frame)  # 2.7.1: from now on the peer may use our max-frame-size
    return None


def _close(conn: Connection, close: Any, channel: int, frame: bytes) -> Endpoint:
    _not_in_sasl(conn, "close")
    inp = ConnInput.SEND_CLOSE if close.error is None else ConnInput.SEND_CLOSE_ERROR
    if conn.machine.process(inp) == OPEN_THEN_CLOSE:
        conn.write_open()
    conn.write_frame(frame)
    return None


# --- sessions (2.5, 2.7.2, 2.7.4, 2.7.6, 2.7.8) ---------------------------------------


def _session_on(conn: Connection, channel: int, inp: SessInput) -> Session:
    """The session on our `channel`, checked (connection and session) for `inp`."""
    _not_in_sasl(conn, inp.value)
    conn.machine.refuse_unless(ConnInput.SEND_FRAME)
    session = conn.sessions_by_channel.get(channel)
    if session is None:
        raise UsageError(f"no session of ours on channel {channel}")
    session.machine.refuse_unless(inp)
    return session


def _begin(conn: Connection, begin: Any, channel: int, frame: bytes) -> Endpoint:
    _not_in_sasl(conn, "begin")
    conn.machine.refuse_unless(ConnInput.SEND_FRAME)
    on_channel = conn.sessions_by_channel.get(channel)
    if begin.remote_channel is not None:  # answering the peer's begin (2.5.2)
        session = conn.sessions_by_remote_channel.get(begin.remote_channel)
        if session is None:
            raise UsageError(f"no begin from the peer on channel {begin.remote_channel}")
        if on_channel not in (None, session):
            raise UsageError(f"channel {channel} is another session's")
    else:
        session = on_channel
    limit = conn.remote_channel_max if conn.remote_open is not None else conn.channel_max
    if channel > limit:
        raise UsageError(f"channel {channel} > channel-max {limit} (2.7.1)")
    if session is not None:
        session.machine.refuse_unless(SessInput.SEND_BEGIN)
    conn.check_can_send()
    if session is None:
        session = Session(conn, incoming=True)
    if session.channel is None:
        session.channel = channel
        conn.sessions_by_channel[channel] = session
    session.machine.process(SessInput.SEND_BEGIN)
    session.initial_outgoing_id = session.next_outgoing_id = begin.next_outgoing_id
    session.incoming_window = session.incoming_window_max = begin.incoming_window
    session.outgoing_window = begin.outgoing_window
    session.handle_max = begin.handle_max
    session.properties = begin.properties
    session.offered_capabilities = begin.offered_capabilities
    session.desired_capabilities = begin.desired_capabilities
    session.grant_window()
    conn.write_frame(frame)
    return session


def _end(conn: Connection, end: Any, channel: int, frame: bytes) -> Endpoint:
    inp = SessInput.SEND_END if end.error is None else SessInput.SEND_END_ERROR
    session = _session_on(conn, channel, inp)
    conn.check_can_send()
    if session.machine.process(inp) == BEGIN_THEN_END:
        session.write_begin()
    session.drop_queued()
    conn.write_frame(frame)
    session.maybe_unmapped()
    return session


def _flow(conn: Connection, flow: Any, channel: int, frame: bytes) -> Endpoint:
    session = _session_on(conn, channel, SessInput.SEND_FLOW)
    link = None
    if flow.handle is not None:
        link = _link_on(session, flow.handle)
        link.machine.refuse_unless(LinkInput.SEND_FLOW)
    conn.check_can_send()
    session.machine.process(SessInput.SEND_FLOW)
    session.incoming_window = session.incoming_window_max = flow.incoming_window
    session.outgoing_window = flow.outgoing_window
    session.grant_window()
    if link is not None:
        link.machine.process(LinkInput.SEND_FLOW)
        if link.is_sender:
            if flow.available is not None:
                link.available = flow.available
        else:
            if flow.link_credit is not None:
                link.grant(flow.link_credit)
            link.drain = bool(flow.drain)
    conn.write_frame(frame)
    return link or session


def _disposition(conn: Connection, disposition: Any, channel: int, frame: bytes) -> Endpoint:
    session = _session_on(conn, channel, SessInput.SEND_DISPOSITION)
    conn.check_can_send()
    session.machine.process(SessInput.SEND_DISPOSITION)
    conn.write_frame(frame)
    return session


# --- links (2.6, 2.7.3, 2.7.5, 2.7.7) ---------------------------------------------------


def _link_on(session: Session, handle: int) -> Link:
    link = session.links.get(handle)
    if link is None:
        raise UsageError(f"no link of ours with handle {handle}")
    return link


def _on_link(conn: Connection, channel: int, handle: int, what: str) -> tuple[Session, Link]:
    """Session and link for a SEND_<what> (TRANSFER, DETACH): every table checked first,
    then the connection's and session's inputs applied (the link's is the caller's)."""
    session = _session_on(conn, channel, SessInput[f"SEND_{what}"])
    link = _link_on(session, handle)
    link.machine.refuse_unless(LinkInput[f"SEND_{what}"])
    conn.check_can_send()
    session.machine.process(SessInput[f"SEND_{what}"])
    return session, link


def _attach(conn: Connection, attach: Any, channel: int, frame: bytes) -> Endpoint:
    session = _session_on(conn, channel, SessInput.SEND_ATTACH)
    link = next(
        (
            peer_link
            for peer_link in session.links_by_remote_handle.values()
            if peer_link.name == attach.name and peer_link.state is LinkState.ATTACH_RCVD
        ),
        None,
    )  # answering the peer's attach (2.6.3)
    if link is not None:
        link.machine.refuse_unless(LinkInput.SEND_ATTACH)
    if session.links.get(attach.handle) not in (None, link):
        raise UsageError(f"handle {attach.handle} is in use (2.6.2)")
    conn.check_can_send()
    session.machine.process(SessInput.SEND_ATTACH)
    if link is None:
        link = Link(session, attach.name, attach.role, None, None, None, None)
    link.source, link.target = attach.source, attach.target
    link.snd_settle_mode, link.rcv_settle_mode = attach.snd_settle_mode, attach.rcv_settle_mode
    link.max_message_size = attach.max_message_size
    link.handle = attach.handle
    session.links[attach.handle] = link
    if link.is_sender:  # 2.6.7: our delivery-count starts at initial-delivery-count
        link.start_delivery_count(attach.initial_delivery_count or 0)
    link.machine.process(LinkInput.SEND_ATTACH)
    if link.state is LinkState.ATTACH_SENT:
        session.await_attach(link)
    conn.write_frame(frame)
    return link


def _transfer(conn: Connection, transfer: Any, channel: int, frame: bytes) -> Endpoint:
    session, link = _on_link(conn, channel, transfer.handle, "TRANSFER")
    link.machine.process(LinkInput.SEND_TRANSFER)
    # 2.5.6: every transfer frame takes one transfer-id, within the window or not
    session.next_outgoing_id = serial_add(session.next_outgoing_id, 1)
    if not link.sending_more:  # 2.6.7, 2.7.5: the first frame of a delivery
        if transfer.delivery_id is not None and serial_ge(
            transfer.delivery_id, session.next_delivery_id
        ):
            session.next_delivery_id = serial_add(transfer.delivery_id, 1)
        if link.is_sender and link.delivery_count is not None:
            link.delivery_count = serial_add(link.delivery_count, 1)
            link.link_credit = max(0, link.link_credit - 1)
    link.sending_more = bool(transfer.more) and not transfer.aborted
    conn.write_frame(frame)
    return link


def _detach(conn: Connection, detach: Any, channel: int, frame: bytes) -> Endpoint:
    session, link = _on_link(conn, channel, detach.handle, "DETACH")
    if link.machine.process(LinkInput.SEND_DETACH) == ATTACH_THEN_DETACH:
        session.write_attach(link.attach_frame({}))
    conn.write_frame(frame)
    link.maybe_detached()
    return link


# --- SASL (5.3.2) -----------------------------------------------------------------------

_SASL_INPUT = {
    "sasl-mechanisms": SaslInput.SEND_MECHANISMS,
    "sasl-init": SaslInput.SEND_INIT,
    "sasl-challenge": SaslInput.SEND_CHALLENGE,
    "sasl-response": SaslInput.SEND_RESPONSE,
    "sasl-outcome": SaslInput.SEND_OUTCOME,
}


def _sasl(conn: Connection, body: Any, channel: int, frame: bytes) -> Endpoint:
    machine = conn.sasl_machine
    if machine is None or not conn.in_sasl:
        raise UsageError(f"{body.NAME} outside a SASL exchange (5.3.2)")
    inp = _SASL_INPUT[body.NAME]
    header = machine.state is SaslState.START and conn.role == "client"
    state = SASL_TABLE[machine.state, SaslInput.SEND_HEADER].next_state if header else None
    if (state or machine.state, inp) not in SASL_TABLE:
        machine.refuse(inp)
    if header:
        machine.process(SaslInput.SEND_HEADER)
        conn.send_raw(SASL_HEADER.encode())
    machine.process(inp)
    conn.write_frame(frame)
    if inp is SaslInput.SEND_OUTCOME:
        conn.sasl_outcome = body.code
        conn.finish_sasl(body.code)
    return None


# performative name (amqp10.spec) -> recorder
_RECORDERS: dict[str, Callable[..., Endpoint]] = {
    "open": _open,
    "close": _close,
    "begin": _begin,
    "end": _end,
    "flow": _flow,
    "disposition": _disposition,
    "attach": _attach,
    "transfer": _transfer,
    "detach": _detach,
    **dict.fromkeys(_SASL_INPUT, _sasl),
}
