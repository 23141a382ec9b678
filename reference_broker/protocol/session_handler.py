"""The session handler of a broker connection (2.5): the engine's begin, end and
session-scoped protocol errors, answered with the broker's sessions (sessions.py).

Owns: the connection's `BrokerSession` per engine Session (the dict is the connection's,
`connection.sessions`), accepting a begin within the configured limits (limits.py; window 0
while a resource alarm blocks publishers), releasing a session's links when it ends, the
incoming window re-opened once per read (2.5.6) and the alarm windows of every session.
May touch: the engine Sessions of its connection, the link handler (a session's links go
with it), the recovery registry (features/recovery.py, 3.5.3 session-end).
"""

from __future__ import annotations

import logging

from amqpspec.amqp10.engine import UsageError
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.transitions import LinkState, SessState
from amqpspec.amqp10.spec import Cond

from ..features.recovery import CLOSED, SESSION_ENDED
from .limits import session_options
from .parts import ConnectionPart
from .sessions import BrokerSession

log = logging.getLogger("reference_broker.connection")

_GONE_LINK = frozenset({LinkState.DETACHED, LinkState.DETACH_SENT})
_LIVE_SESSION = frozenset({SessState.MAPPED, SessState.BEGIN_RCVD})


class SessionHandler(ConnectionPart):
    """Begin, end and the sessions' windows of one connection."""

    SHARED = ("sessions",)
    __slots__ = SHARED

    def on_begin(self, event: ev.RemoteBegin) -> None:
        connection = self.connection
        engine_session = event.session
        if engine_session.state is not SessState.BEGIN_RCVD:
            return  # the engine already answered it: begin+end, or begin+end with an error
        blocked = connection.context.alarm_active and not connection.faults.ignore_alarm
        try:
            engine_session.accept(
                **session_options(connection.config.limits, blocked),
                auto_window=False,  # re-opened per read in reopen_windows(), see there
            )
        except UsageError as exc:  # e.g. no free channel
            log.info("%s: begin refused: %s", connection.name, exc)
            engine_session.end(Cond.RESOURCE_LIMIT_EXCEEDED, str(exc))
            return
        self.sessions[engine_session] = BrokerSession(connection, engine_session)
        connection.summary.channels = len(self.sessions)

    def on_end(self, event: ev.RemoteEnd) -> None:
        session = self.sessions.pop(event.session, None)
        if session is not None:
            self.release_session(session, SESSION_ENDED)
        self.connection.summary.channels = len(self.sessions)

    def on_protocol_error(self, event: ev.ProtocolErrorRaised) -> None:
        """The engine ended the session or detached the link: release what went with it."""
        engine_session = event.session
        session = self.sessions.get(engine_session)
        if session is None:
            return
        if engine_session.state not in _LIVE_SESSION:
            self.release_session(session, SESSION_ENDED)
            del self.sessions[engine_session]
            self.connection.summary.channels = len(self.sessions)
        elif event.link is not None and event.link.state in _GONE_LINK:
            self.connection.link_handler.release_link(session, event.link)

    def release_session(self, session: BrokerSession, why: str = CLOSED) -> None:
        release_link = self.connection.link_handler.release_link
        for link in list(session.links):
            release_link(session, link, why=why)
        self.connection.context.recovery.session_gone(session)  # 3.5.3 session-end
        session.pending_accepts = []

    def release_all(self, why: str) -> None:
        """The connection ends (close, loss): every session goes, `why` for their termini."""
        for session in list(self.sessions.values()):
            self.release_session(session, why)
        self.sessions.clear()

    def reopen_windows(self) -> None:
        """2.5.6: re-open a session's incoming window once less than half is left, once
        per read (one flow per read at most, where the engine's auto_window would send
        one per half window). The engine enforces a grant from the moment it is written
        out, so a burst beyond the window we advertised ends the session with
        window-violation."""
        for session in self.sessions.values():  # a handful: checked after every read
            engine_session = session.engine
            limit = engine_session.incoming_window_max
            if engine_session.incoming_window * 2 < limit and engine_session.state is (
                SessState.MAPPED
            ):
                session.set_window(limit)

    def set_windows(self, window: int) -> None:
        """Alarm raised (window 0) or cleared (configured window) on every session."""
        for session in self.sessions.values():
            session.alarm_overshoot = 0
            session.set_window(window)
        self.connection.mark_dirty()
