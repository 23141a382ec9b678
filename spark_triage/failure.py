"""A triage job that failed: the stage and the first executor error in one line, the rest in
a log file (exit 3: amqpspec.exit_status.JOB_FAILED, never 1, which claims violations).

Owns: `Steps` (the job's progress, remembering the step that runs), `first_error(text)`
(Spark's stage, the executor and the first Python or Java error in an exception's text)
and `report(exc, step, out) -> line` (writes `OUT/triage-error.log` with the full trace).
"""

from __future__ import annotations

import re
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOG_NAME = "triage-error.log"
_STAGE = re.compile(r"in stage (\d+(?:\.\d+)?)")
# "(127.0.0.1 executor 1)" or "(host executor driver)" in "Lost task 0.3 in stage 2.0 (TID 9)"
_EXECUTOR = re.compile(r"\(([^()\s]+ executor [^()\s]+)\)")
# the first line of a Java exception: "java.io.FileNotFoundException: ..."
_JAVA = re.compile(r"^[\s:]*((?:[a-z]\w*\.)+[A-Z]\w*(?:Exception|Error)\b.*)$")


class Steps:
    """Wraps a rich Progress (or anything with add_task/update/advance): the description of
    the newest task is the step the job is in."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.current = "start Spark"

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> Any:
        self.current = description
        return self.progress.add_task(description, *args, **kwargs)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.progress.update(*args, **kwargs)

    def advance(self, *args: Any, **kwargs: Any) -> None:
        self.progress.advance(*args, **kwargs)


@dataclass(frozen=True)
class FirstError:
    stage: str | None  # Spark's stage id ("2.0"), when the error came from a task
    executor: str | None  # "127.0.0.1 executor 1"
    error: str  # "FileNotFoundError: [Errno 2] No such file or directory: '...'"


def first_error(text: str) -> FirstError:
    """The first error in an exception's text: the exception line of the first Python
    traceback (an executor's, carried inside Spark's message), else the first Java
    exception line, else the first line."""
    stage = _STAGE.search(text)
    executor = _EXECUTOR.search(text)
    lines = text.splitlines()
    error = None
    for index, line in enumerate(lines):
        if "Traceback (most recent call last)" in line:
            error = next(
                (
                    later.strip()
                    for later in lines[index + 1 :]
                    if later.strip() and not later[:1].isspace() and ":" in later
                ),
                None,
            )
            break
    if error is None:
        error = next((m.group(1).strip() for x in lines if (m := _JAVA.match(x))), None)
    if error is None:
        error = next((x.strip() for x in lines if x.strip()), "no message")
    return FirstError(
        stage.group(1) if stage else None, executor.group(1) if executor else None, error[:400]
    )


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it came from: pyspark raises its Python-side conversion
    `from None`, and the hidden Py4JJavaError is the one whose text names Spark's stage
    and executor ("Job aborted due to stage failure: ... in stage 3.0 ... executor 1")."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def failed_stage(spark: Any) -> str | None:
    """Spark's newest failed job and its stage that lost tasks, from the status tracker
    (pyspark's exception for a failed Python task carries the worker's traceback, not the
    stage): "job 3, stage 5 (parquet at ...), 1 of 2 tasks failed"."""
    try:
        tracker = spark.sparkContext.statusTracker()
        for job in sorted(tracker.getJobIdsForGroup(None), reverse=True):
            info = tracker.getJobInfo(job)
            if info is None or str(info.status) != "FAILED":
                continue
            for stage in sorted(info.stageIds):
                detail = tracker.getStageInfo(stage)
                if detail is not None and detail.numFailedTasks > 0:
                    return (
                        f"job {job}, stage {stage} ({detail.name}), "
                        f"{detail.numFailedTasks} of {detail.numTasks} tasks failed"
                    )
            return f"job {job}"
    except Exception:  # best effort: a stopped or broken SparkContext says nothing
        return None
    return None


def report(exc: BaseException, step: str, out: Path | None, spark: Any = None) -> str:
    """Writes the full trace to OUT/triage-error.log (a temporary file when OUT cannot be
    written) and returns the one line for stderr."""
    chain = _chain(exc)
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for hidden in chain[1:]:
        trace += f"\n--- raised while handling {type(hidden).__name__}:\n{hidden}\n"
    log: Path | None = None
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            log = out / LOG_NAME
            log.write_text(f"step: {step}\n\n{trace}")
        except OSError:
            log = None
    if log is None:
        with tempfile.NamedTemporaryFile(
            "w", prefix="amqpspec-triage-error-", suffix=".log", delete=False
        ) as handle:
            handle.write(f"step: {step}\n\n{trace}")
        log = Path(handle.name)
    found = first_error("\n".join(f"{type(e).__name__}: {e}" for e in chain))
    stage = failed_stage(spark) if spark is not None else None
    where = ", ".join(
        part
        for part in (
            f"Spark {stage}" if stage else f"Spark stage {found.stage}" if found.stage else "",
            found.executor or "",
        )
        if part
    )
    return (
        f"amqpspec triage: the job failed in step '{step}'"
        + (f" ({where})" if where else "")
        + f": {found.error} (full trace: {log})"
    )
