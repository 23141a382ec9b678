"""Build the C arrows (bench/arrows/arrow.c) against libqpid-proton.

    python -m amqpspec.bench.arrows.build [--build-dir DIR]     # prints the binary's path

Owns: compiling arrow.c (gcc -O2 -lqpid-proton) into the build
directory, again only when the source changed. Needs gcc and libqpid-proton11-dev
(`tools/brokers/proton-c-broker.sh install`). Touches nothing else.
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import shutil
import subprocess
import sys
import tempfile

SOURCE = pathlib.Path(__file__).resolve().parent / "arrow.c"
DEFAULT_BUILD_DIR = pathlib.Path(tempfile.gettempdir()) / "amqpspec-arrows"
# what c_arrow_available() misses, and how to install it (Debian 12)
MISSING = (
    "gcc or libqpid-proton11-dev missing: apt-get install gcc libqpid-proton11-dev "
    "(or bash tools/brokers/proton-c-broker.sh install)"
)


def c_arrow_available() -> bool:
    header = pathlib.Path("/usr/include/proton/proactor.h")
    return shutil.which("gcc") is not None and header.exists()


def build_c_arrow(build_dir: pathlib.Path = DEFAULT_BUILD_DIR) -> pathlib.Path:
    """The compiled arrow (one binary: `arrow send|receive ...`), rebuilt when arrow.c
    changed (its hash names the binary)."""
    text = SOURCE.read_bytes()
    binary = build_dir / f"arrow-{hashlib.sha256(text).hexdigest()[:12]}"
    if binary.exists():
        return binary
    build_dir.mkdir(parents=True, exist_ok=True)
    partial = binary.with_suffix(".partial")
    subprocess.run(
        ["gcc", "-O2", "-Wall", "-o", str(partial), str(SOURCE), "-lqpid-proton", "-lpthread"],
        check=True,
        timeout=300,
    )
    partial.replace(binary)
    return binary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(DEFAULT_BUILD_DIR))
    args = parser.parse_args(argv)
    if not c_arrow_available():
        print(MISSING, file=sys.stderr)
        return 2
    print(build_c_arrow(pathlib.Path(args.build_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
