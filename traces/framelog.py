"""Parquet frame log: one row per header / frame / raw run, with flattened key fields.

Owns: `SCHEMA` and `SCHEMA_VERSION` (documented in docs/traces.md; bump the version on
any incompatible change; a log of another version is refused with `FrameLogSchemaError`),
`row_of(item)` (TraceItem -> flat dict), `FrameLogWriter` (streams row groups to a file,
bounded memory), and `read_frame_log(path)` (rows back to TraceItems by decoding the
stored raw bytes with the core). Column types avoid unsigned
and nanosecond types so Spark reads them as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import Frame, ProtocolHeader, decode_frame
from amqpspec.amqp10.monitor import KIND_FRAME, KIND_HEADER, TraceItem
from amqpspec.traces.model import ConnectionInfo

SCHEMA_VERSION = "1"
METADATA_KEY_VERSION = b"amqpspec.traces.schema_version"
METADATA_KEY_TRACE_ID = b"amqpspec.traces.trace_id"
METADATA_KEY_CONNECTIONS = b"amqpspec.traces.connections"

_INT = pa.int64()


class FrameLogSchemaError(ValueError):
    """A frame log whose schema version is not SCHEMA_VERSION (bad input, by its type)."""


SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("connection_id", pa.int32()),
        ("frame_index", pa.int64()),
        ("direction", pa.string()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("kind", pa.string()),
        ("client", pa.string()),
        ("server", pa.string()),
        ("protocol_id", pa.int16()),
        ("frame_type", pa.int16()),
        ("channel", pa.int32()),
        ("performative", pa.string()),
        ("descriptor_code", _INT),
        ("frame_size", _INT),
        ("payload_size", _INT),
        ("handle", _INT),
        ("remote_channel", pa.int32()),
        ("delivery_id", _INT),
        ("delivery_tag", pa.binary()),
        ("message_format", _INT),
        ("delivery_count", _INT),
        ("link_credit", _INT),
        ("available", _INT),
        ("drain", pa.bool_()),
        ("echo", pa.bool_()),
        ("next_incoming_id", _INT),
        ("incoming_window", _INT),
        ("next_outgoing_id", _INT),
        ("outgoing_window", _INT),
        ("settled", pa.bool_()),
        ("more", pa.bool_()),
        ("aborted", pa.bool_()),
        ("resume", pa.bool_()),
        ("first", _INT),
        ("last", _INT),
        ("role", pa.string()),
        ("link_name", pa.string()),
        ("source_address", pa.string()),
        ("target_address", pa.string()),
        ("initial_delivery_count", _INT),
        ("snd_settle_mode", pa.int16()),
        ("rcv_settle_mode", pa.int16()),
        ("max_frame_size", _INT),
        ("channel_max", pa.int32()),
        ("idle_time_out", _INT),
        ("container_id", pa.string()),
        ("closed", pa.bool_()),
        ("state", pa.string()),
        ("error_condition", pa.string()),
        ("error_description", pa.string()),
        ("sasl_mechanism", pa.string()),
        ("sasl_code", pa.int16()),
        ("raw", pa.binary()),
    ]
)
COLUMNS = tuple(SCHEMA.names)

# composite field -> column, for fields copied as they are
_DIRECT = {
    "handle": "handle",
    "remote_channel": "remote_channel",
    "delivery_id": "delivery_id",
    "delivery_tag": "delivery_tag",
    "message_format": "message_format",
    "delivery_count": "delivery_count",
    "link_credit": "link_credit",
    "available": "available",
    "drain": "drain",
    "echo": "echo",
    "next_incoming_id": "next_incoming_id",
    "incoming_window": "incoming_window",
    "next_outgoing_id": "next_outgoing_id",
    "outgoing_window": "outgoing_window",
    "settled": "settled",
    "more": "more",
    "aborted": "aborted",
    "resume": "resume",
    "first": "first",
    "last": "last",
    "initial_delivery_count": "initial_delivery_count",
    "snd_settle_mode": "snd_settle_mode",
    "rcv_settle_mode": "rcv_settle_mode",
    "max_frame_size": "max_frame_size",
    "channel_max": "channel_max",
    "idle_time_out": "idle_time_out",
    "container_id": "container_id",
    "closed": "closed",
    "code": "sasl_code",
}
_INT_COLUMNS = frozenset(
    name for name, type_ in zip(SCHEMA.names, SCHEMA.types) if pa.types.is_integer(type_)
)


def row_of(item: TraceItem, trace_id: str, connection: ConnectionInfo | None) -> dict[str, Any]:
    """The flat row of one trace item (absent fields are None)."""
    row: dict[str, Any] = {
        "trace_id": trace_id,
        "connection_id": item.connection_id,
        "frame_index": item.index,
        "direction": item.direction,
        "timestamp": round(item.time * 1_000_000),
        "kind": item.kind,
        "client": connection.client if connection else None,
        "server": connection.server if connection else None,
        "raw": item.raw,
    }
    decoded = item.item
    if isinstance(decoded, ProtocolHeader):
        row["protocol_id"] = decoded.protocol_id
        row["frame_size"] = len(item.raw)
        return row
    if not isinstance(decoded, Frame):
        row["frame_size"] = len(item.raw)
        return row
    row["frame_type"] = decoded.type
    row["channel"] = decoded.channel
    row["frame_size"] = decoded.size
    row["performative"] = decoded.name
    performative = decoded.performative
    if performative is None:
        return row
    row["descriptor_code"] = performative.DESCRIPTOR_CODE
    if decoded.name == "transfer":
        row["payload_size"] = len(decoded.payload)
    for field_name in performative.FIELD_NAMES:
        value = getattr(performative, field_name)
        if value is None:
            continue
        column = _DIRECT.get(field_name)
        if column is not None:
            row[column] = int(value) if column in _INT_COLUMNS else _plain(value)
        elif field_name == "role":
            row["role"] = "receiver" if value else "sender"
        elif field_name == "name":
            row["link_name"] = str(value)
        elif field_name == "source":
            row["source_address"] = _address(value)
        elif field_name == "target":
            row["target_address"] = _address(value)
        elif field_name == "state":
            row["state"] = getattr(value, "NAME", type(value).__name__)
        elif field_name == "error":
            row["error_condition"] = str(value.condition) if value.condition is not None else None
            row["error_description"] = value.description
        elif field_name == "mechanism":
            row["sasl_mechanism"] = str(value)
    return row


def _plain(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return str(value)
    return value


def _address(terminus: Any) -> str | None:
    address = getattr(terminus, "address", None)
    return None if address is None else str(address)


def connections_metadata(connections: Iterable[ConnectionInfo]) -> bytes:
    return json.dumps(
        [
            {
                "connection_id": info.connection_id,
                "client": info.client,
                "server": info.server,
                "start_time": info.start_time,
                "end_time": info.end_time,
                "bytes": info.byte_counts,
            }
            for info in connections
        ]
    ).encode()


class FrameLogWriter:
    """Stream rows to a Parquet file: a row group every `rows_per_group` rows."""

    def __init__(self, path: str, trace_id: str, rows_per_group: int = 16384) -> None:
        self.path = path
        self.trace_id = trace_id
        self.rows_per_group = rows_per_group
        self._rows: list[dict[str, Any]] = []
        self._metadata = {
            METADATA_KEY_VERSION: SCHEMA_VERSION.encode(),
            METADATA_KEY_TRACE_ID: trace_id.encode(),
        }
        self._writer = pq.ParquetWriter(
            path, SCHEMA.with_metadata(self._metadata), compression="zstd"
        )
        self.rows_written = 0

    def add(self, item: TraceItem, connection: ConnectionInfo | None = None) -> None:
        self._rows.append(row_of(item, self.trace_id, connection))
        if len(self._rows) >= self.rows_per_group:
            self.flush()

    def flush(self) -> None:
        if not self._rows:
            return
        table = pa.Table.from_pylist(self._rows, schema=SCHEMA)
        self._writer.write_table(table)
        self.rows_written += len(self._rows)
        self._rows = []

    def close(self, connections: Iterable[ConnectionInfo] = ()) -> None:
        self.flush()
        self._writer.add_key_value_metadata(
            {METADATA_KEY_CONNECTIONS.decode(): connections_metadata(connections).decode()}
        )
        self._writer.close()


def schema_version(path: Any) -> str | None:
    """The log's schema version; `path`: a path or an open (pyarrow or Python) file."""
    metadata = pq.read_schema(path).metadata or {}
    value = metadata.get(METADATA_KEY_VERSION)
    return value.decode() if value is not None else None


def read_connections(path: str) -> dict[int, ConnectionInfo]:
    metadata = pq.ParquetFile(path).metadata.metadata or {}
    raw = metadata.get(METADATA_KEY_CONNECTIONS)
    result: dict[int, ConnectionInfo] = {}
    if raw:
        for entry in json.loads(raw):
            info = ConnectionInfo(
                entry["connection_id"],
                entry["client"],
                entry["server"],
                entry["start_time"],
                entry["end_time"],
            )
            info.byte_counts.update(entry.get("bytes", {}))
            result[info.connection_id] = info
    return result


def read_frame_log(path: str) -> Iterator[TraceItem]:
    """TraceItems of a frame log, in file order, decoded again from their raw bytes."""
    version = schema_version(path)
    if version != SCHEMA_VERSION:
        raise FrameLogSchemaError(
            f"{path}: frame log schema version {version!r}, expected {SCHEMA_VERSION}"
        )
    columns = ["connection_id", "frame_index", "direction", "timestamp", "kind", "raw"]
    parquet = pq.ParquetFile(path)
    for batch in parquet.iter_batches(columns=columns, batch_size=8192):
        data = batch.to_pydict()
        times = batch.column("timestamp").cast(pa.int64()).to_pylist()
        for connection_id, index, direction, time_us, kind, raw in zip(
            data["connection_id"],
            data["frame_index"],
            data["direction"],
            times,
            data["kind"],
            data["raw"],
        ):
            item: ProtocolHeader | Frame | None = None
            try:
                if kind == KIND_HEADER:
                    item = ProtocolHeader.decode(raw)
                elif kind == KIND_FRAME:
                    item = decode_frame(raw)
            except DecodeError:
                item = None
            yield TraceItem(connection_id, direction, index, time_us / 1e6, item, raw)


__all__ = [
    "COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "FrameLogSchemaError",
    "FrameLogWriter",
    "read_frame_log",
    "row_of",
]
