"""What one probe connection saw: the bytes both ways (`Chunk`, for the pcap) and the
connection monitor's reading of them (`Recording`: TraceItems, the broker's violations and the
probe's own, the engine transitions used), and `broker_monitor`, the monitor that judges a
recorded connection. Plain data: the probe fills it, the runner, results and relay read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.monitor import ConnectionMonitor, MonitorOutput, TraceItem
from amqpspec.amqp10.origins import SERVER


@dataclass(slots=True)
class Chunk:
    """Bytes as they crossed the socket (for the pcap)."""

    direction: str
    data: bytes
    time: float


@dataclass(slots=True)
class Recording:
    """Everything one probe connection saw, in order."""

    connection_id: int
    client: str = "127.0.0.1:0"
    server: str = "127.0.0.1:0"
    start: float = 0.0
    end: float | None = None
    items: list[TraceItem] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)  # the broker's (SERVER's)
    # the probe's own (CLIENT's): a negative case breaks rules on purpose; the runner does
    # not grade the broker's frames that follow one (the checker's view of the probe's
    # state is unreliable from there: runner.unjudgeable_after)
    probe_violations: list[Violation] = field(default_factory=list)
    # (machine, state, input) of the probe engine's transition tables this connection used
    transitions: set[tuple[str, str, str]] = field(default_factory=set)

    def add(self, output: MonitorOutput) -> None:
        """What the connection monitor made of the latest bytes."""
        self.items += output.items
        for violation in output.violations:
            mine = violation.origin == SERVER
            (self.violations if mine else self.probe_violations).append(violation)


def broker_monitor(recording: Recording) -> ConnectionMonitor:
    """The monitor of a recorded connection: judges both peers' frames (the recording
    keeps the broker's violations and the probe's apart)."""
    return ConnectionMonitor(recording.connection_id)
