"""`trace check`: the connection monitor's verdicts over every connection of a trace.

Owns: `check_trace(items)`, which gives each connection's items, in order, to its own
`amqp10.monitor.ConnectionMonitor` (`observe`: the items are decoded already, by the
capture reader or from a frame log) and returns `Finding`s: the checker's violations,
cited by the trace's own item index (the number `trace show` prints), and the monitor's
notes (a direction that could not be decoded; a connection whose start the capture
missed, not checked at all). Every connection is finished at the trace's last time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.monitor import ConnectionMonitor, MonitorOutput, TraceItem


@dataclass(slots=True)
class Finding:
    connection_id: int
    frame_index: int | None
    violation: Violation | None
    note: str = ""

    @property
    def level(self) -> str:
        return self.violation.level if self.violation else "NOTE"

    def line(self) -> str:
        where = f"#{self.frame_index}" if self.frame_index is not None else "end"
        if self.violation is None:
            return f"[conn {self.connection_id}] {where} NOTE {self.note}"
        v = self.violation
        return (
            f"[conn {self.connection_id}] {where} {v.level} {v.rule_id} (section {v.section}) "
            f"{v.origin}: {v.reason}"
        )


def _findings(connection_id: int, out: MonitorOutput) -> list[Finding]:
    found = [Finding(connection_id, note.index, None, note.text) for note in out.notes]
    found += [Finding(connection_id, v.frame_index, v) for v in out.violations]
    return found


def check_trace(items: Iterable[TraceItem], liveness_bound: float | None = None) -> list[Finding]:
    monitors: dict[int, ConnectionMonitor] = {}
    findings: list[Finding] = []
    last_time = 0.0
    for item in items:
        last_time = item.time
        monitor = monitors.get(item.connection_id)
        if monitor is None:
            monitor = ConnectionMonitor(item.connection_id, liveness_bound=liveness_bound)
            monitors[item.connection_id] = monitor
        findings += _findings(item.connection_id, monitor.observe(item))
    for connection_id, monitor in monitors.items():
        findings += _findings(connection_id, monitor.finish(last_time))
    return findings
