"""Broker sessions per second: the reference broker in memory against the same broker over a
loopback socket, in one run.

    python -m amqpspec.bench.broker_memory_bench [--seconds 3] [--rounds 3]

One "session" is what an in-process fuzzer starts per case: an amqp10 engine client opens a
connection, begins a session, attaches a sender to a queue, sends one settled transfer once
the broker granted credit, and closes; done when the broker has dropped the connection.
The client code is the same both ways; only the transport differs:
- memory: reference_broker.runtime.memory.MemoryBroker in this process (no socket, manual clock);
- socket: reference_broker.runtime.process.BrokerProcess (the broker as users run it) on 127.0.0.1,
  the client on a blocking TCP socket in this process.
Rates are best of `--rounds` runs of `--seconds` each; memory and socket runs alternate, so
machine load hits both alike. Owns nothing but the measurement.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import time
from collections.abc import Callable

from amqpspec.amqp10.engine import Connection
from amqpspec.amqp10.message import Message
from amqpspec.reference_broker.runtime.memory import MemoryBroker
from amqpspec.reference_broker.runtime.process import BrokerProcess

QUEUE = "bench"
PAYLOAD = Message.of(b"x" * 16).encode()
WAIT = 10.0  # seconds: the bound on every socket wait


def _start(client: Connection):
    client.open()
    session = client.begin()
    return session.attach_sender("s", target=f"/queues/{QUEUE}")


def memory_session(broker: MemoryBroker) -> None:
    conn = broker.connect()
    link = _start(conn.client)
    broker.pump()
    link.send(PAYLOAD, settled=True)
    conn.client.close()
    broker.pump()
    if not conn.finished:
        raise RuntimeError("the in-memory broker kept the connection")


class _SocketPeer:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client = Connection("client")

    def until(self, done: Callable[[], bool]) -> None:
        client = self.client
        deadline = time.monotonic() + WAIT
        while True:
            data = client.data_to_send(time.monotonic())
            if data:
                self.sock.sendall(data)
            for _ in client.events():
                pass
            if done():
                return
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise TimeoutError("the broker did not answer in time")
            chunk = self.sock.recv(65536)
            client.receive_data(chunk, time.monotonic())
            if not chunk:
                for _ in client.events():
                    pass
                return


def socket_session(port: int) -> None:
    peer = _SocketPeer(port)
    try:
        link = _start(peer.client)
        peer.until(lambda: link.link_credit > 0)
        link.send(PAYLOAD, settled=True)
        peer.client.close()
        peer.until(lambda: peer.client.finished)
    finally:
        peer.sock.close()


def rate(run_one: Callable[[], None], seconds: float) -> float:
    count = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        run_one()
        count += 1
    return count / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per transport (best)")
    args = parser.parse_args(argv)
    memory = MemoryBroker()
    memory.vhost.declare_queue(QUEUE, durable=False)
    best = {"memory": 0.0, "socket": 0.0}
    with BrokerProcess(admin=True) as process:
        from amqpspec.reference_broker.admin.client import ManagementClient

        with ManagementClient(f"http://127.0.0.1:{process.admin_port}") as admin:
            admin.declare_queue(QUEUE, durable=False)
        for _ in range(args.rounds):
            memory.vhost.purge_queue(QUEUE)
            best["memory"] = max(best["memory"], rate(lambda: memory_session(memory), args.seconds))
            best["socket"] = max(
                best["socket"], rate(lambda: socket_session(process.port), args.seconds)
            )
    memory.close()
    load = os.getloadavg()[0]
    print(f"load average (1 min) at the end: {load:.2f}")
    print(f"{'transport':<10} {'sessions/s':>12}")
    for name, value in best.items():
        print(f"{name:<10} {value:>12,.0f}")
    print(f"memory/socket: {best['memory'] / best['socket']:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
