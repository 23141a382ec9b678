"""The SparkSession of a triage run: local[*] by default, any master by URL.

Owns: `spark_session(master, partitions, conf)`. Sets what a local run needs and a user should
not have to (PYSPARK_PYTHON = this interpreter, so workers import this project;
SPARK_LOCAL_IP = 127.0.0.1 for local masters and a standalone master on loopback, whose
executors must reach the driver there; Arrow enabled; quiet logs). Under
spark-submit (or in a notebook) an active session is returned as it is, and spark-submit's
`--master` is never overridden.
"""

from __future__ import annotations

import os
import sys


def _loopback(master: str) -> bool:
    """A `spark://` master on this machine's loopback address."""
    hosts = [part.rsplit(":", 1)[0] for part in master.removeprefix("spark://").split(",")]
    return master.startswith("spark://") and all(
        host in ("127.0.0.1", "localhost", "[::1]") for host in hosts
    )


def spark_session(
    master: str | None = None, partitions: int | None = None, conf: dict[str, str] | None = None
):
    """The session; `conf`: more Spark settings for a new one (`spark.executorEnv.NAME`...)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit: its --master rules
    if not submitted:
        master = master or os.environ.get("MASTER") or "local[*]"
        if master.startswith("local") or _loopback(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    builder = (
        builder.appName("amqpspec-triage")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")  # keep the planned partitioning
        .config("spark.sql.session.timeZone", "UTC")
    )
    if partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
