"""The `amqpspec` command: one subcommand per part of the project.

Owns: argument parsing and dispatch only. Each part registers its subcommand through a
module with `add_arguments(parser)` and `run(args) -> int`, listed in SUBCOMMANDS; a part
whose extra is not installed (pyproject.toml: `[spark]`, `[fuzz]`, ...) says which and exits
2. An exception of the tool's own that reaches here exits 3 (amqpspec.exit_status: never 1,
which claims violations), its traceback then one line on stderr. The subcommands and their
options are contracts users' CI depends on: add, don't rename.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence
from typing import Any

# subcommand -> (module providing add_arguments/run, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "broker": ("amqpspec.reference_broker.cli", "run the bundled reference AMQP 1.0 broker"),
    "run": ("amqpspec.conformance.run.cli", "run the conformance suite against a broker"),
    "report": (
        "amqpspec.conformance.report.cli",
        "render results directories as a brokers x cases matrix",
    ),
    "coverage": (
        "amqpspec.conformance.report.coverage_cli",
        "spec coverage of a conformance run (fields, "
        "error conditions, engine transitions, checker rules, the normative manifest)",
    ),
    "capture": ("amqpspec.traces.capture_cli", "record AMQP traffic through a relaying proxy"),
    "trace": ("amqpspec.traces.cli", "show, check and convert recorded traces"),
    "fuzz": ("amqpspec.fuzz.cli", "fuzz a broker's frame parser and state machine"),
    "triage": ("amqpspec.spark_triage.cli", "triage trace corpora with PySpark"),
    "bench": ("amqpspec.bench.cli", "benchmarks: codec, brokers, overload, arrows"),
    "engine": ("amqpspec.engine_cli", "the protocol engine: draw its state tables"),
}


# a third-party package some subcommands need -> the extra that installs it (pyproject.toml)
EXTRAS = {
    "pyarrow": "traces",
    "numpy": "traces",
    "scapy": "fuzz",
    "pyspark": "spark",
    "pandas": "spark",
    "matplotlib": "bench",
}
# a subcommand outside the base install -> its extra, which covers all it needs (the base
# install is `run` and `broker`; `report` and `engine` need nothing more either)
SUBCOMMAND_EXTRAS = {
    "coverage": "traces",
    "capture": "traces",
    "trace": "traces",
    "fuzz": "fuzz",
    "triage": "spark",
    "bench": "bench",
}


def missing_extra_line(command: str, package: str) -> str:
    """What a subcommand says when `package` is not installed: the extra to install."""
    extra = SUBCOMMAND_EXTRAS.get(command) or EXTRAS.get(package, "all")
    return (
        f"amqpspec {command}: needs {package}, which is not installed: "
        f"pip install 'amqpspec[{extra}]'"
    )


def _missing_package(exc: ModuleNotFoundError) -> str | None:
    """The third-party package an ImportError names when it belongs to an extra, else None."""
    top = (exc.name or "").split(".")[0]
    return top if top in EXTRAS else None


class MissingExtra:
    """A subcommand whose module needs a package this install lacks: it says which and how
    to install it, and exits 2 (also for --help and for any arguments)."""

    def __init__(self, package: str) -> None:
        self.package = package

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        message = missing_extra_line(parser.prog.split()[-1], self.package)

        class _Help(argparse.Action):
            def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None):
                print(message, file=sys.stderr)
                parser.exit(2)

        parser.add_argument("-h", "--help", nargs=0, action=_Help, help=argparse.SUPPRESS)
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def run(self, args: argparse.Namespace) -> int:
        print(missing_extra_line(args._name, self.package), file=sys.stderr)
        return 2


def _load(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top and top != "amqpspec":
            return MissingExtra(top)
        raise


def version_line() -> str:
    """amqpspec's version and which amqp10 path runs (compiled or pure: docs/speedups.md)."""
    from amqpspec import __version__
    from amqpspec.amqp10.speedups import describe

    return f"amqpspec {__version__}; amqp10 {describe()}"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only` (a subcommand), only that subcommand's module is
    imported (the others are listed by name and help: `amqpspec run` does not pay for
    importing the fuzzer, PySpark's triage or the benchmarks)."""
    parser = argparse.ArgumentParser(
        prog="amqpspec", description="AMQP 1.0 conformance and fuzz test suite"
    )
    parser.add_argument("--version", action="store_true", help="version and amqp10's build")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text, description=help_text)
            continue
        module = _load(module_name)
        missing = isinstance(module, MissingExtra)
        if missing:
            help_text += f" (pip install 'amqpspec[{SUBCOMMAND_EXTRAS.get(name, 'all')}]')"
        sub_parser = sub.add_parser(
            name, help=help_text, description=help_text, add_help=not missing
        )
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_module=module, _name=name)
    return parser


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names (its first word, when it is one), else None."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in SUBCOMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        print(version_line())  # without importing every subcommand
        return 0
    parser = build_parser(_chosen(sys.argv[1:] if argv is None else argv))
    args, unknown = parser.parse_known_args(argv)
    if isinstance(getattr(args, "_module", None), MissingExtra):
        return args._module.run(args)  # whatever the arguments: the extra to install
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.version:
        print(version_line())
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args._module.run(args) or 0)
    except Exception as exc:  # a bug or a broken run: no verdict, and never exit 1
        package = _missing_package(exc) if isinstance(exc, ModuleNotFoundError) else None
        if package is not None:  # an extra's package imported on the way (lazily)
            print(missing_extra_line(args._name, package), file=sys.stderr)
            return 2
        from amqpspec.exit_status import JOB_FAILED, internal_error_line

        traceback.print_exc()
        print(internal_error_line(args._name, exc), file=sys.stderr)
        return JOB_FAILED


if __name__ == "__main__":
    sys.exit(main())
