"""The probe's waits: for an engine event, a broker frame, a close, an outcome, or a flow.

Owns: `ProbeWaits` (expect, expect_type, wait_for_frame, first_frame, idle, wait_closed,
error_outcome, header_answer, next_link_flow, link_flows, fail_if_gone): each wait is bounded
by its own timeout and by the case's deadline, and its failure (`WaitTimeout`) says what the
broker did instead. `EVENT_NAMES`: the broker frame behind an engine event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.engine import (
    Event,
    Link,
)
from amqpspec.amqp10.frames import Frame, ProtocolHeader
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.probe.wire import ProbeWire, WaitTimeout
from amqpspec.conformance.verdicts import NoDelivery, Unanswered

# engine events by the broker frame behind them (a wait's failure names the frame)
EVENT_NAMES = {
    "RemoteOpen": "open",
    "RemoteBegin": "begin",
    "RemoteAttach": "attach",
    "RemoteDetach": "detach",
    "RemoteEnd": "end",
    "RemoteClose": "close",
    "FlowReceived": "flow",
    "TransferReceived": "transfer",
    "DispositionReceived": "disposition",
    "SaslOutcomeReceived": "sasl-outcome",
}
_ANSWERED = "answered"  # error_outcome's `until` held before anything ended


def _article(label: str) -> str:
    """`a flow`, `an attach`, `the ...` (a wait's label in its failure)."""
    if label.startswith(("a ", "an ", "the ", "no ")) or label[:1].isupper():
        return label
    return ("an " if label[:1] in "aeiou" else "a ") + label


class ProbeWaits(ProbeWire):
    """Bounded waits on the wire: what the broker sent, or its silence, in words."""

    def expect(
        self, predicate: Callable[[Event], bool], timeout: float | None = None, what: str = ""
    ) -> Event:
        """Take the first event matching `predicate` (already received or arriving within
        `timeout`); WaitTimeout otherwise."""
        timeout = self.wait if timeout is None else timeout

        def take() -> Event | None:
            for index, event in enumerate(self.inbox):
                if predicate(event):
                    return self.inbox.pop(index)
            return None

        since = self.mark()
        event = self._poll(take, timeout)
        if event is None:
            label = what or getattr(predicate, "__name__", "event")
            raise WaitTimeout(
                f"expected {_article(label)} within {timeout:g}s; {self.observed(since)}"
            )
        return event

    def expect_type(self, event_type: type, timeout: float | None = None, **fields: Any) -> Any:
        def match(event: Event) -> bool:
            return isinstance(event, event_type) and all(
                getattr(event, k) == v for k, v in fields.items()
            )

        return self.expect(
            match, timeout, EVENT_NAMES.get(event_type.__name__, event_type.__name__)
        )

    def _answer(
        self, predicate: Callable[[Event], bool], timeout: float | None, what: str
    ) -> Event:
        """`expect` for an answer a step needs (the broker's open, begin, attach, detach,
        end): without it the case cannot go on (`Unanswered`, UNSUPPORTED)."""
        try:
            return self.expect(predicate, timeout, what)
        except WaitTimeout as exc:
            raise Unanswered(str(exc)) from exc

    def wait_for_frame(
        self,
        name: str,
        timeout: float | None = None,
        predicate: Callable[[Frame], bool] | None = None,
        since: int | None = None,
    ) -> Frame:
        """The next broker frame named `name` (after the last one a wait returned, or
        after trace position `since`) matching `predicate`."""
        timeout = self.wait if timeout is None else timeout
        start = self._frame_cursor if since is None else since

        def take() -> Frame | None:
            items = self.recording.items
            for position in range(start, len(items)):
                trace_item = items[position]
                frame = trace_item.item
                if (
                    trace_item.direction == SERVER
                    and isinstance(frame, Frame)
                    and frame.name == name
                    and (predicate is None or predicate(frame))
                ):
                    self._frame_cursor = position + 1
                    return frame
            return None

        waited_from = self.mark()
        frame = self._poll(take, timeout)
        if frame is None:
            what = f"{_article(name)} frame" + (" of the kind the case needs" if predicate else "")
            raise WaitTimeout(
                f"expected {what} within {timeout:g}s; {self.observed(min(start, waited_from))}"
            )
        return frame

    def first_frame(self, since: int, timeout: float | None = None) -> Frame | None:
        """The broker's first AMQP frame (SASL frames skipped) after trace position `since`
        (waiting up to `timeout`), or None when none came."""
        timeout = self.wait if timeout is None else timeout

        def first() -> Frame | None:
            frames = (t.item for t in self.frames_since(since))
            return next((f for f in frames if not str(f.name).startswith("sasl-")), None)

        return self._poll(first, timeout)

    def idle(self, seconds: float) -> None:
        """Keep the connection serviced for `seconds` (bounded by the deadline)."""
        end = time.monotonic() + min(seconds, self._left())
        while not self.closed and (left := end - time.monotonic()) > 0:
            self.pump(min(left, 0.2))

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait for the broker to close the TCP stream; True if it did."""
        timeout = self.wait if timeout is None else timeout
        return self._poll(lambda: True if self.closed else None, timeout) is not None

    def error_outcome(
        self,
        timeout: float | None = None,
        since: int = 0,
        until: Callable[[], bool] | None = None,
    ) -> str:
        """Wait for the broker to end something and name it: 'close:<condition>',
        'end:<condition>', 'detach:<condition>' (condition 'none' without error),
        'tcp-close', or 'timeout' (nothing ended while it waited). Looks at broker items
        after position `since`. `until`: the wait also ends once it returns True (the
        broker's answer that settles the question, e.g. to an echo), before `timeout`."""
        timeout = self.wait if timeout is None else timeout

        def ended() -> str | None:
            ending = self._ending_after(since)
            if ending is None and until is not None and until():
                return _ANSWERED
            return ending

        found = self._poll(ended, timeout)
        self._observation(since)
        return self._gone_or_timeout() if found in (None, _ANSWERED) else found

    def _ending_after(self, since: int) -> str | None:
        for trace_item in self.recording.items[since:]:
            if trace_item.direction != SERVER:
                continue
            item = trace_item.item
            if isinstance(item, Frame) and item.name in ("close", "end", "detach"):
                error = item.performative.error
                if item.name == "detach" and error is None:
                    continue
                condition = str(error.condition) if error is not None else "none"
                return f"{item.name}:{condition}"
        return None

    def header_answer(self, timeout: float | None = None, since: int = 0) -> str:
        """After sending a protocol header: the broker's header ('header:0.1.0.0'),
        'tcp-close' or 'timeout'."""
        timeout = self.wait if timeout is None else timeout

        def answer() -> str | None:
            for trace_item in self.recording.items[since:]:
                header = trace_item.item
                if trace_item.direction == SERVER and isinstance(header, ProtocolHeader):
                    return (
                        f"header:{header.protocol_id}.{header.major}."
                        f"{header.minor}.{header.revision}"
                    )
            return None

        found = self._poll(answer, timeout)
        self._observation(since)
        return found or self._gone_or_timeout()

    def _gone_or_timeout(self) -> str:
        """What a wait that found nothing saw: 'tcp-close' or 'timeout'."""
        return "tcp-close" if self.closed else "timeout"

    def next_link_flow(self, link: Link, since: int, timeout: float | None = None) -> Any:
        """The first flow the broker sent for `link` after trace position `since`."""
        frame = self.wait_for_frame(
            "flow",
            timeout,
            lambda f: (
                link.remote_handle is not None and f.performative.handle == link.remote_handle
            ),
            since=since,
        )
        return frame.performative

    def link_flows(self, link: Link, since: int = 0) -> list[Any]:
        """Flows the broker sent for `link` (by its handle) after trace position `since`."""
        flows = []
        for trace_item in self.recording.items[since:]:
            frame = trace_item.item
            if (
                trace_item.direction == SERVER
                and isinstance(frame, Frame)
                and frame.name == "flow"
                and frame.performative.handle == link.remote_handle
                and link.remote_handle is not None
            ):
                flows.append(frame.performative)
        return flows

    def fail_if_gone(self, link: Link) -> None:
        """NoDelivery naming the broker's end/close/detach when `link` can no longer be used
        (no sentence forbids the broker to end it: a shortfall unless a case says more)."""
        if link.state.name == "ATTACHED" and link.session.state.name == "MAPPED":
            return
        raise NoDelivery(
            f"expected the link to stay attached (link {link.state.name}, session "
            f"{link.session.state.name}); {self.observed(self._ended_from(self.mark()))}"
        )
