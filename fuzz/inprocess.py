"""In-process fuzzing: the codec, the engine and the reference broker's logic, no sockets.

    amqpspec fuzz codec|engine|broker --duration S [--seed N] [--corpus DIR]

Owns: `TARGETS` and `run_inprocess(target, duration, seed, corpus)`, the per-target
oracles (`codec_one`, `engine_one`, `broker_one`: None when the input was handled as the
contract says, else a one-line description of the crash), the crashers
(`fuzz/crashers/<target>-<hash>.json`, a reproducer of steps, written as soon as found,
minimised with ddmin) and `crashers()` for the regression test that replays every one.

Contracts judged:
- codec: any bytes through `codec.decode_value` and `frames.FrameDecoder` raise nothing
  but `DecodeError` (docs/architecture.md, "The core": strict, total decoding). Coverage-guided
  with atheris when it is installed (libFuzzer mutation of the corpus in fuzz/corpus/codec,
  in a child process, crash inputs to fuzz/crashers/), else the mutators of fuzz.mutators
  over the engine's legal conversations.
- engine: a server `amqp10.engine.Connection` fed a mutated client conversation step by
  step never raises: peer misbehaviour becomes a ProtocolErrorRaised and a close.
- broker: the same steps through `reference_broker.runtime.memory.MemoryBroker` end with no
  internal error of the broker (`MemoryBroker.failures`) and nothing raised.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from amqpspec.amqp10 import codec, malformed
from amqpspec.amqp10.engine import Connection, ServerSasl
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import FrameDecoder
from amqpspec.fuzz.case import Case, Step, case_from_json, step
from amqpspec.fuzz.model import FUZZ_QUEUE, QUEUE_HANDSHAKE, Handshake, answer
from amqpspec.fuzz.mutators import STRATEGIES, mutate_case
from amqpspec.fuzz.seeds import load_corpus, scenario
from amqpspec.traces.minimize import ddmin

FUZZ_DIR = Path(__file__).resolve().parent
CORPUS_DIR = FUZZ_DIR / "corpus"
CRASHERS_DIR = FUZZ_DIR / "crashers"


# ----------------------------------------------------------------- the oracles


def _crash(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}{where}: {exc}"


def codec_one(data: bytes) -> str | None:
    """Decode `data` as one value and as a frame stream: only DecodeError may come out."""
    try:
        try:
            codec.decode_value(data, 0, len(data))
        except DecodeError:
            pass
        decoder = FrameDecoder(expect_header=data[:4] == b"AMQP")
        decoder.feed(data)
        for _ in range(10_000):
            try:
                if decoder.next_item() is None:
                    break
            except DecodeError:
                break
    except Exception as exc:  # the contract: nothing but DecodeError
        return _crash(exc)
    return None


def engine_one(steps: list[Step]) -> str | None:
    """Feed the steps to a server engine one by one: it must never raise."""
    sasl = ServerSasl(("PLAIN", "ANONYMOUS"), verify_plain=lambda *_: True)
    server = Connection(
        "server", "fuzz", sasl=sasl if steps and malformed.starts_sasl(steps[0].data) else None
    )
    now = 0.0
    try:
        for s in steps:
            now += 0.001
            server.receive_data(s.data, now)
            for event in server.events():
                answer(server, event)  # the application's UsageError is not a crash
            server.data_to_send(now)
        server.receive_data(b"", now)
        server.events()
    except Exception as exc:
        return _crash(exc)
    return None


def broker_one(steps: list[Step]) -> str | None:
    """The steps through the in-memory reference broker: no internal error, no raise."""
    from amqpspec.reference_broker.runtime.memory import MemoryBroker

    try:
        with MemoryBroker(housekeeping=False) as broker:
            broker.vhost.declare_queue(FUZZ_QUEUE, durable=False)
            connection = broker.connect(raw=True)
            for s in steps:
                connection.send(s.data)
                broker.pump()
            broker.advance(1.0)
            if broker.failures:
                return _crash(broker.failures[0])
    except Exception as exc:
        return _crash(exc)
    return None


@dataclass(frozen=True, slots=True)
class InProcessTarget:
    name: str
    judge: Callable[[list[Step]], str | None]
    handshake: Handshake


def _codec_steps(steps: list[Step]) -> str | None:
    return codec_one(b"".join(s.data for s in steps))


TARGETS: dict[str, InProcessTarget] = {
    "codec": InProcessTarget("codec", _codec_steps, Handshake(sasl="none")),
    "engine": InProcessTarget("engine", engine_one, Handshake()),
    "broker": InProcessTarget("broker", broker_one, QUEUE_HANDSHAKE),
}


# ----------------------------------------------------------------- crashers


def crasher_path(target: str, steps: list[Step], directory: Path = CRASHERS_DIR) -> Path:
    digest = hashlib.sha1(b"".join(s.data for s in steps)).hexdigest()[:12]
    return directory / f"{target}-{digest}.json"


def save_crasher(target: str, case: Case, crash: str, directory: Path = CRASHERS_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = crasher_path(target, case.steps, directory)
    record = case.to_json(target=target, crash=crash)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def crashers(directory: Path = CRASHERS_DIR) -> list[tuple[str, Path, Case]]:
    """Every kept crasher: (target, path, case)."""
    found = []
    for path in sorted(directory.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        found.append((str(record["target"]), path, case_from_json(record)))
    return found


# ----------------------------------------------------------------- the loop


@dataclass(slots=True)
class InProcessResult:
    target: str
    executions: int = 0
    seconds: float = 0.0
    engine: str = "mutators"
    crashers: list[str] = field(default_factory=list)

    def line(self) -> str:
        rate = self.executions / max(self.seconds, 1e-9)
        found = ", ".join(self.crashers) if self.crashers else "no crasher"
        return (
            f"amqpspec fuzz {self.target} ({self.engine}): {self.executions} executions in "
            f"{self.seconds:.1f} s ({rate:.0f}/s); {found}"
        )


def run_inprocess(
    target: InProcessTarget,
    duration: float,
    seed: int = 0,
    corpus: str | None = None,
    crashers_dir: Path = CRASHERS_DIR,
) -> InProcessResult:
    if target.name == "codec" and _atheris_available() and crashers_dir == CRASHERS_DIR:
        return _run_atheris(duration, seed, corpus)
    result = InProcessResult(target.name)
    seeds = load_corpus(corpus) if corpus else []
    start = time.monotonic()
    seen: set[str] = set()
    index = 0
    while time.monotonic() - start < duration:
        rng = random.Random(f"{seed}:{index}")
        index += 1
        if seeds and rng.random() < 0.3:
            base = rng.choice(seeds)
        else:
            base = scenario(target.handshake, rng)[1]
        steps = mutate_case(list(base), rng.choice(STRATEGIES), rng)
        crash = target.judge(steps)
        result.executions += 1
        if crash is None or crash.split(":", 1)[0] in seen:
            continue
        seen.add(crash.split(":", 1)[0])

        def same(candidate: list[Step], kind: str = crash.split(":", 1)[0]) -> bool:
            found = target.judge(candidate)
            return found is not None and found.split(":", 1)[0] == kind

        small = ddmin(steps, same, max_tests=500).items
        case = Case(small, "inprocess", f"{seed}:{index - 1}")
        path = save_crasher(target.name, case, crash, crashers_dir)
        result.crashers.append(f"{crash} -> {path}")
    result.seconds = time.monotonic() - start
    return result


# ----------------------------------------------------------------- atheris (codec)


def _atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def _run_atheris(duration: float, seed: int, corpus: str | None) -> InProcessResult:
    """libFuzzer through atheris in a child process (it owns the process until done)."""
    work = CORPUS_DIR / "codec"
    if not work.exists() or not any(work.iterdir()):
        seed_codec_corpus(work)
    CRASHERS_DIR.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "amqpspec.fuzz.atheris_codec",
        f"-max_total_time={max(1, int(duration))}",
        f"-seed={seed + 1}",
        f"-artifact_prefix={CRASHERS_DIR}/codec-raw-",
        "-print_final_stats=1",
        str(work),
    ]
    if corpus:
        argv.append(corpus)
    start = time.monotonic()
    env = dict(os.environ, PYTHONPATH=str(FUZZ_DIR.parent))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=duration + 120)
    result = InProcessResult("codec", engine="atheris")
    result.seconds = time.monotonic() - start
    for line in done.stderr.splitlines():
        if line.startswith("stat::number_of_executed_units:"):
            result.executions = int(line.split(":")[-1])
    for raw in sorted(CRASHERS_DIR.glob("codec-raw-*")):
        data = raw.read_bytes()
        raw.unlink()
        crash = codec_one(data)
        if crash is not None:
            path = save_crasher("codec", Case([step(data, "raw")], "atheris", str(seed)), crash)
            result.crashers.append(f"{crash} -> {path.relative_to(FUZZ_DIR.parent)}")
    return result


def seed_codec_corpus(directory: Path = CORPUS_DIR / "codec", count: int = 24) -> int:
    """Legal client streams of every scenario (and the broker's side is decoded by the
    same code) as the first codec corpus; returns how many files were added."""
    directory.mkdir(parents=True, exist_ok=True)
    added = 0
    for index in range(count):
        _, steps = scenario(Handshake(), random.Random(f"corpus:{index}"))
        data = b"".join(s.data for s in steps)
        path = directory / hashlib.sha1(data).hexdigest()
        if not path.exists():
            path.write_bytes(data)
            added += 1
    return added
