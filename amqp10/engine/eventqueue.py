"""The connection's event queue and the replies that wait their turn in it.

Owns: the events raised and not yet taken (`next_event()`, `events()`), the observers that
see (or consume) every event as it is raised (`add_observer`), and the engine's own
answers (an end, a detach, an error) due while what must precede them is not out yet
(`reply_when_sendable`, 2.4.1, 2.5.1). A part of `Connection` (connection.py composes it);
reads the hub's `can_send()` and nothing else of it. `emit()` is on the per-transfer path:
keep it a plain append.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.transitions import SessState

if TYPE_CHECKING:
    from amqpspec.amqp10.engine.session import Session


class EventQueue:
    """Events out, in order, and the replies queued behind them (a part of Connection)."""

    def _init_events(self) -> None:
        self._events: deque[ev.Event] = deque()
        self._observers: list[Callable[[ev.Event], bool | None]] = []
        # answers (errors, end and detach replies) due while what must precede them is not
        # out yet (our open, the session's begin: the peer pipelined), sent once it is
        self._unsent_replies: list[tuple[Callable[[], None], Session | None, int]] = []
        self._events_queued = 0  # events queued and taken so far: a reply waits its turn
        self._events_taken = 0

    def add_observer(self, observer: Callable[[ev.Event], bool | None]) -> None:
        """Call `observer(event)` for every event as the engine raises it, before it is
        queued; an observer that returns True consumes the event (events() never yields
        it). E.g. record the outcome of every DispositionReceived, or drop them."""
        self._observers.append(observer)

    def remove_observer(self, observer: Callable[[ev.Event], bool | None]) -> None:
        self._observers.remove(observer)

    def next_event(self) -> ev.Event | None:
        if not self._events:
            return None
        event = self._events.popleft()
        self._events_taken += 1
        if self._unsent_replies:
            self._send_unsent_replies()
        return event

    def events(self) -> Iterator[ev.Event]:
        """Every pending event, oldest first."""
        while self._events:
            yield self.next_event()  # type: ignore[misc]

    def reply_when_sendable(
        self, reply: Callable[[], None], session: Session | None = None
    ) -> None:
        """Call `reply()` (it writes an end, a detach, an error) now if our open is out, and
        `session`'s begin when given (a link's frame). Otherwise it waits: a peer may
        pipeline open, begin, attach and more in one write without waiting for ours (2.4.1,
        2.5.1), and what the engine must answer to those frames still reaches it, where a
        peer sending one frame at a time would see it: once the application has taken the
        events raised up to here (it answered the open, begin and attach before them) and
        it can go out, or at the latest at data_to_send(). `reply` checks again that it is
        still due when called."""
        if self._sendable(session):
            reply()
        else:
            self._unsent_replies.append((reply, session, self._events_queued))

    def _sendable(self, session: Session | None) -> bool:
        return self.can_send() and (session is None or session.state is not SessState.BEGIN_RCVD)

    def _send_unsent_replies(self, everything: bool = False) -> None:
        """The waiting replies whose turn came (`everything`: all) and that can go out now."""
        waiting, self._unsent_replies = self._unsent_replies, []
        for reply, session, due in waiting:
            if (everything or due <= self._events_taken) and self._sendable(session):
                reply()
            else:
                self._unsent_replies.append((reply, session, due))

    def emit(self, event: ev.Event) -> None:
        for observer in self._observers:
            if observer(event):
                return  # consumed: not queued for events()/next_event()
        self._events.append(event)
        self._events_queued += 1
