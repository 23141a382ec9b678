"""amqpspec's fuzzer against boofuzz: the same faulty reference broker, the same wall time.

    python -m amqpspec.bench.fuzz_vs_boofuzz [--budget SECONDS] [--seed N] [--workers N]
                                            [--clean SECONDS] [--out reports] [FAULT ...]

Owns: `run_boofuzz(faults, budget)` (the boofuzz session of bench/peers/boofuzz_amqp.py
against a supervised reference broker with `faults` on, until its first failure or the
budget) and writing `<out>/fuzz-vs-boofuzz.md`: per parser fault of the catalog
(reference_broker/faults.py, PARSER_LAYER), time and cases to the first finding of each
tool and what each reports. amqpspec's side is fuzz.detection's `detect` as it is; the
faulty broker is fuzz.detection's `Supervised` (restarted on the same port when it exits)
for both tools.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from importlib.metadata import version

from amqpspec.bench.peers.boofuzz_amqp import build_session
from amqpspec.fuzz.cli import QUEUE
from amqpspec.fuzz.detection import PARSER_FAULTS, Detection, Supervised, detect, target_for
from amqpspec.reference_broker.faults import CATALOG


@dataclass(slots=True)
class BoofuzzRun:
    fault: str
    seconds: float | None  # to the first failure (None: none within the budget)
    index: int | None  # boofuzz's test-case number of the first failure
    cases: int  # test cases run in all
    node: str = ""  # the message being fuzzed in the failing case
    message: str = ""  # boofuzz's failure text
    data: bytes = b""  # the fuzzed message's bytes
    restarts: int = 0


def run_boofuzz(faults: list[str], budget: float) -> BoofuzzRun:
    """One boofuzz session against a reference broker with `faults` on."""
    broker = Supervised(faults)
    workdir = tempfile.mkdtemp(prefix="amqpspec-boofuzz-")
    try:
        target_for(broker)  # declares the queue the model attaches to
        session, recorder = build_session(
            "127.0.0.1", broker.port, f"/queues/{QUEUE}", workdir, broker
        )
        timer = threading.Timer(budget, recorder.stop)
        recorder.started = time.monotonic()
        timer.start()
        try:
            session.fuzz()
        finally:
            timer.cancel()
        name = "+".join(faults) or "clean"
        return BoofuzzRun(
            name,
            recorder.seconds,
            recorder.index,
            recorder.cases,
            recorder.node,
            recorder.message,
            recorder.data,
            broker.restarts,
        )
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _found(seconds: float | None) -> str:
    return f"{seconds:.1f} s" if seconds is not None else "not found"


def _hex(data: bytes, limit: int = 48) -> str:
    text = data[:limit].hex()
    return text + (f"... ({len(data)} B)" if len(data) > limit else "")


def report(
    rows: list[tuple[Detection, BoofuzzRun]],
    clean: tuple[Detection, BoofuzzRun] | None,
    args: argparse.Namespace,
) -> str:
    lines = [
        "## Figures",
        "",
        f"Budget {args.budget:.0f} s of wall time per fault and tool, each stopped at its "
        f"first finding; amqpspec seed {args.seed}, {args.workers} worker(s); boofuzz "
        f"{version('boofuzz')} (deterministic: no seed). Machine: {os.cpu_count()} cores.",
        "",
        "| fault | amqpspec: time | amqpspec: cases | boofuzz: time | boofuzz: case # "
        "| boofuzz: fuzzed message | boofuzz: failure |",
        "|---|---|---|---|---|---|---|",
    ]
    for ours, theirs in rows:
        index = str(theirs.index) if theirs.index is not None else f"({theirs.cases} run)"
        cases = str(ours.cases) if ours.seconds is not None else f"({ours.cases} run)"
        lines.append(
            f"| `{ours.fault}` | {_found(ours.seconds)} | {cases} | {_found(theirs.seconds)} "
            f"| {index} | {theirs.node} | {theirs.message} |"
        )
    lines += ["", "amqpspec's minimised reproducers and signatures:", ""]
    for ours, _ in rows:
        if ours.seconds is not None:
            steps = ", ".join(ours.reproducer or [])
            lines.append(f"- `{ours.fault}`: {ours.kind} `{ours.signature}`: {steps}")
    lines += ["", "boofuzz's failing test cases (the fuzzed message's first bytes):", ""]
    for _, theirs in rows:
        if theirs.index is not None:
            lines.append(
                f"- `{theirs.fault}`: case #{theirs.index}, {theirs.node}: `{_hex(theirs.data)}`"
            )
    if clean is not None:
        ours, theirs = clean
        verdict = "0 findings" if ours.seconds is None else f"FINDING {ours.signature}"
        boo = (
            "0 failures"
            if theirs.index is None
            else f"FAILURE at #{theirs.index}: " + (f"{theirs.node}: {theirs.message}")
        )
        lines += [
            "",
            f"Clean reference broker ({args.clean:.0f} s each): amqpspec {ours.cases} cases, "
            f"{verdict}; boofuzz {theirs.cases} cases, {boo}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amqpspec.bench.fuzz_vs_boofuzz", description=__doc__
    )
    parser.add_argument("faults", nargs="*", help=f"default: {' '.join(PARSER_FAULTS)}")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per fault and tool")
    parser.add_argument("--seed", type=int, default=1, help="amqpspec's seed")
    parser.add_argument("--workers", type=int, default=1, help="amqpspec's workers")
    parser.add_argument("--clean", type=float, default=60.0, help="seconds on the clean broker")
    parser.add_argument("--out", default="reports", help="writes OUT/fuzz-vs-boofuzz-figures.md")
    args = parser.parse_args(argv)
    rows = []
    for fault in args.faults or PARSER_FAULTS:
        if fault not in CATALOG:
            print(f"unknown fault {fault!r}", file=sys.stderr)
            return 2
        ours = detect([fault], args.budget, args.seed, workers=args.workers)
        print(f"{fault}: amqpspec {_found(ours.seconds)}, {ours.cases} cases", flush=True)
        theirs = run_boofuzz([fault], args.budget)
        print(
            f"{fault}: boofuzz {_found(theirs.seconds)}, case #{theirs.index} "
            f"({theirs.node}: {theirs.message})",
            flush=True,
        )
        rows.append((ours, theirs))
    clean = None
    if args.clean > 0:
        clean = (
            detect([], args.clean, args.seed, workers=args.workers, stop_at_first=False),
            run_boofuzz([], args.clean),
        )
        print(
            f"clean: amqpspec {clean[0].cases} cases {clean[0].signature or 'none'}; "
            f"boofuzz {clean[1].cases} cases, {clean[1].message or 'none'}",
            flush=True,
        )
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "fuzz-vs-boofuzz-figures.md")
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        file.write(report(rows, clean, args))
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
