"""Support for the fuzzer's tests: `amqpspec fuzz ...` run as users run it, bounded."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_fuzz(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """`python -m amqpspec.cli fuzz ARGS` from this checkout; output captured."""
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "fuzz", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
    )


def run_campaign(broker, out, *options: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """A quiet `amqpspec fuzz` campaign against a reference broker (its admin API on)."""
    return run_fuzz(
        "--broker",
        broker.url,
        "--profile",
        "reference",
        "--admin",
        broker.admin_url,
        "--out",
        str(out),
        "--quiet",
        *options,
        timeout=timeout,
    )
