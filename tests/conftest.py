"""Suite-wide policy: where every prerequisite is installed, a skipped test is a failure.

Tests skip only when something outside the project is missing (a Debian package, a real
broker, a compiler), and each skip's reason says how to install it. On a developer's machine
that is a hint; under the switch below it means an install step was lost, and a green run
must not hide it.

The switch: AMQPSPEC_REQUIRE_ALL=1 (.ci/run exports it), or CI=true (any CI service), turns
any skip into a failed run (exit status 1, the skipped tests and their reasons listed).
AMQPSPEC_REQUIRE_ALL=0 turns it off even under CI.

Also the module-scoped fixtures several test modules share: `spark` (a local Spark session,
tests/triage_support.py) and `s3` (moto's S3 server on loopback, tests/s3_support.py).
"""

from __future__ import annotations

import os

import pytest
from s3_support import s3_server
from triage_support import local_spark

OFF = ("", "0", "false", "no")


def require_all() -> bool:
    """True when a skip must fail the run (AMQPSPEC_REQUIRE_ALL, else CI)."""
    switch = os.environ.get("AMQPSPEC_REQUIRE_ALL")
    if switch is not None:
        return switch.strip().lower() not in OFF
    return os.environ.get("CI", "").strip().lower() not in OFF


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not require_all() or exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        print(
            f"\nAMQPSPEC_REQUIRE_ALL/CI: {len(skipped)} test(s) skipped; here every "
            "prerequisite must be installed (.ci/run):"
        )
        for report in skipped[:20]:
            print(f"  {report.nodeid}: {report.longrepr[2] if report.longrepr else ''}")
        session.exitstatus = 1


@pytest.fixture(scope="module")
def spark():
    with local_spark() as session:
        yield session


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server
