"""The import graph read from the code (scripts/import_graph.py): the picture in
docs/architecture.md is the code's, no part imports one it may not use, and the parts listed
in CLEAN have no import cycle between their files and import no private name from another
module (docs/architecture.md, "Who uses whom")."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
assert _spec is not None and _spec.loader is not None
import_graph = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = import_graph
_spec.loader.exec_module(import_graph)

# The parts whose files import each other without a cycle and without private names.
CLEAN = (
    "amqp10",
    "traces",
    "reference_broker",
    "spark_triage",
    "bench",
    "amqpspec",
    "conformance",
    "fuzz",
)


@pytest.fixture(scope="module")
def graph():
    return import_graph.build()


def test_the_picture_in_docs_is_the_codes(graph):
    text = import_graph.DOC.read_text(encoding="utf-8")
    assert import_graph._doc_with(text, import_graph.picture(graph)) == text, (
        "docs/architecture.md is stale: run python3 scripts/import_graph.py --write"
    )


def test_no_part_imports_one_it_may_not_use(graph):
    assert graph.forbidden() == []


@pytest.mark.parametrize("part", CLEAN)
def test_no_import_cycle_between_files(graph, part):
    assert [c for c in graph.cycles() if graph.part(c[0]) == part] == []


@pytest.mark.parametrize("part", CLEAN)
def test_no_private_name_imported_across_modules(graph, part):
    assert [p for p in graph.private if graph.part(p[0]) == part] == []


def test_the_graph_sees_a_cycle_and_a_private_import(tmp_path, monkeypatch):
    """The checks can fail: two files importing each other, one taking a private name."""
    package = tmp_path / "amqp10"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from amqpspec.amqp10.b import _hidden\n")
    (package / "b.py").write_text("from amqpspec.amqp10 import a\n_hidden = 1\n")
    for part in import_graph.PARTS[1:]:
        (tmp_path / part).mkdir()
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    seen = import_graph.build(tmp_path)
    assert seen.cycles() == [["amqpspec.amqp10.a", "amqpspec.amqp10.b"]]
    assert seen.private == [("amqpspec.amqp10.a", "amqpspec.amqp10.b", "_hidden")]
