"""Fuzzer speed: network cases/s and frames/s, in-process executions/s, minimiser time.

    python -m amqpspec.bench.fuzz_bench [--seconds 10]
    python -m amqpspec.bench.fuzz_bench --broker URL|reference [--profile NAME] [--admin URL]
                                        [--seconds 120] [--seed 3] [--workers auto,1,32]
                                        [--processes auto,1]
                                        [--keep DIR]

Owns: the measurements bench/README.md quotes for the fuzzer, against a
reference broker it starts on free ports (reference_broker.runtime.process.BrokerProcess):
- network, new connection per case: `fuzz.oracle.run_case` on mutated legal
  conversations, one and two workers (threads); and a whole campaign
  (`fuzz.campaign.Campaign`, seed 1: generation, oracle, coverage), one and two workers;
- network, within one connection: frames/s of a flow storm on one open link (the bytes
  built once by amqp10.builder, sent and answered: the broker reads every frame);
- in-process: codec (`fuzz.inprocess.codec_one` on legal streams and mutations), engine
  and broker-in-memory executions/s (`run_inprocess` for the duration);
- the minimiser: seconds to minimise and confirm one finding of the `die-on-channel-reuse`
  fault (ddmin over the network, replay 3x).
With `--broker`: whole campaigns against that broker instead (bench.fuzz_campaigns: cases/s
as `amqpspec fuzz` gets them, triage included), one per `--workers` entry and
`--processes` entry (`amqpspec fuzz --processes`; auto, the default, as the CLI's).
Prints a table; not a test (times are never asserted).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time

from amqpspec.amqp10.builder import build_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.fuzz.campaign import Campaign, CampaignConfig, triage
from amqpspec.fuzz.case import Case, step
from amqpspec.fuzz.inprocess import TARGETS, codec_one, run_inprocess
from amqpspec.fuzz.model import QUEUE_HANDSHAKE as QUEUE
from amqpspec.fuzz.model import Conversation
from amqpspec.fuzz.mutators import STRATEGIES, mutate_case
from amqpspec.fuzz.oracle import Target, run_case
from amqpspec.fuzz.seeds import scenario
from amqpspec.reference_broker.runtime.process import BrokerProcess


def _cases(count: int) -> list[list]:
    out = []
    for index in range(count):
        rng = random.Random(f"bench:{index}")
        out.append(mutate_case(scenario(QUEUE, rng)[1], rng.choice(STRATEGIES), rng))
    return out


def network_cases(target: Target, seconds: float, workers: int) -> float:
    cases = _cases(2000)
    done = [0]
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def work(offset: int) -> None:
        index = offset
        while time.monotonic() < end:
            run_case(target, cases[index % len(cases)])
            index += workers
            with lock:
                done[0] += 1

    threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done[0] / (time.monotonic() - start)


def campaign_cases(target: Target, seconds: float, workers: int) -> float:
    """Cases/s of a whole campaign (`fuzz.campaign.Campaign`: case generation, the oracle,
    state coverage, triage of anything found) as `amqpspec fuzz` runs it, seed 1."""
    with tempfile.TemporaryDirectory() as out:
        config = CampaignConfig(target, out, seed=1, duration=seconds, workers=workers)
        stats = Campaign(config).run()
    return stats.rate


def frames_within_a_connection(target: Target, frames: int = 20000) -> float:
    conv = Conversation(QUEUE).open()
    conv.attach_receiver(conv.begin(), credit=0)
    flow = COMPOSITE_CLASSES["flow"](
        next_incoming_id=0,
        incoming_window=2048,
        next_outgoing_id=0,
        outgoing_window=2048,
        handle=0,
        delivery_count=0,
        link_credit=0,
    )
    storm = step(build_frame(flow) * frames, f"flow x{frames}")
    start = time.monotonic()
    run_case(target, [*conv.steps(), storm])
    return frames / (time.monotonic() - start)


def codec_rate(seconds: float) -> float:
    inputs = [b"".join(s.data for s in c) for c in _cases(500)]
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for data in inputs:
            codec_one(data)
        count += len(inputs)
    return count / seconds


def minimiser_seconds() -> float:
    from amqpspec.fuzz.detection import Supervised

    broker = Supervised(["die-on-channel-reuse"])
    try:
        target = Target("127.0.0.1", broker.port, QUEUE)
        conv = Conversation(QUEUE).open()
        session = conv.begin()
        conv.attach_sender(session)
        conv.attach_receiver(session, credit=5)
        begin = COMPOSITE_CLASSES["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)
        steps = [*conv.steps(), step(build_frame(begin), "begin[reused channel]")]
        outcome = run_case(target, steps)
        start = time.monotonic()
        result = triage(target, Case(steps, "bench", "0"), outcome)
        assert result is not None, "the planted fault was not confirmed"
        return time.monotonic() - start
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m amqpspec.bench.fuzz_bench")
    parser.add_argument(
        "--seconds", type=float, help="per measurement (default 10; 120 with --broker)"
    )
    parser.add_argument("--broker", help="whole campaigns against this broker URL, or reference")
    parser.add_argument("--profile", default="generic", help="with --broker (default generic)")
    parser.add_argument("--admin", help="with --broker: management URL (the fuzz queue declared)")
    parser.add_argument("--seed", type=int, default=3, help="with --broker (default 3)")
    parser.add_argument(
        "--workers", default="auto", help="with --broker: auto or N, comma-separated"
    )
    parser.add_argument(
        "--processes",
        default="auto",
        help="with --broker: worker processes, auto or N, comma-separated (default auto)",
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="with --broker: each campaign's directory under DIR"
    )
    args = parser.parse_args(argv)
    if args.broker:
        return _campaigns(args)
    args.seconds = args.seconds or 10.0
    rows: list[tuple[str, str]] = []
    with BrokerProcess(admin=False) as broker:
        target = Target("127.0.0.1", broker.port, QUEUE)
        for workers in (1, 2):
            rate = network_cases(target, args.seconds, workers)
            rows.append((f"network: new-connection cases/s, {workers} worker(s)", f"{rate:,.0f}"))
        for workers in (1, 2):
            rate = campaign_cases(target, args.seconds, workers)
            rows.append((f"network: campaign cases/s, {workers} worker(s)", f"{rate:,.0f}"))
        rate = frames_within_a_connection(target)
        rows.append(("network: frames/s within one connection (flow storm)", f"{rate:,.0f}"))
    rows.append(
        ("in-process codec executions/s (mutated streams)", f"{codec_rate(args.seconds):,.0f}")
    )
    for name in ("engine", "broker"):
        result = run_inprocess(TARGETS[name], args.seconds, seed=1)
        rows.append(
            (f"in-process {name} executions/s", f"{result.executions / result.seconds:,.0f}")
        )
    rows.append(("minimise + confirm one finding (s)", f"{minimiser_seconds():.1f}"))
    _print(rows)
    return 0


def _print(rows: list[tuple[str, str]]) -> None:
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>10}", flush=True)


def _campaigns(args: argparse.Namespace) -> int:
    from amqpspec.bench.fuzz_campaigns import run_campaign, target_for

    seconds = args.seconds or 120.0
    entries = [
        (w.strip(), p.strip())
        for w in args.workers.split(",")
        if w.strip()
        for p in args.processes.split(",")
        if p.strip()
    ]
    if args.broker == "reference":
        with BrokerProcess(admin=False) as broker:
            target = target_for(f"amqp://127.0.0.1:{broker.port}", "reference", None)
            pid = broker.proc.pid
            rows = [
                run_campaign(target, seconds, args.seed, w, args.keep, pid, p).row("reference")
                for w, p in entries
            ]
    else:
        target = target_for(args.broker, args.profile, args.admin)
        rows = [
            run_campaign(target, seconds, args.seed, w, args.keep, None, p).row(args.profile)
            for w, p in entries
        ]
    _print(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
