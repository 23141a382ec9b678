"""`amqpspec engine`: the protocol engine's own tools. Today: `diagram`, the state tables
of amqp10.engine.transitions drawn as Graphviz dot or Mermaid (amqp10.engine.diagram),
to stdout or a file.

    amqpspec engine diagram --machine session --format mermaid
    amqpspec engine diagram --machine all --format dot --errors -o docs/engine-states.dot

Owns: argument parsing and writing the text; the drawing is amqp10's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from amqpspec.amqp10.engine.diagram import FORMATS, MACHINES, render


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="engine_command", metavar="ENGINE_COMMAND")
    diagram = sub.add_parser(
        "diagram",
        help="draw the endpoint state tables (read from amqp10.engine.transitions)",
        description="Draw the connection (2.4.6), session (2.5.5), link (2.6) and SASL "
        "(5.3.2) state tables as Graphviz dot or Mermaid.",
    )
    diagram.add_argument("--format", choices=FORMATS, default="mermaid")
    diagram.add_argument("--machine", choices=(*MACHINES, "all"), default="all")
    diagram.add_argument(
        "--errors", action="store_true", help="also draw every refused RECV pair and its error"
    )
    diagram.add_argument("-o", "--output", type=Path, help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    if args.engine_command != "diagram":
        print(
            "usage: amqpspec engine diagram [--format dot|mermaid] [--machine M]", file=sys.stderr
        )
        return 2
    machines = MACHINES if args.machine == "all" else (args.machine,)
    text = "\n".join(render(machine, args.format, args.errors) for machine in machines)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text)
    return 0
