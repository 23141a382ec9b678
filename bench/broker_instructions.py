"""The reference broker's instructions per message under callgrind: an A/B that load on the
machine does not move (valgrind counts instructions, not seconds).

    cd CHECKOUT && PYTHONPATH=$PWD PYTHONHASHSEED=0 [AMQP10_PURE=1] \\
        python3 /path/to/bench/broker_instructions.py [--mode send|receive] [--low 5000] \\
        [--high 25000] [--out DIR]

Owns: running the checkout's own reference broker (`bench.broker_profile.broker`, as
bench/broker_bench.py starts it) under `valgrind --tool=callgrind`, driving it with the
Proton C `send12` client (mode send: N messages into the queue, each confirmed) or
`send12` then `receive-quiet-credit-200` (mode receive), once with `--low` and once with
`--high` messages, and printing (instructions at high - instructions at low) / (high - low):
the broker's instructions per message with its start, its connections' set-up and its
stop left out. Run from the checkout under test (its own broker and bench code, whatever
its age): the broker is put under valgrind by the interpreter path its process starts
with, not by an option of the broker's. May touch: valgrind, the broker it starts (stopped
by bench.broker_profile), the output files in --out.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import tempfile

VALGRIND = ("valgrind", "--tool=callgrind", "--dump-instr=no", "--collect-jumps=no")


def _launcher(directory: pathlib.Path) -> str:
    """An executable that starts this interpreter under callgrind, its output in $CG_OUT."""
    script = directory / "python-under-callgrind"
    command = " ".join(VALGRIND)
    script.write_text(
        f'#!/bin/sh\nexec {command} --callgrind-out-file="$CG_OUT" {sys.executable} "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def instructions(messages: int, mode: str, out: pathlib.Path) -> int:
    """The broker's instructions for one run of `messages` messages (callgrind's total)."""
    from amqpspec.bench import broker_profile
    from amqpspec.bench.broker_bench import DEFAULT_BUILD_DIR, build_c_clients

    build_c_clients(DEFAULT_BUILD_DIR)
    process_module = sys.modules[broker_profile.BrokerProcess.__module__]
    started = process_module.BrokerProcess.__init__

    def slow_start(self, *args, **kwargs) -> None:  # a broker under valgrind starts slowly
        kwargs["wait"] = 900.0
        started(self, *args, **kwargs)

    output = out / f"callgrind-{mode}-{messages}.out"
    os.environ["CG_OUT"] = str(output)
    real_executable = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        sys.executable = _launcher(work)
        process_module.BrokerProcess.__init__ = slow_start
        try:
            with broker_profile.broker(work) as broker:
                if mode == "receive":
                    broker_profile.drive(
                        "receive", DEFAULT_BUILD_DIR, broker.port, messages, prepare=True
                    )
                broker_profile.drive(mode, DEFAULT_BUILD_DIR, broker.port, messages, prepare=False)
        finally:
            sys.executable = real_executable
            process_module.BrokerProcess.__init__ = started
    found = re.search(r"^(?:summary|totals):\s*(\d+)", output.read_text(errors="replace"), re.M)
    if found is None:
        raise SystemExit(f"broker_instructions: no total in {output}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("send", "receive"), default="send")
    parser.add_argument("--low", type=int, default=5000)
    parser.add_argument("--high", type=int, default=25000)
    parser.add_argument("--out", type=pathlib.Path, default=None)
    args = parser.parse_args()
    if args.high <= args.low:
        parser.error("--high must be more messages than --low")
    out = args.out or pathlib.Path(tempfile.mkdtemp(prefix="broker-instructions-"))
    out.mkdir(parents=True, exist_ok=True)
    low = instructions(args.low, args.mode, out)
    high = instructions(args.high, args.mode, out)
    per_message = (high - low) / (args.high - args.low)
    print(
        f"{args.mode}: {per_message:,.0f} instructions per message ({low:,} at {args.low}, "
        f"{high:,} at {args.high}; callgrind files in {out})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
