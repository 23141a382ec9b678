"""An asyncio event loop run in a thread of its own, beside synchronous code.

Owns: `run_loop(loop, setup, serve, started)`, the body of such a thread: `setup()` runs in
the loop (binding a listener, say), `started` learns that it ran or what it raised, then
`serve()` runs the loop until the server is done and the loop is closed; and `Started`, what
the starting thread waits on. Used by `server.BrokerThread` (the reference broker for tests
and tools) and by the conformance suite's WebSocket bridge (conformance/run/ws_bridge.py).
Touches nothing else.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any


class Started:
    """Set by a loop thread once its setup ran; `error`: what the setup raised, if it did."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self._done = threading.Event()

    def wait(self, timeout: float) -> bool:
        """True once the setup ran, or failed, within `timeout` seconds."""
        return self._done.wait(timeout)

    def _set(self, error: BaseException | None = None) -> None:
        self.error = error
        self._done.set()


def run_loop(
    loop: asyncio.AbstractEventLoop,
    setup: Callable[[], Awaitable[Any]],
    serve: Callable[[], Any],
    started: Started,
) -> None:
    """Run `setup()` in `loop`, tell `started`, then (if it did not raise) `serve()` and
    close the loop however that ends. What the setup raises is the starter's to report."""
    try:
        loop.run_until_complete(setup())
    except BaseException as exc:  # reported by the starter
        started._set(exc)
        return
    started._set()
    try:
        serve()
    finally:
        loop.close()
