"""The command line every bench module that splits its options (`add_arguments`) from its run
(`run`) shares: `amqpspec bench NAME` and `python -m amqpspec.bench.NAME` parse the same way.

Owns: nothing but the parse; the module's own `run` does the work.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def script_main(
    doc: str | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
    argv: list[str] | None = None,
) -> int:
    """What a bench module's `main` does: its docstring's first line as the description,
    its `add_arguments` for the options, its `run` on what was parsed."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
