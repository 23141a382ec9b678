"""Triage benchmarks: decode + check frames/s vs tshark, and local[2] over local[1].

    python bench/triage_bench.py check [--messages 100000] [--pcap PATH] [--rounds 3]
    python bench/triage_bench.py scale [--copies 8] [--pcap PATH]

`check` times, on one core and the same file, what a triage task does per connection
(traces.pcap_vector read, TCP reassembly, frame decode, the checker, signatures:
spark_triage.check.check_flow) against `tshark -T fields -e amqp.performative` (decode
only), alternating rounds so machine load hits both alike, and prints the ratio. The file
is bench/trace_bench.py's synthetic capture unless --pcap is given. `scale` copies a
capture into a corpus and times `amqpspec triage` with --master local[1] and local[2]
(each a fresh JVM; wall time, start-up included) and prints the speed-up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.trace_bench import time_tshark, write_synthetic_capture  # noqa: E402
from spark_triage.check import check_flow, segments_of  # noqa: E402
from traces.pcap_vector import read_segments  # noqa: E402


def time_check(path: str) -> tuple[int, float]:
    start = time.perf_counter()
    flows: dict[tuple, list] = defaultdict(list)
    for entry in segments_of(read_segments(path)):
        flows[tuple(sorted((entry[0].src, entry[0].dst)))].append(entry)
    frames = 0
    for segments in flows.values():
        _violations, connections = check_flow(path, segments)
        frames += sum(row.frames for row in connections)
    return frames, time.perf_counter() - start


def bench_check(args: argparse.Namespace) -> None:
    path = args.pcap or os.path.join(tempfile.gettempdir(), f"amqpspec-bench-{args.messages}.pcap")
    if not os.path.exists(path):
        frames = write_synthetic_capture(path, args.messages)
        print(f"wrote {path}: {frames} AMQP frames, {os.path.getsize(path) / 1e6:.1f} MB")
    for _ in range(args.rounds):
        frames, elapsed = time_check(path)
        ours = frames / elapsed
        print(f"triage decode+check: {frames} frames in {elapsed:.2f} s = {ours:,.0f} frames/s")
        measured = time_tshark(path)
        if measured:
            count, seconds = measured
            theirs = count / seconds
            print(
                f"tshark decode only:  {count} frames in {seconds:.2f} s = {theirs:,.0f} frames/s"
            )
            print(f"ratio triage/tshark: {ours / theirs:.2f}")


def bench_scale(args: argparse.Namespace) -> None:
    source = args.pcap or os.path.join(
        ROOT, "..", "shared", "captures", "rabbitmq-3.10.8-prefetch2-overdelivery.pcap"
    )
    work = tempfile.mkdtemp(prefix="amqpspec-triage-bench-")
    corpus = os.path.join(work, "corpus")
    os.mkdir(corpus)
    for number in range(args.copies):
        shutil.copy(source, os.path.join(corpus, f"copy-{number:03d}.pcap"))
    env = dict(os.environ, PYTHONPATH=ROOT, SPARK_LOCAL_IP="127.0.0.1")
    seconds = {}
    for master in ("local[1]", "local[2]"):
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "amqpspec.cli",
                "triage",
                corpus,
                "--out",
                os.path.join(work, master),
                "--master",
                master,
            ],
            env=env,
            capture_output=True,
            check=False,
        )
        seconds[master] = time.perf_counter() - start
        print(f"{master}: {seconds[master]:.1f} s for {args.copies} copies of {source}")
    print(f"local[2] speed-up over local[1]: {seconds['local[1]'] / seconds['local[2]']:.2f}x")
    shutil.rmtree(work, ignore_errors=True)


# mode -> (function, options as (flag, type, default))
MODES = {
    "check": (
        bench_check,
        (("--messages", int, 100_000), ("--pcap", str, None), ("--rounds", int, 3)),
    ),
    "scale": (bench_scale, (("--copies", int, 8), ("--pcap", str, None))),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode, (_function, options) in MODES.items():
        mode_parser = sub.add_parser(mode)
        for flag, kind, default in options:
            mode_parser.add_argument(flag, type=kind, default=default)
    args = parser.parse_args()
    MODES[args.mode][0](args)


if __name__ == "__main__":
    main()
