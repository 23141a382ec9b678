"""Parquet frame logs as TCP segments, so triage reads them through the same pipeline.

Owns: `framelog_segments(path)`: each connection of a traces/framelog.py log becomes one TCP
flow (SYN, SYN-ACK, then one segment per logged item carrying its exact raw bytes, with
per-direction sequence numbers), between the client and server the log names. The bytes
are the log's own; nothing is encoded or decoded here. Reads the one file it is given
(a local path, or a URL opened through traces/urlfs.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from amqpspec.traces import urlfs
from amqpspec.traces.framelog import SCHEMA_VERSION, FrameLogSchemaError, schema_version
from amqpspec.traces.pcap_format import TCP_ACK, TCP_PSH, TCP_SYN
from amqpspec.traces.pcap_vector import SEGMENT_SCHEMA

_COLUMNS = ["connection_id", "direction", "timestamp", "client", "server", "raw"]


def _endpoint(text: str) -> tuple[bytes, int]:
    host, _, port = text.rpartition(":")
    return ipaddress.ip_address(host.strip("[]")).packed, int(port)


class _Flow:
    """One connection's segments, as columns of SEGMENT_SCHEMA."""

    def __init__(self, ends: dict[str, tuple[bytes, int]], ordinal: int) -> None:
        self.ends = ends
        self.ordinal = ordinal
        self.seq = {"client": 1000, "server": 5000}
        self.columns: dict[str, list] = {name: [] for name in SEGMENT_SCHEMA.names}

    def add(self, direction: str, time: int, flags: int, payload: bytes) -> None:
        peer = "server" if direction == "client" else "client"
        values = (
            self.ordinal,
            int(time),
            self.ends[direction][0],
            self.ends[direction][1],
            self.ends[peer][0],
            self.ends[peer][1],
            self.seq[direction] & 0xFFFFFFFF,
            self.seq[peer] & 0xFFFFFFFF,
            flags,
            payload,
            False,
        )
        for name, value in zip(SEGMENT_SCHEMA.names, values):
            self.columns[name].append(value)
        self.ordinal += 1
        self.seq[direction] += len(payload) + (1 if flags & TCP_SYN else 0)


def framelog_segments(path: str) -> Iterator[pa.RecordBatch]:
    """The segments of the frame log at `path` (a local path or a URL, traces/urlfs.py)."""
    source = urlfs.open_file(path) if urlfs.is_url(path) else path
    version = schema_version(source)
    if version != SCHEMA_VERSION:
        raise FrameLogSchemaError(
            f"{path}: frame log schema version {version!r}, expected {SCHEMA_VERSION}"
        )
    table = pq.read_table(source, columns=_COLUMNS)
    ids = table.column("connection_id").to_numpy(zero_copy_only=False)
    times = table.column("timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False) * 1000
    directions = table.column("direction").to_pylist()
    clients = table.column("client").to_pylist()
    servers = table.column("server").to_pylist()
    raws = table.column("raw").to_pylist()
    ordinal = 0
    for connection in np.unique(ids):
        rows = np.nonzero(ids == connection)[0]
        first = rows[0]
        ends = {"client": _endpoint(clients[first]), "server": _endpoint(servers[first])}
        if ends["client"] == ends["server"]:  # an in-memory log: give the flow two ends
            ends["client"] = (ends["client"][0], 40000 + int(connection) % 20000)
        flow = _Flow(ends, ordinal)
        flow.add("client", times[first], TCP_SYN, b"")
        flow.add("server", times[first], TCP_SYN | TCP_ACK, b"")
        for row in rows:
            flow.add(directions[row], times[row], TCP_PSH | TCP_ACK, raws[row] or b"")
        ordinal = flow.ordinal
        yield pa.RecordBatch.from_pydict(flow.columns, schema=SEGMENT_SCHEMA)
