#!/usr/bin/env python3
"""The project's import graph, read from the code: who uses whom, import cycles, private names
imported across modules (docs/architecture.md, "Who uses whom").

Owns: the graph of runtime imports between the modules of the installed parts (imports under
`if TYPE_CHECKING:` are not runtime imports and are left out), the part-level picture it
writes between the markers of docs/architecture.md, and the checks tests/test_import_graph.py
runs: no import cycle between files, no private name (`_x`) imported from another module, no
part importing a part it may not touch (`MAY_USE`).

    python3 scripts/import_graph.py            # print cycles, private imports, part edges
    python3 scripts/import_graph.py --write    # rewrite the picture in docs/architecture.md
    python3 scripts/import_graph.py --check    # exit 1 if the picture is stale or a rule broken
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START = "<!-- import-graph: start (scripts/import_graph.py --write) -->"
END = "<!-- import-graph: end -->"

# The parts in the order of the picture, and what each may import (besides itself).
PARTS = (
    "amqp10",
    "traces",
    "reference_broker",
    "conformance",
    "fuzz",
    "spark_triage",
    "bench",
    "amqpspec",
)
# `amqpspec` is the package root: the command line, `__version__` and the exit-status
# contract every subcommand keeps (amqpspec/exit_status.py).
MAY_USE: dict[str, frozenset[str]] = {
    "amqp10": frozenset(),  # the core stands alone
    "traces": frozenset({"amqp10", "amqpspec", "fuzz"}),  # fuzz: `trace replay` (traces/cli.py)
    "reference_broker": frozenset({"amqp10", "amqpspec"}),
    "conformance": frozenset({"amqp10", "amqpspec", "traces", "reference_broker"}),
    "fuzz": frozenset(
        {"amqp10", "amqpspec", "traces", "reference_broker", "conformance", "spark_triage"}
    ),  # spark_triage: the known upstream issues a finding is linked to
    # conformance: the results folders it reads and the run header of its reports
    "spark_triage": frozenset({"amqp10", "amqpspec", "traces", "conformance"}),
    "bench": frozenset(PARTS) - {"bench"},
    "amqpspec": frozenset(PARTS) - {"amqpspec"},
}


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)  # amqpspec.x.y -> file
    edges: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    private: list[tuple[str, str, str]] = field(default_factory=list)  # (importer, module, name)

    def part(self, module: str) -> str:
        pieces = module.split(".")
        return pieces[1] if len(pieces) > 1 and pieces[1] in PARTS else "amqpspec"

    def part_edges(self) -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for source, targets in self.edges.items():
            for target in targets:
                a, b = self.part(source), self.part(target)
                if a != b:
                    counts[(a, b)] += 1
        return dict(counts)

    def cycles(self) -> list[list[str]]:
        """Strongly connected components of more than one module (Tarjan, iterative)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []
        counter = 0
        for root in sorted(self.modules):
            if root in index:
                continue
            work = [(root, iter(sorted(self.edges.get(root, ()))))]
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack.add(root)
            while work:
                node, children = work[-1]
                child = next(children, None)
                if child is not None:
                    if child not in index:
                        index[child] = low[child] = counter
                        counter += 1
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(sorted(self.edges.get(child, ())))))
                    elif child in on_stack:
                        low[node] = min(low[node], index[child])
                    continue
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
        return sorted(found)

    def forbidden(self) -> list[tuple[str, str, str]]:
        """(importer, imported, why) for every import of a part the importer may not use."""
        bad = []
        for source, targets in sorted(self.edges.items()):
            a = self.part(source)
            for target in sorted(targets):
                b = self.part(target)
                if a != b and b not in MAY_USE[a]:
                    bad.append((source, target, f"{a} may not use {b}"))
        return bad


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts[0] == "amqpspec" else "amqpspec." + ".".join(parts)


def _runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:` (annotations only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                todo.extend(child.orelse)
                continue
            yield child
            todo.append(child)


def build(root: Path = ROOT) -> Graph:
    graph = Graph()
    # Cython modules without a .py source: amqp10._generated is written at build time from
    # the generated codec templates (docs/speedups.md), so a clean checkout has no file
    compiled_only = {"amqpspec.amqp10._generated"}
    for part in PARTS:
        for path in sorted((root / part).rglob("*.pyx")):
            if not path.with_suffix(".py").exists():
                compiled_only.add(_module_name(path))
    for part in PARTS:
        for path in sorted((root / part).rglob("*.py")):
            if "build" in path.relative_to(root).parts:
                continue
            graph.modules[_module_name(path)] = path
    for name, path in graph.modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in graph.modules and alias.name != name:
                        graph.edges[name].add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                for alias in node.names:
                    submodule = f"{module}.{alias.name}"
                    if submodule in compiled_only:
                        continue  # no Python source, so no import from it
                    if submodule in graph.modules:
                        target = submodule
                    elif module in graph.modules:
                        target = module
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            graph.private.append((name, module, alias.name))
                    else:
                        continue  # a compiled-only module or a third-party one
                    if target != name:
                        graph.edges[name].add(target)
    return graph


def picture(graph: Graph) -> str:
    """The part-level picture: a Mermaid graph and a table of who imports whom (parts only,
    no counts, so it changes when a dependency between parts does, not with every import)."""
    edges = sorted(graph.part_edges(), key=lambda e: (PARTS.index(e[0]), PARTS.index(e[1])))
    lines = [START, "", "```mermaid", "flowchart BT"]
    lines += [f"    {a} --> {b}" for a, b in edges]
    lines += ["```", "", "| part | imports from | may use |", "|---|---|---|"]
    for part in PARTS:
        uses = ", ".join(f"`{b}`" for a, b in edges if a == part) or "nothing"
        allowed = ", ".join(f"`{p}`" for p in PARTS if p in MAY_USE[part]) or "nothing"
        lines.append(f"| `{part}` | {uses} | {allowed} |")
    lines += ["", END]
    return "\n".join(lines)


def _doc_with(text: str, block: str) -> str:
    if START not in text or END not in text:
        raise SystemExit(f"{DOC}: the markers {START!r} / {END!r} are missing")
    head, rest = text.split(START, 1)
    _old, tail = rest.split(END, 1)
    return head + block + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/architecture.md")
    parser.add_argument("--check", action="store_true", help="exit 1 if stale or a rule broken")
    args = parser.parse_args(argv)
    graph = build()
    cycles, private, forbidden = graph.cycles(), graph.private, graph.forbidden()
    for component in cycles:
        print("cycle:", " <-> ".join(component))
    for importer, module, name in private:
        print(f"private: {importer} imports {name} from {module}")
    for importer, imported, why in forbidden:
        print(f"forbidden: {importer} imports {imported} ({why})")
    text = DOC.read_text(encoding="utf-8")
    wanted = _doc_with(text, picture(graph))
    if args.write and wanted != text:
        DOC.write_text(wanted, encoding="utf-8")
        print(f"wrote the picture into {DOC.relative_to(ROOT)}")
    stale = wanted != DOC.read_text(encoding="utf-8")
    if stale:
        print(f"{DOC.relative_to(ROOT)}: the picture is stale (run with --write)")
    print(
        f"{len(graph.modules)} modules; {len(cycles)} import cycles, {len(private)} private "
        f"names imported across modules, {len(forbidden)} forbidden part imports"
    )
    if args.check and (stale or cycles or private or forbidden):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
