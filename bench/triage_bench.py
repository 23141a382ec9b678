"""Triage benchmarks: decode + check frames/s vs tshark, local[2] over local[1], a
10-million-frame corpus end to end, one 10-million-frame connection in 1 GB.

    python bench/triage_bench.py check [--messages 100000] [--pcap PATH] [--rounds 3]
    python bench/triage_bench.py scale [--copies 8] [--pcap PATH]
    python bench/triage_bench.py corpus [--frames 10000000] [--files 40] [--master local[*]]
    python bench/triage_bench.py huge [--frames 10000000] [--memory 1g]

`check` times, on one core and the same file, what a triage task does per connection
(traces.pcap_vector read, TCP reassembly, frame decode, the checker, signatures:
spark_triage.check.check_flow on each flow, split off with Arrow as Spark groups them)
against `tshark -T fields -e amqp.performative` (decode only), alternating rounds so
machine load hits both alike, after one uncounted warm-up run of each, and prints the
ratio (tshark's time is its whole process, start-up included, as measured here). The
file is bench/trace_bench.py's synthetic capture unless --pcap is given. `scale` copies a
capture into a corpus and times `amqpspec triage` with --master local[1] and local[2]
(each a fresh JVM; wall time, start-up included) and prints the speed-up, end to end and
beyond the same runs on a 1-copy corpus (what the second core can share: start-up, the
first jobs and the one cluster's reproducer are there either way). `corpus`
writes `--files` synthetic captures (4 connections each) holding `--frames` AMQP frames in
all and times `amqpspec triage` on them end to end (wall time, JVM start included). `huge`
writes ONE connection of `--frames` frames and runs `amqpspec triage` on it with
--master local[1] and `--memory` for the driver and the executor (PYSPARK_SUBMIT_ARGS:
--driver-memory, spark.executor.memory), sampling the resident memory of the whole process
tree (the JVM and its Python workers) every 0.5 s; it prints whether the run completed,
the frames it checked, and the peak RSS of the tree, of the JVM and of a Python worker.
Captures are written under --work (default: the temporary directory) and kept for reuse.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from amqpspec.bench.trace_bench import time_tshark, write_synthetic_capture  # noqa: E402
from amqpspec.spark_triage.check import check_flow, segments_of  # noqa: E402
from amqpspec.traces.pcap_vector import read_segments  # noqa: E402


def flows_of(path: str) -> Iterator[list]:
    """The capture's TCP flows (both directions of a 4-tuple), each as Arrow batches in
    capture order: the grouping the triage job leaves to Spark, done vectorised here."""
    table = pa.Table.from_batches(list(read_segments(path)))
    if not table.num_rows:
        return
    src_ip, dst_ip = table["src_ip"], table["dst_ip"]
    src_port, dst_port = table["src_port"], table["dst_port"]
    src_low = pc.or_(
        pc.less(src_ip, dst_ip),
        pc.and_(pc.equal(src_ip, dst_ip), pc.less_equal(src_port, dst_port)),
    )
    keys = pa.table(
        {
            "low_ip": pc.if_else(src_low, src_ip, dst_ip),
            "low_port": pc.if_else(src_low, src_port, dst_port),
            "high_ip": pc.if_else(src_low, dst_ip, src_ip),
            "high_port": pc.if_else(src_low, dst_port, src_port),
        }
    )
    names = keys.column_names
    for flow in keys.group_by(names, use_threads=False).aggregate([]).to_pylist():
        mask = functools.reduce(pc.and_, (pc.equal(keys[n], flow[n]) for n in names))
        yield table.filter(mask).to_batches()


def time_check(path: str) -> tuple[int, float]:
    start = time.perf_counter()
    frames = 0
    for batches in flows_of(path):
        _violations, connections = check_flow(path, segments_of(batches))
        frames += sum(row.frames for row in connections)
    return frames, time.perf_counter() - start


def bench_check(args: argparse.Namespace) -> None:
    path = args.pcap or os.path.join(tempfile.gettempdir(), f"amqpspec-bench-{args.messages}.pcap")
    if not os.path.exists(path):
        frames = write_synthetic_capture(path, args.messages)
        print(f"wrote {path}: {frames} AMQP frames, {os.path.getsize(path) / 1e6:.1f} MB")
    time_check(path)  # warm-up, not counted: first imports, caches, the page cache
    time_tshark(path)
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


MESSAGES_PER_FRAME = 0.84  # write_synthetic_capture: bursts of 1-20 transfers + flow + disposition


def _triage(corpus: str, out: str, *options: str, env: dict | None = None):
    command = [sys.executable, "-m", "amqpspec.cli", "triage", corpus, "--out", out, *options]
    environment = dict(os.environ, PYTHONPATH=ROOT, SPARK_LOCAL_IP="127.0.0.1", **(env or {}))
    return subprocess.Popen(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _capture(work: str, name: str, messages: int, connections: int) -> str:
    path = os.path.join(work, name)
    if not os.path.exists(path):
        frames = write_synthetic_capture(path + ".part", messages, connections)
        os.rename(path + ".part", path)
        print(f"wrote {path}: {frames:,} frames, {os.path.getsize(path) / 1e6:,.0f} MB")
    return path


def _checked_frames(out: str) -> int:
    import pyarrow.parquet as pq

    table = pq.read_table(os.path.join(out, "connections.parquet"), columns=["frames"])
    return sum(table.column("frames").to_pylist())


def bench_corpus(args: argparse.Namespace) -> None:
    corpus = os.path.join(args.work, f"amqpspec-corpus-{args.frames}-{args.files}")
    os.makedirs(corpus, exist_ok=True)
    messages = int(args.frames * MESSAGES_PER_FRAME / args.files)
    for number in range(args.files):
        _capture(corpus, f"part-{number:03d}.pcap", messages, 4)
    size = sum(os.path.getsize(os.path.join(corpus, n)) for n in os.listdir(corpus))
    out = tempfile.mkdtemp(prefix="amqpspec-triage-corpus-")
    start = time.perf_counter()
    process = _triage(corpus, out, "--master", args.master)
    _stdout, stderr = process.communicate()
    elapsed = time.perf_counter() - start
    frames = _checked_frames(out) if process.returncode in (0, 1) else 0
    print(
        f"corpus {corpus}: {args.files} files, {size / 1e9:.2f} GB; triage --master "
        f"{args.master}: exit {process.returncode}, {frames:,} frames in {elapsed:.0f} s "
        f"({frames / elapsed:,.0f} frames/s)"
    )
    if process.returncode not in (0, 1):
        print(stderr[-2000:])
    shutil.rmtree(out, ignore_errors=True)


def tree_rss(root: int) -> dict[int, tuple[str, int]]:
    """pid -> (command name, resident bytes) for `root` and every descendant."""
    children: dict[int, list[int]] = defaultdict(list)
    names: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            continue
        pid = int(entry)
        children[int(fields[1])].append(pid)
        names[pid] = (name, int(fields[21]) * os.sysconf("SC_PAGE_SIZE"))
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in names:
            found[pid] = names[pid]
        todo += children.get(pid, [])
    return found


def bench_huge(args: argparse.Namespace) -> None:
    messages = int(args.frames * MESSAGES_PER_FRAME)
    path = _capture(args.work, f"amqpspec-one-connection-{args.frames}.pcap", messages, 1)
    out = tempfile.mkdtemp(prefix="amqpspec-triage-huge-")
    submit = f"--driver-memory {args.memory} --conf spark.executor.memory={args.memory}"
    start = time.perf_counter()
    process = _triage(
        path,
        out,
        "--master",
        "local[1]",
        env={"PYSPARK_SUBMIT_ARGS": f"{submit} pyspark-shell"},
    )
    peak_tree = peak_jvm = peak_python = 0
    while process.poll() is None:
        tree = tree_rss(process.pid)
        peak_tree = max(peak_tree, sum(rss for _name, rss in tree.values()))
        peak_jvm = max([peak_jvm] + [rss for name, rss in tree.values() if name == "java"])
        workers = [rss for pid, (name, rss) in tree.items() if name.startswith("python")]
        peak_python = max([peak_python] + [rss for rss in workers if rss])
        time.sleep(0.5)
    elapsed = time.perf_counter() - start
    stderr = process.stderr.read() if process.stderr else ""
    done = process.returncode in (0, 1)
    frames = _checked_frames(out) if done else 0
    print(
        f"one connection, {os.path.getsize(path) / 1e9:.2f} GB: triage --master local[1] "
        f"--driver-memory {args.memory}: completed {'yes' if done else 'no'} (exit "
        f"{process.returncode}), {frames:,} frames checked in {elapsed:.0f} s; peak RSS: "
        f"tree {peak_tree / 2**20:,.0f} MiB, JVM {peak_jvm / 2**20:,.0f} MiB, largest Python "
        f"process {peak_python / 2**20:,.0f} MiB"
    )
    if not done:
        print(stderr[-3000:])
    shutil.rmtree(out, ignore_errors=True)


def bench_scale(args: argparse.Namespace) -> None:
    source = args.pcap or os.path.join(
        ROOT, "..", "shared", "captures", "rabbitmq-3.10.8-prefetch2-overdelivery.pcap"
    )
    work = tempfile.mkdtemp(prefix="amqpspec-triage-bench-")
    corpora = {}
    for copies in (1, args.copies):
        corpora[copies] = os.path.join(work, f"corpus-{copies}")
        os.mkdir(corpora[copies])
        for number in range(copies):
            shutil.copy(source, os.path.join(corpora[copies], f"copy-{number:03d}.pcap"))
    seconds: dict[tuple[str, int], float] = {}
    for copies in (1, args.copies):
        for master in ("local[1]", "local[2]"):
            start = time.perf_counter()
            out = os.path.join(work, f"{master}-{copies}")
            _triage(corpora[copies], out, "--master", master).communicate()
            seconds[master, copies] = time.perf_counter() - start
            print(f"{master}: {seconds[master, copies]:.1f} s for {copies} copies of {source}")
    one, two = seconds["local[1]", args.copies], seconds["local[2]", args.copies]
    print(f"local[2] speed-up over local[1]: {one / two:.2f}x (end to end, start-up included)")
    extra_one = one - seconds["local[1]", 1]
    extra_two = two - seconds["local[2]", 1]
    print(
        f"beyond a 1-copy run (JVM start, first jobs, one cluster's reproducer): local[1] "
        f"{extra_one:.1f} s, local[2] {extra_two:.1f} s: {extra_one / extra_two:.2f}x"
    )
    shutil.rmtree(work, ignore_errors=True)


# mode -> (function, options as (flag, type, default))
MODES = {
    "check": (
        bench_check,
        (("--messages", int, 100_000), ("--pcap", str, None), ("--rounds", int, 3)),
    ),
    "scale": (bench_scale, (("--copies", int, 8), ("--pcap", str, None))),
    "corpus": (
        bench_corpus,
        (
            ("--frames", int, 10_000_000),
            ("--files", int, 40),
            ("--master", str, "local[*]"),
            ("--work", str, tempfile.gettempdir()),
        ),
    ),
    "huge": (
        bench_huge,
        (
            ("--frames", int, 10_000_000),
            ("--memory", str, "1g"),
            ("--work", str, tempfile.gettempdir()),
        ),
    ),
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
