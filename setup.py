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
    """Compile amqp10's fast path when possible; otherwise one line and a pure-Python install.

    The extensions are named at setup time without sources (egg_info and an sdist ask
    build_ext for its sources; Cython's C in a scratch folder is none); run() gives them the C
    that Cython generates and builds them.
    """

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # the modules compile independently (-j overrides)
            self.parallel = min(os.cpu_count() or 1, len(self.extensions)) or None

    def run(self) -> None:
        if not self.extensions:  # AMQPSPEC_PURE_BUILD=1
            return
        self._manifest_path().unlink(missing_ok=True)  # an earlier build's, until this one's
        try:
            with tempfile.TemporaryDirectory(prefix="amqpspec-speedups-") as scratch:
                named = {ext.name: ext for ext in self.extensions}
                for generated in self._cythonized(Path(scratch)):
                    named[generated.name].sources = generated.sources
                super().run()
            self._write_manifest()
            print("amqpspec: compiled amqp10's fast path", file=sys.stderr)
        except Exception as exc:
            self._pure(exc)

    def get_outputs(self) -> list[str]:
        return [path for path in super().get_outputs() if Path(path).exists()]

    def _pure(self, exc: BaseException) -> None:
        """No extension at all (not half a build, not an earlier build's), and one line."""
        for path in self.get_outputs():
            Path(path).unlink(missing_ok=True)
        if self._in_place():  # the extensions beside the sources, as build_speedups --clean
            _build_speedups_module().clean()
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if len(reason) > 200:  # a compiler's command line: its start and how it ended
            reason = f"{reason[:80]} ... {reason[-110:]}"
        print(
            f"amqpspec: no compiled fast path ({reason}); amqp10 runs pure Python", file=sys.stderr
        )
        self.extensions = []

    def _cythonized(self, scratch: Path) -> list[Extension]:
        tool = _build_speedups_module()
        from Cython.Build import cythonize

        generated = scratch / "_generated.pyx"
        generated.write_text(tool.generated_pyx())
        tree = tool.package_tree(scratch)  # each module's .pxd applies (build_speedups.py)
        sources = [
            Extension(f"amqpspec.amqp10.{name}", [str(tree / f"{name}.py")])
            for name in tool.MODULES
        ]
        sources.append(Extension("amqpspec.amqp10._generated", [str(generated)]))
        self._manifest = tool.manifest()
        return cythonize(
            sources, compiler_directives=tool.DIRECTIVES, build_dir=str(scratch), quiet=True
        )

    def _in_place(self) -> bool:
        return bool(self.inplace or getattr(self, "editable_mode", False))

    def _manifest_path(self) -> Path:
        """Beside the built extensions: the wheel's package, or the sources when in place."""
        if self._in_place():
            return ROOT / "amqp10" / "_speedups.json"
        return Path(self.build_lib) / "amqpspec" / "amqp10" / "_speedups.json"

    def _write_manifest(self) -> None:
        self._manifest_path().write_text(json.dumps(self._manifest, indent=1) + "\n")


packages, package_dir = _packages()
# the compiled modules, named here for setuptools (OptionalSpeedups.run gives them their C);
# the largest C first (_generated, composites), so that a parallel build ends sooner; -g0: no
# debug information (about a quarter less compile time, the same code).
extensions = [
    Extension(f"amqpspec.amqp10.{name}", sources=[], extra_compile_args=["-g0"])
    for name in ("_generated", *sorted(_build_speedups_module().MODULES, key="composites".__ne__))
]
setup(
    packages=packages,
    package_dir=package_dir,
    # AMQPSPEC_PURE_BUILD=1: build no extension (a pure-Python wheel)
    ext_modules=[] if os.environ.get("AMQPSPEC_PURE_BUILD") else extensions,
    cmdclass={"build_ext": OptionalSpeedups},
)
