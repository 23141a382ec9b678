"""Packaging: one installed namespace, `amqpspec`, built from the repository's top-level folders.

Owns: the package map (`amqpspec.amqp10` <- `amqp10/`, `amqpspec.conformance` <- `conformance/`,
...: the folders stay where they are, the installed names live under one package, as h11, h2
and aioquic each install one) and the optional compiled fast path of amqp10. Where Cython and a
C compiler are there, the build compiles scripts/build_speedups.py's MODULES into the wheel (or,
for `pip install -e`, beside their sources) with the manifest amqp10.speedups checks; where
they are not, the package installs pure Python and the build says so in one line
(docs/speedups.md). Metadata and dependencies are in pyproject.toml.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# installed name -> repository folder
FOLDERS = {
    "amqpspec": "amqpspec",
    "amqpspec.amqp10": "amqp10",
    "amqpspec.reference_broker": "reference_broker",
    "amqpspec.conformance": "conformance",
    "amqpspec.fuzz": "fuzz",
    "amqpspec.traces": "traces",
    "amqpspec.spark_triage": "spark_triage",
    "amqpspec.bench": "bench",
}


def _packages() -> tuple[list[str], dict[str, str]]:
    packages, package_dir = [], {}
    for name, folder in FOLDERS.items():
        package_dir[name] = folder
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            parts = init.parent.relative_to(ROOT / folder).parts
            packages.append(".".join((name, *parts)))
    return packages, package_dir


def _build_speedups_module():
    spec = importlib.util.spec_from_file_location(
        "_amqpspec_build_speedups", ROOT / "scripts" / "build_speedups.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class OptionalSpeedups(build_ext):
    """Compile amqp10's fast path when possible; otherwise one line and a pure-Python install."""

    def finalize_options(self) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="amqpspec-speedups-")
        try:
            self.distribution.ext_modules = self._cythonized(Path(self._scratch.name))
        except Exception as exc:
            self._pure(exc)
        self.extensions = self.distribution.ext_modules
        super().finalize_options()

    def run(self) -> None:
        try:
            if self.extensions:
                super().run()
                self._write_manifest()
                print("amqpspec: compiled amqp10's fast path", file=sys.stderr)
        except Exception as exc:
            self._pure(exc)
        finally:
            self._scratch.cleanup()

    def get_outputs(self) -> list[str]:
        return [path for path in super().get_outputs() if Path(path).exists()]

    def _pure(self, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        print(f"amqpspec: no compiled fast path ({reason}); amqp10 runs pure Python",
              file=sys.stderr)
        self.distribution.ext_modules = self.extensions = []

    def _cythonized(self, scratch: Path) -> list[Extension]:
        tool = _build_speedups_module()
        from Cython.Build import cythonize

        generated = scratch / "_generated.pyx"
        generated.write_text(tool.generated_pyx())
        sources = [
            Extension(f"amqpspec.amqp10.{name}", [str(ROOT / "amqp10" / f"{name}.py")])
            for name in tool.MODULES
        ]
        sources.append(Extension("amqpspec.amqp10._generated", [str(generated)]))
        self._manifest = tool.manifest()
        return cythonize(
            sources, compiler_directives=tool.DIRECTIVES, build_dir=str(scratch), quiet=True
        )

    def _write_manifest(self) -> None:
        """Beside the built extensions: the wheel's package, or the sources when in place."""
        in_place = self.inplace or getattr(self, "editable_mode", False)
        target = ROOT / "amqp10" if in_place else Path(self.build_lib) / "amqpspec" / "amqp10"
        (target / "_speedups.json").write_text(json.dumps(self._manifest, indent=1) + "\n")


packages, package_dir = _packages()
# a placeholder that makes setuptools run build_ext; OptionalSpeedups puts the real ones in
placeholder = [Extension("amqpspec.amqp10._speedups_placeholder", sources=[])]
setup(
    packages=packages,
    package_dir=package_dir,
    # AMQPSPEC_PURE_BUILD=1: build no extension (a pure-Python wheel)
    ext_modules=[] if os.environ.get("AMQPSPEC_PURE_BUILD") else placeholder,
    cmdclass={"build_ext": OptionalSpeedups},
)
