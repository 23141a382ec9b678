"""The exit status every judging subcommand keeps (`amqpspec triage`, `fuzz`, `run`, `trace
check`): what a CI job reading it may conclude.

Owns: the four codes and `internal_error_line`. A code of 1 is a claim about the broker, so
a run that broke (a Spark job that failed, a fuzzer worker that crashed, an exception of the
tool's own) must never end in it: it ends in JOB_FAILED with one line on stderr naming what
broke (README, "Exit status"; docs/triage.md).
"""

from __future__ import annotations

OK = 0  # judged: no MUST violation (no finding)
VIOLATIONS = 1  # judged: MUST violations (findings), the evidence in the output
BAD_INPUT = 2  # not judged: bad input or usage (the message names it)
JOB_FAILED = 3  # not judged: the run itself failed (the message names the stage and error)


def internal_error_line(command: str, exc: BaseException) -> str:
    """The one stderr line of a subcommand stopped by an exception of the tool's own."""
    text = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
    return (
        f"amqpspec {command}: the run failed, no verdict (exit {JOB_FAILED}): {detail} "
        "(traceback above)"
    )
