"""The seeds' trends with the arrows (issue 12): throughput and latency against the credit
window, and rate and memory against queue depth ("less is more").

    python -m bench.arrows.trends credit [--brokers reference,rabbitmq] [--count 20000]
        [--windows 1,10,100,1000,10000]
    python -m bench.arrows.trends depth [--brokers reference,rabbitmq] [--count 1000000]

credit: the quorum-queue flow-control post's two sweeps, translated to AMQP 1.0: the
publisher-confirm in-flight limit is the sender's `--max-unsettled` (receiver credit 1000),
the consumer prefetch is the receiver's link credit (sender in-flight limit 1000). One run
of `--count` messages per window and broker, C arrows, 100-byte bodies, at-least-once.
depth: the consumer falls behind completely: the sender publishes `--count` messages
with no consumer (the queue grows to --count), then the receiver drains it; publish rate
against the queue depth reached, drain rate against the depth left, and the broker's RSS
against depth (sampled every 0.5 s).
Output: reports/bench/trends-credit.json|png, trends-depth.json|png.
Owns: the sweeps and their plots; brokers and arrows come from bench.arrows.run.
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import json
import os
import pathlib
import sys
import tempfile

from bench.arrows import run as arrows
from bench.arrows.build import DEFAULT_BUILD_DIR
from bench.arrows.procstat import ProcessSampler
from bench.arrows.results import per_second
from bench.arrows.spec import ArrowSpec, read_records

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
WINDOWS = (1, 10, 100, 1000, 10000)
SWEEPS = ("in-flight", "prefetch")  # what the window bounds: sender unsettled / receiver credit


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
        with arrows.started_targets(args.brokers.split(","), base) as targets:
            for target in targets:
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


def _depth_series(sent: list[int], got: list[int], samples: list) -> list[list[float]]:
    """[seconds, depth, rss MiB] per broker sample: depth = published - received by then."""
    series = []
    for t, _cpu, rss in samples:
        t_ns = int(t * 1e9)
        depth = bisect.bisect_right(sent, t_ns) - bisect.bisect_right(got, t_ns)
        series.append([round(t - samples[0][0], 2), depth, round(rss / 2**20, 1)])
    return series


def depth_run(target: arrows.Target, args: argparse.Namespace, work: pathlib.Path) -> dict:
    build = pathlib.Path(args.build_dir)
    common = dict(
        host=target.host,
        port=target.port,
        address=target.address,
        count=args.count,
        body_size=100,
        credit=1000,
        timeout=args.timeout,
        user=target.user,
        password=target.password,
    )
    records = work / f"depth-{target.name}.bin"
    sampler = ProcessSampler(target.pid).start()
    sender = arrows.spawn_arrow("c", ArrowSpec("send", **common, max_unsettled=1000), build)
    sent = arrows.arrow_result(sender, "sender arrow", args.timeout + 30)
    receiver = arrows.spawn_arrow("c", ArrowSpec("receive", **common, out=str(records)), build)
    arrows.wait_ready(receiver, "receiver arrow")
    got = arrows.arrow_result(receiver, "receiver arrow", args.timeout + 30)
    summary = sampler.stop()
    sent_ns, received_ns = read_records(str(records))
    send_sorted, got_sorted = sorted(sent_ns), sorted(received_ns)
    start = send_sorted[0]
    publish = per_second(send_sorted, start)
    drain = per_second(got_sorted, got_sorted[0])
    # depth reached at the end of each publishing second, left at the start of each draining one
    publish_depth = [sum(publish[: i + 1]) for i in range(len(publish))]
    drain_depth = [len(got_sorted) - sum(drain[:i]) for i in range(len(drain))]
    return {
        "broker": target.name,
        "label": target.label,
        "sent": sent["sent"],
        "received": got["received"],
        "publish_rates": publish,
        "publish_depth": publish_depth,
        "drain_rates": drain,
        "drain_depth": drain_depth,
        "series": _depth_series(send_sorted, got_sorted, sampler.samples),
        "broker_process": summary,
    }


def depth_sweep(args: argparse.Namespace) -> dict:
    base = _run_args(["--count", str(args.count)])
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="arrows-depth-") as tmp,
        arrows.started_targets(args.brokers.split(","), base) as targets,
    ):
        for target in targets:
            runs.append(depth_run(target, args, pathlib.Path(tmp)))
            last = runs[-1]
            print(
                f"{target.name}: published {last['sent']:,}, drained {last['received']:,}; "
                f"peak RSS {last['broker_process']['rss_peak_bytes'] / 2**20:,.0f} MiB",
                flush=True,
            )
    return {"count": args.count, "runs": runs}


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


def plot_depth(report: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.5))
    for run in report["runs"]:
        axes[0].plot(run["publish_depth"], run["publish_rates"], marker=".", label=run["label"])
        axes[1].plot(run["drain_depth"], run["drain_rates"], marker=".", label=run["label"])
        series = run["series"]
        axes[2].plot([s[1] for s in series], [s[2] for s in series], marker=".", label=run["label"])
    axes[0].set_xlabel("queue depth reached")
    axes[0].set_ylabel("publish msg/s (no consumer)")
    axes[1].set_xlabel("queue depth left")
    axes[1].set_ylabel("drain msg/s (no publisher)")
    axes[1].invert_xaxis()
    axes[2].set_xlabel("queue depth")
    axes[2].set_ylabel("broker RSS (MiB)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"queue depth: {report['count']:,} x 100 B published, then drained", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trend", choices=("credit", "depth"))
    parser.add_argument("--brokers", default="reference,rabbitmq")
    parser.add_argument("--count", type=int, help="messages per point (credit 20000, depth 1M)")
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)))
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--build-dir", default=str(DEFAULT_BUILD_DIR))
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench"))
    args = parser.parse_args(argv)
    args.count = args.count or (20_000 if args.trend == "credit" else 1_000_000)
    report = credit_sweep(args) if args.trend == "credit" else depth_sweep(args)
    report |= {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join([sys.executable, "-m", "bench.arrows.trends", *sys.argv[1:]]),
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
