"""The `amqpspec` command: one subcommand per part of the project.

Owns: argument parsing and dispatch only. Each part registers its subcommand through a
module with `add_arguments(parser)` and `run(args) -> int`, listed in SUBCOMMANDS; a part
not built yet says so and exits 2. Contracts named in issues (broker, run, capture,
trace, report, ...) keep their names and options: add, don't rename.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand -> (module providing add_arguments/run, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "broker": ("reference_broker.cli", "run the bundled reference AMQP 1.0 broker"),
    "run": ("conformance.cli", "run the conformance suite against a broker"),
    "report": ("conformance.report_cli", "render results directories as a brokers x cases matrix"),
    "coverage": (
        "conformance.coverage_cli",
        "spec coverage of a conformance run (fields, "
        "error conditions, engine transitions, checker rules)",
    ),
    "capture": ("traces.capture_cli", "record AMQP traffic through a relaying proxy"),
    "trace": ("traces.cli", "show, check and convert recorded traces"),
    "fuzz": ("fuzz.cli", "fuzz a broker's frame parser and state machine"),
    "triage": ("spark_triage.cli", "triage trace corpora with PySpark"),
    "bench": ("bench.cli", "benchmarks: codec, brokers, overload, arrows"),
    "engine": ("amqpspec.engine_cli", "the protocol engine: draw its state tables"),
}


def _load(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if (
            exc.name
            and module_name.startswith(exc.name.split(".")[0])
            and (module_name == exc.name or module_name.startswith(exc.name + "."))
        ):
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amqpspec", description="AMQP 1.0 conformance and fuzz test suite"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = _load(module_name)
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if module is not None:
            module.add_arguments(sub_parser)
        sub_parser.set_defaults(_module=module, _name=name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args._module is None:
        print(f"amqpspec {args._name}: not available in this version yet", file=sys.stderr)
        return 2
    return int(args._module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
