"""probe: the frame-level client the cases drive (`Probe`, `client.py`) and what it records
(`Recording`, `recording.py`; `observed.py` says in words what the broker did).

The names a case uses are exported here: `from amqpspec.conformance.probe import Probe`.
"""

from amqpspec.conformance.probe.client import DEFAULT_WAIT, EVENT_NAMES, Probe, WaitTimeout
from amqpspec.conformance.probe.recording import Chunk, Recording, broker_monitor

__all__ = [
    "DEFAULT_WAIT",
    "EVENT_NAMES",
    "Chunk",
    "Probe",
    "Recording",
    "WaitTimeout",
    "broker_monitor",
]
