"""Run the checker (amqp10.checker) over every connection of a trace.

Owns: `check_trace(items)`, which keeps one `Checker` per connection, feeds it that
connection's headers and frames in order with their origin ('client'/'server') and
time, and returns `Finding`s: the checker's violations with the trace's own frame
index (the number `trace show` prints), plus notes: a direction that could not be decoded
(raw bytes are not fed to the checker) and a connection whose start the capture missed
(not checked at all, since the peers' state at the first captured frame is unknown).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from traces.model import KIND_FRAME, KIND_RAW, TraceItem


@dataclass(slots=True)
class Finding:
    connection_id: int
    frame_index: int | None
    violation: Any | None  # amqp10.checker.Violation
    note: str = ""

    @property
    def level(self) -> str:
        return getattr(self.violation, "level", "NOTE") if self.violation else "NOTE"

    def line(self) -> str:
        where = f"#{self.frame_index}" if self.frame_index is not None else "end"
        if self.violation is None:
            return f"[conn {self.connection_id}] {where} NOTE {self.note}"
        v = self.violation
        return (
            f"[conn {self.connection_id}] {where} {v.level} {v.rule_id} (section {v.section}) "
            f"{v.origin}: {v.reason}"
        )


class _Connection:
    __slots__ = ("checker", "fed", "raw_noted", "unchecked")

    def __init__(self, checker: Any) -> None:
        self.checker = checker
        self.fed: list[int] = []  # trace frame index of each item fed, in feed order
        self.raw_noted: set[str] = set()
        self.unchecked = False  # the capture missed the connection's start


def _index_of(connection: _Connection, violation: Any) -> int | None:
    position = getattr(violation, "frame_index", None)
    if position is None:
        return None
    if 0 <= position < len(connection.fed):
        return connection.fed[position]
    return position


def check_trace(items: Iterable[TraceItem], liveness_bound: float | None = None) -> list[Finding]:
    from amqp10.checker import Checker  # the checker is optional until it is built

    connections: dict[int, _Connection] = {}
    findings: list[Finding] = []
    last_time = 0.0
    for item in items:
        last_time = item.time
        connection = connections.get(item.connection_id)
        if connection is None:
            connection = _Connection(Checker(liveness_bound=liveness_bound))
            connections[item.connection_id] = connection
            if item.kind == KIND_FRAME:
                # 2.2: a connection starts with a protocol header. Without it the capture
                # began mid-connection: the peers' state is unknown, so nothing is judged.
                connection.unchecked = True
                findings.append(
                    Finding(
                        item.connection_id,
                        item.index,
                        None,
                        "the capture starts mid-connection (no protocol header); not checked",
                    )
                )
        if connection.unchecked:
            continue
        if item.kind == KIND_RAW:
            if item.direction not in connection.raw_noted:
                connection.raw_noted.add(item.direction)
                findings.append(
                    Finding(
                        item.connection_id,
                        item.index,
                        None,
                        f"{item.direction} bytes from here on could not be decoded "
                        f"({len(item.raw)} bytes); not checked",
                    )
                )
            continue
        connection.fed.append(item.index)
        for violation in connection.checker.feed(item.direction, item.item, time=item.time):
            findings.append(
                Finding(item.connection_id, _index_of(connection, violation), violation)
            )
    for connection_id, connection in connections.items():
        if connection.unchecked:
            continue
        for violation in connection.checker.finish(now=last_time) or ():
            findings.append(Finding(connection_id, _index_of(connection, violation), violation))
    return findings
