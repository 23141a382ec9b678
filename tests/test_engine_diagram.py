"""The state-table diagrams (amqp10.engine.diagram, `amqpspec engine diagram`) are read
from the transition tables: every (state, input) pair of every table appears, with its
next state, in both formats; refused RECV pairs appear with their condition on request.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from amqpspec.amqp10.engine.diagram import FORMATS, MACHINES, edges, render
from amqpspec.amqp10.engine.transitions import PROCESS, TABLES

DOT_EDGE = re.compile(r'^  "([^"]+)" -> "([^"]+)" \[label="([^"]+)"\];$')
MERMAID_EDGE = re.compile(r"^    (\S+) --> (\S+) : (.+)$")


def _pairs_drawn(text: str, fmt: str) -> set[tuple[str, str, str]]:
    """(state, input, next node) of every edge in the text, node ids resolved."""
    aliases = dict(
        (ident, name) for name, ident in re.findall(r'^    state "([^"]+)" as (\S+)$', text, re.M)
    )
    pattern = DOT_EDGE if fmt == "dot" else MERMAID_EDGE
    drawn = set()
    for line in text.splitlines():
        match = pattern.match(line)
        if match is None:
            continue
        source, target, label = match.groups()
        source, target = aliases.get(source, source), aliases.get(target, target)
        drawn.add((source, label.split(" ")[0], target))
    return drawn


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("entry", TABLES, ids=[t[0] for t in TABLES])
def test_every_pair_of_every_table_is_drawn(entry, fmt):
    name, _, _, table, refused = entry
    text = render(name, fmt)
    drawn = _pairs_drawn(text, fmt)
    expected = {(s.value, i.value, t.next_state.value) for (s, i), t in table.items()}
    assert drawn == expected
    for (_, inp), transition in table.items():
        if transition.action != PROCESS:
            assert f"{inp.value} ({transition.action})" in text
    with_errors = _pairs_drawn(render(name, fmt, errors=True), fmt)
    refusals = {
        (s.value, i.value, f"refused: {cond} ({scope})")
        for (s, i), (cond, scope) in refused.items()
    }
    assert with_errors == expected | refusals


def test_edges_follow_the_table_order():
    name, _, _, table, _ = TABLES[1]
    assert [(s, lbl.split(" ")[0]) for s, _, lbl in edges(name)] == [
        (s.value, i.value) for s, i in table
    ]


def test_initial_states_and_headers():
    assert render("connection", "mermaid").startswith("stateDiagram-v2\n    [*] --> START\n")
    assert 'start -> "UNMAPPED";' in render("session", "dot")
    assert render("link", "dot").startswith("digraph link {")
    assert '    state "END" as END_' in render("connection", "mermaid")


def test_unknown_machine_or_format():
    with pytest.raises(ValueError):
        render("delivery")
    with pytest.raises(ValueError):
        render("session", "svg")


def test_cli_writes_every_machine(tmp_path):
    out = tmp_path / "states.dot"
    done = subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "engine", "diagram", "--format", "dot", "-o", out],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert [f"digraph {m} {{" in text for m in MACHINES] == [True] * len(MACHINES)
    done = subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "engine", "diagram", "--machine", "sasl"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout == render("sasl", "mermaid")
