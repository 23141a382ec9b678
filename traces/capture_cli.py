"""`amqpspec capture`: run the recording proxy until SIGINT/SIGTERM.

Owns: the subcommand's options and the process lifecycle (event loop, uvloop when
installed, signal handlers). Prints 'listening on HOST:PORT' once ready, then the paths
of the files it writes; on a signal it closes connections and files and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
import uuid

from amqpspec.amqp10.monitor import DEFAULT_MAX_FRAME_SIZE
from amqpspec.traces.proxy import RecordingProxy, new_event_loop
from amqpspec.traces.recorder import Recorder


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen", type=_host_port, required=True, help="HOST:PORT to accept clients on"
    )
    parser.add_argument(
        "--upstream", type=_host_port, required=True, help="HOST:PORT of the broker"
    )
    parser.add_argument("--out", required=True, help="directory for the pcap/Parquet/index")
    parser.add_argument("--trace-id", help="name of this run's files (default: capture-TIME-ID)")
    parser.add_argument(
        "--max-frame-size",
        type=int,
        default=DEFAULT_MAX_FRAME_SIZE,
        help="frames announcing more bytes are recorded raw (bounds memory)",
    )


def default_trace_id() -> str:
    return f"capture-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:6]}"


async def _serve(args: argparse.Namespace) -> int:
    trace_id = args.trace_id or default_trace_id()
    recorder = Recorder(args.out, trace_id, args.max_frame_size)
    proxy = RecordingProxy(*args.listen, *args.upstream, recorder)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, proxy.stop)
    ready: asyncio.Future = loop.create_future()
    task = asyncio.create_task(proxy.run(ready))
    await asyncio.wait({task, ready}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        error = task.exception() if task.done() else TimeoutError("not ready within 30 s")
        print(f"amqpspec capture: cannot listen on {args.listen}: {error}", file=sys.stderr)
        recorder.close(time.time())
        return 2
    host, port = ready.result()
    print(f"listening on {host}:{port}", flush=True)
    print(f"pcap {recorder.pcap_path}", flush=True)
    print(f"parquet {recorder.parquet_path}", flush=True)
    print(f"index {recorder.index_path}", flush=True)
    await task
    if recorder.builder_exit_code != 0:
        print(
            f"amqpspec capture: the frame log builder exited with {recorder.builder_exit_code};"
            f" the pcap {recorder.pcap_path} is complete, convert it with `amqpspec trace convert`",
            file=sys.stderr,
        )
        return 1
    print("stopped; files closed", flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    loop = new_event_loop()
    try:
        return loop.run_until_complete(_serve(args))
    finally:
        loop.close()
