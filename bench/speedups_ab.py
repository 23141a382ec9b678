"""A/B of amqp10's compiled fast path against its pure-Python path (docs/speedups.md).

    python3 -m amqpspec.bench.speedups_ab [--rounds 3] [--pcap PATH]
        [--out reports/bench/speedups.json]

Each round runs one child process per mode (compiled, then AMQP10_PURE=1), alternating, and
times process CPU seconds (robust to other load, unlike wall time) of: decoding a stream of
transfer/flow/disposition frames with FrameDecoder, frames.encode_transfer_frame, encoding a
Flow with encode_frame, and triage's decode + check of the synthetic capture that
bench/triage_bench.py check uses. Prints the best of each per mode and compiled/pure speedups.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _cpu(function: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def child(pcap: str) -> dict[str, object]:
    from amqpspec import amqp10
    from amqpspec.amqp10 import frames
    from amqpspec.amqp10.composites import Accepted, Disposition, Flow
    from amqpspec.bench.triage_bench import time_check

    message = b"\x00Sw\xa1\x0chello world!"
    transfer = frames.encode_transfer_frame(1, 0, 12345, b"tag-000001", 0, False, message)
    flow = Flow(
        next_incoming_id=5,
        incoming_window=2048,
        next_outgoing_id=9,
        outgoing_window=2048,
        handle=0,
        delivery_count=100,
        link_credit=200,
    )
    disposition = Disposition(role=True, first=100, last=199, settled=True, state=Accepted())
    burst = transfer * 8 + frames.encode_frame(flow, 1) + frames.encode_frame(disposition, 1)
    stream = frames.AMQP_HEADER.encode() + burst * 2000

    def decode() -> None:
        decoder = frames.FrameDecoder()
        decoder.feed(stream)
        while decoder.next_item() is not None:
            pass

    def encode_transfers() -> None:
        for i in range(20_000):
            frames.encode_transfer_frame(1, 0, i, b"tag-000001", 0, False, message)

    def encode_flows() -> None:
        for _ in range(5_000):
            frames.encode_frame(flow, 1)

    checked = time_check(pcap)[0]
    return {
        "amqp10": amqp10.implementation(),
        "decode 20k frames": _cpu(decode),
        "encode_transfer_frame x20k": _cpu(encode_transfers),
        "encode_frame(Flow) x5k": _cpu(encode_flows),
        f"triage check {checked} frames": _cpu(lambda: time_check(pcap), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pcap", help="default: the triage bench's synthetic capture")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    pcap = args.pcap or os.path.join(tempfile.gettempdir(), "amqpspec-bench-100000.pcap")
    if args.child:
        print(json.dumps(child(pcap)))
        return 0
    if not os.path.exists(pcap):
        from amqpspec.bench.triage_bench import write_synthetic_capture

        write_synthetic_capture(pcap, 100_000)
    best: dict[str, dict[str, float]] = {"compiled": {}, "pure": {}}
    seen: dict[str, object] = {}
    for _ in range(args.rounds):
        for mode in ("compiled", "pure"):
            env = {k: v for k, v in os.environ.items() if k != "AMQP10_PURE"}
            env["PYTHONPATH"] = str(ROOT)
            if mode == "pure":
                env["AMQP10_PURE"] = "1"
            done = subprocess.run(
                [sys.executable, "-m", "amqpspec.bench.speedups_ab", "--child", "--pcap", pcap],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            result = json.loads(done.stdout)
            seen[mode] = result.pop("amqp10")
            for case, seconds in result.items():
                best[mode][case] = min(seconds, best[mode].get(case, float("inf")))
    print(f"compiled: {seen['compiled']}\npure: {seen['pure']}")
    print(f"{'CPU seconds, best of ' + str(args.rounds):40s} {'compiled':>9s} {'pure':>9s} speedup")
    for case, pure in best["pure"].items():
        compiled = best["compiled"][case]
        print(f"{case:40s} {compiled:9.4f} {pure:9.4f} {pure / compiled:6.2f}x")
    if args.out:
        report = {"implementations": seen, "best_cpu_seconds": best, "load": os.getloadavg()}
        pathlib.Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
