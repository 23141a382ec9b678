"""Every conformance case module, found through the registry (a new module is covered
without listing it here): it registers cases with unique, well-formed ids named by the
behaviour they test, spec sentences, descriptions, known capabilities and acceptable
outcome sets, and says in its header which ids it owns. No broker needed."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections import defaultdict
from pathlib import Path

import pytest

import amqpspec.conformance.cases
from amqpspec.conformance.profile import CAPABILITIES
from amqpspec.conformance.run.registry import LEVELS, MODEL, Case, load_cases

CASES = load_cases()
MODULES = sorted(
    f"{amqpspec.conformance.cases.__name__}.{info.name}"
    for info in pkgutil.iter_modules(amqpspec.conformance.cases.__path__)
)
BY_MODULE: dict[str, list[Case]] = defaultdict(list)
for _case in CASES:
    BY_MODULE[_case.module].append(_case)
# words that name when or how a case was added, not what it tests
HISTORY = re.compile(r"(^|-)(more|must|should|extra|added)(-|$)")


def test_ids_unique() -> None:
    ids = [case.case_id for case in CASES]
    assert len(ids) == len(set(ids)) >= 200


@pytest.mark.parametrize("module", MODULES)
def test_every_case_module_registers_cases(module: str) -> None:
    """conformance/cases/ holds case modules only, named `s<section>_<topic>`, each
    registering at least one case and saying in its header which ids it owns."""
    assert re.fullmatch(r"amqpspec\.conformance\.cases\.s\d+(_\d+)*_[a-z0-9_]+", module), module
    assert BY_MODULE[module], f"{module} registers no case"
    loaded = importlib.import_module(module)
    assert "Owns the cases" in (loaded.__doc__ or ""), f"{module}: its header names no ids"
    for node in ast.walk(ast.parse(Path(loaded.__file__ or "").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:  # function-local ones too
            source = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(source, alias.name), f"{module}: {node.module}.{alias.name}"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.case_id)
def test_case_well_formed(case: Case) -> None:
    section, slug = case.case_id.split("/", 1)
    assert re.fullmatch(r"\d+(\.\d+)*", section), case.case_id
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug), case.case_id
    assert not HISTORY.search(slug), f"{case.case_id}: the id names its history"
    assert case.level in LEVELS
    if case.level == MODEL:
        assert case.model is not None, case.case_id
    assert len(case.sentence) > 30, case.case_id
    assert case.description, f"{case.case_id} has no docstring"
    assert case.requires <= set(CAPABILITIES), (case.case_id, case.requires)
    if case.lenient:
        assert case.outcomes, f"{case.case_id}: lenient outcomes without acceptable ones"
    assert case.module in MODULES, case.module
