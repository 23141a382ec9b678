"""`amqpspec triage`: the triage job, the synthetic corpus generator and its scorer.

Owns: argument parsing and dispatch only:
  amqpspec triage INPUT... --out DIR [--master local[*]|URL] [--partitions N]
                  [--broker-label NAME]                       (spark_triage.job)
  amqpspec triage synth --out DIR --connections N [--seed N]  (spark_triage.synth)
  amqpspec triage score DIR --truth truth.json                (spark_triage.score)
"""

from __future__ import annotations

import argparse
import sys

from amqpspec.spark_triage import job


def add_arguments(parser: argparse.ArgumentParser) -> None:
    job.add_arguments(parser)
    parser.add_argument("--connections", type=int, default=40, help="synth: connections")
    parser.add_argument("--seed", type=int, default=1, help="synth: random seed")
    parser.add_argument("--truth", help="score: the truth.json written by synth")
    parser.epilog = (
        "forms: triage INPUT... --out DIR | triage synth --out DIR --connections N "
        "[--seed N] | triage score DIR --truth truth.json"
    )


def run(args: argparse.Namespace) -> int:
    first = args.inputs[0]
    if first == "synth" and len(args.inputs) == 1:
        from amqpspec.spark_triage.synth import synthesize

        if not args.out:
            print("amqpspec triage synth: --out DIR is required", file=sys.stderr)
            return 2
        return synthesize(args.out, args.connections, args.seed)
    if first == "score" and len(args.inputs) == 2:
        from amqpspec.spark_triage.score import score_main

        return score_main(args.inputs[1], args.truth)
    return job.triage(args)
