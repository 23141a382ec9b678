"""The optional compiled fast path: which amqp10 modules load compiled, which pure.

Owns: the import hook that chooses, for each module `scripts/build_speedups.py` compiled, the
Cython extension (`amqp10/<name>.cpython-*.so`, beside the .py) or the pure-Python source, and
`implementation()`, which says what was loaded. It reads only amqp10's own files (the build's
manifest `amqp10/_speedups.json` and the sources it hashes), once, at import.

Rules (docs/speedups.md):
- `AMQP10_PURE=1` loads every module from its .py even when an extension exists.
- An extension is used only when the sha256 of its sources (.py and .pxd) equals the one the
  build recorded; otherwise (a stale or unrecorded extension) the .py is loaded and one warning
  says how to rebuild. Nothing else about a module changes between the two paths.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGE = __name__.rpartition(".")[0]  # amqpspec.amqp10
MANIFEST = PACKAGE_DIR / "_speedups.json"
# how to (re)build: in a checkout the build script; an installed wheel is rebuilt by pip
REBUILD = (
    "python3 scripts/build_speedups.py"
    if (PACKAGE_DIR.parent / "scripts" / "build_speedups.py").is_file()
    else "pip install --force-reinstall --no-deps amqpspec (with gcc and the Python headers)"
)


def pure_forced() -> bool:
    """True when AMQP10_PURE asks for the pure-Python modules (any value but '', '0')."""
    return os.environ.get("AMQP10_PURE", "") not in ("", "0")


def _base(module: str, package_dir: Path) -> Path:
    """amqpspec.amqp10.engine.link -> <package_dir>/engine/link (no suffix)."""
    return package_dir.joinpath(*module.removeprefix(PACKAGE + ".").split("."))


def source_hash(module: str, package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 over a module's .py and, when present, its .pxd (what the build compiled)."""
    digest = hashlib.sha256()
    base = _base(module, package_dir)
    for suffix in (".py", ".pxd"):
        path = base.with_suffix(suffix)
        if path.exists():
            digest.update(suffix.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _extensions(package_dir: Path) -> dict[str, Path]:
    """amqpspec.amqp10.<name> -> its extension file, for every extension beside a .py."""
    found: dict[str, Path] = {}
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for path in package_dir.rglob("*" + suffix):
            name = path.name[: -len(suffix)]
            if (path.parent / f"{name}.py").exists():
                parts = path.parent.relative_to(package_dir).parts
                found.setdefault(".".join((PACKAGE, *parts, name)), path)
    return found


class _Finder:
    """A meta-path finder for amqp10's compiled modules: the extension when it is fresh and
    not AMQP10_PURE, else the .py. Modules without an extension are left to the usual path."""

    def __init__(self, package_dir: Path) -> None:
        self.package_dir = package_dir
        self.extensions = _extensions(package_dir)
        try:
            self.recorded: dict[str, str] = json.loads(MANIFEST.read_text())["modules"]
        except (OSError, ValueError, KeyError, TypeError):
            self.recorded = {}
        self.stale: list[str] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        extension = self.extensions.get(fullname)
        if extension is None:
            return None
        source = _base(fullname, self.package_dir).with_suffix(".py")
        if not pure_forced():
            if self.recorded.get(fullname) == source_hash(fullname, self.package_dir):
                loader = importlib.machinery.ExtensionFileLoader(fullname, str(extension))
                return importlib.util.spec_from_file_location(fullname, extension, loader=loader)
            self.stale.append(fullname)
            why = "has changed since" if fullname in self.recorded else "has no record of"
            warnings.warn(
                f"{extension.name} is stale ({source.name} {why} the build): "
                f"loading the pure-Python {fullname}; rebuild with `{REBUILD}`",
                RuntimeWarning,
                stacklevel=2,
            )
        loader = importlib.machinery.SourceFileLoader(fullname, str(source))
        return importlib.util.spec_from_file_location(fullname, source, loader=loader)


_FINDER = _Finder(PACKAGE_DIR)
if _FINDER.extensions and not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _FINDER)


def implementation() -> dict[str, Any]:
    """What this process runs: {"mode": "compiled" | "partial" | "pure", "compiled": [...],
    "pure": [...], "stale": [...], "forced_pure": bool}, over the modules a build compiled."""
    compiled, pure = [], []
    for name in sorted(set(_FINDER.extensions) | set(_FINDER.recorded)):
        file = getattr(importlib.import_module(name), "__file__", "") or ""
        (pure if file.endswith(".py") else compiled).append(name.removeprefix(PACKAGE + "."))
    mode = "compiled" if compiled and not pure else "partial" if compiled else "pure"
    return {
        "mode": mode,
        "compiled": compiled,
        "pure": pure,
        "stale": sorted({n.removeprefix(PACKAGE + ".") for n in _FINDER.stale}),
        "forced_pure": pure_forced(),
    }


def describe() -> str:
    """One line for `amqpspec --version` and bench reports."""
    info = implementation()
    if info["mode"] == "pure":
        why = "AMQP10_PURE=1" if info["forced_pure"] else f"not built: {REBUILD}"
        if info["stale"]:
            why = f"stale: {REBUILD}"
        return f"pure ({why})"
    line = f"{info['mode']} ({', '.join(info['compiled'])})"
    if info["pure"]:
        line += f"; pure: {', '.join(info['pure'])}"
    return line
