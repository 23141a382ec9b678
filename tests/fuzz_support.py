"""Support for the fuzzer's tests: `amqpspec fuzz ...` run as users run it, bounded."""

from __future__ import annotations

import os
import subprocess

from cli_support import run_amqpspec

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_fuzz(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """`python -m amqpspec.cli fuzz ARGS` from this checkout; output captured."""
    return run_amqpspec("fuzz", *args, timeout=timeout, env=dict(os.environ, PYTHONPATH=REPO))


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
