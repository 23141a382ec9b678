"""Clusters: violations grouped by signature, ranked, linked to known issues, reproduced.

Owns: `clusters(violations, connections)` (Spark aggregation -> the `clusters.json`
entries: signature, rule, section, level, count, connections, sources, brokers, first and
last seen, representative connection, known upstream issue), `reproduce(...)` (the
representative connection's segments fetched back, minimised and written by
spark_triage.reproducers) and `summary(connections)` (run totals for the report and the
exit code). Clusters are ordered by size, then signature, so output is reproducible.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from amqpspec.spark_triage.check import items_of, segments_of
from amqpspec.spark_triage.known_issues import known_issue
from amqpspec.spark_triage.reproducers import minimize, write_reproducer

MAX_REPRODUCERS = 200


def clusters(violations, connections) -> list[dict]:
    from pyspark.sql import functions as F  # noqa: N812 - the usual Spark spelling

    brokers = F.concat_ws(" ", F.coalesce("broker_product", F.lit("unknown")), "broker_version")
    sizes = connections.select("connection_key", "frames", "client", "server")
    rep = F.min(
        F.struct("frames", "connection_key", "frame_index", "source", "flow", "client", "server")
    )
    rows = (
        violations.select(
            "connection_key",
            "signature",
            "rule",
            "section",
            "level",
            "time",
            "source",
            "flow",
            "frame_index",
            "broker_product",
            "broker_version",
        )
        .join(sizes, "connection_key")
        .groupBy("signature")
        .agg(
            F.first("rule").alias("rule"),
            F.first("section").alias("section"),
            F.first("level").alias("level"),
            F.count("*").alias("count"),
            F.countDistinct("connection_key").alias("connections"),
            F.sort_array(F.collect_set("source")).alias("sources"),
            F.sort_array(F.collect_set(brokers)).alias("brokers"),
            F.min("time").alias("first_seen"),
            F.max("time").alias("last_seen"),
            rep.alias("representative"),
        )
        .collect()
    )
    found = []
    for row in rows:
        entry = row.asDict(recursive=True)
        entry["known_issue"] = known_issue(entry["rule"], entry["brokers"])
        found.append(entry)
    found.sort(key=lambda c: (-c["count"], c["signature"]))
    return found


def reproduce(
    spark,
    segments,
    found: list[dict],
    directory: Path,
    tick: Callable[[], None],
    liveness_bound: float | None = None,
) -> None:
    """Adds `reproducer` to each cluster (at most MAX_REPRODUCERS, largest first)."""
    wanted = {(c["representative"]["source"], c["representative"]["flow"]) for c in found}
    wanted_list = sorted(wanted)[: MAX_REPRODUCERS * 2]
    if not wanted_list:
        return
    keys = spark.createDataFrame(wanted_list, "source string, flow string")
    table = segments.join(keys.hint("broadcast"), ["source", "flow"]).toArrow()
    groups: dict[tuple, list[int]] = defaultdict(list)
    for index, pair in enumerate(
        zip(table.column("source").to_pylist(), table.column("flow").to_pylist())
    ):
        groups[pair].append(index)
    items_by_key: dict[str, list] = {}
    for (source, _flow), indices in groups.items():
        part = table.take(pa.array(indices)).sort_by("ordinal")
        items_by_key.update(items_of(source, segments_of(part.to_batches())))
    for cluster in found[:MAX_REPRODUCERS]:
        rep = cluster["representative"]
        items = items_by_key.get(rep["connection_key"])
        cluster["reproducer"] = None
        if items:
            try:
                smallest = minimize(
                    items, cluster["signature"], rep["frame_index"], liveness_bound=liveness_bound
                )
            except ValueError:
                smallest = None
            if smallest:
                result = write_reproducer(
                    smallest,
                    cluster["signature"],
                    directory,
                    rep["client"],
                    rep["server"],
                    liveness_bound,
                )
                cluster["reproducer"] = {
                    "pcap": str(Path(result.pcap).relative_to(directory.parent)),
                    "text": str(Path(result.text).relative_to(directory.parent)),
                    "frames": result.frames,
                    "rechecked": result.rechecked,
                }
        tick()


def summary(connections) -> dict:
    from pyspark.sql import functions as F  # noqa: N812 - the usual Spark spelling

    row = connections.agg(
        F.count("*").alias("connections"),
        F.sum("frames").alias("frames"),
        F.sum("must_violations").alias("must_violations"),
        F.sum("should_violations").alias("should_violations"),
        F.sum(F.when(F.col("verdict") == "MUST", 1).otherwise(0)).alias("must_connections"),
        F.sum(F.when(F.size("defects") > 0, 1).otherwise(0)).alias("defect_connections"),
        F.sum(F.when(F.col("verdict") == "UNCHECKED", 1).otherwise(0)).alias("unchecked"),
    ).collect()[0]
    totals = {key: int(value or 0) for key, value in row.asDict().items()}
    broker = F.concat_ws(" ", F.coalesce("broker_product", F.lit("unknown")), "broker_version")
    per_broker = (
        connections.groupBy(broker.alias("broker"))
        .agg(
            F.count("*").alias("connections"),
            F.sum("frames").alias("frames"),
            F.sum(F.when(F.col("verdict") == "MUST", 1).otherwise(0)).alias("must_connections"),
            F.sum(F.when(F.col("verdict") == "SHOULD", 1).otherwise(0)).alias("should_only"),
            F.sum(F.when(F.col("verdict") == "UNCHECKED", 1).otherwise(0)).alias("unchecked"),
        )
        .orderBy("broker")
        .collect()
    )
    totals["brokers"] = [r.asDict() for r in per_broker]
    defects = connections.select(F.explode("defects").alias("defect", "count"))
    totals["defects"] = {
        r["defect"]: int(r["total"])
        for r in defects.groupBy("defect").agg(F.sum("count").alias("total")).collect()
    }
    return totals
