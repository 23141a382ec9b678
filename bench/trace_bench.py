"""Trace benchmarks: capture reader frames/s vs tshark, and recording-proxy overhead.

    python bench/trace_bench.py reader [--messages 100000] [--pcap PATH]
    python bench/trace_bench.py proxy [--messages 50000] [--rounds 3]

`reader` writes a synthetic capture (sender sessions through a broker: transfers in
bursts, flows and dispositions, TCP segments cut at arbitrary byte offsets so frames are
split and merged) with traces' pcap writer, then times traces' reader (TCP reassembly +
full frame decode by amqp10) and `tshark -T fields -e amqp.performative` on the same
file, and checks both count the same frames. `proxy` times Qpid Proton's C example
send/receive (built from Debian's libqpid-proton11-dev-examples; the python-qpid-proton
clients if gcc or the examples are missing) against the C example broker directly,
through a bare Python relay (RecordingProxy with recording switched off) and through
`amqpspec capture`, interleaved in the same run, and prints msgs/s and the overhead.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from amqpspec.amqp10.composites import (  # noqa: E402
    Attach,
    Begin,
    Disposition,
    Flow,
    Open,
    Source,
    Target,
    Transfer,
)
from amqpspec.amqp10.frames import AMQP_HEADER, encode_frame  # noqa: E402
from amqpspec.amqp10.message import Message  # noqa: E402
from amqpspec.amqp10.origins import CLIENT, SERVER  # noqa: E402
from amqpspec.amqp10.spec import Role  # noqa: E402
from amqpspec.reference_broker.runtime.process import free_port  # noqa: E402
from amqpspec.traces.pcap_writer import PcapWriter  # noqa: E402
from amqpspec.traces.reassembly import PcapTraceReader  # noqa: E402

# -- reader ---------------------------------------------------------------------------


def _cut(data: bytes, rng: random.Random) -> list[bytes]:
    pieces, offset = [], 0
    while offset < len(data):
        size = rng.choice((rng.randint(1, 64), rng.randint(64, 4096), rng.randint(4096, 16384)))
        pieces.append(data[offset : offset + size])
        offset += size
    return pieces


WINDOW = 2**31 - 1


def write_synthetic_capture(path: str, messages: int, connections: int = 4) -> int:
    """A capture of `messages` transfers; returns the number of AMQP frames in it."""
    rng = random.Random(1)
    body = Message.of(b"x" * 12).encode()
    frames = 0
    per_connection = messages // connections
    with PcapWriter(path) as writer:
        now = 1_700_000_000.0
        for number in range(1, connections + 1):
            writer.open_connection(number, f"127.0.0.1:{40000 + number}", "127.0.0.1:5672", now)
            client, server = _link_setup(number)
            frames += 6
            writer.data(number, CLIENT, client, now)
            writer.data(number, SERVER, server, now)
            sent = 0
            while sent < per_connection:
                burst = min(rng.randint(1, 20), per_connection - sent)
                now = _burst(writer, number, sent, burst, body, rng, now)
                sent += burst
                frames += burst + 2
            writer.close_connection(number, now)
    return frames


def _attach(role: Role, **fields: Any) -> bytes:
    """The attach of link "s" (handle 0) to queue q, as `role`."""
    target = Target(address="q")
    return encode_frame(
        Attach(name="s", handle=0, role=role, source=Source(), target=target, **fields)
    )


def _link_setup(number: int) -> tuple[bytes, bytes]:
    """Each side's header, open, begin and attach of a sender link to queue q."""
    client = [
        AMQP_HEADER.encode(),
        encode_frame(Open(container_id=f"sender-{number}")),
        encode_frame(Begin(next_outgoing_id=0, incoming_window=WINDOW, outgoing_window=WINDOW)),
        _attach(Role.SENDER, initial_delivery_count=0),
    ]
    server = [
        AMQP_HEADER.encode(),
        encode_frame(Open(container_id="broker")),
        encode_frame(
            Begin(
                remote_channel=0,
                next_outgoing_id=0,
                incoming_window=WINDOW,
                outgoing_window=WINDOW,
            )
        ),
        _attach(Role.RECEIVER),
    ]
    return b"".join(client), b"".join(server)


def _burst(
    writer: PcapWriter,
    number: int,
    sent: int,
    burst: int,
    body: bytes,
    rng: random.Random,
    now: float,
) -> float:
    """The broker's flow granting `burst`, the transfers (cut in random pieces) and the
    broker's settling disposition; returns the time of the last."""
    flow = Flow(
        next_incoming_id=sent,
        incoming_window=WINDOW,
        next_outgoing_id=0,
        outgoing_window=WINDOW,
        handle=0,
        delivery_count=sent,
        link_credit=burst,
    )
    now += 0.0001
    writer.data(number, SERVER, encode_frame(flow), now)
    transfers = b"".join(
        encode_frame(
            Transfer(
                handle=0,
                delivery_id=sent + i,
                delivery_tag=(sent + i).to_bytes(4, "big"),
                message_format=0,
            ),
            payload=body,
        )
        for i in range(burst)
    )
    for piece in _cut(transfers, rng):
        now += 0.00001
        writer.data(number, CLIENT, piece, now)
    disposition = Disposition(role=Role.RECEIVER, first=sent, last=sent + burst - 1, settled=True)
    writer.data(number, SERVER, encode_frame(disposition), now)
    return now


def time_reader(path: str) -> tuple[int, float]:
    start = time.perf_counter()
    frames = sum(1 for item in PcapTraceReader(path) if item.kind == "frame")
    return frames, time.perf_counter() - start


def time_tshark(path: str) -> tuple[int, float] | None:
    tshark = shutil.which("tshark")
    if tshark is None:
        return None
    start = time.perf_counter()
    result = subprocess.run(
        [
            tshark,
            "-r",
            path,
            "-d",
            "tcp.port==5672,amqp",
            "-T",
            "fields",
            "-e",
            "amqp.performative",
            "-e",
            "amqp.sasl.method",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - start
    frames = sum(
        len([v for v in line.replace("\t", ",").split(",") if v])
        for line in result.stdout.splitlines()
    )
    return frames, elapsed


def bench_reader(args: argparse.Namespace) -> None:
    path = args.pcap or os.path.join(tempfile.gettempdir(), f"amqpspec-bench-{args.messages}.pcap")
    if not os.path.exists(path):
        expected = write_synthetic_capture(path, args.messages)
        print(f"wrote {path}: {expected} AMQP frames, {os.path.getsize(path) / 1e6:.1f} MB")
    for _ in range(args.rounds):
        frames, elapsed = time_reader(path)
        print(
            f"traces reader: {frames} frames in {elapsed:.2f} s = {frames / elapsed:,.0f} frames/s"
        )
        measured = time_tshark(path)
        if measured:
            count, seconds = measured
            print(
                f"tshark 4.0:    {count} frames in {seconds:.2f} s "
                f"= {count / seconds:,.0f} frames/s"
            )


# -- proxy ----------------------------------------------------------------------------

C_EXAMPLES = "/usr/share/proton/examples/c"
HELPERS = os.path.join(ROOT, "tests", "traces_support")


def _build_c_examples(directory: str) -> bool:
    if not shutil.which("gcc") or not os.path.exists(os.path.join(C_EXAMPLES, "send.c")):
        return False
    for name in ("broker", "send", "receive"):
        result = subprocess.run(
            [
                "gcc",
                "-O2",
                "-o",
                os.path.join(directory, name),
                os.path.join(C_EXAMPLES, f"{name}.c"),
                "-lqpid-proton",
                "-lpthread",
            ],
            capture_output=True,
        )
        if result.returncode:
            return False
    return True


def _wait_port(port: int, timeout: float = 20) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


BARE_RELAY = """
import asyncio, sys
sys.path.insert(0, {root!r})
from amqpspec.traces.proxy import RecordingProxy
class NoRecording:
    def open_connection(self, *a): pass
    def data(self, *a): pass
    def close_connection(self, *a): pass
    def flush(self): pass
    def close(self, *a): pass
try:
    import uvloop
    loop = uvloop.new_event_loop()
except ImportError:
    loop = asyncio.new_event_loop()
loop.run_until_complete(RecordingProxy("127.0.0.1", {listen}, "127.0.0.1", {upstream},
                                       NoRecording()).run())
"""


def bench_proxy(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp(prefix="amqpspec-proxy-bench-")
    use_c = _build_c_examples(work)
    ports = {"direct": free_port(), "bare relay": free_port(), "amqpspec capture": free_port()}
    broker, capture, relay = _start_hops(work, use_c, ports)
    try:
        for port in ports.values():
            _wait_port(port)
        results = _time_clients(args, work, use_c, ports)
    finally:
        relay.terminate()
        capture.send_signal(signal.SIGINT)
        capture.wait(120)
        broker.terminate()
        relay.wait(10)
        broker.wait(10)
    _print_proxy_results(args, work, use_c, results)


def _start_hops(
    work: str, use_c: bool, ports: dict[str, int]
) -> tuple[subprocess.Popen, subprocess.Popen, subprocess.Popen]:
    """The broker (ports["direct"]), `amqpspec capture` in front of it and the bare relay."""
    broker_port = ports["direct"]
    if use_c:
        broker = subprocess.Popen(
            [os.path.join(work, "broker"), "127.0.0.1", str(broker_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    else:
        broker = subprocess.Popen(
            [sys.executable, os.path.join(HELPERS, "proton_broker.py"), str(broker_port)],
            stdout=subprocess.DEVNULL,
        )
    capture = subprocess.Popen(
        [
            *(sys.executable, "-m", "amqpspec.cli", "capture"),
            *("--listen", f"127.0.0.1:{ports['amqpspec capture']}"),
            *("--upstream", f"127.0.0.1:{broker_port}", "--out", work, "--trace-id", "bench"),
        ],
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )
    relay = subprocess.Popen(
        [
            sys.executable,
            "-c",
            BARE_RELAY.format(root=ROOT, listen=ports["bare relay"], upstream=broker_port),
        ],
    )
    return broker, capture, relay


def _time_clients(
    args: argparse.Namespace, work: str, use_c: bool, ports: dict[str, int]
) -> dict[str, dict[str, list[float]]]:
    """msgs/s of a sender then a receiver through each hop, `args.rounds` rounds."""
    results: dict[str, dict[str, list[float]]] = {}
    for round_number in range(args.rounds):
        for label, port in ports.items():
            queue = f"q{round_number}-{port}"
            for role in ("send", "receive"):
                if use_c:
                    command = [os.path.join(work, role), "127.0.0.1", str(port)]
                else:
                    client = os.path.join(HELPERS, "proton_clients.py")
                    command = [sys.executable, client, role, f"127.0.0.1:{port}"]
                command += [queue, str(args.messages)]
                start = time.perf_counter()
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=600)
                rate = args.messages / (time.perf_counter() - start)
                results.setdefault(label, {}).setdefault(role, []).append(rate)
    return results


def _print_proxy_results(
    args: argparse.Namespace, work: str, use_c: bool, results: dict[str, dict[str, list[float]]]
) -> None:
    clients = "proton C examples" if use_c else "python-qpid-proton"
    print(f"{clients}, {args.messages} messages per run, {args.rounds} rounds, median msgs/s:")
    direct = {role: statistics.median(rates) for role, rates in results["direct"].items()}
    for label, roles in results.items():
        cells = []
        for role, rates in roles.items():
            median = statistics.median(rates)
            cells.append(f"{role} {median:,.0f} ({100 * (median / direct[role] - 1):+.0f}%)")
        print(f"  {label:17s} " + "  ".join(cells))
    pcap = os.path.join(work, "bench.pcap")
    print(
        f"recorded {os.path.getsize(pcap) / 1e6:.1f} MB pcap, "
        f"{os.path.getsize(os.path.join(work, 'bench.parquet')) / 1e6:.1f} MB Parquet in {work}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    reader = sub.add_parser("reader")
    reader.add_argument("--messages", type=int, default=100_000)
    reader.add_argument("--pcap")
    reader.add_argument("--rounds", type=int, default=1)
    proxy = sub.add_parser("proxy")
    proxy.add_argument("--messages", type=int, default=50_000)
    proxy.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bench_reader(args) if args.what == "reader" else bench_proxy(args)


if __name__ == "__main__":
    main()
