"""Captures over 2 GiB triaged end to end on a Spark standalone cluster (docs/triage.md):
one classic pcap and one pcapng, each over 2 GiB, and the same traffic in small files.

    python bench/triage_big.py write [--work /tmp/amqpspec-big] [--gib 2.1] [--per-file 20]
    python bench/triage_big.py run [--work /tmp/amqpspec-big] [--workers 2] [--memory 2g]
        [--only big.pcapng]

`write` copies the connection of the RabbitMQ 3.10.8 capture (tests/data/captures: 39,513
packets, one credit overrun, RabbitMQ #2597) until each big file passes `--gib` GiB: copy k
gets its own client port and starts where copy k-1 ended, the packets themselves are the
capture's (the client port patched in the TCP header; no AMQP byte is touched). The same
records go to `big.pcap` (nanosecond classic pcap), `big.pcapng` and `small/part-NNN.pcap`
(`--per-file` copies each, every file in one 128 MiB split), through traces.pcap_writer's
RecordWriter. Nothing under --work is committed; it is rewritten only when missing.

`run` checks that the 128 MiB byte-range splits of each big file (traces.pcap_vector
.plan_splits) start at record boundaries (the segments of the splits, read one by one, are
those of the whole file, in order), starts a standalone cluster on loopback
(spark_triage.standalone: `--workers` workers of one core and `--memory`, executors of
`spark.executor.memory` 1g), runs `amqpspec triage big.pcap`, `big.pcapng` and `small` with
RELATIVE paths from --work, sampling every 0.5 s the resident memory of the workers' process
trees (the executor JVMs and their Python workers, which run the tasks), and prints per run:
exit, wall time, connections and frames checked, clusters, peak RSS of an executor JVM and of
a Python worker; then whether the three runs found the same clusters (signature, count,
connections) and the same violations (connection by client port, frame index, signature).
The cluster is stopped by PID at the end, also on failure.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from amqpspec.spark_triage import standalone  # noqa: E402
from amqpspec.traces.pcap_reader import iter_packets  # noqa: E402
from amqpspec.traces.pcap_vector import plan_splits, read_segments  # noqa: E402
from amqpspec.traces.pcap_writer import PCAP_NANO, PCAPNG, RecordWriter  # noqa: E402

SOURCE = ROOT / "tests" / "data" / "captures" / "rabbitmq-3.10.8-prefetch2-overdelivery.pcap.gz"
SPLIT = 128 * 1024 * 1024
ETHERTYPE_IPV4 = 0x0800
PORT = struct.Struct("!H")


def _template(work: Path) -> tuple[list[tuple[int, bytes, bytes]], int, int]:
    """The source's packets as (time_ns, bytes before the client port, bytes after it),
    the client port, and the connection's span in ns."""
    plain = work / "source.pcapng"
    if not plain.exists():
        with gzip.open(SOURCE, "rb") as src, plain.open("wb") as out:
            shutil.copyfileobj(src, out)
    packets = list(iter_packets(str(plain)))
    client = None
    parts: list[tuple[int, bytes, bytes]] = []
    for when, _linktype, data in packets:
        offset = None
        if len(data) >= 38 and PORT.unpack_from(data, 12)[0] == ETHERTYPE_IPV4 and data[23] == 6:
            tcp = 14 + (data[14] & 0x0F) * 4
            source, target = PORT.unpack_from(data, tcp)[0], PORT.unpack_from(data, tcp + 2)[0]
            if client is None:
                client = source if target == 5672 else target
            offset = tcp if source == client else tcp + 2 if target == client else None
        if offset is None:
            raise SystemExit(f"{SOURCE}: a packet of another connection or protocol")
        parts.append((round(when * 1e9), data[:offset], data[offset + 2 :]))
    span = parts[-1][0] - parts[0][0] + 1_000_000_000
    return parts, client or 0, span


def write(args: argparse.Namespace) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    big_pcap, big_ng, small = work / "big.pcap", work / "big.pcapng", work / "small"
    if big_pcap.exists() and big_ng.exists() and small.is_dir():
        print(f"{work}: already written")
        return
    started = time.perf_counter()
    parts, client, span = _template(work)
    size = sum(16 + len(head) + 2 + len(tail) for _t, head, tail in parts)
    copies = int(args.gib * 2**30 / size) + 1
    small.mkdir(exist_ok=True)
    buffered = 8 * 2**20
    with open(big_pcap, "wb", buffering=buffered) as a, open(big_ng, "wb", buffering=buffered) as b:
        pcap, ng = RecordWriter(a, PCAP_NANO), RecordWriter(b, PCAPNG)
        for first in range(0, copies, args.per_file):
            name = small / f"part-{first // args.per_file:03d}.pcap"
            with open(name, "wb", buffering=buffered) as c:
                part = RecordWriter(c, PCAP_NANO)
                for copy in range(first, min(copies, first + args.per_file)):
                    port = PORT.pack(10000 + copy)
                    shift = copy * span
                    for when, head, tail in parts:
                        pcap.write(when + shift, head, port, tail)
                        ng.write(when + shift, head, port, tail)
                        part.write(when + shift, head, port, tail)
                part.flush()
        pcap.flush()
        ng.flush()
    print(
        f"wrote {copies} copies of the {len(parts):,}-packet connection (client port {client} "
        f"-> 10000..{10000 + copies - 1}) in {time.perf_counter() - started:.0f} s: "
        f"big.pcap {big_pcap.stat().st_size / 2**30:.2f} GiB, big.pcapng "
        f"{big_ng.stat().st_size / 2**30:.2f} GiB, {len(list(small.iterdir()))} small files"
    )


def check_splits(path: Path) -> str:
    """The splits' segments, read one split at a time, are the whole file's, in order."""
    splits = plan_splits(str(path), SPLIT)
    whole = sum(batch.num_rows for batch in read_segments(str(path)))
    last, total = -1, 0
    for start, end in splits:
        for batch in read_segments(str(path), start, end):
            ordinals = batch.column("ordinal").to_numpy()
            if len(ordinals) and ordinals[0] <= last:
                raise SystemExit(f"{path}: split at {start} overlaps the previous one")
            last = int(ordinals[-1]) if len(ordinals) else last
            total += batch.num_rows
    verdict = "the same" if total == whole else f"NOT the same ({total} vs {whole})"
    return (
        f"{path.name}: {path.stat().st_size / 2**30:.2f} GiB, {len(splits)} splits of "
        f"<= 128 MiB; their segments {total:,}, the whole file's {whole:,}: {verdict}"
    )


def _tree_rss(roots: list[int]) -> dict[int, tuple[str, int]]:
    from amqpspec.bench.triage_bench import tree_rss as one

    found: dict[int, tuple[str, int]] = {}
    for root in roots:
        found.update(one(root))
    return found


def _summary(out: Path) -> tuple[list, list, int, int]:
    import pyarrow.parquet as pq

    clusters = sorted(
        (c["signature"], c["count"], c["connections"])
        for c in json.loads((out / "clusters.json").read_text())
    )
    table = pq.read_table(out / "violations.parquet").to_pandas()
    violations = sorted(
        (key.split("|", 1)[1], int(index), signature)
        for key, index, signature in zip(
            table["connection_key"], table["frame_index"], table["signature"]
        )
    )
    connections = pq.read_table(out / "connections.parquet", columns=["frames"]).to_pandas()
    return clusters, violations, len(connections), int(connections["frames"].sum())


def run(args: argparse.Namespace) -> None:
    work = Path(args.work)
    names = args.only or ["big.pcap", "big.pcapng", "small"]
    for name in ("big.pcap", "big.pcapng"):
        if name in names:
            print(check_splits(work / name), flush=True)
    cluster = standalone.start(
        work / "cluster",
        workers=args.workers,
        cores=1,
        memory=args.memory,
        env={"PYTHONPATH": str(ROOT)},
    )
    print(f"cluster {cluster.url}: daemons {cluster.pids}", flush=True)
    results = {}
    try:
        for name in names:
            summary = _triage_one(work, name, cluster)
            if summary is not None:
                results[name] = summary
    finally:
        cluster.stop()
        print(f"cluster stopped (PIDs {cluster.pids})")
    if len(results) == 3:
        first = results["small"]
        for name in ("big.pcap", "big.pcapng"):
            same = results[name][:2] == first[:2] and results[name][2:] == first[2:]
            print(
                f"{name} vs small files: {'the same' if same else 'DIFFERENT'} clusters, "
                "violations, connections and frames"
            )


def _triage_one(work: Path, name: str, cluster: standalone.Cluster) -> tuple | None:
    """`amqpspec triage NAME` on the cluster, its time and peak memory printed; the
    summary of its output (None when it failed)."""
    out = work / f"out-{name.replace('.', '-')}"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1")
    command = [sys.executable, "-m", "amqpspec.cli", "triage", name]
    command += ["--out", out.name, "--master", cluster.url]
    peaks = {"jvm": 0, "python": 0}
    done = threading.Event()
    sampler = threading.Thread(target=_sample_peaks, args=(cluster, peaks, done), daemon=True)
    sampler.start()
    started = time.perf_counter()
    process = subprocess.run(
        command, cwd=work, env=env, capture_output=True, text=True, timeout=3600
    )
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    line = f"triage {name} --master {cluster.url}: exit {process.returncode}"
    summary = None
    if process.returncode in (0, 1):
        summary = _summary(out)
        clusters, _violations, connections, frames = summary
        line += (
            f", {elapsed:.0f} s, {connections} connections, {frames:,} frames "
            f"({frames / elapsed:,.0f}/s), clusters {clusters}"
        )
    else:
        line += f", {elapsed:.0f} s\n{process.stderr[-3000:]}"
    print(
        f"{line}; peak RSS: executor JVM {peaks['jvm'] / 2**20:,.0f} MiB, Python "
        f"worker {peaks['python'] / 2**20:,.0f} MiB",
        flush=True,
    )
    return summary


def _sample_peaks(cluster: standalone.Cluster, peaks: dict, done: threading.Event) -> None:
    """Every 0.5 s until `done`: the peak RSS of the executors' JVMs and Python workers."""
    workers = cluster.pids[1:]
    while not done.wait(0.5):
        for pid, (comm, rss) in _tree_rss(workers).items():
            kind = (
                "jvm"
                if comm == "java" and pid not in workers
                else ("python" if comm.startswith("python") else None)
            )
            if kind:
                peaks[kind] = max(peaks[kind], rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=("write", "run"))
    parser.add_argument("--work", default="/tmp/amqpspec-big")
    parser.add_argument("--gib", type=float, default=2.1)
    parser.add_argument("--per-file", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory", default="2g")
    parser.add_argument(
        "--only",
        action="append",
        choices=("big.pcap", "big.pcapng", "small"),
        help="run only these inputs (repeatable; default all three, compared)",
    )
    args = parser.parse_args()
    (write if args.mode == "write" else run)(args)


if __name__ == "__main__":
    main()
