"""Proof that a broker still serves fresh connections, from the cases running beside one.

Owns: `ServedConnections` (per target and process: the start of the newest connection
the broker served as far as its attach, and how many cases are in flight), `EVIDENCE_WAIT_S`.

The oracle (fuzz.oracle) asks after a case the broker dropped, or left unanswered,
whether the broker still serves: a fresh connection that opens, begins and attaches
(`oracle.alive`). That is a whole connection of the broker's and the fuzzer's work, and
in a campaign about one case in five asks it (a mutated protocol header or SASL frame is
dropped without a close, rightly: 2.2, 5.3). The cases running beside it answer the same
question for free: one that connected at or after the drop and got the broker's attach is
that fresh connection. So the oracle first waits, at most EVIDENCE_WAIT_S and only while
other cases are in flight, for such a case, and makes its own connection only without one.
A broker that went down serves no case after the drop: the wait passes and the oracle's
own check decides, as before.
"""

from __future__ import annotations

import threading

EVIDENCE_WAIT_S = 0.05  # at several hundred cases/s a case connects every few milliseconds


class ServedConnections:
    """`note(started)`: a connection started at `started` (time.time()) got the broker's
    attach. `since(t, wait)`: one started at or after `t` did, or does within `wait`
    while other cases are in flight (`entered`/`left` count them)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._newest = float("-inf")
        self._in_flight = 0

    def entered(self) -> None:
        with self._changed:
            self._in_flight += 1

    def left(self) -> None:
        with self._changed:
            self._in_flight -= 1

    def note(self, started: float) -> None:
        with self._changed:
            if started > self._newest:
                self._newest = started
                self._changed.notify_all()

    def since(self, moment: float, wait: float = EVIDENCE_WAIT_S) -> bool:
        """A connection started at or after `moment` was served; waits (bounded by `wait`)
        only while a case other than the asker's is in flight."""
        with self._changed:
            if self._newest >= moment:
                return True
            if self._in_flight <= 1:  # the asker's own case: nobody else can show it
                return False
            return self._changed.wait_for(lambda: self._newest >= moment, timeout=wait)
