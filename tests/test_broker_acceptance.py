"""Reference broker acceptance runs (marked slow; still part of CI): 100k messages through a classic
queue, a durable queue and every exchange type with the Qpid Proton C example clients
(send, then receive), and the prefetch-2 re-grant pattern at scale with the Python client.

The C clients are built from Debian's libqpid-proton11-dev-examples by
tools/brokers/proton-c-broker.sh (see docs/real-brokers.md); without that package the
C runs are skipped with the install command in the reason.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest
from broker_support import ROUTE_IDS, ROUTES, management, proton_receive, running_broker, url

pytestmark = [pytest.mark.slow, pytest.mark.proton]

COUNT = 100_000
ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD_SCRIPT = ROOT / "tools" / "brokers" / "proton-c-broker.sh"
EXAMPLES = pathlib.Path("/usr/share/proton/examples/c/send.c")


@pytest.fixture(scope="module")
def c_clients(tmp_path_factory) -> pathlib.Path:
    if not EXAMPLES.exists() or shutil.which("gcc") is None:
        pytest.skip(f"proton C examples not installed: run '{BUILD_SCRIPT} install'")
    build_dir = tmp_path_factory.mktemp("proton-c")
    env = {**os.environ, "PROTON_BUILD_DIR": str(build_dir)}
    subprocess.run([str(BUILD_SCRIPT), "build"], env=env, check=True, timeout=300)
    return build_dir


def run_client(clients: pathlib.Path, program: str, port: int, address: str, count: int) -> str:
    result = subprocess.run(
        [str(clients / program), "127.0.0.1", str(port), address, str(count)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(("name", "target", "queues", "bindings"), ROUTES, ids=ROUTE_IDS)
def test_100k_with_c_clients(c_clients, tmp_path, name, target, queues, bindings):
    with running_broker(data_dir=str(tmp_path / "data"), fsync=name != "fanout") as broker:
        admin = management(broker)
        admin.declare_queue("cq", durable=False)
        admin.declare_queue("dq", durable=True)
        for exchange, queue, key, args in bindings:
            admin.bind(exchange, queue, key, args)
        sent = run_client(c_clients, "send", broker.port, target, COUNT)
        assert sent == f"{COUNT} messages sent and acknowledged"
        for queue in queues:
            assert admin.queue(queue)["messages"] == COUNT
            got = run_client(c_clients, "receive", broker.port, f"/queues/{queue}", COUNT)
            assert got == f"{COUNT} messages received"
        for queue in queues:
            assert admin.queue(queue)["messages"] == 0


def test_prefetch_two_regrant_at_scale():
    count = 10_000
    with running_broker() as broker:
        management(broker).declare_queue("pq", durable=False)
        queue = broker.server.vhost.get_queue("pq")
        broker.call(lambda: [queue.publish(_encoded(i)) for i in range(count)])
        got = proton_receive(url(broker), "/queues/pq", count, prefetch=2)
        assert not got.timed_out and got.error is None
        assert got.bodies == [f"n{i}" for i in range(count)]


def _encoded(i: int) -> bytes:
    from amqpspec.amqp10.message import Message

    return Message.of(f"n{i}").encode()


def test_aborted_transfers_are_discarded(c_clients):
    source = EXAMPLES.parent / "send-abort.c"
    program = c_clients / "send-abort"
    if not program.exists():
        subprocess.run(
            [
                *("gcc", "-O2", f"-I{EXAMPLES.parent}", "-o", str(program), str(source)),
                *("-lqpid-proton", "-lpthread"),
            ],
            check=True,
            timeout=120,
        )
    with running_broker() as broker:
        admin = management(broker)
        admin.declare_queue("cq", durable=False)
        out = run_client(c_clients, "send-abort", broker.port, "/queues/cq", 10)
        assert out == "10 messages started and aborted"
        assert admin.queue("cq")["messages"] == 0  # 2.6.14: an aborted delivery is dropped
        assert run_client(c_clients, "send", broker.port, "/queues/cq", 5).startswith("5 ")
        assert admin.queue("cq")["messages"] == 5
