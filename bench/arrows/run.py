"""`amqpspec bench arrows`: quiver-style arrows through brokers and peer to peer.

    amqpspec bench arrows [--brokers reference,peer-to-peer] [--url amqp://H:P --address A]
        [--count 100000 | --duration S] [--body-size 100] [--credit 1000]
        [--settlement at-least-once|presettled] [--durable] [--rate MSG_PER_S]
        [--connections 1] [--links 1] [--arrows c|python] [--out reports/bench]

Per target (each broker started here on free ports by bench.broker_bench, a broker given by
--url, or `peer-to-peer`: the receiver arrow listens and the sender connects straight to it,
no broker): the receiver arrow starts, then the sender; the receiver's records give the
per-second rates and the end-to-end latency; the broker process (started here, --broker-pid,
or found by its port) is sampled for CPU and RSS. Output: a rich summary (throughput as a
fraction of peer to peer), reports/bench/arrows-STAMP.json and -rate.png / -latency.png.

Owns: the run of the arrows and the report. Brokers' start and stop: bench.broker_bench.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pathlib
import platform
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

from amqpspec import amqp10
from amqpspec.bench.arrows.build import (
    DEFAULT_BUILD_DIR,
    MISSING,
    build_c_arrow,
    c_arrow_available,
)
from amqpspec.bench.arrows.plots import plot_runs
from amqpspec.bench.arrows.procstat import ProcessSampler, pid_listening_on
from amqpspec.bench.arrows.results import summarise
from amqpspec.bench.arrows.spec import MIN_BODY, ArrowSpec, read_records, split_url
from amqpspec.bench.script import script_main
from amqpspec.bench.table import print_table
from amqpspec.reference_broker.runtime.process import free_port

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TARGETS = ("reference", "rabbitmq", "proton-c", "peer-to-peer")
PEER = "peer-to-peer"
READY_WAIT = 60.0  # seconds for an arrow to listen / attach every link


@dataclass
class Target:
    """Where the arrows go: a broker (`listen` False) or the receiver itself (peer to peer)."""

    name: str
    label: str
    host: str
    port: int
    address: str
    user: str = ""
    password: str = ""
    pid: int | None = None  # the broker's process (None: peer to peer / unknown)
    listen: bool = False


# --- targets --------------------------------------------------------------------------


@contextlib.contextmanager
def started_targets(names: list[str], args: argparse.Namespace) -> Iterator[list[Target]]:
    """The targets of the run, brokers started (and stopped at the end) on free ports."""
    from amqpspec.bench import broker_bench

    examples = pathlib.Path(args.build_dir) / "examples"
    brokers = [name for name in names if name != PEER]
    with broker_bench.started_brokers(
        brokers, "amqpspec-arrows-", lambda: broker_bench.build_c_clients(examples)
    ) as started:
        running = iter(started)
        targets = []
        for name in names:
            if name == PEER:
                targets.append(
                    Target(PEER, "peer to peer (no broker)", "127.0.0.1", 0, "arrows", listen=True)
                )
                continue
            broker = next(running)
            address = broker.address
            if args.durable:
                if broker.durable_address is None:
                    raise SystemExit(f"{broker.label} keeps no durable queue: leave out --durable")
                address = broker.durable_address
            user = "guest" if name == "rabbitmq" else ""
            pid = broker.pid or pid_listening_on(broker.port)
            targets.append(
                Target(
                    broker.name, broker.label, "127.0.0.1", broker.port, address, user, user, pid
                )
            )
        yield targets


def url_target(args: argparse.Namespace) -> Target:
    host, port, user, password = split_url(args.url)
    pid = args.broker_pid or pid_listening_on(port)
    return Target("url", args.url, host, port, args.address or "arrows", user, password, pid)


# --- one run -------------------------------------------------------------------------


def arrow_command(kind: str, build_dir: pathlib.Path) -> list[str]:
    if kind == "c":
        return [str(build_c_arrow(build_dir))]
    return [sys.executable, "-m", "amqpspec.bench.arrows.python_arrow"]


def spawn_arrow(kind: str, spec: ArrowSpec, build_dir: pathlib.Path) -> subprocess.Popen:
    """One arrow process ("c" or "python"); stdout/stderr piped (text)."""
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}
    command = [*arrow_command(kind, build_dir), *spec.argv()]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def wait_ready(process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + READY_WAIT
    assert process.stderr is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = process.stderr.readline()
        if line.strip() == "ready":
            return
        if not line:
            break
    process.kill()
    raise RuntimeError(f"{what} was not ready within {READY_WAIT:.0f} s (exit {process.poll()})")


def arrow_result(process: subprocess.Popen, what: str, timeout: float) -> dict:
    from amqpspec.bench.broker_bench import output_within

    late = f"{what} did not finish within {timeout:.0f} s"
    out, err = output_within(process, timeout, late)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{what} exited {process.returncode} without a result: {err[-2000:]}")
    result = json.loads(lines[-1])
    if "error" in result or process.returncode != 0:
        raise RuntimeError(f"{what}: {result.get('error')} (exit {process.returncode})")
    return result


def _run_arrows(
    args: argparse.Namespace, receive: ArrowSpec, send: ArrowSpec, build_dir: pathlib.Path
) -> tuple[dict, dict]:
    """The receiver arrow up, then the sender arrow to the end; both results."""
    receiver = spawn_arrow(args.receiver_arrow, receive, build_dir)
    try:
        wait_ready(receiver, f"receiver arrow ({args.receiver_arrow})")
        sender = spawn_arrow(args.sender_arrow, send, build_dir)
        try:
            sent = arrow_result(sender, f"sender arrow ({args.sender_arrow})", args.timeout + 30)
        finally:
            if sender.poll() is None:
                sender.kill()
                sender.wait(10)
        got = arrow_result(receiver, f"receiver arrow ({args.receiver_arrow})", args.timeout + 30)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait(10)
    return sent, got


def run_one(target: Target, args: argparse.Namespace, work: pathlib.Path) -> dict:
    """Receiver, then sender, through `target`; the figures (bench.arrows.results)."""
    build_dir = pathlib.Path(args.build_dir)
    port = free_port() if target.listen else target.port
    records = work / f"records-{target.name}.bin"
    common = dict(
        host=target.host,
        port=port,
        address=target.address,
        count=args.count,
        duration=args.duration,
        body_size=args.body_size,
        credit=args.credit,
        presettled=args.settlement == "presettled",
        durable=args.durable,
        connections=args.connections,
        links=args.links,
        timeout=args.timeout,
    )
    receive = ArrowSpec(
        "receive",
        **common,
        listen=target.listen,
        out=str(records),
        senders=args.connections * args.links,
        user=target.user,
        password=target.password,
    )
    send = ArrowSpec(
        "send",
        **common,
        rate=args.rate,
        max_unsettled=args.max_unsettled,
        user=target.user,
        password=target.password,
    )
    sampler = ProcessSampler(target.pid).start() if target.pid else None
    sent, got = _run_arrows(args, receive, send, build_dir)
    broker = sampler.stop() if sampler else None
    sent_ns, received_ns = read_records(str(records))
    result = {"broker": target.name, "label": target.label} | summarise(
        sent_ns, received_ns, sent, got
    )
    if broker and broker.get("cpu_seconds") is not None and result["received"]:
        broker["cpu_us_per_message"] = round(1e6 * broker["cpu_seconds"] / result["received"], 2)
    result["broker_process"] = broker
    return result


# --- report ----------------------------------------------------------------------------


def _ms(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.1f}s"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def summary_rows(runs: list[dict]) -> list[list[str]]:
    rows = []
    for run in runs:
        lat = run["latency_ms"]
        proc = run["broker_process"] or {}
        fraction = f"{run['of_peer_to_peer']:.2f}" if run.get("of_peer_to_peer") else ""
        rss = proc.get("rss_peak_bytes")
        rows.append(
            [
                run["broker"],
                f"{run['throughput']:,.0f}",
                fraction,
                *(_ms(lat[k]) for k in ("p50", "p90", "p99", "p99.9", "max")),
                f"{proc['cpu_percent']:.0f}" if proc.get("cpu_percent") is not None else "",
                f"{proc['cpu_us_per_message']:.1f}" if proc.get("cpu_us_per_message") else "",
                f"{rss / 2**20:,.0f}" if rss else "",
            ]
        )
    return rows


HEADERS = [
    "target",
    "msg/s",
    "x peer",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "max",
    "CPU %",
    "us/msg",
    "RSS MiB",
]


def describe(args: argparse.Namespace) -> str:
    amount = f"{args.count:,} msgs" if args.count else f"{args.duration:g} s"
    rate = f"{args.rate:,} msg/s" if args.rate else "unlimited rate"
    return (
        f"{amount} x {args.body_size} B, credit {args.credit}, {args.settlement}"
        f"{', durable' if args.durable else ''}, {rate}, {args.connections} conn x "
        f"{args.links} link(s), {args.sender_arrow}->{args.receiver_arrow} arrows"
    )


def write_report(runs: list[dict], args: argparse.Namespace) -> pathlib.Path:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC)
    name = args.name or f"arrows-{stamp:%Y-%m-%dT%H%M%S}"
    path = out / f"{name}.json"
    report = {
        "date": stamp.isoformat(timespec="seconds"),
        "command": " ".join(["amqpspec", "bench", "arrows", *sys.argv[3:]])
        if pathlib.Path(sys.argv[0]).name == "amqpspec"
        else " ".join(sys.argv),
        "settings": {k: getattr(args, k) for k in SETTINGS},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "amqp10": amqp10.implementation(),  # compiled or pure (docs/speedups.md)
        },
        "load_average": os.getloadavg(),
        "runs": runs,
    }
    if not args.no_plots:
        report["plots"] = [p.name for p in plot_runs(runs, out / name, describe(args))]
    path.write_text(json.dumps(report, indent=1) + "\n")
    return path


SETTINGS = (
    "count",
    "duration",
    "body_size",
    "credit",
    "settlement",
    "durable",
    "rate",
    "max_unsettled",
    "connections",
    "links",
    "sender_arrow",
    "receiver_arrow",
)


# --- command line -----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--brokers",
        default=f"reference,{PEER}",
        help=f"comma-separated targets started here: {','.join(TARGETS)}",
    )
    parser.add_argument("--url", help="a running broker instead: amqp://[user:pass@]host:port")
    parser.add_argument("--address", help="the address with --url (default: arrows)")
    parser.add_argument("--broker-pid", type=int, help="the --url broker's pid (CPU, RSS)")
    parser.add_argument("--count", type=int, default=100_000, help="messages (0: --duration)")
    parser.add_argument("--duration", type=float, default=0.0, help="seconds to send (count 0)")
    parser.add_argument("--body-size", type=int, default=100, help=f"bytes, at least {MIN_BODY}")
    parser.add_argument("--credit", type=int, default=1000, help="receiver credit window per link")
    parser.add_argument(
        "--settlement", choices=("at-least-once", "presettled"), default="at-least-once"
    )
    parser.add_argument("--durable", action="store_true", help="durable messages and queue")
    parser.add_argument("--rate", type=int, default=0, help="msg/s over all links (0: max)")
    parser.add_argument(
        "--max-unsettled",
        type=int,
        default=0,
        help="sender: unacknowledged deliveries in flight at most (0: no limit)",
    )
    parser.add_argument("--connections", type=int, default=1, help="connections per arrow")
    parser.add_argument("--links", type=int, default=1, help="links per connection")
    parser.add_argument(
        "--arrows", choices=("c", "python"), default="c", help="implementation of both arrows"
    )
    parser.add_argument("--sender-arrow", choices=("c", "python"), help="override for the sender")
    parser.add_argument("--receiver-arrow", choices=("c", "python"), help="override: receiver")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--build-dir", default=str(DEFAULT_BUILD_DIR), help="C arrow builds")
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench"), help="report directory")
    parser.add_argument("--name", default="", help="report file name (default arrows-STAMP)")
    parser.add_argument("--no-plots", action="store_true", help="JSON and summary only")


def run(args: argparse.Namespace) -> int:
    args.sender_arrow = args.sender_arrow or args.arrows
    args.receiver_arrow = args.receiver_arrow or args.arrows
    if args.body_size < MIN_BODY or (not args.count and args.duration <= 0):
        print(f"--body-size at least {MIN_BODY}; --count or --duration", file=sys.stderr)
        return 2
    if "c" in (args.sender_arrow, args.receiver_arrow) and not c_arrow_available():
        print(f"{MISSING}; or --arrows python", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    unknown = set(names) - set(TARGETS)
    if unknown:
        print(f"unknown targets: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    runs = []
    with contextlib.ExitStack() as stack:
        work = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="arrows-")))
        if args.url:
            targets = [url_target(args)]
            if PEER in names:
                targets.append(
                    Target(PEER, "peer to peer (no broker)", "127.0.0.1", 0, "arrows", listen=True)
                )
        else:
            targets = stack.enter_context(started_targets(names, args))
        for target in targets:
            print(f"{target.label}: running", flush=True)
            runs.append(run_one(target, args, work))
    peer = next((r["throughput"] for r in runs if r["broker"] == PEER), None)
    for result in runs:  # the physical limit's fraction each target reached
        result["of_peer_to_peer"] = round(result["throughput"] / peer, 4) if peer else None
    title = describe(args) + "; latencies in ms; CPU, us/msg, RSS: the broker process"
    print_table(HEADERS, summary_rows(runs), title, left_columns=("target",))
    path = write_report(runs, args)
    print(f"report {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return script_main(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
