"""The SparkSession of a triage run: local[*] by default, any master by URL.

Owns: `spark_session(master, partitions)`. Sets what a local run needs and a user should
not have to (PYSPARK_PYTHON = this interpreter, so workers import this project;
SPARK_LOCAL_IP = 127.0.0.1 for local masters; Arrow enabled; quiet logs). Under
spark-submit the session already exists and is returned as it is.
"""

from __future__ import annotations

import os
import sys


def spark_session(master: str | None = None, partitions: int | None = None):
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("MASTER") or "local[*]"
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName("amqpspec-triage")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")  # keep the planned partitioning
        .config("spark.sql.session.timeZone", "UTC")
    )
    if partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
