"""amqpspec's fuzzer against boofuzz: the same faulty reference broker, the same wall time.

    python -m amqpspec.bench.fuzz_vs_boofuzz [--budget SECONDS] [--seed N] [--workers N]
                                            [--clean SECONDS] [--out reports] [FAULT ...]

Owns: `run_boofuzz(faults, budget)` (the boofuzz session of bench/peers/boofuzz_amqp.py
against a supervised reference broker with `faults` on, until its first failure or the
budget) and writing `<out>/fuzz-vs-boofuzz.md`: per parser fault of the catalog
(reference_broker/faults/catalog.py, PARSER_LAYER), time and cases to the first finding of each
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

from amqpspec.bench.peers.boofuzz_amqp import AMQP_MESSAGES, EDGES, build_session
from amqpspec.fuzz.cli import QUEUE
from amqpspec.fuzz.detection import PARSER_FAULTS, Detection, Supervised, detect, target_for
from amqpspec.reference_broker.faults.catalog import CATALOG

# where each fault's trigger lives in the model: the message boofuzz is pointed at when its
# whole-graph run missed the fault (hindsight a user would not have; see the report)
HINDSIGHT = {
    "die-on-nested-descriptor": "open",  # any descriptor; open's is the first after the open
    "exit-on-compound-overrun": "open",  # a list size past the frame
    "leak-on-declared-count": "open",  # a list count above the fields carried
    "hang-on-serial-wrap": "begin",  # next-outgoing-id at 2^31 (also flow, transfer)
    "exit-on-illegal-sasl": "sasl-init",
    "hang-on-disposition-range": "disposition",  # last - first >= 2^16
    "die-on-channel-reuse": "begin",  # needs a second begin on channel 0: not in the graph
    "die-on-credit-overflow": "flow",  # link-credit at 2^31
}


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
    case_name: str = ""  # boofuzz's test-case name (the mutated primitive)


def path_to(node: str) -> str:
    """boofuzz's name of the path from the first message to `node` ("a->b->node")."""
    parents = {dst: src for src, dst in EDGES}
    names = [node]
    while (parent := parents[names[0]]) is not None:
        names.insert(0, parent)
    return "->".join(names)


def run_boofuzz(faults: list[str], budget: float, node: str | None = None) -> BoofuzzRun:
    """One boofuzz session against a reference broker with `faults` on: the whole graph
    (`session.fuzz()`), or only `node`'s message after its unfuzzed path."""
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
            session.fuzz(name=path_to(node) if node else None)
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
            recorder.case_name,
        )
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _found(seconds: float | None) -> str:
    return f"{seconds:.1f} s" if seconds is not None else "not found"


def _hex(data: bytes, limit: int = 40) -> str:
    text = data[:limit].hex()
    return text + (f"... ({len(data)} B)" if len(data) > limit else "")


def _boofuzz_cells(run: BoofuzzRun) -> str:
    index = str(run.index) if run.index is not None else f"({run.cases} run)"
    return f"{_found(run.seconds)} | {index} | {run.node} | {run.message}"


@dataclass(slots=True)
class Results:
    rows: list[tuple[Detection, BoofuzzRun]]
    hindsight: list[BoofuzzRun]
    clean: tuple[Detection, BoofuzzRun] | None
    clean_nodes: list[BoofuzzRun]


def report(results: Results, args: argparse.Namespace) -> str:
    lines = [
        "## Figures",
        "",
        f"`python -m amqpspec.bench.fuzz_vs_boofuzz --budget {args.budget:.0f} --seed {args.seed}"
        f" --workers {args.workers} --hindsight {args.hindsight:.0f} --clean {args.clean:.0f}"
        f" --clean-nodes {args.clean_nodes:.0f}`: budget {args.budget:.0f} s of wall time per "
        f"fault and tool, each stopped at its first finding; amqpspec seed {args.seed}, "
        f"{args.workers} worker(s); boofuzz {version('boofuzz')} (deterministic: no seed). "
        f"Machine: {os.cpu_count()} cores, load average {args.load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end (other jobs ran beside).",
        "",
        "| fault | amqpspec: time | amqpspec: cases | boofuzz: time | boofuzz: case # "
        "| boofuzz: fuzzed message | boofuzz: failure |",
        "|---|---|---|---|---|---|---|",
    ]
    for ours, theirs in results.rows:
        cases = str(ours.cases) if ours.seconds is not None else f"({ours.cases} run)"
        lines.append(
            f"| `{ours.fault}` | {_found(ours.seconds)} | {cases} | {_boofuzz_cells(theirs)} |"
        )
    if results.hindsight:
        lines += [
            "",
            f"boofuzz pointed at the message holding the trigger (`session.fuzz(name=PATH)`, "
            f"{args.hindsight:.0f} s each), for the faults its whole-graph run missed:",
            "",
            "| fault | time | case # (within the message) | message | failure |",
            "|---|---|---|---|---|",
        ]
        for run in results.hindsight:
            lines.append(f"| `{run.fault}` | {_boofuzz_cells(run)} |")
    lines += ["", "amqpspec's minimised reproducers and signatures:", ""]
    for ours, _ in results.rows:
        if ours.seconds is not None:
            steps = ", ".join(ours.reproducer or [])
            lines.append(f"- `{ours.fault}`: {ours.kind} `{ours.signature}`: {steps}")
    lines += ["", "boofuzz's failing test cases (the fuzzed message's first bytes, hex):", ""]
    for run in [theirs for _, theirs in results.rows] + results.hindsight:
        if run.index is not None:
            lines.append(
                f"- `{run.fault}`: case #{run.index} `{run.case_name}`: `{_hex(run.data)}`"
            )
    return "\n".join(lines + _clean_lines(results, args)) + "\n"


def _clean_lines(results: Results, args: argparse.Namespace) -> list[str]:
    """What each tool found on the clean reference broker (none of its faults on)."""
    lines: list[str] = []
    if results.clean is not None:
        ours, theirs = results.clean
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
    if results.clean_nodes:
        each = ", ".join(
            f"{run.node or name} {run.cases} cases"
            + ("" if run.index is None else f" FAILURE at #{run.index}: {run.message}")
            for name, run in zip(AMQP_MESSAGES, results.clean_nodes, strict=True)
        )
        failures = sum(run.index is not None for run in results.clean_nodes)
        lines += [
            "",
            f"boofuzz's detectors on the clean broker, each message after the open fuzzed "
            f"alone for {args.clean_nodes:.0f} s: {failures} failures ({each}).",
        ]
    return lines


def _run_clean(args: argparse.Namespace, results: Results) -> None:
    """Both tools on the clean broker (--clean), and boofuzz per message (--clean-nodes)."""
    if args.clean > 0:
        results.clean = (
            detect([], args.clean, args.seed, workers=args.workers, stop_at_first=False),
            run_boofuzz([], args.clean),
        )
        print(
            f"clean: amqpspec {results.clean[0].cases} cases; boofuzz "
            f"{_boofuzz_cells(results.clean[1])}",
            flush=True,
        )
    if args.clean_nodes > 0:
        for node in AMQP_MESSAGES:
            run = run_boofuzz([], args.clean_nodes, node)
            print(f"clean {node}: boofuzz {_boofuzz_cells(run)}", flush=True)
            results.clean_nodes.append(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amqpspec.bench.fuzz_vs_boofuzz", description=__doc__
    )
    parser.add_argument("faults", nargs="*", help=f"default: {' '.join(PARSER_FAULTS)}")
    parser.add_argument("--budget", type=float, default=150.0, help="seconds per fault and tool")
    parser.add_argument("--seed", type=int, default=1, help="amqpspec's seed")
    parser.add_argument("--workers", type=int, default=1, help="amqpspec's workers")
    parser.add_argument(
        "--hindsight",
        type=float,
        default=0.0,
        help="seconds of boofuzz on the trigger's message when it missed a fault",
    )
    parser.add_argument("--clean", type=float, default=60.0, help="seconds on the clean broker")
    parser.add_argument(
        "--clean-nodes",
        type=float,
        default=0.0,
        help="seconds of boofuzz per message after the open on the clean broker",
    )
    parser.add_argument("--out", default="reports", help="writes OUT/fuzz-vs-boofuzz-figures.md")
    args = parser.parse_args(argv)
    args.load_start = os.getloadavg()[0]
    results = Results([], [], None, [])
    for fault in args.faults or PARSER_FAULTS:
        if fault not in CATALOG:
            print(f"unknown fault {fault!r}", file=sys.stderr)
            return 2
        ours = detect([fault], args.budget, args.seed, workers=args.workers)
        print(f"{fault}: amqpspec {_found(ours.seconds)}, {ours.cases} cases", flush=True)
        theirs = run_boofuzz([fault], args.budget)
        print(f"{fault}: boofuzz {_boofuzz_cells(theirs)}", flush=True)
        results.rows.append((ours, theirs))
    for _, theirs in list(results.rows):
        if args.hindsight > 0 and theirs.index is None and theirs.fault in HINDSIGHT:
            run = run_boofuzz([theirs.fault], args.hindsight, HINDSIGHT[theirs.fault])
            print(f"{theirs.fault} (hindsight): boofuzz {_boofuzz_cells(run)}", flush=True)
            results.hindsight.append(run)
    _run_clean(args, results)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "fuzz-vs-boofuzz-figures.md")
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        file.write(report(results, args))
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
