"""The Spark 4 Python data source `amqpspec-pcap`: trace files -> a DataFrame of TCP segments.

Owns: `CaptureSource` (register it with `spark.dataSource.register(CaptureSource)`, then
`spark.read.format("amqpspec-pcap").option("files", files_json(inputs)).load()`), the
partitioning (one partition per byte-range split of a capture, planned on the driver by
traces.pcap_vector.plan_splits_with_context, so captures over 2 GiB need no binaryFile and no
pre-splitting; one per gzip'd file or frame log) and `read_input(...)` (one partition's
Arrow batches, also used by the driver for reproducers). Columns: traces.pcap_vector's
SEGMENT_SCHEMA plus `source` (the input path or URL), `broker_label` and `error`: bad input
found while reading (BAD_INPUT_ERRORS, by type) is carried to the driver as data, one row
with only `source`, `broker_label` and `error` set (`bad_input_batch`), never as the text
of an executor's exception (Spark does not keep its type). Reads files only:
local paths, or URLs through traces/urlfs.py (a split's byte range, a gzip'd file streamed
to a temporary file, a frame log opened as a pyarrow file).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from amqpspec.spark_triage.framelog_segments import framelog_segments
from amqpspec.spark_triage.inputs import FRAMELOG, InputFile
from amqpspec.traces import urlfs
from amqpspec.traces.framelog import FrameLogSchemaError
from amqpspec.traces.pcap_format import CaptureFormatError
from amqpspec.traces.pcap_vector import (
    SEGMENT_SCHEMA,
    plan_splits_with_context,
    read_segments,
)

NAME = "amqpspec-pcap"
DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024
SCHEMA = (
    SEGMENT_SCHEMA.append(pa.field("source", pa.string()))
    .append(pa.field("broker_label", pa.string()))
    .append(pa.field("error", pa.string()))
)
# the readers' refusals of a file's content: bad input (exit 2), not a failed job
BAD_INPUT_ERRORS = (CaptureFormatError, FrameLogSchemaError)
SCHEMA_DDL = (
    "ordinal long, time_ns long, src_ip binary, src_port int, dst_ip binary, dst_port int, "
    "seq long, ack long, flags short, payload binary, truncated boolean, source string, "
    "broker_label string, error string"
)


def files_json(inputs: list[InputFile]) -> str:
    return json.dumps([asdict(item) for item in inputs])


@dataclass
class Split(InputPartition):
    path: str
    kind: str
    gzip: bool
    broker: str | None
    start: int
    end: int | None
    # a pcapng split's section and interface blocks (offsets): read, then the split's own
    # blocks, and no page in between (traces.pcap_vector.plan_splits_with_context)
    context: tuple[int, ...] | None = None


def plan(inputs: list[InputFile], split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[Split]:
    splits: list[Split] = []
    for item in inputs:
        if item.gzip or item.kind == FRAMELOG:
            splits.append(Split(item.path, item.kind, item.gzip, item.broker, 0, None))
            continue
        for start, end, context in plan_splits_with_context(item.path, split_bytes):
            splits.append(Split(item.path, item.kind, False, item.broker, start, end, context))
    return splits


def read_input(split: Split, label: str | None = None) -> Iterator[pa.RecordBatch]:
    """The segments of one split with their source and broker label columns."""
    broker = split.broker or label
    with _plain_file(split) as path:
        if split.kind == FRAMELOG:
            batches = framelog_segments(path)
        else:
            batches = read_segments(path, split.start, split.end, context=split.context)
        for batch in batches:
            rows = batch.num_rows
            yield pa.RecordBatch.from_arrays(
                [
                    *batch.columns,
                    pa.array([split.path] * rows, pa.string()),
                    pa.array([broker] * rows, pa.string()),
                    pa.nulls(rows, pa.string()),
                ],
                schema=SCHEMA,
            )


def bad_input_batch(split: Split, label: str | None, error: Exception) -> pa.RecordBatch:
    """The one row that says a split is bad input: its source, label and the reader's
    message (for humans: the driver knows it by the `error` column being set)."""
    row = {"source": split.path, "broker_label": split.broker or label, "error": str(error)}
    return pa.RecordBatch.from_pylist([row], schema=SCHEMA)


class _plain_file:  # noqa: N801 - used as a context manager
    """The split's file, gunzipped into a temporary file (on the executor's disk, read
    front to back, a URL's too) when it is gzip'd."""

    def __init__(self, split: Split) -> None:
        self.split = split
        self.temp: str | None = None

    def __enter__(self) -> str:
        if not self.split.gzip:
            return self.split.path
        handle, self.temp = tempfile.mkstemp(suffix=".trace")
        path = self.split.path
        packed = urlfs.open_stream(path) if urlfs.is_url(path) else open(path, "rb")
        with os.fdopen(handle, "wb") as out, packed, gzip.open(packed, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        return self.temp

    def __exit__(self, *exc: object) -> None:
        if self.temp:
            os.unlink(self.temp)


class CaptureSource(DataSource):
    """Options: `files` (JSON from files_json), `splitBytes`, `brokerLabel`."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema) -> DataSourceReader:
        return _Reader(self.options)


class _Reader(DataSourceReader):
    def __init__(self, options) -> None:
        self.inputs = [InputFile(**entry) for entry in json.loads(options["files"])]
        self.split_bytes = int(options.get("splitBytes") or DEFAULT_SPLIT_BYTES)
        self.label = options.get("brokerLabel") or None

    def partitions(self) -> list[Split]:
        return plan(self.inputs, self.split_bytes)

    def read(self, partition: Split) -> Iterator[pa.RecordBatch]:
        try:
            yield from read_input(partition, self.label)
        except BAD_INPUT_ERRORS as exc:
            yield bad_input_batch(partition, self.label, exc)
