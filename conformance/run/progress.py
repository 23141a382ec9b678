"""What a person sees while `amqpspec run` runs (docs/conformance.md): instead of one pytest line
per case, a live progress bar with the tally of verdicts so far and the case in progress (rich, when
stdout is a terminal), or one plain line per finished case (CI logs, pipes). pytest's own lines come
back with `amqpspec run -v` (then this plugin is not registered).

Owns `RunProgress`, a pytest plugin object `conformance.cli` passes to `pytest.main`: it
reads each case's verdict from its report (`user_properties`, set by
`plugin.conformance_run`) and hides pytest's per-test letters. May touch: stdout.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import IO, Any

import pytest

# tally order and colours (rich markup) of the verdicts
VERDICT_STYLES = {
    "OK": "green",
    "NON-STRICT": "yellow",
    "UNSUPPORTED": "blue",
    "FAILED": "bold red",
    "ERROR": "bold magenta",
    "DIFFERS": "cyan",  # last, apart: differs from the profile's model, not the spec
}


def case_id_of(nodeid: str) -> str:
    """`conformance/suite.py::test_case[2.6.7/drain-empty-queue]` -> the case id."""
    start = nodeid.find("[")
    return nodeid[start + 1 : -1] if start >= 0 and nodeid.endswith("]") else nodeid


def verdict_of(report: pytest.TestReport) -> str | None:
    """The case's verdict once its report says it finished, else None."""
    if report.when == "call" or (report.when == "setup" and not report.passed):
        verdict = dict(report.user_properties).get("verdict")
        if verdict is not None:
            return str(verdict)
        return "UNSUPPORTED" if report.skipped else "ERROR" if report.failed else "OK"
    return None


class RunProgress:
    """Live progress (rich) on a terminal, plain lines elsewhere; `live` forces either."""

    def __init__(self, stream: IO[str] | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.tally: Counter[str] = Counter()
        self.total = 0
        self.done = 0
        self.current = ""
        self._progress: Any = None
        self._task: Any = None

    # --- pytest hooks ------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)
        if self.live and self.total:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            console = Console(file=self.stream, force_terminal=True)
            self._progress = Progress(
                BarColumn(bar_width=30),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[tally]}"),
                TextColumn("[dim]{task.fields[case]}"),
                console=console,
                transient=True,
            )
            self._task = self._progress.add_task("cases", total=self.total, tally="", case="")
            self._progress.start()

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.current = case_id_of(nodeid)
        self._refresh()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        verdict = verdict_of(report)
        if verdict is None:
            return
        self.done += 1
        self.tally[verdict] += 1
        if self._progress is None:
            width = len(str(self.total))
            self.stream.write(
                f"[{self.done:>{width}}/{self.total}] {verdict:<11} {case_id_of(report.nodeid)}"
                f" ({report.duration:.2f} s)\n"
            )
            self.stream.flush()
        self._refresh()

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        """No pytest letters (we show progress); the category keeps pytest's own counts."""
        if report.when == "call" or not report.passed:
            return report.outcome, "", ""
        return "", "", ""

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # --- display -----------------------------------------------------------------------
    def tally_text(self, markup: bool = True) -> str:
        """The verdicts so far; DIFFERS apart after a bar (it is no spec verdict)."""
        parts = []
        for verdict, style in VERDICT_STYLES.items():
            count = self.tally.get(verdict)
            if count:
                text = f"[{style}]{verdict} {count}[/]" if markup else f"{verdict} {count}"
                parts.append(f"| {text}" if verdict == "DIFFERS" else text)
        return "  ".join(parts)

    def _refresh(self) -> None:
        if self._progress is not None:
            self._progress.update(
                self._task, completed=self.done, tally=self.tally_text(), case=self.current
            )
