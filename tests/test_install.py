"""What a user gets from `pip install amqpspec`: a wheel built from this checkout, installed
without extras in a clean virtualenv, used from a folder outside the checkout.

Owns the install's promises (pyproject.toml, setup.py, amqpspec/cli.py): one top-level package,
`amqpspec`, carrying its data files; `amqpspec broker` and `amqpspec run` work from any folder
with the base install and print no warning; amqp10 runs compiled where a C compiler and the
Python headers exist (docs/speedups.md); a subcommand whose extra is missing says which
`pip install 'amqpspec[...]'` to run and exits 2; and the install changes nothing for another
pytest project in the same environment (no plugin, no `--amqp-` option). Each step's failure
says which step broke and shows its output. Also: the sdist carries what building and testing
need (MANIFEST.in).

Slow (a wheel build compiles amqp10's fast path; the first install downloads the
dependencies into pip's cache); still part of CI.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

REPO = Path(__file__).resolve().parent.parent
# the repository's top-level folders, installed only as amqpspec.<folder> (setup.py's map)
PARTS = ("amqp10", "reference_broker", "conformance", "fuzz", "traces", "spark_triage", "bench")
# data files the wheel must carry (pyproject's package-data): run, broker, coverage, fuzz read them
DATA = (
    "conformance/suite.ini",
    "conformance/aliases.toml",
    "conformance/anchor_parity.toml",
    "conformance/profiles/reference.toml",
    "conformance/profiles/rabbitmq3.toml",
    "conformance/expectations/reference.toml",
    "conformance/spec/amqp-1.0/transport.xml",
    "conformance/manifest/sentences.toml",
    "conformance/manifest/links.toml",
    "amqp10/frames.pxd",  # amqp10.speedups hashes it with frames.py
    "bench/arrows/arrow.c",
    "bench/README.md",
    "fuzz/crashers/README.md",
)
# cases of `amqpspec run` from several spec sections (header, open, message, alarms via admin)
CASES = (
    "header-wrong-minor or open-every-field or message-header-ttl-kept "
    "or alarm-publishers-blocked-then-reopened"
)
READY = re.compile(r"ready on 127\.0\.0\.1:(?P<port>\d+) \(admin 127\.0\.0\.1:(?P<admin>\d+)\)")
WARNING = re.compile(r"warning", re.IGNORECASE)
NO_COMPILER = "apt-get install gcc python3-dev, then pip install the wheel again"


@dataclass
class Install:
    wheel: Path
    build_log: str  # setup.py's "amqpspec: ..." lines of the wheel build
    venv: Path
    python: Path
    site: Path  # the venv's site-packages
    work: Path  # a folder outside the checkout, where the commands run
    env: dict[str, str]

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def run(
        self, what: str, argv: list[str], *, timeout: float, ok=(0,)
    ) -> subprocess.CompletedProcess[str]:
        """`step` in the work folder with the install's environment."""
        return step(what, argv, cwd=self.work, env=self.env, timeout=timeout, ok=ok)


def _clean_env() -> dict[str, str]:
    """This environment without what would point a process at the checkout or change pytest."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "AMQP10_PURE", "PYTHONSTARTUP")
    return {
        key: value
        for key, value in os.environ.items()
        if key not in drop and not key.startswith("PYTEST_")
    }


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def step(
    what: str, argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float, ok=(0,)
) -> subprocess.CompletedProcess[str]:
    """Run one step; fail the test with the step's name, command and output when it breaks."""
    command = " ".join(argv)
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        pytest.fail(f"{what}: no exit within {timeout:.0f} s\n$ {command}\n{_tail(out)}")
    if done.returncode not in ok:
        pytest.fail(
            f"{what}: exit {done.returncode}\n$ {command} (in {cwd})\n"
            f"--- stdout\n{_tail(done.stdout)}\n--- stderr\n{_tail(done.stderr)}"
        )
    return done


def warning_lines(*texts: str) -> list[str]:
    return [line for text in texts for line in text.splitlines() if WARNING.search(line)]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Install:
    root = tmp_path_factory.mktemp("install")
    env = _clean_env()
    wheels = root / "wheels"
    built = step(
        "building the wheel from the checkout",
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(wheels), str(REPO)],
        cwd=root,
        env=env,
        timeout=1800,
    )
    found = sorted(wheels.glob("amqpspec-*.whl"))
    assert len(found) == 1, f"pip wheel made {[p.name for p in wheels.iterdir()]}, not one wheel"
    build_log = "\n".join(line.strip() for line in built.stderr.splitlines() if "amqpspec:" in line)

    venv = root / "venv"
    step(
        "creating a clean virtualenv (python3 -m venv; Debian's python3: apt-get install "
        "python3-venv)",
        [sys.executable, "-m", "venv", str(venv)],
        cwd=root,
        env=env,
        timeout=300,
    )
    python = venv / "bin" / "python"
    venv_env = {**env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"}
    step(
        "pip install of the wheel (base install, no extras) in the virtualenv",
        [str(python), "-m", "pip", "install", "-q", str(found[0])],
        cwd=root,
        env=venv_env,
        timeout=1500,
    )
    site = step(
        "asking the virtualenv for its site-packages",
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        cwd=root,
        env=venv_env,
        timeout=60,
    ).stdout.strip()
    work = root / "elsewhere"
    work.mkdir()
    return Install(found[0], build_log, venv, python, Path(site), work, venv_env)


def test_one_top_level_package_with_its_data(installed: Install) -> None:
    site = installed.site
    strays = [name for name in (*PARTS, "tests", "scripts", "tools") if (site / name).exists()]
    assert not strays, f"the wheel installed top-level packages besides amqpspec: {strays}"
    listed = installed.run(
        "listing the installed distribution's files",
        [
            str(installed.python),
            "-c",
            "import importlib.metadata as m, json; d = m.distribution('amqpspec'); "
            "print(json.dumps(sorted({str(f).split('/')[0] for f in d.files}))); "
            "print((d.read_text('top_level.txt') or '').strip())",
        ],
        timeout=60,
    ).stdout.splitlines()
    tops = json.loads(listed[0])
    assert [t for t in tops if t != ".." and not t.endswith(".dist-info")] == ["amqpspec"], (
        f"the wheel's top-level entries: {tops}"
    )
    assert listed[1:] == ["amqpspec"], f"top_level.txt says {listed[1:]}"
    package = site / "amqpspec"
    missing = [path for path in DATA if not (package / path).is_file()]
    assert not missing, f"package data missing from the wheel: {missing} (pyproject.toml)"
    corpus = list((package / "fuzz" / "corpus").rglob("*"))
    assert any(p.is_file() for p in corpus), "fuzz/corpus missing from the wheel"
    # every module of the checkout's parts, subpackages too (a folder without __init__.py
    # would be left out of the wheel: setup.py finds packages by their __init__.py)
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", *(f"{part}/*.py" for part in PARTS)],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    absent = [module for module in tracked if not (package / module).is_file()]
    assert not absent, f"modules missing from the wheel: {absent[:10]}"


def test_broker_and_run_from_another_folder(installed: Install) -> None:
    """`amqpspec broker` and `amqpspec run` as a user runs them: exit 0, no warning printed."""
    log_path = installed.work / "broker.log"
    with log_path.open("w") as log:
        broker = subprocess.Popen(
            [
                installed.bin("amqpspec"),
                "broker",
                "--port",
                "0",
                "--admin-port",
                "0",
                "--log-level",
                "info",
            ],
            cwd=installed.work,
            env={**installed.env, "PYTHONUNBUFFERED": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        ready = None
        while ready is None and time.monotonic() < deadline and broker.poll() is None:
            ready = READY.search(log_path.read_text())
            time.sleep(0.1)
        assert ready is not None, (
            f"amqpspec broker did not say ready within 30 s (exit {broker.poll()}):\n"
            f"{_tail(log_path.read_text())}"
        )
        run = installed.run(
            "amqpspec run against amqpspec broker, from a folder outside the checkout",
            [
                installed.bin("amqpspec"),
                "run",
                "--broker",
                f"amqp://127.0.0.1:{ready['port']}",
                "--profile",
                "reference",
                "--admin",
                f"http://guest:guest@127.0.0.1:{ready['admin']}",
                "-k",
                CASES,
            ],
            timeout=300,
        )
    finally:
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait(timeout=15)
    passed = re.search(r"\b(\d+) passed", run.stdout)
    assert passed and int(passed[1]) >= 4 and " failed" not in run.stdout, _tail(run.stdout)
    warned = warning_lines(run.stdout, run.stderr)
    assert not warned, "amqpspec run printed warnings:\n" + "\n".join(warned)
    results = installed.work / "reports" / "_conformance" / "index.json"
    assert results.is_file(), f"no results in the user's folder ({results})"


def _compiler() -> bool:
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return headers.is_file() and any(shutil.which(cc) for cc in ("gcc", "cc"))


def test_amqp10_compiled_where_a_compiler_exists(installed: Install) -> None:
    if not _compiler():
        pytest.skip(f"no C compiler or no Python headers: {NO_COMPILER}")
    mode = installed.run(
        "importing amqpspec.amqp10 in the virtualenv",
        [
            str(installed.python),
            "-c",
            "import amqpspec.amqp10 as a; print(a.implementation()['mode'])",
        ],
        timeout=60,
    )
    assert mode.stdout.strip() == "compiled", (
        f"amqp10 runs {mode.stdout.strip()!r} although a compiler and Python.h exist; the "
        f"build said: {installed.build_log or '(nothing)'}; {mode.stderr.strip()}"
    )
    version = installed.run(
        "amqpspec --version",
        [installed.bin("amqpspec"), "--version"],
        timeout=60,
    )
    assert "amqp10 compiled" in version.stdout, version.stdout


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["triage", "--help"], "spark"),
        (["fuzz"], "fuzz"),
        (["trace", "--help"], "traces"),
        (["coverage", "reports"], "traces"),
    ],
)
def test_a_missing_extra_names_its_install(installed: Install, argv: list[str], extra: str):
    lacking = installed.run(
        "looking for the extras' packages in the base install",
        [
            str(installed.python),
            "-c",
            "import importlib.util as u; "
            "print([m for m in ('pyarrow', 'scapy', 'pyspark') if u.find_spec(m)])",
        ],
        timeout=60,
    ).stdout.strip()
    assert lacking == "[]", f"the base install has extras' packages: {lacking}"
    done = installed.run(
        f"amqpspec {' '.join(argv)} without its extra",
        [installed.bin("amqpspec"), *argv],
        timeout=60,
        ok=(0, 1, 2),
    )
    line = f"pip install 'amqpspec[{extra}]'"
    assert done.returncode == 2 and line in done.stderr, (
        f"amqpspec {' '.join(argv)}: exit {done.returncode}, expected 2 and {line!r}:\n"
        f"{_tail(done.stdout, 5)}\n{_tail(done.stderr, 10)}"
    )
    assert "Traceback" not in done.stderr, done.stderr


def test_another_pytest_project_is_unaffected(installed: Install) -> None:
    """Last: it adds a pytest plugin to the virtualenv. amqpspec registers no pytest plugin,
    so a project beside it sees neither its options nor its plugin."""
    installed.run(
        "pip install pytest-profiling in the virtualenv",
        [str(installed.python), "-m", "pip", "install", "-q", "pytest-profiling"],
        timeout=600,
    )
    project = installed.work.parent / "tiny-project"
    project.mkdir()
    (project / "test_tiny.py").write_text("def test_adds():\n    assert 1 + 1 == 2\n")
    pytest_argv = [str(installed.python), "-m", "pytest", "-p", "no:cacheprovider"]

    def pytest_there(what: str, *options: str) -> subprocess.CompletedProcess[str]:
        """The virtualenv's pytest in the unrelated project."""
        return step(what, [*pytest_argv, *options], cwd=project, env=installed.env, timeout=120)

    tiny = pytest_there("pytest in an unrelated project beside the install", "-q")
    assert re.search(r"\b1 passed\b", tiny.stdout), _tail(tiny.stdout)
    warned = warning_lines(tiny.stdout, tiny.stderr)
    assert not warned, "the unrelated project's pytest printed warnings:\n" + "\n".join(warned)
    traced = pytest_there(
        "pytest --trace-config there (the plugins it loads)", "-q", "--trace-config"
    )
    loaded = [line for line in traced.stdout.splitlines() if "amqpspec" in line]
    assert not loaded, "amqpspec loaded into another project's pytest:\n" + "\n".join(loaded)
    assert "pytest_profiling" in traced.stdout, "pytest-profiling did not load (the check is void)"
    helped = pytest_there("pytest --help there", "--help")
    assert "--amqp-" not in helped.stdout, "amqpspec's --amqp- options in another project"
    assert "--profile" in helped.stdout, "pytest-profiling's options are missing from --help"
    plugins = pytest_there("pytest -VV there", "--version", "--version")
    listing = plugins.stdout + plugins.stderr
    assert "amqpspec" not in listing, f"amqpspec among pytest's plugins:\n{listing}"


SDIST_NEEDS = (
    "setup.py",
    "pyproject.toml",
    "MANIFEST.in",
    "README.md",
    "scripts/build_speedups.py",  # setup.py loads it
    "amqp10/frames.pxd",
    "amqp10/spec_table.py",
    "tools/gen_spec_table.py",
    "conformance/suite.ini",
    "conformance/spec/amqp-1.0/transport.xml",
    "conformance/manifest/links.toml",
    "tests/conftest.py",
    "tests/data/captures/README.md",
    "tests/broker_support/__init__.py",
    "tools/brokers/rabbitmq.sh",
)


@pytest.mark.skipif(
    importlib.util.find_spec("build") is None,
    reason="python3 -m build missing: pip install build (the test extra: pip install -e '.[test]')",
)
def test_sdist_carries_what_building_and_testing_need(tmp_path: Path) -> None:
    step(
        "building the sdist (python3 -m build --sdist)",
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(REPO)],
        cwd=tmp_path,
        env=_clean_env(),
        timeout=600,
    )
    (sdist,) = tmp_path.glob("amqpspec-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    missing = [path for path in SDIST_NEEDS if path not in names]
    assert not missing, f"the sdist lacks {missing} (MANIFEST.in)"
    assert any(name.startswith("tests/data/captures/") and name.endswith(".gz") for name in names)
    built = sorted(
        name
        for name in names
        if name.endswith((".so", ".pyc", "_speedups.json")) or re.match(r"amqp10/.*\.c$", name)
    )
    assert not built, f"the sdist carries build products: {built[:10]}"
