"""2.6.7 credit accuracy seen through a real client library: python-qpid-proton's
MessagingHandler with prefetch 2 (the pattern that exposed RabbitMQ #2597), its traffic
relayed and recorded by `conformance.relay` and judged by the checker (the broker is the
link's sender: no transfer beyond credit, 2.6.7). The proton event loop is driven here
step by step and stopped at the case's budget (a close the broker never answers cannot
hold it: Container.run() would wait for it forever); the runner's hard limit stops it too
(`ctx.on_abort`).

Owns the cases `2.6.7/proton-*`.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from amqpspec.conformance.probe.observed import broker_did
from amqpspec.conformance.run.registry import MUST, case
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.steps.sentences import CREDIT_FORMULA, LINK_CREDIT_ILLEGAL
from amqpspec.conformance.verdicts import HarnessError, NoDelivery, Unsupported

STEP_S = 0.2  # how long one step of the proton event loop may wait for I/O

MESSAGES = 2000


class _Ending:
    """How the receiver ends (a mixin before MessagingHandler, so these handlers are the
    ones proton calls): a closed or detached link, the case's timer, a link or transport
    error each cancel the timer and close the connection; the errors are kept in `error`."""

    received: int
    count: int
    error: str | None
    timer: Any
    connection: Any

    def on_link_closed(self, event: Any) -> None:
        self._finish(event)

    def on_link_remote_detach(self, event: Any) -> None:  # a detach without closed=true
        self._finish(event)

    def on_timer_task(self, event: Any) -> None:
        self.error = f"timed out after {self.received} of {self.count} messages"
        self.timer = None
        self._finish(event)

    def on_link_error(self, event: Any) -> None:
        self.error = f"link error: {event.link.remote_condition}"
        self._finish(event)

    def on_transport_error(self, event: Any) -> None:
        self.error = f"transport error: {event.transport.condition}"
        self._finish(event)

    def _finish(self, event: Any) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _handler_class() -> Any:
    try:
        from proton.handlers import MessagingHandler
    except ImportError as exc:
        raise Unsupported("python-qpid-proton is not installed") from exc

    class PrefetchReceiver(_Ending, MessagingHandler):
        """Receive `count` messages with prefetch 2 (re-grant after every delivery)."""

        def __init__(self, url: str, address: str, count: int, timeout: float, mechs: str):
            super().__init__(prefetch=2, auto_accept=True)
            self.url, self.address, self.count = url, address, count
            self.timeout, self.mechs = timeout, mechs
            self.received = 0
            self.error: str | None = None
            self.timer = None
            self.connection = None

        def on_start(self, event: Any) -> None:
            self.connection = event.container.connect(
                self.url, allowed_mechs=self.mechs, allow_insecure_mechs=True, reconnect=False
            )
            event.container.create_receiver(self.connection, self.address)
            self.timer = event.container.schedule(self.timeout, self)

        def on_connection_bound(self, event: Any) -> None:
            event.transport.max_frame_size = 4096  # before our open goes out

        def on_session_init(self, event: Any) -> None:
            event.session.incoming_capacity = 4 * 4096  # a 4-frame session window

        def on_message(self, event: Any) -> None:
            self.received += 1
            if self.received >= self.count:
                event.receiver.close()  # detach first; the connection closes once detached

    return PrefetchReceiver


@case(
    "2.6.7/proton-prefetch-regrant",
    MUST,
    "If the link-credit is less than or equal to zero, it is illegal to send more messages; "
    "a receiver may re-grant at any time and the new link-credit replaces the old.",
    sentences=(LINK_CREDIT_ILLEGAL, CREDIT_FORMULA),
    role="sender",
    requires={"queues"},
    budget=120.0,
)
def proton_prefetch(probe, ctx):
    """python-qpid-proton receives 2,000 messages with MessagingHandler(prefetch=2) through
    a recording relay: the checker judges every transfer the broker sends it."""
    handler_class = _handler_class()
    from proton.reactor import Container

    queue = ctx.queue()
    fill(probe, ctx, queue, MESSAGES)
    relay = ctx.relay()
    user, password = (
        ctx.target.username or ctx.profile.username,
        ctx.target.password or ctx.profile.password,
    )
    credentials = f"{user}:{password}@" if ctx.profile.sasl == "PLAIN" and user else ""
    mechs = "PLAIN" if credentials else "ANONYMOUS"
    url = f"amqp://{credentials}127.0.0.1:{relay.port}"
    left = max(1.0, relay.deadline - time.monotonic() - 2.0)
    handler = handler_class(url, ctx.source(queue), MESSAGES, left, mechs)
    container = Container(handler)
    ctx.on_abort(container.stop)  # the runner's hard limit, should this loop not end
    stopped = _drive(container, relay.deadline - 1.0)
    relay.disconnect()
    ctx.note(f"proton received {handler.received} messages")
    if stopped:  # the budget is a hard limit: ERROR, with what the broker was seen doing
        raise HarnessError(
            f"the case's budget ran out: proton's event loop stopped after {handler.received} "
            f"of {MESSAGES} messages ({handler.error or 'no error'}); observed "
            f"{broker_did(relay.recording)}"
        )
    if handler.error:
        raise NoDelivery(handler.error)
    if handler.received != MESSAGES:
        raise NoDelivery(f"expected {MESSAGES} messages; proton received {handler.received}")


def _drive(container: Any, stop_at: float) -> bool:
    """Run the proton container step by step until it is done or `stop_at` (monotonic)
    passes; True when it had to be stopped."""
    container.timeout = STEP_S
    try:
        container.start()
        while container.process():
            if time.monotonic() >= stop_at:
                return True
    except Exception as exc:
        raise HarnessError(f"proton container: {exc}") from exc
    finally:
        container.stop()
        with contextlib.suppress(Exception):
            container.process()
    return False
