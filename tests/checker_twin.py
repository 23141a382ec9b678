"""A pytest plugin (`-p checker_twin`, tests/ on the path) that makes every `Checker` a twin:
the checker under test (fast lane on) plus a shadow with `fast=False` fed the same calls;
every `feed`, `feed_run` and `finish` must return the same violations (rule, section, level, frame,
origin, reason) or raise the same error. test_checker_fastlane.py runs the checker and
monitor test modules under it, so each of their frame sequences is a differential case.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.checker.core import Checker

_init, _feed, _feed_run, _finish, _note = (
    Checker.__init__,
    Checker.feed,
    Checker.feed_run,
    Checker.finish,
    Checker.note_available,
)
CALLS = [0]  # feeds compared, printed at the end so the run shows the twin was in place


def _same(mine: Any, theirs: Any) -> None:
    if isinstance(theirs, BaseException):
        assert type(mine) is type(theirs) and str(mine) == str(theirs), (mine, theirs)
        return
    assert [vars_of(v) for v in mine] == [vars_of(v) for v in theirs]


def vars_of(violation: Any) -> tuple:
    return (
        violation.rule_id,
        violation.section,
        violation.level,
        violation.frame_index,
        violation.origin,
        violation.reason,
    )


def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    except Exception as exc:  # compared with the fast checker's outcome
        return exc


def __init__(  # noqa: N807 - installed as Checker.__init__
    self: Checker, liveness_bound: float | None = None, *, fast: bool = True
) -> None:
    _init(self, liveness_bound, fast=fast)
    self._twin = Checker.__new__(Checker)
    _init(self._twin, liveness_bound, fast=False)


def feed(self: Checker, *args: Any, **kwargs: Any) -> Any:
    theirs = _call(_feed, self._twin, *args, **kwargs)
    mine = _call(_feed, self, *args, **kwargs)
    _same(mine, theirs)
    CALLS[0] += 1
    if isinstance(mine, BaseException):
        raise mine
    return mine


def feed_run(self: Checker, items: Any) -> Any:
    items = list(items)
    theirs = _call(_feed_run, self._twin, items)
    mine = _call(_feed_run, self, items)
    if isinstance(theirs, BaseException):
        _same(mine, theirs)
    else:
        assert [p for p, _ in mine] == [p for p, _ in theirs]
        for (_, found), (_, expected) in zip(mine, theirs, strict=True):
            _same(found, expected)
    CALLS[0] += len(items)
    if isinstance(mine, BaseException):
        raise mine
    return mine


def finish(self: Checker, *args: Any, **kwargs: Any) -> Any:
    theirs = _call(_finish, self._twin, *args, **kwargs)
    mine = _finish(self, *args, **kwargs)
    _same(mine, theirs)
    _same(self.violations, self._twin.violations)
    return mine


def note_available(self: Checker, *args: Any, **kwargs: Any) -> None:
    _note(self._twin, *args, **kwargs)
    _note(self, *args, **kwargs)


Checker.__init__ = __init__
Checker.feed = feed
Checker.feed_run = feed_run
Checker.finish = finish
Checker.note_available = note_available


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"checker twin: {CALLS[0]} feeds compared")
