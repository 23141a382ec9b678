"""Suite-wide policy: on CI (CI=true) a skipped test is a failure.

Tests skip only when something outside the project is missing (a Debian package, a real
broker, the shared captures). On a developer's machine that is a hint; on CI it means
.ci/run lost an install step, and a green run must not hide it.
"""

from __future__ import annotations

import os

import pytest


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not os.environ.get("CI") or exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        print(f"\nCI: {len(skipped)} test(s) skipped; on CI every prerequisite is installed:")
        for report in skipped[:20]:
            print(f"  {report.nodeid}: {report.longrepr[2] if report.longrepr else ''}")
        session.exitstatus = 1
