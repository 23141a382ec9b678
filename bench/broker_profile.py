"""Profiles of the reference broker process under the broker benchmark's load.

    python -m amqpspec.bench.broker_profile [--messages 100000]
        [--modes send,receive,concurrent,durable]
        [--out reports/bench/profiles] [--top 30] [--no-py-spy] [--no-cprofile]

Owns: running the reference broker (`python -m amqpspec.reference_broker`, as bench/broker_bench.py
does, with a --data-dir for the durable queue) once per mode and profiler, driving it with
the Proton C example clients of bench/broker_bench.py, and writing per mode:
- `MODE.speedscope.json` and `MODE.svg`: py-spy sampling profiles of the broker process
  (attached by PID; open the JSON at https://www.speedscope.app, the SVG in a browser);
- `MODE.cprofile.txt`: cProfile's top functions by own time and by cumulative time (the
  broker started as `python -m cProfile -o ... -m reference_broker`, stopped by SIGTERM);
- `summary.json`: broker CPU seconds per 100,000 messages per mode (/proc/PID/stat).
Modes: send (N unsettled 12-byte messages into an empty queue, each confirmed), receive
(N out of a full queue, credit 200; the queue is filled first, not profiled), concurrent
(receive N and send N together), durable (send N durable messages to a durable queue: each
accepted after its fsync). May touch: the broker only through its command line and admin
API; every broker and py-spy it starts is stopped by PID.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pathlib
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator

from amqpspec.bench.broker_bench import (
    DEFAULT_BUILD_DIR,
    DURABLE_QUEUE,
    QUEUE,
    build_c_clients,
    c_examples_available,
    process_cpu_seconds,
    run_c_client,
)
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.runtime.process import BrokerProcess

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODES = ("send", "receive", "concurrent", "durable")
CREDIT = 200


@contextlib.contextmanager
def broker(work: pathlib.Path, python_options: tuple[str, ...] = ()) -> Iterator[BrokerProcess]:
    data = pathlib.Path(tempfile.mkdtemp(prefix="data-", dir=work))
    process = BrokerProcess(
        "--data-dir", str(data), admin=True, wait=30.0, python_options=python_options
    )
    try:
        with ManagementClient(f"http://127.0.0.1:{process.admin_port}") as admin:
            admin.declare_queue(QUEUE, durable=False)
            admin.declare_queue(DURABLE_QUEUE, durable=True)
        yield process
    finally:
        process.stop()


def drive(mode: str, clients: pathlib.Path, port: int, messages: int, *, prepare: bool) -> None:
    """prepare=True: what must happen before the measured part (fill the queue for
    receive); False: the measured part."""
    send, receive = clients / "send12", clients / f"receive-quiet-credit-{CREDIT}"
    queue = f"/queues/{QUEUE}"
    if mode == "receive":
        if prepare:
            run_c_client(send, port, queue, messages)
        else:
            run_c_client(receive, port, queue, messages)
    elif prepare:
        return
    elif mode == "send":
        run_c_client(send, port, queue, messages)
    elif mode == "durable":
        run_c_client(clients / "send12-durable", port, f"/queues/{DURABLE_QUEUE}", messages)
    else:  # concurrent
        args = ["127.0.0.1", str(port), queue, str(messages)]
        receiver = subprocess.Popen([str(receive), *args], stdout=subprocess.DEVNULL)
        try:
            run_c_client(send, port, queue, messages)
        finally:
            receiver.wait(timeout=600)


def py_spy(pid: int, output: pathlib.Path, fmt: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["py-spy", "record", "--pid", str(pid), "--rate", "250", "--format", fmt,
         "--output", str(output), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def stop_py_spy(recorder: subprocess.Popen) -> None:
    recorder.send_signal(signal.SIGINT)  # it writes its output on SIGINT
    try:
        recorder.wait(timeout=60)
    except subprocess.TimeoutExpired:
        recorder.kill()
        recorder.wait(timeout=10)


def profile_py_spy(mode: str, clients: pathlib.Path, messages: int, out: pathlib.Path,
                   work: pathlib.Path) -> float | None:  # fmt: skip
    """Both py-spy outputs of one mode (one broker run each); the broker's CPU seconds per
    100k messages of the last run."""
    per_100k = None
    for fmt, name in (("speedscope", f"{mode}.speedscope.json"), ("flamegraph", f"{mode}.svg")):
        with broker(work) as process:
            drive(mode, clients, process.port, messages, prepare=True)
            recorder = py_spy(process.proc.pid, out / name, fmt)
            try:
                before = process_cpu_seconds(process.proc.pid)
                drive(mode, clients, process.port, messages, prepare=False)
                after = process_cpu_seconds(process.proc.pid)
            finally:
                stop_py_spy(recorder)
            if before is not None and after is not None:
                per_100k = round((after - before) * 100_000 / messages, 3)
    return per_100k


def profile_cprofile(mode: str, clients: pathlib.Path, messages: int, out: pathlib.Path,
                     work: pathlib.Path, top: int) -> None:  # fmt: skip
    stats_file = work / f"{mode}.pstats"
    with broker(work, ("-m", "cProfile", "-o", str(stats_file))) as process:
        drive(mode, clients, process.port, messages, prepare=True)
        drive(mode, clients, process.port, messages, prepare=False)
    text = io.StringIO()
    stats = pstats.Stats(str(stats_file), stream=text)
    stats.strip_dirs()
    prefill = " (plus the prefill's send)" if mode == "receive" else ""
    text.write(f"cProfile of the reference broker, mode {mode}, {messages:,} messages{prefill}\n")
    text.write(f"\n== top {top} by own time (tottime)\n")
    stats.sort_stats("tottime").print_stats(top)
    text.write(f"\n== top {top} by cumulative time\n")
    stats.sort_stats("cumulative").print_stats(top)
    (out / f"{mode}.cprofile.txt").write_text(text.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench" / "profiles"))
    parser.add_argument("--top", type=int, default=30, help="rows per cProfile table")
    parser.add_argument("--no-py-spy", action="store_true")
    parser.add_argument("--no-cprofile", action="store_true")
    parser.add_argument("--build-dir", default=str(DEFAULT_BUILD_DIR), help="C client builds")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if set(modes) - set(MODES):
        parser.error(f"modes: a subset of {','.join(MODES)}")
    if not c_examples_available():
        print("proton C examples missing: run tools/brokers/proton-c-broker.sh install")
        return 2
    if not args.no_py_spy and shutil.which("py-spy") is None:
        print("py-spy missing: pip install -e '.[test]' (or --no-py-spy)", file=sys.stderr)
        return 2
    clients = build_c_clients(pathlib.Path(args.build_dir), (CREDIT,))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory(prefix="amqpspec-profile-") as tmp:
        work = pathlib.Path(tmp)
        for mode in modes:
            if not args.no_py_spy:
                summary[mode] = profile_py_spy(mode, clients, args.messages, out, work)
            if not args.no_cprofile:
                profile_cprofile(mode, clients, args.messages, out, work, args.top)
            print(f"{mode}: broker CPU s/100k {summary.get(mode)}", flush=True)
    report = {"messages": args.messages, "broker_cpu_seconds_per_100k": summary}
    (out / "summary.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"profiles in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
