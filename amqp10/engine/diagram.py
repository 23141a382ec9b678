"""Pictures of the endpoint state machines, drawn from the transition tables themselves
(h2's idea: the diagram tool imports the table, so the picture cannot drift from the code).

Owns: `render(machine, fmt, errors=False) -> str`, Graphviz dot or a Mermaid
stateDiagram-v2 of one table of `transitions.TABLES` (connection 2.4.6, session 2.5.5,
link 2.6, sasl 5.3.2): one edge per (state, input) pair, labelled with the input and,
when it is not plain "process", the action. With `errors=True` every refused RECV pair
is drawn too, as an edge to a node naming the error condition and its scope. Pure: text
in, text out; `amqpspec engine diagram` writes it to stdout or a file.
"""

from __future__ import annotations

from enum import Enum

from amqpspec.amqp10.engine.transitions import (
    PROCESS,
    TABLES,
    Transition,
    connection_machine,
    link_machine,
    sasl_machine,
    session_machine,
)

FORMATS = ("dot", "mermaid")
_MERMAID_WORDS = frozenset({"end", "state", "note", "direction", "class", "classdef", "style"})
MACHINES = tuple(name for name, *_ in TABLES)
_INITIAL = {
    "connection": connection_machine,
    "session": session_machine,
    "link": link_machine,
    "sasl": sasl_machine,
}


def edges(machine: str, errors: bool = False) -> list[tuple[str, str, str]]:
    """(from state, to node, label) per (state, input) pair of `machine`'s table, in
    table order; refused RECV pairs (errors=True) lead to 'refused: condition (scope)'."""
    _, _, _, table, refused = _table(machine)
    result = [
        (state.value, t.next_state.value, _label(inp, t)) for (state, inp), t in table.items()
    ]
    if errors:
        for (state, inp), (condition, scope) in refused.items():
            result.append((state.value, f"refused: {condition} ({scope})", inp.value))
    return result


def _table(machine: str) -> tuple:
    for entry in TABLES:
        if entry[0] == machine:
            return entry
    raise ValueError(f"no state table {machine!r}; one of {', '.join(MACHINES)}")


def _label(inp: Enum, transition: Transition) -> str:
    if transition.action == PROCESS:
        return inp.value
    return f"{inp.value} ({transition.action})"


def render(machine: str, fmt: str = "mermaid", errors: bool = False) -> str:
    """The diagram of `machine` ('connection', 'session', 'link', 'sasl') as `fmt`."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
    initial = _INITIAL[_table(machine)[0]]().state.value
    lines = edges(machine, errors)
    return _dot(machine, initial, lines) if fmt == "dot" else _mermaid(initial, lines)


def _dot(machine: str, initial: str, lines: list[tuple[str, str, str]]) -> str:
    out = [
        f"digraph {machine} {{",
        "  rankdir=LR;",
        "  node [shape=box, style=rounded];",
        '  start [shape=point, label=""];',
        f'  start -> "{initial}";',
    ]
    for node in sorted({target for _, target, _ in lines if target.startswith("refused")}):
        out.append(f'  "{node}" [shape=note, color=red];')
    out += [f'  "{source}" -> "{target}" [label="{label}"];' for source, target, label in lines]
    out.append("}")
    return "\n".join(out) + "\n"


def _mermaid(initial: str, lines: list[tuple[str, str, str]]) -> str:
    ids: dict[str, str] = {}

    def node(name: str) -> str:
        """Refusal nodes and state names Mermaid reserves get an id and a label."""
        if name not in ids:
            if name.startswith("refused"):
                ids[name] = f"refused{sum(k.startswith('refused') for k in ids)}"
            else:
                ids[name] = f"{name}_" if name.lower() in _MERMAID_WORDS else name
        return ids[name]

    out = ["stateDiagram-v2", f"    [*] --> {node(initial)}"]
    out += [f"    {node(s)} --> {node(t)} : {label}" for s, t, label in lines]
    out += [f'    state "{name}" as {ident}' for name, ident in ids.items() if name != ident]
    return "\n".join(out) + "\n"
