"""The seeds' trends with the arrows (bench/README.md "Arrows"): throughput and latency against the
credit window, and rate and memory against queue depth ("less is more") up to the memory watermark.

    python -m amqpspec.bench.arrows.trends credit [--brokers reference,rabbitmq] [--count 20000]
        [--windows 1,10,100,1000,10000] [--rabbitmq-port P ...]
    python -m amqpspec.bench.arrows.trends depth [--brokers reference,rabbitmq] [--count 3000000]
        [--body-size 100] [--memory-limit-mib 512] [--paging-ratio 0.5] [--blocked-wait 10]
        [--sender-arrow python|c] [--rabbitmq-port P --rabbitmq-mgmt-port M
        --rabbitmq-node N --rabbitmq-data-dir D]

credit: the quorum-queue flow-control post's two sweeps, translated to AMQP 1.0: the
publisher-confirm in-flight limit is the sender's `--max-unsettled` (receiver credit 1000),
the consumer prefetch is the receiver's link credit (sender in-flight limit 1000). One run
of `--count` messages per window and broker, C arrows, 100-byte bodies, at-least-once.
depth: the consumer falls behind completely. Both brokers run with the same memory
watermark (`--memory-limit-mib`: the reference broker's --memory-high-watermark-bytes,
RabbitMQ's vm_memory_high_watermark.absolute, which pages classic queues to disk above
`--paging-ratio` of it). The sender (in-flight 1000) publishes `--count` messages with no
consumer until it is done or the memory alarm has blocked it for `--blocked-wait` s; then
the receiver (credit 1000, C arrow) drains the queue while the sender finishes. The sender is
the Python arrow unless `--sender-arrow c`: Proton C 0.37 overruns the window the alarm closes
(a client fault, reports/client-findings.md), so the C sender's run often ends with the
broker's amqp:session:window-violation. Recorded:
publish rate against the depth reached, drain rate against the depth left, the broker's
RSS against depth (/proc, every 0.5 s), the broker's own memory, depth, alarm and paged-out
count (management API, every 0.5 s: bench.arrows.brokerwatch), and the events (alarm set and
cleared, paging started, consumer started) with the depth at each, the seconds in alarm and
the seconds the publisher sent nothing (pauses of at least 0.5 s).
Both sweeps start their brokers here (RabbitMQ on free ports with a node of its own unless
--rabbitmq-port/--rabbitmq-mgmt-port/--rabbitmq-node/--rabbitmq-data-dir name them) and stop
them at the end. Output: reports/bench/trends-credit.json|png, trends-depth.json|png.
Owns: the sweeps and their plots; brokers from bench.broker_bench, arrows from bench.arrows.run.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime
import itertools
import json
import os
import pathlib
import sys
import tempfile
import time
from collections.abc import Iterator

from amqpspec.bench.arrows import run as arrows
from amqpspec.bench.arrows.brokerwatch import INTERVAL as WATCH_INTERVAL
from amqpspec.bench.arrows.brokerwatch import BrokerWatch
from amqpspec.bench.arrows.build import DEFAULT_BUILD_DIR, MISSING, c_arrow_available
from amqpspec.bench.arrows.procstat import ProcessSampler, pid_listening_on
from amqpspec.bench.arrows.results import per_second
from amqpspec.bench.arrows.spec import ArrowSpec, read_records
from amqpspec.bench.broker_bench import QUEUE

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
WINDOWS = (1, 10, 100, 1000, 10000)
SWEEPS = ("in-flight", "prefetch")  # what the window bounds: sender unsettled / receiver credit
DEPTH_COUNT = 3_000_000
BLOCKED_GAP = 0.5  # seconds without a publish that count as the publisher being blocked


def _run_args(options: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    arrows.add_arguments(parser)
    args = parser.parse_args(options)
    args.sender_arrow = args.sender_arrow or args.arrows
    args.receiver_arrow = args.receiver_arrow or args.arrows
    return args


def credit_sweep(args: argparse.Namespace) -> dict:
    windows = [int(w) for w in args.windows.split(",")]
    base = _run_args(["--count", str(args.count), "--timeout", str(args.timeout)])
    points = []
    with tempfile.TemporaryDirectory(prefix="arrows-trends-") as tmp:
        work = pathlib.Path(tmp)
        with sweep_targets(args, memory_limit=False) as targets:
            for target, _admin_url in targets:
                for sweep in SWEEPS:
                    for window in windows:
                        base.max_unsettled = window if sweep == "in-flight" else 1000
                        base.credit = window if sweep == "prefetch" else 1000
                        result = arrows.run_one(target, base, work)
                        point = {
                            "broker": target.name,
                            "label": target.label,
                            "sweep": sweep,
                            "window": window,
                            "throughput": result["throughput"],
                            "latency_ms": result["latency_ms"],
                            "broker_process": result["broker_process"],
                        }
                        points.append(point)
                        print(
                            f"{target.name} {sweep} {window}: {result['throughput']:,.0f} msg/s,"
                            f" p50 {result['latency_ms']['p50']:.2f} ms,"
                            f" p99 {result['latency_ms']['p99']:.2f} ms",
                            flush=True,
                        )
    return {"count": args.count, "windows": windows, "points": points}


def _depth_at(sent: list[int], got: list[int], t_ns: int) -> int:
    """Queue depth at monotonic time `t_ns`: published by then - received by then."""
    return bisect.bisect_right(sent, t_ns) - bisect.bisect_right(got, t_ns)


def _depth_series(sent: list[int], got: list[int], samples: list) -> list[list[float]]:
    """[seconds, depth, rss MiB] per broker sample: depth = published - received by then."""
    return [
        [round(t - samples[0][0], 2), _depth_at(sent, got, int(t * 1e9)), round(rss / 2**20, 1)]
        for t, _cpu, rss in samples
    ]


def _blocked_seconds(sent: list[int], gap: float = BLOCKED_GAP) -> float:
    """Seconds the publisher sent nothing, summed over its pauses of at least `gap` s."""
    limit = int(gap * 1e9)
    pauses = (b - a for a, b in itertools.pairwise(sent) if b - a >= limit)
    return round(sum(pauses) / 1e9, 2)


def broker_options(
    args: argparse.Namespace, memory_limit: bool
) -> tuple[list[str], dict[str, str]]:
    """The reference broker's options and rabbitmq.sh's environment: the RabbitMQ ports, node
    and data dir when given, and with `memory_limit` the depth sweep's watermark for both."""
    limit = str(args.memory_limit_mib * 2**20)
    memory_limit = memory_limit and args.memory_limit_mib > 0
    reference = ["--memory-high-watermark-bytes", limit] if memory_limit else []
    rabbitmq: dict[str, str] = {}
    if memory_limit:  # and the management figures every poll of the watch, not every 5 s
        rabbitmq |= {"MEMORY_HIGH_WATERMARK_BYTES": limit}
        rabbitmq |= {"STATS_INTERVAL_MS": str(int(WATCH_INTERVAL * 1000))}
    if memory_limit and args.paging_ratio:
        rabbitmq |= {"MEMORY_PAGING_RATIO": str(args.paging_ratio)}
    for option, name in (
        ("rabbitmq_port", "AMQP_PORT"),
        ("rabbitmq_mgmt_port", "MGMT_PORT"),
        ("rabbitmq_node", "NODE_NAME"),
        ("rabbitmq_data_dir", "RABBITMQ_DATA_DIR"),
    ):
        if getattr(args, option):
            rabbitmq[name] = str(getattr(args, option))
    return reference, rabbitmq


@contextlib.contextmanager
def sweep_targets(
    args: argparse.Namespace, memory_limit: bool
) -> Iterator[list[tuple[arrows.Target, str]]]:
    """(target, management URL) per broker of --brokers, started here and stopped at the end."""
    from amqpspec.bench import broker_bench

    reference, rabbitmq = broker_options(args, memory_limit)
    with (
        tempfile.TemporaryDirectory(prefix="arrows-depth-brokers-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        work = pathlib.Path(tmp)
        targets = []
        for name in args.brokers.split(","):
            if name == "reference":
                broker = stack.enter_context(broker_bench.reference_broker(work, *reference))
            elif name == "rabbitmq":
                broker = stack.enter_context(broker_bench.rabbitmq_broker(work, rabbitmq))
            else:
                raise SystemExit(f"trends: brokers are reference and rabbitmq, not {name}")
            user = "guest" if name == "rabbitmq" else ""
            pid = broker.pid or pid_listening_on(broker.port)
            target = arrows.Target(
                broker.name, broker.label, "127.0.0.1", broker.port, broker.address, user, user, pid
            )
            targets.append((target, broker.admin_url or ""))
        yield targets


def _events(watch: list[list[float]], sent: list[int], got: list[int], t0: float) -> list[dict]:
    """Memory alarm set / cleared and paging started, from the broker's own figures."""
    events: list[dict] = []
    alarm, paging = False, False
    for t, _depth, mem_mib, on, paged in watch:
        found = []
        if bool(on) != alarm:
            alarm = bool(on)
            found.append("alarm set" if alarm else "alarm cleared")
        if paged and not paging:
            paging = True
            found.append("paging started")
        depth = _depth_at(sent, got, int((t0 + t) * 1e9)) if found else 0
        events += [{"event": e, "t": t, "depth": depth, "memory_mib": mem_mib} for e in found]
    return events


def depth_run(
    target: arrows.Target, admin_url: str, args: argparse.Namespace, work: pathlib.Path
) -> dict:
    build = pathlib.Path(args.build_dir)
    common = dict(
        host=target.host,
        port=target.port,
        address=target.address,
        count=args.count,
        body_size=args.body_size,
        credit=1000,
        timeout=args.timeout,
        user=target.user,
        password=target.password,
    )
    records = work / f"depth-{target.name}.bin"
    sampler = ProcessSampler(target.pid).start()
    t0 = sampler.samples[0][0]
    watch = BrokerWatch(admin_url, QUEUE, t0).start()
    sent, got, consumer_at = _publish_then_consume(args, common, records, build, watch)
    summary = sampler.stop()
    return _depth_figures(target, records, sampler, watch, (t0, consumer_at), (sent, got), summary)


def _publish_then_consume(
    args: argparse.Namespace,
    common: dict,
    records: pathlib.Path,
    build: pathlib.Path,
    watch: BrokerWatch,
) -> tuple[dict, dict, float]:
    """The sender arrow, then the receiver arrow; their results and when the consumer
    started (monotonic). Stops `watch`."""
    sender = arrows.spawn_arrow(
        args.sender_arrow, ArrowSpec("send", **common, max_unsettled=1000), build
    )
    receiver = None
    try:
        # the consumer starts when everything is published, or when the alarm has blocked
        # the publisher for --blocked-wait s (a broker that does not page blocks for good)
        deadline = time.monotonic() + args.timeout
        while sender.poll() is None and time.monotonic() < deadline:
            if watch.alarm_seconds() >= args.blocked_wait:
                break
            time.sleep(0.2)
        consumer_at = time.monotonic()
        # a sender that already failed fails the run now, not after the receiver's timeout
        done = arrows.arrow_result(sender, "sender arrow", 30) if sender.poll() is not None else {}
        receiver = arrows.spawn_arrow("c", ArrowSpec("receive", **common, out=str(records)), build)
        arrows.wait_ready(receiver, "receiver arrow")
        got = arrows.arrow_result(receiver, "receiver arrow", args.timeout + 30)
        sent = done or arrows.arrow_result(sender, "sender arrow", args.timeout + 30)
    finally:
        for process in (sender, receiver):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)
        watch.stop()
    return sent, got, consumer_at


def _depth_figures(
    target: arrows.Target,
    records: pathlib.Path,
    sampler: ProcessSampler,
    watch: BrokerWatch,
    times: tuple[float, float],
    results: tuple[dict, dict],
    summary: dict,
) -> dict:
    """The run's rates, depths, events and series from the receiver's records."""
    t0, consumer_at = times
    sent, got = results
    sent_ns, received_ns = read_records(str(records))
    send_sorted, got_sorted = sorted(sent_ns), sorted(received_ns)
    publish = per_second(send_sorted, send_sorted[0])
    drain = per_second(got_sorted, got_sorted[0])
    # depth after the last publish of each publishing second, before each draining second
    last_sent = send_sorted[-1]
    publish_t = [min(send_sorted[0] + (i + 1) * 10**9 - 1, last_sent) for i in range(len(publish))]
    drain_t = [got_sorted[0] + i * 10**9 - 1 for i in range(len(drain))]
    events = _events(watch.samples, send_sorted, got_sorted, t0)
    events.append(
        {
            "event": "consumer started",
            "t": round(consumer_at - t0, 2),
            "depth": _depth_at(send_sorted, got_sorted, int(consumer_at * 1e9)),
        }
    )
    events.sort(key=lambda e: e["t"])
    return {
        "broker": target.name,
        "label": target.label,
        "sent": sent["sent"],
        "received": got["received"],
        "publish_rates": publish,
        "publish_depth": [_depth_at(send_sorted, got_sorted, t) for t in publish_t],
        "drain_rates": drain,
        "drain_depth": [_depth_at(send_sorted, got_sorted, t) for t in drain_t],
        "series": _depth_series(send_sorted, got_sorted, sampler.samples),
        "broker_watch": watch.samples,
        "events": events,
        "alarm_seconds": watch.alarm_total(),
        "publisher_blocked_seconds": _blocked_seconds(send_sorted),
        "broker_process": summary,
    }


def depth_sweep(args: argparse.Namespace) -> dict:
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="arrows-depth-") as tmp,
        sweep_targets(args, memory_limit=True) as targets,
    ):
        for target, admin_url in targets:
            runs.append(depth_run(target, admin_url, args, pathlib.Path(tmp)))
            last = runs[-1]
            print(
                f"{target.name}: published {last['sent']:,}, drained {last['received']:,}; "
                f"peak RSS {last['broker_process']['rss_peak_bytes'] / 2**20:,.0f} MiB; "
                f"alarm {last['alarm_seconds']:.1f} s, publisher blocked "
                f"{last['publisher_blocked_seconds']:.1f} s; "
                + ", ".join(f"{e['event']} at {e['depth']:,}" for e in last["events"]),
                flush=True,
            )
    return {
        "count": args.count,
        "body_size": args.body_size,
        "memory_limit_mib": args.memory_limit_mib,
        "paging_ratio": args.paging_ratio,
        "blocked_wait": args.blocked_wait,
        "runs": runs,
    }


# --- plots -----------------------------------------------------------------------------


def plot_credit(report: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    keys = sorted({(p["label"], p["sweep"]) for p in report["points"]})
    for label, sweep in keys:
        points = [p for p in report["points"] if (p["label"], p["sweep"]) == (label, sweep)]
        windows = [p["window"] for p in points]
        name = f"{label}: {sweep}"
        axes[0].plot(windows, [p["throughput"] for p in points], marker="o", label=name)
        axes[1].plot(windows, [p["latency_ms"]["p99"] for p in points], marker="o", label=name)
    axes[0].set_ylabel("msg/s (received)")
    axes[1].set_ylabel("p99 end-to-end latency (ms, log)")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("window (sender max unsettled / receiver link credit)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"throughput and latency vs window, {report['count']:,} msgs per point", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


EVENT_MARKERS = {"alarm set": "v", "alarm cleared": "^", "paging started": "s"}


def plot_depth(report: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(2, 2, figsize=(13, 8.5))
    (rate_in, rate_out), (memory, timeline) = grid
    for index, run in enumerate(report["runs"]):
        color = f"C{index}"
        label = run["label"]
        rate_in.plot(run["publish_depth"], run["publish_rates"], ".", color=color, label=label)
        rate_out.plot(run["drain_depth"], run["drain_rates"], ".", color=color, label=label)
        series = run["series"]
        memory.plot([s[1] for s in series], [s[2] for s in series], ".", color=color, label=label)
        timeline.plot([s[0] for s in series], [s[1] for s in series], "-", color=color, label=label)
        for event in run.get("events", []):
            name, depth = event["event"], event["depth"]
            if name in EVENT_MARKERS:
                rate_in.axvline(depth, color=color, ls=":", lw=1)
            marker = EVENT_MARKERS.get(name, "o")
            timeline.plot(event["t"], depth, marker, color=color, ms=8)
            timeline.annotate(name, (event["t"], depth), fontsize=7, rotation=30)
    limit = report.get("memory_limit_mib")
    if limit:
        memory.axhline(limit, color="red", lw=1, label=f"memory watermark {limit} MiB")
        paging = limit * report["paging_ratio"]
        memory.axhline(paging, color="orange", lw=1, ls="--", label="RabbitMQ paging threshold")
    rate_in.set_xlabel("queue depth reached (dotted: alarm set/cleared, paging started)")
    rate_in.set_ylabel("publish msg/s")
    rate_out.set_xlabel("queue depth left")
    rate_out.set_ylabel("drain msg/s")
    rate_out.invert_xaxis()
    memory.set_xlabel("queue depth")
    memory.set_ylabel("broker RSS (MiB)")
    timeline.set_xlabel("seconds")
    timeline.set_ylabel("queue depth (events marked)")
    for ax in (rate_in, rate_out, memory, timeline):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"queue depth: {report['count']:,} x {report.get('body_size', 100)} B published with no"
        f" consumer until done or blocked {report.get('blocked_wait', 0):g} s by the memory"
        f" alarm, then drained; memory watermark {limit or 'default'} MiB",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _parser() -> argparse.ArgumentParser:
    """The command line: the trend, the brokers, the depth run's and the RabbitMQ node's options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trend", choices=("credit", "depth"))
    parser.add_argument("--brokers", default="reference,rabbitmq")
    parser.add_argument("--count", type=int, help="messages per point (credit 20000, depth 3M)")
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)))
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--build-dir", default=str(DEFAULT_BUILD_DIR))
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench"))
    depth = parser.add_argument_group("depth")
    depth.add_argument("--body-size", type=int, default=100, help="bytes per message")
    depth.add_argument(
        "--memory-limit-mib",
        type=int,
        default=512,
        help="memory watermark of both brokers, MiB (0: their defaults, 0.4 of RAM)",
    )
    depth.add_argument(
        "--paging-ratio",
        type=float,
        default=0.5,
        help="RabbitMQ pages queues to disk above this fraction of the watermark",
    )
    depth.add_argument(
        "--blocked-wait",
        type=float,
        default=10.0,
        help="seconds the alarm may block the publisher before the consumer starts",
    )
    depth.add_argument(
        "--sender-arrow",
        choices=("c", "python"),
        default="python",
        help="publisher arrow (python: Proton C 0.37, the C arrow, sends beyond the session"
        " window the alarm closes while transfers are in flight, and the reference broker rightly"
        " ends its session with window-violation; reports/client-findings.md)",
    )
    rabbitmq = parser.add_argument_group("RabbitMQ node (both sweeps)")
    rabbitmq.add_argument("--rabbitmq-port", type=int, help="AMQP port (default: a free one)")
    rabbitmq.add_argument("--rabbitmq-mgmt-port", type=int, help="management port (default: free)")
    rabbitmq.add_argument(
        "--rabbitmq-node", help="node name (default amqpspec-bench-PID@localhost)"
    )
    rabbitmq.add_argument("--rabbitmq-data-dir", help="data dir (default: a temp dir)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not c_arrow_available():  # both sweeps receive with the C arrow
        print(MISSING, file=sys.stderr)
        return 2
    args.count = args.count or (20_000 if args.trend == "credit" else DEPTH_COUNT)
    report = credit_sweep(args) if args.trend == "credit" else depth_sweep(args)
    report |= {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join([sys.executable, "-m", "amqpspec.bench.arrows.trends", *sys.argv[1:]]),
        "load_average": os.getloadavg(),
    }
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"trends-{args.trend}"
    (plot_credit if args.trend == "credit" else plot_depth)(report, stem.with_suffix(".png"))
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"report {stem.with_suffix('.json')}, plot {stem.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
