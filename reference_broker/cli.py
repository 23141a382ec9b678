"""`amqpspec broker` / `python -m amqpspec.reference_broker`: run the reference broker.

Owns: the command-line entry (options from config.add_arguments, `--fault help`),
logging set-up (per-connection lines bounded per second: runtime/log_flood.py), the event
loop (uvloop when installed) and SIGINT/SIGTERM handling.
May touch: runtime/server.py (builds and stops the broker).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys

from .config import ConfigError, from_args
from .config import add_arguments as add_config_arguments
from .faults.catalog import describe_catalog
from .runtime.log_flood import FloodLimit, limit_connection_lines
from .runtime.server import BrokerServer, install_uvloop

log = logging.getLogger("reference_broker")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)


async def _serve(server: BrokerServer, lines: FloodLimit) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await server.start()
    await stop.wait()
    log.info("stopping")
    await server.stop()
    lines.report_left_out()


def run(args: argparse.Namespace) -> int:
    if args.fault and "help" in args.fault:
        print(describe_catalog())
        return 0
    try:
        config = from_args(args)
    except ConfigError as exc:
        print(f"amqpspec broker: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=getattr(logging, config.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    lines = limit_connection_lines()  # a flood of refused connections: bounded lines
    if config.faults:
        log.warning("faults switched on: %s", ", ".join(sorted(config.faults.enabled)))
    install_uvloop()
    tune_gc()
    try:
        asyncio.run(_serve(BrokerServer(config), lines))
    except OSError as exc:
        log.error("cannot start: %s", exc)
        return 1
    return 0


def tune_gc() -> None:
    """The broker process's cyclic collector (measured in bench/README.md): what start-up
    allocated (modules, spec tables, generated codecs) is frozen out of every collection,
    and a young collection runs every 20,000 net allocations instead of 700, so a queue
    holding many messages is not traversed again and again. Cycles are still collected.
    Only here, in the broker's own process (BrokerThread shares a test's process)."""
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amqpspec broker", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
