"""`amqpspec bench`: one sub-benchmark per module with `add_arguments(parser)` / `run(args)`.

Owns: dispatch only. `amqpspec bench codec` runs bench.codec_bench (amqp10 against
python-qpid-proton), `amqpspec bench brokers` bench.broker_bench (reference broker against RabbitMQ
3.10 and the Proton C example broker), the bench.overload modules (durability and overload:
kill-soak, alarm-flood, conn-scale, hostile), `amqpspec bench arrows` bench.arrows.run (quiver-style
sender/receiver arrows); add further benchmarks to BENCHMARKS.
"""

from __future__ import annotations

import argparse
import importlib

# name -> (module with add_arguments/run, one-line help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "codec": (
        "amqpspec.bench.codec_bench",
        "amqp10 codec vs python-qpid-proton: transfer/flow/disposition",
    ),
    "brokers": (
        "amqpspec.bench.broker_bench",
        "msgs/s: reference broker vs RabbitMQ 3.10 vs Proton C example broker (C clients)",
    ),
    "kill-soak": (
        "amqpspec.bench.overload.kill_soak",
        "kill -9 cycles under confirmed traffic: durable classic + stream, lost/duplicates",
    ),
    "arrows": (
        "amqpspec.bench.arrows.run",
        "quiver-style arrows: rates, end-to-end latency, broker CPU/RSS, peer-to-peer limit",
    ),
    "alarm-flood": (
        "amqpspec.bench.overload.alarm_flood",
        "1 GiB against a 256 MiB memory watermark: RSS, blocked publishers, draining consumers",
    ),
    "conn-scale": (
        "amqpspec.bench.overload.conn_scale",
        "5,000 idle connections x 2 sessions: broker KiB per connection, a new client's latency",
    ),
    "hostile": (
        "amqpspec.bench.overload.hostile",
        "1,000 slowloris + 1,000 random-byte peers: a normal client's rate, the broker's answers",
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    for name, (module_name, help_text) in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_bench_module=module)


def run(args: argparse.Namespace) -> int:
    module = getattr(args, "_bench_module", None)
    if module is None:
        print("amqpspec bench: choose one of " + ", ".join(BENCHMARKS))
        return 2
    return int(module.run(args) or 0)
