"""One management client, two brokers: the same scenario against the reference broker's admin
API and a real RabbitMQ 3.10 (Debian rabbitmq-server, started by tools/brokers/rabbitmq.sh on
private ports under a temporary data dir, stopped in teardown).

Skipped only when rabbitmq-server is not installed (`tools/brokers/rabbitmq.sh install`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqpspec.reference_broker.admin.api import AdminApi
from amqpspec.reference_broker.admin.client import ManagementClient, ManagementError
from amqpspec.reference_broker.admin.http_server import AdminServer
from amqpspec.reference_broker.config import BrokerConfig
from amqpspec.reference_broker.features.alarms import ResourceAlarms
from amqpspec.reference_broker.queues.vhost import VirtualHost
from amqpspec.reference_broker.runtime.process import free_port

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "brokers" / "rabbitmq.sh"
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


@pytest.fixture(scope="module")
def rabbitmq_url(tmp_path_factory) -> Iterator[str]:
    if not RABBITMQ_SERVER.exists():
        pytest.skip("rabbitmq-server not installed: bash tools/brokers/rabbitmq.sh install")
    data_dir = tmp_path_factory.mktemp("rabbitmq")
    env = dict(
        os.environ,
        RABBITMQ_DATA_DIR=str(data_dir),
        AMQP_PORT=str(free_port()),
        MGMT_PORT=str(free_port()),
        DIST_PORT=str(free_port()),
        NODE_NAME=f"amqpspec-test-{os.getpid()}@localhost",
        START_TIMEOUT="90",
        STOP_MODE="kill",  # throw-away node: no graceful shutdown needed
    )
    started = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=150
    )
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        yield f"http://127.0.0.1:{env['MGMT_PORT']}"
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def reference_url() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    alarms = ResourceAlarms(
        memory_limit=1 << 40, disk_free_limit=0, read_memory=lambda: 1, read_disk_free=lambda: 1
    )
    server = AdminServer(AdminApi(VirtualHost(), alarms, BrokerConfig()))
    port = asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0), loop).result(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def scenario(url: str) -> list[str]:
    """The calls a conformance adapter makes; returns the properties keys it saw."""
    seen: list[str] = []
    with ManagementClient(url) as client:
        overview = client.overview()
        assert "object_totals" in overview and "queue_totals" in overview
        client.delete_queue("amqpspec-cq", missing_ok=True)
        assert client.declare_queue("amqpspec-cq", durable=True) is True
        assert client.declare_queue("amqpspec-cq", durable=True) is False
        with pytest.raises(ManagementError) as info:
            client.declare_queue("amqpspec-cq", durable=False)
        assert info.value.status == 400 and info.value.error == "bad_request"
        queue = client.queue("amqpspec-cq")
        assert (queue["name"], queue["vhost"], queue["durable"]) == ("amqpspec-cq", "/", True)
        assert any(q["name"] == "amqpspec-cq" for q in client.queues())

        assert client.declare_exchange("amqpspec-tx", "topic", durable=False) is True
        assert client.exchange("amqpspec-tx")["type"] == "topic"
        client.bind("amqpspec-tx", "amqpspec-cq", "a.*")
        client.bind("amqpspec-tx", "amqpspec-cq", "")
        between = client.bindings("amqpspec-tx", "amqpspec-cq")
        seen = sorted(b["properties_key"] for b in between)
        implicit = [b for b in client.bindings() if b["destination"] == "amqpspec-cq"]
        assert {"source": "", "routing_key": "amqpspec-cq"}.items() <= implicit[0].items()
        for key in seen:
            client.unbind("amqpspec-tx", "amqpspec-cq", key)
        assert client.bindings("amqpspec-tx", "amqpspec-cq") == []

        client.purge_queue("amqpspec-cq")
        assert isinstance(client.connections(), list)
        assert client.alarms_in_effect() == []
        client.delete_exchange("amqpspec-tx")
        client.delete_queue("amqpspec-cq")
        with pytest.raises(ManagementError) as info:
            client.queue("amqpspec-cq")
        assert info.value.status == 404
        assert info.value.body == {"error": "Object Not Found", "reason": "Not Found"}
    with ManagementClient(url, password="wrong") as bad, pytest.raises(ManagementError) as info:
        bad.overview()
    assert info.value.status == 401 and info.value.reason == "Login failed"
    return seen


def test_same_client_against_reference_broker(reference_url):
    assert scenario(reference_url) == ["a.%2A", "~"]


@pytest.mark.slow
def test_same_client_against_rabbitmq_3_10(rabbitmq_url):
    assert scenario(rabbitmq_url) == ["a.%2A", "~"]
