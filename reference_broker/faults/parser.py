"""Parser and state-machine faults: what the broker does when one of them is switched on.

Owns: `inspect(faults, connection, event)`, called for every engine event of a
connection while any parser fault is on (`Faults.parser`), and `FaultTriggeredError`, the
signal the connection acts on. Each fault behaves as the real bug it is modelled on did
(the catalog in catalog.py names them):
- DIE: the connection task dies: the socket is closed with no close frame and nothing
  the engine queued is written (an uncaught exception in a connection's reader);
- EXIT: the broker process exits at once (a crash: segfault, abort, heap overflow);
- HANG: the connection stops reading and writing, the socket stays open (a spin loop);
- LEAK: the broker holds memory in proportion to a count the peer declared
  (allocation before validation), for LEAK_HELD_S after the frame.
The triggers read only the engine's events (decoded performatives and the engine's own
protocol errors, by their kind and facts: amqp10/errors.py; never by the message text);
no bytes are parsed here.
Touches: nothing but its own held leaks; `os._exit` for EXIT.
"""

from __future__ import annotations

import mmap
import os
from collections import deque
from typing import Any

from amqpspec.amqp10.engine import (
    DispositionReceived,
    FlowReceived,
    ProtocolErrorRaised,
    RemoteBegin,
    TransferReceived,
)
from amqpspec.amqp10.errors import ErrorKind
from amqpspec.amqp10.serial import serial_count
from amqpspec.amqp10.spec import Cond

DIE, EXIT, HANG = "die", "exit", "hang"
EXIT_STATUS = 70  # EX_SOFTWARE: what the crashed process reports
SIGNED_LIMIT = 2**31  # a sequence number read as a signed 32-bit int goes negative here
DISPOSITION_RANGE_LIMIT = 2**16
LEAK_PER_DECLARED_FIELD = 512 * 1024
LEAK_CAP = 64 * 1024 * 1024  # per declaration
LEAK_HELD_S = 2.0  # a leak outlives its connection this long (a heap that shrinks late)
_held: deque[tuple[float, mmap.mmap]] = deque()


class FaultTriggeredError(Exception):
    """A fault fired: the connection must `die` or `hang` (see the module doc)."""

    def __init__(self, fault: str, action: str) -> None:
        super().__init__(f"fault {fault}: {action}")
        self.fault = fault
        self.action = action


def _fire(fault: str, action: str) -> None:
    if action == EXIT:
        os._exit(EXIT_STATUS)  # the broker process dies with no clean-up, like a crash
    raise FaultTriggeredError(fault, action)


def _leak(scheduler: Any, size: int) -> None:
    """Hold `size` bytes, every page written (resident), for LEAK_HELD_S; the broker's
    scheduler lets go of them then. Anonymous mmap, so the memory goes back to the system
    at once on release (malloc would keep it for the next allocation to reuse)."""
    size = min(LEAK_CAP, size)
    chunk = mmap.mmap(-1, size)
    for offset in range(0, size, mmap.PAGESIZE):
        chunk[offset] = 1
    due = scheduler.now() + LEAK_HELD_S
    _held.append((due, chunk))
    scheduler.call_at(due, _release)


def _release(now: float) -> None:
    while _held and _held[0][0] <= now:
        _held.popleft()[1].close()


def _protocol_error(faults: Any, connection: Any, event: ProtocolErrorRaised) -> None:
    kind, condition, error = event.kind, event.condition, event.error
    if faults.die_on_nested_descriptor and kind == ErrorKind.NESTED_DESCRIPTOR:
        _fire("die-on-nested-descriptor", DIE)
    # a composite's list (a performative's, or one inside it) whose size runs past its
    # bytes; the codec's own list/map/array overrun (no performative) never fired it
    if (
        faults.exit_on_compound_overrun
        and condition == Cond.DECODE_ERROR
        and kind == ErrorKind.COMPOUND_OVERRUN
        and error is not None
        and error.performative is not None
    ):
        _fire("exit-on-compound-overrun", EXIT)
    if faults.leak_on_declared_count and kind == ErrorKind.TOO_MANY_FIELDS and error is not None:
        _leak(connection.scheduler, (error.declared or 0) * LEAK_PER_DECLARED_FIELD)
    if (
        faults.die_on_channel_reuse
        and condition == Cond.ILLEGAL_STATE
        and kind == ErrorKind.CHANNEL_IN_USE
    ):
        _fire("die-on-channel-reuse", DIE)
    engine = connection.engine
    if (
        faults.exit_on_illegal_sasl
        and engine is not None
        and engine.remote_open is None
        and (engine.sasl is not None)
    ):
        _fire("exit-on-illegal-sasl", EXIT)


def inspect(faults: Any, connection: Any, event: Any) -> None:
    """Act on `event` as the enabled parser faults would (may not return)."""
    kind = type(event)
    if kind is ProtocolErrorRaised:
        _protocol_error(faults, connection, event)
    elif kind is FlowReceived:
        flow = event.flow
        if faults.hang_on_serial_wrap and (flow.delivery_count or 0) >= SIGNED_LIMIT:
            _fire("hang-on-serial-wrap", HANG)
        if faults.die_on_credit_overflow and (flow.link_credit or 0) >= SIGNED_LIMIT:
            _fire("die-on-credit-overflow", DIE)
    elif kind is TransferReceived:
        if faults.hang_on_serial_wrap and event.delivery_id >= SIGNED_LIMIT:
            _fire("hang-on-serial-wrap", HANG)
    elif kind is RemoteBegin:
        if faults.hang_on_serial_wrap and event.begin.next_outgoing_id >= SIGNED_LIMIT:
            _fire("hang-on-serial-wrap", HANG)
    elif (
        kind is DispositionReceived
        and faults.hang_on_disposition_range
        and serial_count(event.first, event.last) >= DISPOSITION_RANGE_LIMIT
    ):
        _fire("hang-on-disposition-range", HANG)
