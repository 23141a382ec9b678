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
