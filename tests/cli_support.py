"""The command line as users run it, for the tests: `python -m amqpspec.cli ARGS` from this
checkout, bounded, its output captured as text.

Owns: `REPO` (this checkout), `run_amqpspec`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_amqpspec(
    *args: str, timeout: float = 240, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m amqpspec.cli ARGS` in REPO, killed after `timeout` s; `env`: the whole
    environment (default: this process's)."""
    return subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
