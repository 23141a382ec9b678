"""The /management node (reference_broker.admin.management, management_links): its routes on a
vhost, the link pair over the protocol in memory (replies wait for credit), and the
conformance suite's `management-node` admin adapter against a broker with no HTTP port.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from amqpspec.amqp10.composites import Properties, Source, Target
from amqpspec.amqp10.engine import Connection, TransferReceived
from amqpspec.amqp10.message import Message
from amqpspec.conformance.admin.management_node import ManagementNodeAdmin
from amqpspec.conformance.verdicts import HarnessError
from amqpspec.reference_broker.admin.management import answer, route
from amqpspec.reference_broker.queues.errors import ResourceLockedError
from amqpspec.reference_broker.queues.vhost import VirtualHost
from amqpspec.reference_broker.runtime.memory import MemoryBroker
from amqpspec.reference_broker.runtime.process import BrokerProcess

ROOT = Path(__file__).resolve().parents[1]


# --- routes on a vhost ----------------------------------------------------------------------


def test_queue_routes():
    vhost = VirtualHost()
    status, info = route(vhost, "PUT", "/queues/a%2Fb", {"durable": True, "arguments": {}})
    assert status == 200 and info["name"] == "a/b" and info["type"] == "classic"
    status, info = route(vhost, "PUT", "/queues/s", {"arguments": {"x-queue-type": "stream"}})
    assert (status, info["type"]) == (200, "stream")
    vhost.get_queue("a/b").publish(b"x")
    assert route(vhost, "GET", "/queues/a%2Fb", None)[1]["message_count"] == 1
    assert route(vhost, "DELETE", "/queues/a%2Fb/messages", None) == (200, {"message_count": 1})
    assert route(vhost, "DELETE", "/queues/a%2Fb", None) == (200, {"message_count": 0})
    assert route(vhost, "GET", "/queues/a%2Fb", None)[0] == 404


def test_conflicts_and_bad_requests():
    vhost = VirtualHost()
    route(vhost, "PUT", "/queues/q", {"durable": True})
    assert route(vhost, "PUT", "/queues/q", {"durable": False})[0] == 409  # inequivalent
    assert route(vhost, "PUT", "/queues/q", "not a map")[0] == 400
    assert route(vhost, "PATCH", "/queues/q", None)[0] == 400
    assert route(vhost, "DELETE", "/exchanges/amq.direct", None)[0] == 409  # reserved


def test_exclusive_queue_is_its_connections_only_and_goes_with_it():
    vhost = VirtualHost()
    owner, other = object(), object()
    exclusive = {"durable": False, "exclusive": True, "arguments": {}}
    status, info = route(vhost, "PUT", "/queues/x", exclusive, owner=owner)
    assert status == 200 and info["exclusive"] is True
    assert route(vhost, "PUT", "/queues/x", exclusive, owner=owner)[0] == 200  # its own again
    # RabbitMQ 4: another connection's declare, purge or delete is 400 (resource_locked)
    assert route(vhost, "PUT", "/queues/x", exclusive, owner=other)[0] == 400
    assert route(vhost, "PUT", "/queues/x", {"durable": False}, owner=other)[0] == 400
    assert route(vhost, "DELETE", "/queues/x/messages", None, owner=other)[0] == 400
    assert route(vhost, "DELETE", "/queues/x", None, owner=other)[0] == 400
    with pytest.raises(ResourceLockedError) as refused:
        vhost.owners.check_exclusive("x", other)  # a consumer's attach: amqp:resource-locked
    assert refused.value.condition == "amqp:resource-locked"
    vhost.owners.check_exclusive("x", owner)
    route(vhost, "PUT", "/queues/shared", {"durable": True})
    vhost.owners.check_exclusive("shared", other)  # shared queues are anyone's
    assert route(vhost, "PUT", "/queues/shared", exclusive, owner=owner)[0] == 400  # strict
    assert vhost.owners.release_owner(owner) == ["x"] and not vhost.has_queue("x")


def test_exchange_and_binding_routes():
    vhost = VirtualHost()
    route(vhost, "PUT", "/queues/q", {})
    assert route(vhost, "PUT", "/exchanges/x", {"type": "topic", "durable": True}) == (204, None)
    bind = {"source": "x", "destination_queue": "q", "binding_key": "a.*", "arguments": {}}
    assert route(vhost, "POST", "/bindings", bind) == (204, None)
    assert [q.name for q in vhost.route(vhost.resolve_target("/exchanges/x/a.b"))] == ["q"]
    path = "/bindings/src=x;dstq=q;key=a.*;args="
    assert route(vhost, "DELETE", path, None) == (204, None)
    assert route(vhost, "DELETE", path, None)[0] == 404
    assert vhost.route(vhost.resolve_target("/exchanges/x/a.b")) == []
    assert route(vhost, "DELETE", "/exchanges/x", None) == (204, None)


def test_answer_correlates_and_ignores_what_it_cannot_answer():
    vhost = VirtualHost()
    request = Message.of(
        {"durable": True},
        properties=Properties(message_id="m-1", to="/queues/q", subject="PUT", reply_to="$me"),
    )
    reply = Message.decode(answer(vhost, request.encode()))
    assert reply.properties.correlation_id == "m-1" and reply.properties.subject == "200"
    assert reply.value["name"] == "q"
    assert answer(vhost, Message.of(b"no id").encode()) is None
    assert answer(vhost, b"\x00garbage") is None


# --- the link pair over the protocol, in memory ---------------------------------------------


def test_link_pair_in_memory_replies_wait_for_credit():
    with MemoryBroker() as broker:
        conn = broker.connect(Connection("client", "mgmt-test"), monitor=True)
        conn.client.open()
        broker.pump()
        session = conn.client.begin()
        broker.pump()
        sender = session.attach_sender("management-link-pair", target=Target(address="/management"))
        receiver = session.attach_receiver(
            "management-link-pair", source=Source(address="/management")
        )
        broker.pump()
        assert sender.link_credit > 0
        for i, path in enumerate(["/queues/one", "/queues/two"]):
            props = Properties(message_id=i, to=path, subject="PUT", reply_to="$me")
            sender.send(Message.of({"durable": True}, properties=props).encode(), settled=True)
        broker.pump()
        assert broker.vhost.has_queue("one") and broker.vhost.has_queue("two")
        assert conn.of(TransferReceived) == []  # no credit on the reply link yet (2.6.7)
        receiver.flow(link_credit=1)
        broker.pump()
        assert len(conn.of(TransferReceived)) == 1
        receiver.flow(link_credit=5)
        broker.pump()
        replies = [Message.decode(e.payload) for e in conn.of(TransferReceived)]
        assert [(r.properties.correlation_id, r.properties.subject) for r in replies] == [
            (0, "200"),
            (1, "200"),
        ]
        conn.client.close()
        broker.pump()
        assert [str(v) for v in conn.finish()] == []


# --- the management-node admin adapter, no HTTP port ----------------------------------------


@pytest.fixture(scope="module")
def broker_without_http():
    broker = BrokerProcess(admin=False)
    try:
        yield broker
    finally:
        broker.kill()


def test_adapter_manages_queues_without_http(broker_without_http):
    assert broker_without_http.admin_port is None
    admin = ManagementNodeAdmin(f"amqp://guest:guest@127.0.0.1:{broker_without_http.port}")
    try:
        admin.declare_queue("mq", {"x-queue-type": "quorum"})
        assert admin.call("GET", "/queues/mq")["type"] == "quorum"
        assert admin.queue_depth("mq") == 0
        admin.purge_queue("mq")
        admin.delete_queue("mq")
        admin.delete_queue("mq")  # already gone: fine
        with pytest.raises(HarnessError):
            admin.queue_depth("mq")
    finally:
        admin.close()


def test_reference_cases_that_need_admin_run_through_the_management_node(
    broker_without_http, tmp_path
):
    """The reference profile with the management-node adapter (and no --admin): the cases
    that declare, purge or count queues, streams and quorum queues all OK."""
    profile = (ROOT / "conformance/profiles/reference.toml").read_text()
    profile = profile.replace('adapter = "rabbitmq-http"', 'adapter = "management-node"')
    profile = profile.replace('url = "http://guest:guest@127.0.0.1:15672"\n', "")
    path = tmp_path / "reference-management-node.toml"
    path.write_text(profile)
    results = tmp_path / "results"
    selection = "stream or quorum or requeue or 3.4.3 or queue-depth"
    command = [sys.executable, "-c", "from amqpspec.cli import main; main()", "run", "--broker"]
    command += [f"amqp://127.0.0.1:{broker_without_http.port}", "--profile", str(path)]
    command += ["-k", selection, "--results", str(results), "--pipelined", "never"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    index = json.loads(next(results.rglob("index.json")).read_text())
    verdicts = {
        case: entry["verdict"] if isinstance(entry, dict) else entry
        for broker in index.values()
        for case, entry in (broker.items() if isinstance(broker, dict) else [])
    }
    assert len(verdicts) >= 8, done.stdout[-2000:]
    assert set(verdicts.values()) == {"OK"}, verdicts
