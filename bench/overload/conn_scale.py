"""Connection scale: thousands of idle connections with two sessions each; the broker's
memory per connection and the time a new client needs with them all held.

    amqpspec bench conn-scale [--connections 5000] [--sessions 2] [--probes 20]
    python -m amqpspec.bench.overload.conn_scale [same options]

The broker runs with `--idle-timeout 0` (no heartbeats: the held connections are really
idle). Warm-up: --probes probe rounds with nothing held (the baseline latency; the broker's
first-use allocations happen here). Then connections are opened in batches of --batch
(open + --sessions begins, pipelined; a batch is done when every begin was answered) and
held without further traffic (the admin API must list every one). The broker's RSS
(/proc/PID/statm) before and after gives memory per connection = RSS delta / connections
(goal <= 30 KB; RabbitMQ 4.0 about 133 KB, 3.13 about 301 KB in the seeds). With them
held, --probes probe rounds: a new connection's open + begin + attach (sender) + one
unsettled transfer until its `accepted` disposition, timed end to end (goal <= 100 ms);
then the same probes once more after the held connections closed.
Owns: its broker process (stopped by PID), its sockets.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from amqpspec.amqp10.composites import Accepted
from amqpspec.amqp10.engine import DispositionReceived, RemoteBegin
from amqpspec.amqp10.message import Message
from amqpspec.bench.overload.peer import Peer, Pump, exit_status, rss, write_report
from amqpspec.bench.script import script_main
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.runtime.process import BrokerProcess

QUEUE = "scale-probe"
PAYLOAD = Message.of(b"probe").encode()
KB = 1024


def probe(port: int, timeout: float = 15.0) -> float:
    """Seconds from TCP connect to the accepted disposition of one transfer."""
    started = time.perf_counter()
    pump = Pump()
    try:
        peer = pump.add(Peer(port, "scale-probe"))
        peer.conn.open()
        link = peer.conn.begin().attach_sender("probe", target=f"/queues/{QUEUE}")
        pump.run_until(lambda: link.credit > 0, timeout, "probe credit")
        link.send(PAYLOAD, settled=False)

        def accepted() -> bool:
            return any(
                isinstance(e, DispositionReceived) and isinstance(e.state, Accepted)
                for e in peer.events
            )

        pump.run_until(accepted, timeout, "probe accepted")
        elapsed = time.perf_counter() - started
        peer.conn.close()
        pump.run_until(lambda: peer.conn.finished or peer.closed, timeout, "probe close")
    finally:
        pump.close()
    return elapsed


def probes(port: int, count: int) -> dict[str, float]:
    times = sorted(probe(port) for _ in range(count))
    return {
        "median_ms": round(statistics.median(times) * 1000, 2),
        "p95_ms": round(times[min(len(times) - 1, int(len(times) * 0.95))] * 1000, 2),
        "max_ms": round(times[-1] * 1000, 2),
    }


def hold(port: int, connections: int, sessions: int, batch: int) -> list[Peer]:
    """Open `connections` connections with `sessions` sessions each, batch by batch; return
    them (sockets open, no longer pumped)."""
    held: list[Peer] = []
    while len(held) < connections:
        pump = Pump()
        group = []
        for _ in range(min(batch, connections - len(held))):
            peer = pump.add(Peer(port, "scale-idle"))
            peer.conn.open()
            for _ in range(sessions):
                peer.conn.begin()
            group.append(peer)

        def answered(group: list[Peer] = group) -> bool:
            return all(sum(isinstance(e, RemoteBegin) for e in p.events) == sessions for p in group)

        pump.run_until(answered, 60.0, f"{len(group)} connections")
        for peer in group:
            peer.events.clear()
            pump.release(peer)
        pump.close()
        held += group
    return held


def scale(connections: int, sessions: int, probe_count: int, batch: int) -> dict[str, Any]:
    broker = BrokerProcess("--handshake-timeout", "0", admin=True, idle_timeout=0)
    held: list[Peer] = []
    try:
        with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as admin:
            admin.declare_queue(QUEUE, durable=False)
        idle = probes(broker.port, probe_count)  # also the warm-up
        before = rss(broker.proc.pid)
        started = time.monotonic()
        held = hold(broker.port, connections, sessions, batch)
        open_seconds = time.monotonic() - started
        time.sleep(0.5)  # the broker settles (nothing pending)
        after = rss(broker.proc.pid)
        loaded = probes(broker.port, probe_count)
        with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as admin:
            listed = len(admin.connections())  # the broker's own count, held ones included
        for peer in held:
            peer.close()
        held = []
        time.sleep(0.5)
        released = probes(broker.port, probe_count)
        rss_released = rss(broker.proc.pid)
    finally:
        for peer in held:
            peer.close()
        broker.stop()
    per_connection = (after - before) / connections
    result = {
        "connections": connections,
        "sessions_per_connection": sessions,
        "broker_connections_while_held": listed,
        "open_seconds": round(open_seconds, 2),
        "connections_per_s": round(connections / open_seconds, 1),
        "rss_before_mb": round(before / (KB * KB), 1),
        "rss_held_mb": round(after / (KB * KB), 1),
        "rss_after_close_mb": round(rss_released / (KB * KB), 1),
        "kb_per_connection": round(per_connection / KB, 1),
        "goal_kb_per_connection": 30,
        "probe_idle": idle,
        "probe_with_connections_held": loaded,
        "probe_after_close": released,
        "goal_probe_ms": 100,
    }
    result["ok"] = listed >= connections and ok(result)
    return result


def ok(result: dict[str, Any]) -> bool:
    return (
        result["kb_per_connection"] <= result["goal_kb_per_connection"]
        and result["probe_with_connections_held"]["median_ms"] <= result["goal_probe_ms"]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--connections", type=int, default=5000, help="idle connections held")
    parser.add_argument("--sessions", type=int, default=2, help="sessions per connection")
    parser.add_argument("--probes", type=int, default=20, help="probe rounds per phase")
    parser.add_argument("--batch", type=int, default=250, help="connections opened at once")
    parser.add_argument("--out", default=None, help="report directory (default reports/bench)")


def run(args: argparse.Namespace) -> int:
    result = scale(args.connections, args.sessions, args.probes, args.batch)
    result["command"] = (
        f"amqpspec bench conn-scale --connections {args.connections} --sessions "
        f"{args.sessions} --probes {args.probes} --batch {args.batch}"
    )
    path = write_report("conn-scale", result, args.out)
    print(
        f"connection scale: {args.connections} idle connections x {args.sessions} sessions, "
        f"opened in {result['open_seconds']} s -> {path}"
    )
    print(
        f"broker RSS {result['rss_before_mb']} -> {result['rss_held_mb']} MiB: "
        f"{result['kb_per_connection']} KiB per connection (goal <= 30)"
    )
    for phase in ("probe_idle", "probe_with_connections_held", "probe_after_close"):
        p = result[phase]
        print(f"{phase}: median {p['median_ms']} ms, p95 {p['p95_ms']} ms, max {p['max_ms']} ms")
    return exit_status(result["ok"], "OVER GOAL")


def main(argv: list[str] | None = None) -> int:
    return script_main(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
