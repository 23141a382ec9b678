"""amqpspec: AMQP 1.0 conformance and fuzz test suite.

The installed package holds every part under one name: `amqpspec.amqp10`,
`amqpspec.reference_broker`, `amqpspec.conformance`, `amqpspec.fuzz`, `amqpspec.traces`,
`amqpspec.spark_triage`, `amqpspec.bench` (setup.py maps them from the repository's top-level
folders). In a source checkout this package's path also covers the checkout's root, so that
`amqpspec.<part>` is that checkout's `<part>/` folder whether or not it is installed, and never
another checkout's (docs/architecture.md, "Layout").
"""

from pathlib import Path as _Path

__version__ = "0.1.0"


def _checkout_root() -> _Path | None:
    """The repository root when this package runs from a checkout (not a wheel), else None."""
    here = _Path(__file__).resolve().parent
    root = here.parent
    if (here / "amqp10").is_dir() or not (root / "pyproject.toml").is_file():
        return None
    return root if (root / "amqp10" / "__init__.py").is_file() else None


_root = _checkout_root()
if _root is not None and str(_root) not in __path__:
    __path__.append(str(_root))
del _root
