"""The size of conformance/'s code (docs/architecture.md, "The conformance parts"): no class
over 400 lines and no function over 60 outside cases/ (which are many small functions). Its
import cycles and private imports are tests/test_import_graph.py's (conformance is in CLEAN).
The check is shown to fail on a package made to. The same sizes hold in the reference broker,
traces, triage, the benchmarks, the package root, amqp10 and the fuzzer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = ROOT / "conformance"
HELD = ("reference_broker", "traces", "spark_triage", "bench", "amqpspec", "amqp10", "fuzz")
MAX_CLASS, MAX_FUNCTION = 400, 60


def oversized(root: Path) -> list[str]:
    """Classes over MAX_CLASS and functions over MAX_FUNCTION lines outside cases/."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "cases" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                size = node.end_lineno - node.lineno + 1
                limit = MAX_CLASS if isinstance(node, ast.ClassDef) else MAX_FUNCTION
                if size > limit:
                    found.append(f"{path.relative_to(root)}:{node.name} {size} lines")
    return found


def test_no_class_or_function_too_long_outside_cases() -> None:
    assert oversized(CONFORMANCE) == []


@pytest.mark.parametrize("part", HELD)
def test_no_class_or_function_too_long_in_the_other_parts(part: str) -> None:
    assert oversized(ROOT / part) == []


def test_the_check_fails_on_a_package_made_to(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    body = "    x = 1\n" * MAX_FUNCTION
    (tmp_path / "a.py").write_text(
        f"def long():\n{body}\n\nclass Big:\n" + "    y = 1\n" * MAX_CLASS
    )
    (tmp_path / "cases" / "b.py").write_text(f"def long_case():\n{body}")  # cases/: allowed
    assert sorted(oversized(tmp_path)) == [
        f"a.py:Big {MAX_CLASS + 1} lines",
        f"a.py:long {MAX_FUNCTION + 1} lines",
    ]
