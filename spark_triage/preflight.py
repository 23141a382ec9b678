"""Before a triage job on a cluster: is the master there, and can its executors read the
inputs and import amqpspec? Each "no" is bad input or usage (exit 2), said in one line
before any job starts, instead of a Python traceback from a worker.

Owns: `master_unreachable(master)` (a TCP connect to each host:port of a `spark://` URL,
bounded) and `executor_problems(spark, paths)` (one small Spark job, a few tasks per core:
each task checks on its executor that every input file is readable, a local path by
os.access, a URL (`s3a:`, `gs:`, ...) by opening its file system and asking for the file
with the executor's own environment (traces/urlfs.py), and that `amqpspec.spark_triage`
imports; the problems, by host; bounded: a cluster that runs none
of its tasks in `PREFLIGHT_TIMEOUT_S`, e.g. one whose workers lack the cores or memory the
application asks for, where Spark would wait for ever, raises `NoExecutorsError`). A local
master needs neither.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 5.0
SHOWN = 10  # unreadable files named per host (then a count)
# executors start in seconds; a loaded machine or a busy cluster may take a minute or two
PREFLIGHT_TIMEOUT_S = float(os.environ.get("AMQPSPEC_TRIAGE_PREFLIGHT_TIMEOUT", "300"))


class NoExecutorsError(Exception):
    """No executor ran the preflight's tasks in time (the job failed: exit 3)."""


def is_cluster(master: str | None) -> bool:
    return bool(master) and not str(master).startswith("local")


def master_unreachable(master: str) -> str | None:
    """Why nothing answers at a `spark://host:port[,host:port]` master, or None (other
    schemes, yarn and k8s, are left to Spark)."""
    if not master.startswith("spark://"):
        return None
    failures = []
    for address in master[len("spark://") :].split(","):
        parts = urlsplit(f"spark://{address}")
        try:
            host, port = parts.hostname, parts.port or 7077
        except ValueError:
            return f"--master {master}: not host:port ({address!r})"
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                return None
        except OSError as exc:
            failures.append(f"{host}:{port} ({exc.strerror or exc})")
    return f"--master {master}: no Spark master answers at {', '.join(failures)}"


def executor_problems(spark: Any, paths: list[str]) -> list[str]:
    """What the executors cannot do, one line per host and problem (empty: all is well).
    The tasks run where Spark puts them: a few per core, so that every executor is very
    likely to run one, though Spark does not promise it."""
    context = spark.sparkContext
    shared = context.broadcast(paths)
    tasks = max(2, 2 * context.defaultParallelism)

    def probe(_rows: Any) -> Any:  # runs on an executor: builtins and its own imports only
        import os
        import re
        import socket

        host = socket.gethostname()
        urls = [path for path in shared.value if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", path)]
        paths = set(shared.value).difference(urls)
        missing = [p for p in shared.value if p in paths and not os.access(p, os.R_OK)]
        url_problems: list[str] = []
        try:
            import amqpspec.spark_triage.check  # noqa: F401 - the job's own import
            from amqpspec.traces import urlfs
        except Exception as exc:
            failed = f"{type(exc).__name__}: {exc}"
        else:
            failed = ""
            url_problems = urlfs.unreadable(urls)
        yield host, os.getcwd(), missing, url_problems, failed

    rows = _bounded(context, lambda: context.parallelize(range(tasks), tasks).mapPartitions(probe))
    shared.unpersist()
    return _problems(rows)


def _bounded(context: Any, job: Any) -> list:
    """`job()`'s rows collected within PREFLIGHT_TIMEOUT_S; NoExecutorsError (the jobs
    cancelled) when no executor ran it in time."""
    answer: dict[str, Any] = {}

    def run() -> None:
        try:
            answer["rows"] = job().collect()
        except Exception as exc:  # cancelled, or the cluster failed it
            answer["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(PREFLIGHT_TIMEOUT_S)
    if thread.is_alive():
        context.cancelAllJobs()
        thread.join(30)
        raise NoExecutorsError(
            f"no executor of {context.master} ran a task in {PREFLIGHT_TIMEOUT_S:.0f} s: do its "
            "workers have the cores and memory the application asks for (spark.executor.memory, "
            "spark.executor.cores)? (AMQPSPEC_TRIAGE_PREFLIGHT_TIMEOUT sets the wait)"
        )
    if "error" in answer:
        raise answer["error"]
    return answer["rows"]


def _problems(rows: list) -> list[str]:
    """One line per host and problem (import, unreadable files, unreadable URLs), as the
    first executor on the host that had it said."""
    problems: dict[tuple[str, str], str] = {}
    for host, cwd, missing, url_problems, failed in rows:
        if failed:
            problems.setdefault(
                (host, "import"),
                f"executors on {host} cannot import amqpspec ({failed}): ship it with "
                "spark-submit --py-files or a Python archive (docs/triage.md, 'On a cluster')",
            )
        if missing:
            problems.setdefault(
                (host, "read"),
                f"executors on {host} (working directory {cwd}) cannot read "
                f"{len(missing)} input file(s): {_shown(missing, ', ', ' and')}",
            )
        if url_problems:
            problems.setdefault(
                (host, "url"),
                f"executors on {host} cannot read {len(url_problems)} input URL(s) with their "
                "environment (docs/triage.md, 'Inputs by URL'): "
                + _shown(url_problems, "; ", "; and"),
            )
    return list(problems.values())


def _shown(items: list[str], separator: str, more: str) -> str:
    """The first SHOWN `items`, and how many more there are ('a, b and 3 more')."""
    rest = f"{more} {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return separator.join(items[:SHOWN]) + rest
