"""reference_broker.runtime.loop_thread: the body of a thread that runs an event loop, and the
two that use it (BrokerThread, the conformance WebSocket bridge) when their setup fails."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable

import pytest

from amqpspec.conformance.run.ws_bridge import WebSocketBridge
from amqpspec.reference_broker.config import BrokerConfig
from amqpspec.reference_broker.runtime.loop_thread import Started, run_loop
from amqpspec.reference_broker.runtime.server import BrokerThread

WAIT = 5.0


def _run_in_thread(
    setup: Callable[[], Awaitable[None]],
    serve: Callable[[], object],
    loop: asyncio.AbstractEventLoop,
) -> Started:
    started = Started()
    thread = threading.Thread(target=run_loop, args=(loop, setup, serve, started), daemon=True)
    thread.start()
    assert started.wait(WAIT)
    thread.join(WAIT)
    assert not thread.is_alive()
    return started


def test_a_setup_that_ran_is_told_then_served_then_the_loop_is_closed() -> None:
    loop = asyncio.new_event_loop()
    ran: list[str] = []

    async def setup() -> None:
        ran.append("setup")

    def serve() -> None:
        ran.append("serve")

    started = _run_in_thread(setup, serve, loop)
    assert started.error is None
    assert ran == ["setup", "serve"]
    assert loop.is_closed()


def test_what_a_setup_raises_is_told_and_nothing_is_served() -> None:
    loop = asyncio.new_event_loop()
    served: list[bool] = []

    async def setup() -> None:
        raise OSError("address in use")

    started = _run_in_thread(setup, lambda: served.append(True), loop)
    assert isinstance(started.error, OSError) and str(started.error) == "address in use"
    assert served == []
    loop.close()


def test_a_started_not_told_within_the_bound_says_so() -> None:
    assert Started().wait(0.01) is False


def test_a_broker_thread_whose_port_is_taken_raises_what_the_broker_raised() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = BrokerThread(BrokerConfig(host="127.0.0.1", port=port, admin_port=-1))
        with pytest.raises(OSError):
            broker.start()


def test_a_bridge_that_cannot_listen_says_it_did_not_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def refused(*args: object, **kwargs: object) -> None:
        raise OSError("no listener")

    monkeypatch.setattr(asyncio, "start_server", refused)
    bridge = WebSocketBridge("ws://127.0.0.1:1/", connect_timeout=WAIT)
    with pytest.raises(RuntimeError, match="did not start: no listener"):
        bridge.start()
