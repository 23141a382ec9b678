"""The triage job: trace corpora -> violations, connections, clusters, reproducers, report.

Owns: the Spark plan and the output directory layout (docs/triage.md):
  files (spark_triage.inputs) -> byte-range splits (spark_triage.datasource.plan) -> a
  file read in one split, small enough for one Arrow table, is checked whole in the task
  that reads it (`check_split`, a mapInArrow: its segments never cross to the JVM); any
  other goes through the `amqpspec-pcap` data source (one task per split), grouped by (source,
  symmetric 4-tuple) and ordered by capture position, a grouped Arrow UDF per group
  (`check_group`). Both run spark_triage.check.check_flow (TCP reassembly, the core's
  monitor/checker, signatures, capture defects) per flow -> violation and connection
  rows -> `violations.parquet`, `connections.parquet` -> clusters by signature
  (`clusters.json`, known upstream issues from spark_triage.known_issues) -> the smallest
  connection of each cluster minimised on the driver (spark_triage.reproducers) ->
  `reproducers/<signature>.pcap|.txt` -> `report.md` / `report.html` (spark_triage.report).
Runs as `amqpspec triage INPUT... --out DIR` or `spark-submit spark_triage/job.py INPUT...
--out DIR`. Exit 0: no MUST violation; 1: MUST violations; 2: bad input or usage; 3: the job
failed (spark_triage.failure; amqpspec.exit_status).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script by spark-submit: the repo root is one up
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa

from amqpspec.spark_triage.check import DEFAULT_GAP_SECONDS, check_flow, segments_of
from amqpspec.spark_triage.inputs import FRAMELOG

RESULT_FIELDS = [
    ("kind", pa.string()),  # VIOLATION, CONNECTION or BAD_INPUT (then only source, reason)
    ("source", pa.string()),
    ("flow", pa.string()),
    ("connection_key", pa.string()),
    ("broker_product", pa.string()),
    ("broker_version", pa.string()),
    # violation columns
    ("frame_index", pa.int64()),
    ("time", pa.float64()),
    ("rule", pa.string()),
    ("section", pa.string()),
    ("level", pa.string()),
    ("origin", pa.string()),
    ("performative", pa.string()),
    ("channel", pa.int64()),
    ("handle", pa.int64()),
    ("reason", pa.string()),
    ("signature", pa.string()),
    # connection columns
    ("client", pa.string()),
    ("server", pa.string()),
    ("start_time", pa.float64()),
    ("end_time", pa.float64()),
    ("frames", pa.int64()),
    ("bytes_client", pa.int64()),
    ("bytes_server", pa.int64()),
    ("verdict", pa.string()),
    ("must_violations", pa.int64()),
    ("should_violations", pa.int64()),
    ("defects", pa.map_(pa.string(), pa.int64())),
    ("notes", pa.list_(pa.string())),
]
RESULT_SCHEMA = pa.schema(RESULT_FIELDS)
VIOLATION, CONNECTION = "violation", "connection"
# an input the readers refused (datasource.BAD_INPUT_ERRORS): the executor says so as a
# result row (reason: the reader's message), which the driver knows by its kind, since
# Spark hands the driver an executor's exception as text only
BAD_INPUT = "bad-input"
VIOLATION_COLUMNS = [
    "source",
    "connection_key",
    "frame_index",
    "time",
    "rule",
    "section",
    "level",
    "signature",
    "origin",
    "performative",
    "channel",
    "handle",
    "reason",
    "broker_product",
    "broker_version",
]
CONNECTION_COLUMNS = [
    "source",
    "connection_key",
    "client",
    "server",
    "start_time",
    "end_time",
    "frames",
    "bytes_client",
    "bytes_server",
    "verdict",
    "must_violations",
    "should_violations",
    "broker_product",
    "broker_version",
    "defects",
    "notes",
]


class BadInputError(Exception):
    """Bad input found while the job ran (exit 2)."""


def _in_capture_order(
    batches: Iterator[pa.RecordBatch], source: str, flow: str
) -> Iterator[pa.RecordBatch]:
    last = -1
    for batch in batches:
        ordinal = batch.column("ordinal").to_numpy()
        if len(ordinal) and (ordinal[0] < last or bool((ordinal[1:] < ordinal[:-1]).any())):
            raise RuntimeError(f"{source} {flow}: segments reached the check out of capture order")
        if len(ordinal):
            last = int(ordinal[-1])
        yield batch


def check_group(
    key: tuple, batches: Iterator[pa.RecordBatch], liveness_bound: float | None = None
) -> Iterator[pa.RecordBatch]:
    """Grouped Arrow UDF: one (source, flow) group's segments -> result rows. The batches
    are consumed as they come (a connection of any length never sits in memory whole):
    the plan sorts each partition by (source, flow, ordinal), which Spark keeps for the
    grouping, so they arrive in capture order; a batch that does not is a planning bug and
    stops the job rather than giving wrong verdicts."""
    first = next(batches, None)
    if first is None or first.num_rows == 0:
        return
    if first.column("error").null_count < first.num_rows:  # datasource.bad_input_batch
        yield _bad_input_batch(key[0].as_py(), first.column("error")[0].as_py())
        return
    source = key[0].as_py()
    flow = key[1].as_py()
    label = first.column("broker_label")[0].as_py()
    violations, connections = check_flow(
        source,
        segments_of(_in_capture_order(itertools.chain([first], batches), source, flow)),
        DEFAULT_GAP_SECONDS,
        label,
        liveness_bound,
    )
    yield _result_batch(flow, violations, connections)


def _bad_input_batch(source: str, message: str) -> pa.RecordBatch:
    row = {"kind": BAD_INPUT, "source": source, "reason": message}
    return pa.RecordBatch.from_pylist([row], schema=RESULT_SCHEMA)


def _result_batch(flow: str, violations: list, connections: list) -> pa.RecordBatch:
    """One flow's violation and connection rows in RESULT_SCHEMA."""
    rows: list[dict] = []
    for v in violations:
        rows.append(
            {
                "kind": VIOLATION,
                "source": v.source,
                "flow": flow,
                "connection_key": v.connection_key,
                "broker_product": v.broker_product,
                "broker_version": v.broker_version,
                "frame_index": v.frame_index,
                "time": v.time,
                "rule": v.rule,
                "section": v.section,
                "level": v.level,
                "origin": v.origin,
                "performative": v.performative,
                "channel": v.channel,
                "handle": v.handle,
                "reason": v.reason,
                "signature": v.signature,
            }
        )
    for c in connections:
        rows.append(
            {
                "kind": CONNECTION,
                "source": c.source,
                "flow": flow,
                "connection_key": c.connection_key,
                "broker_product": c.broker_product,
                "broker_version": c.broker_version,
                "client": c.client,
                "server": c.server,
                "start_time": c.start_time,
                "end_time": c.end_time,
                "frames": c.frames,
                "bytes_client": c.bytes_client,
                "bytes_server": c.bytes_server,
                "verdict": c.verdict,
                "must_violations": c.must_violations,
                "should_violations": c.should_violations,
                "defects": list(c.defects.items()),
                "notes": c.notes,
            }
        )
    return pa.RecordBatch.from_pylist(rows, schema=RESULT_SCHEMA)


def with_flow(segments: Any) -> Any:
    """`segments` (a Spark DataFrame with src/dst ip and port) with its `flow` column: the
    symmetric flow name `flow_of` gives, computed by Spark for the shuffled path."""
    from pyspark.sql import functions as F  # noqa: N812 - the usual Spark spelling

    a = F.concat(F.hex("src_ip"), F.lit(":"), F.col("src_port").cast("string"))
    b = F.concat(F.hex("dst_ip"), F.lit(":"), F.col("dst_port").cast("string"))
    return segments.withColumn("flow", F.concat_ws("-", F.least(a, b), F.greatest(a, b)))


def flow_of(src_ip: bytes, src_port: int, dst_ip: bytes, dst_port: int) -> str:
    """The symmetric flow name of a segment, as `with_flow` computes it in Spark:
    'HEXIP:port-HEXIP:port', the lesser end first."""
    a = f"{src_ip.hex().upper()}:{src_port}"
    b = f"{dst_ip.hex().upper()}:{dst_port}"
    return f"{a}-{b}" if a <= b else f"{b}-{a}"


def check_split(
    split: Any, label: str | None, liveness_bound: float | None = None
) -> Iterator[pa.RecordBatch]:
    """Every flow of a split that holds its whole file (spark_triage.datasource.Split),
    checked in the task that read it: the same rows `check_group` gives for each flow,
    without shuffling the file's segments through Spark. The split's segments sit in
    one Arrow table (about the split's size), grouped by flow in capture order."""
    from amqpspec.spark_triage.datasource import BAD_INPUT_ERRORS, read_input

    try:
        batches = list(read_input(split, label))
    except BAD_INPUT_ERRORS as exc:
        yield _bad_input_batch(split.path, str(exc))
        return
    table = pa.Table.from_batches(batches).sort_by("ordinal") if batches else None
    if table is None or table.num_rows == 0:
        return
    names: dict[tuple, str] = {}
    flows: dict[str, list[int]] = {}
    ends = zip(
        table.column("src_ip").to_pylist(),
        table.column("src_port").to_pylist(),
        table.column("dst_ip").to_pylist(),
        table.column("dst_port").to_pylist(),
    )
    for row, end in enumerate(ends):
        flow = names.get(end)
        if flow is None:
            flow = names[end] = flow_of(*end)
        flows.setdefault(flow, []).append(row)
    source = split.path
    broker = table.column("broker_label")[0].as_py()
    for flow, rows in flows.items():
        part = table.take(pa.array(rows, pa.int64()))
        violations, connections = check_flow(
            source,
            segments_of(part.to_batches()),
            DEFAULT_GAP_SECONDS,
            broker,
            liveness_bound,
        )
        yield _result_batch(flow, violations, connections)


def _spark_type():
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(RESULT_SCHEMA)


# a gzip'd capture or a Parquet frame log is one split whatever its size; its segments may
# take this many times its size on disk
_EXPANSION = 8


def _fits(split: Any, size: int, limit: int) -> bool:
    """The split's segments fit in one task's memory as one Arrow table (check_split);
    `size`: its file's, as discovery measured it (a URL's from its listing)."""
    if split.gzip or split.kind == FRAMELOG:
        size *= _EXPANSION
    return size <= limit


def _check_whole_splits(
    spark,
    splits: list,
    sizes: dict[str, int],
    broker_label: str | None,
    liveness_bound: float | None,
) -> Any:
    """Result rows of `check_split` over every split, one task per split, the biggest
    files first (so a late big file does not leave the other cores idle at the end)."""
    from amqpspec.spark_triage.datasource import Split

    splits = sorted(splits, key=lambda split: -sizes[split.path])
    rows = [(s.path, s.kind, s.gzip, s.broker, s.start, s.end, broker_label) for s in splits]
    schema = (
        "path string, kind string, gzip boolean, broker string, start long, end long, label string"
    )
    table = spark.createDataFrame(spark.sparkContext.parallelize(rows, len(rows)), schema)

    def check(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                split = Split(
                    row["path"], row["kind"], row["gzip"], row["broker"], row["start"], row["end"]
                )
                yield from check_split(split, row["label"], liveness_bound)

    return table.mapInArrow(check, _spark_type())


def run_job(
    spark,
    inputs: list,
    out: Path,
    partitions: int | None,
    broker_label: str | None,
    progress,
    liveness_bound: float | None = None,
    split_bytes: int | None = None,
) -> int:
    """The whole job on an existing SparkSession; returns the exit code. `split_bytes`:
    the size of the byte-range splits captures are read in (default 128 MiB)."""
    from amqpspec.spark_triage.datasource import CaptureSource

    spark.dataSource.register(CaptureSource)
    out.mkdir(parents=True, exist_ok=True)
    step = progress.add_task("read + check connections", total=None)
    read = _reader(spark, broker_label, split_bytes)
    # a few groups per core, so one big connection does not leave the other cores idle
    count = partitions or 4 * spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.shuffle.partitions", str(count))
    results = _checked(spark, inputs, read, count, broker_label, liveness_bound, split_bytes)
    work = out / "_results.parquet"
    results.write.mode("overwrite").parquet(str(work))  # any executor error: a failed job
    progress.update(step, total=1, completed=1)
    # What follows works on the result rows (one per connection and violation, small next
    # to the segments): one shuffle partition per core, not four, saves tasks.
    small = partitions or spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.shuffle.partitions", str(small))
    tables, step = _write_tables(spark.read.parquet(str(work)), out, count, progress)
    summary = _cluster_and_report(spark, inputs, read, out, tables, progress, step, liveness_bound)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if summary["must_violations"] else 0


def _reader(spark, broker_label: str | None, split_bytes: int | None) -> Callable[[list], Any]:
    """`read(files)`: the capture data source's segments of `files`, each with its flow."""
    from amqpspec.spark_triage.datasource import NAME, files_json

    def read(files: list) -> Any:
        segments = (
            spark.read.format(NAME)
            .option("files", files_json(files))
            .option("brokerLabel", broker_label or "")
            .option("splitBytes", str(split_bytes or ""))
            .load()
        )
        return with_flow(segments)

    return read


def _checked(
    spark,
    inputs: list,
    read: Callable[[list], Any],
    count: int,
    broker_label: str | None,
    liveness_bound: float | None,
    split_bytes: int | None,
) -> Any:
    """The result rows of every connection of `inputs` (a DataFrame, not yet computed)."""
    from amqpspec.spark_triage.datasource import DEFAULT_SPLIT_BYTES, plan

    # A file read in one split is checked by the task that reads it (no shuffle of its
    # segments: the JVM only sees result rows, so the work is Python's and spreads over
    # the cores); a file in several byte-range splits (over `split_bytes`) goes through
    # the shuffle that brings each flow's segments together in capture order.
    limit = split_bytes or DEFAULT_SPLIT_BYTES
    splits = plan(inputs, limit)
    per_file = Counter(split.path for split in splits)
    sizes = {item.path: item.size for item in inputs}
    whole = [
        split
        for split in splits
        if per_file[split.path] == 1 and _fits(split, sizes[split.path], limit)
    ]
    paths = {split.path for split in whole}
    shuffled = [item for item in inputs if item.path not in paths]
    parts = []
    if whole:
        parts.append(_check_whole_splits(spark, whole, sizes, broker_label, liveness_bound))
    if shuffled:
        ordered = (
            read(shuffled)
            .repartition(count, "source", "flow")
            .sortWithinPartitions("source", "flow", "ordinal")
        )

        def udf(key: tuple, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return check_group(key, batches, liveness_bound)

        parts.append(ordered.groupBy("source", "flow").applyInArrow(udf, schema=_spark_type()))
    if not parts:
        parts.append(spark.createDataFrame([], _spark_type()))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def _write_tables(rows: Any, out: Path, count: int, progress) -> tuple[tuple[Any, Any], Any]:
    """violations.parquet and connections.parquet from the result rows; returns both
    DataFrames and the progress step begun. A bad input refuses the job (BadInputError, by
    the row's kind)."""
    from pyspark.sql import functions as F  # noqa: N812 - the usual Spark spelling

    refused = rows.filter(F.col("kind") == BAD_INPUT).select("reason").limit(1).collect()
    if refused:  # bad input, by the row's kind (the reason is the reader's message)
        raise BadInputError(refused[0]["reason"])
    violations = rows.filter(F.col("kind") == VIOLATION)
    connections = rows.filter(F.col("kind") == CONNECTION)
    step = progress.add_task("write violations, connections, clusters", total=None)
    for frame, columns, name in (
        (violations, VIOLATION_COLUMNS, "violations.parquet"),
        (connections, CONNECTION_COLUMNS, "connections.parquet"),
    ):
        frame.select(*columns).orderBy("source", "connection_key").coalesce(
            max(1, min(count, 8))
        ).write.mode("overwrite").parquet(str(out / name))
    return (violations, connections), step


def _cluster_and_report(
    spark,
    inputs: list,
    read: Callable[[list], Any],
    out: Path,
    tables: tuple[Any, Any],
    progress,
    step: Any,
    liveness_bound: float | None,
) -> dict[str, Any]:
    """clusters.json, the minimised reproducers and the report; returns the summary."""
    from amqpspec.spark_triage import clusters as clustering
    from amqpspec.spark_triage import report

    violations, connections = tables
    found = clustering.clusters(violations, connections)
    progress.update(step, total=1, completed=1)
    step = progress.add_task("minimise reproducers", total=len(found))
    # only the files holding a representative are read again
    sources = {cluster["representative"]["source"] for cluster in found}
    clustering.reproduce(
        spark,
        read([item for item in inputs if item.path in sources] or inputs[:1]),
        found,
        out / "reproducers",
        lambda: progress.advance(step),
        liveness_bound,
    )
    (out / "clusters.json").write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
    summary = clustering.summary(connections)
    summary["inputs"] = [  # the report lists them
        {"path": i.path, "kind": i.kind, "broker": i.broker, "size": i.size} for i in inputs
    ]
    step = progress.add_task("report", total=None)
    report.write(out, found, violations.select(*VIOLATION_COLUMNS).toPandas(), summary)
    progress.update(step, total=1, completed=1)
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="files or directories")
    parser.add_argument("--out", help="output directory (required)")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--partitions", type=int, help="shuffle partitions (default: 4 per core)")
    parser.add_argument("--broker-label", help="broker name for inputs that do not say")
    parser.add_argument(
        "--liveness-bound",
        type=float,
        metavar="SECONDS",
        help="also check liveness rules (unanswered drain/echo/close, stalls) with this bound",
    )
    parser.add_argument(
        "--split-bytes",
        type=int,
        metavar="BYTES",
        help="size of the byte-range splits captures are read in (default 128 MiB)",
    )


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options alone (before any input is read), or None."""
    if not args.out:
        return "--out DIR is required"
    if args.split_bytes is not None and args.split_bytes < 4096:
        return "--split-bytes must be 4096 or more"
    return None


def triage(args: argparse.Namespace) -> int:
    """Discover inputs, start (or join) Spark, run the job; the exit code
    (amqpspec.exit_status): 0 no MUST violation, 1 MUST violations, 2 bad input or usage
    (named before any job starts where it can be), 3 the job failed (one line naming the
    step, Spark's stage and the first executor error; the trace in OUT/triage-error.log)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from amqpspec import exit_status
    from amqpspec.spark_triage import failure, preflight
    from amqpspec.spark_triage.inputs import InputError, discover
    from amqpspec.spark_triage.session import spark_session

    console = Console(stderr=True, soft_wrap=True)

    def fail(line: str, code: int) -> int:
        console.print(line, markup=False, highlight=False)
        return code

    if problem := _usage_problem(args):
        return fail(f"amqpspec triage: {problem}", exit_status.BAD_INPUT)
    try:
        inputs = discover(args.inputs)
    except InputError as exc:
        return fail(f"amqpspec triage: bad input: {exc}", exit_status.BAD_INPUT)
    out = Path(args.out).resolve()  # the driver writes it; never the executors' directory
    if args.master and (problem := preflight.master_unreachable(args.master)):
        return fail(f"amqpspec triage: {problem}", exit_status.BAD_INPUT)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    steps = failure.Steps(None)
    spark = None
    try:
        spark = spark_session(args.master, args.partitions)
        master = spark.sparkContext.master
        if preflight.is_cluster(master):
            steps.current = "check what the executors see"
            problems = preflight.executor_problems(spark, [item.path for item in inputs])
            if problems:
                return fail(
                    f"amqpspec triage: bad input on {master}: " + "; ".join(problems),
                    exit_status.BAD_INPUT,
                )
        with Progress(*columns, console=console, transient=False) as progress:
            steps.progress = progress
            code = run_job(
                spark,
                inputs,
                out,
                args.partitions,
                args.broker_label,
                steps,
                args.liveness_bound,
                args.split_bytes,
            )
    except BadInputError as exc:
        return fail(f"amqpspec triage: bad input: {exc}", exit_status.BAD_INPUT)
    except Exception as exc:  # the job broke: no verdict, and never exit 1
        return fail(failure.report(exc, steps.current, out, spark), exit_status.JOB_FAILED)
    console.print(f"triage: {len(inputs)} input file(s) -> {out} (exit {code})")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_triage/job.py", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return triage(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
