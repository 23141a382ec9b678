"""Reference broker over real sockets with python-qpid-proton clients: queues, exchanges,
durable queues, credit patterns, settlement, SASL, the CLI.

Each test starts its own in-process broker on ephemeral ports (tests/broker_support) and
stops it in teardown; message counts stay modest (the 100k runs live in
test_broker_acceptance.py, marked slow).
"""

from __future__ import annotations

import subprocess

import pytest
from broker_support import (
    WAIT,
    management,
    proton_receive,
    proton_send,
    running_broker,
    url,
)
from proton import ConnectionException, Message
from proton.utils import BlockingConnection

from amqpspec.reference_broker.runtime.process import BrokerProcess

pytestmark = pytest.mark.proton

N = 2000


@pytest.fixture
def broker():
    with running_broker() as b:
        yield b


def bodies(n: int, prefix: str = "m") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


@pytest.mark.parametrize("prefetch", [2, 200])
def test_classic_queue_roundtrip_in_order(broker, prefetch):
    management(broker).declare_queue("q", durable=False)
    count = N if prefetch == 200 else 500
    sent = proton_send(url(broker), "/queues/q", bodies(count))
    assert (sent.accepted, sent.error, sent.timed_out) == (count, None, False)
    got = proton_receive(url(broker), "/queues/q", count, prefetch=prefetch)
    assert got.error is None and not got.timed_out
    assert got.bodies == bodies(count)  # FIFO, nothing lost, nothing duplicated
    assert management(broker).queue("q")["messages"] == 0


def test_v1_addresses_and_anonymous_terminus(broker):
    management(broker).declare_queue("v1q")
    management(broker).bind("amq.direct", "v1q", "v1key")
    assert proton_send(url(broker), "/amq/queue/v1q", ["a"]).accepted == 1
    assert proton_send(url(broker), "/exchange/amq.direct/v1key", ["b"]).accepted == 1
    got = proton_receive(url(broker), "/amq/queue/v1q", 2)
    assert got.bodies == ["a", "b"]


def test_durable_queue_confirms_after_fsync_and_survives_restart(tmp_path):
    data_dir = str(tmp_path / "data")
    with running_broker(data_dir=data_dir) as b:
        management(b).declare_queue("dq", durable=True)
        sent = proton_send(url(b), "/queues/dq", bodies(N, "d"), durable=True)
        assert sent.accepted == N
        store = b.server.vhost.store
        # every confirm was sent after a group commit made it durable
        assert store.durable_through >= N and store.fsync_count >= 1
        assert store.fsync_count < N  # fsyncs were batched across publishes
    with running_broker(data_dir=data_dir) as b:
        got = proton_receive(url(b), "/queues/dq", N)
        assert got.bodies == bodies(N, "d")


def test_direct_fanout_topic_headers_exchanges(broker):
    m = management(broker)
    for q in ("qa", "qb", "qt", "qh"):
        m.declare_queue(q, durable=False)
    m.bind("amq.direct", "qa", "key-a")
    m.bind("amq.fanout", "qa")
    m.bind("amq.fanout", "qb")
    m.bind("amq.topic", "qt", "stock.*.nyse")
    m.bind("amq.headers", "qh", "", {"x-match": "all", "kind": "order"})
    assert proton_send(url(broker), "/exchanges/amq.direct/key-a", bodies(50, "d")).accepted == 50
    assert proton_send(url(broker), "/exchanges/amq.fanout", bodies(50, "f")).accepted == 50
    assert proton_send(url(broker), "/exchanges/amq.topic/stock.ibm.nyse", ["t1"]).accepted == 1
    missed = proton_send(url(broker), "/exchanges/amq.topic/stock.ibm.lse", ["t2"])
    assert (missed.accepted, missed.released) == (0, 1)  # unroutable -> released (3.4.4)
    hdr = proton_send(url(broker), "/exchanges/amq.headers", ["h1"], properties={"kind": "order"})
    assert hdr.accepted == 1
    assert proton_receive(url(broker), "/queues/qa", 100).bodies == bodies(50, "d") + bodies(
        50, "f"
    )
    assert proton_receive(url(broker), "/queues/qb", 50).bodies == bodies(50, "f")
    assert proton_receive(url(broker), "/queues/qt", 1).bodies == ["t1"]
    assert proton_receive(url(broker), "/queues/qh", 1).bodies == ["h1"]


def test_null_target_routes_by_to(broker):
    management(broker).declare_queue("byto", durable=False)
    sent = proton_send(url(broker), None, ["x", "y"], address="/queues/byto")
    assert sent.accepted == 2
    assert proton_receive(url(broker), "/queues/byto", 2).bodies == ["x", "y"]


def test_presettled_publishes(broker):
    management(broker).declare_queue("ps", durable=False)
    sent = proton_send(url(broker), "/queues/ps", bodies(500), settled=True)
    assert sent.error is None and not sent.timed_out
    got = proton_receive(url(broker), "/queues/ps", 500)
    assert got.bodies == bodies(500)


def test_attach_to_missing_queue_is_refused_with_not_found(broker):
    conn = BlockingConnection(url(broker), timeout=WAIT)
    try:
        with pytest.raises(Exception, match="amqp:not-found"):
            conn.create_receiver("/queues/absent")
    finally:
        conn.close()


def test_unsettled_on_connection_loss_are_requeued(broker):
    management(broker).declare_queue("lost", durable=False)
    proton_send(url(broker), "/queues/lost", bodies(5))
    conn = BlockingConnection(url(broker), timeout=WAIT)
    receiver = conn.create_receiver("/queues/lost", credit=5)
    first = [receiver.receive(timeout=WAIT).body for _ in range(5)]
    assert first == bodies(5)
    conn.close()  # nothing settled
    got = proton_receive(url(broker), "/queues/lost", 5)
    assert got.bodies == bodies(5)
    for message in got.messages:
        assert message.first_acquirer is False  # 3.2.1 on redelivery


def test_sasl_plain_good_and_bad_credentials():
    with running_broker(users=_users(("alice", "s3cret"))) as b:
        management_ok = b.port
        conn = BlockingConnection(
            f"amqp://127.0.0.1:{management_ok}",
            timeout=WAIT,
            user="alice",
            password="s3cret",
            allowed_mechs="PLAIN",
            allow_insecure_mechs=True,
        )
        conn.close()
        with pytest.raises(ConnectionException):
            BlockingConnection(
                f"amqp://127.0.0.1:{b.port}",
                timeout=WAIT,
                user="alice",
                password="wrong",
                allowed_mechs="PLAIN",
                allow_insecure_mechs=True,
            )


def test_anonymous_refused_when_configured_never():
    with running_broker(sasl_anonymous="never") as b, pytest.raises(ConnectionException):
        BlockingConnection(f"amqp://127.0.0.1:{b.port}", timeout=WAIT, allowed_mechs="ANONYMOUS")


def _users(*pairs):
    from amqpspec.reference_broker.config import User

    return tuple(User(name, password) for name, password in pairs)


def test_cli_starts_logs_ready_and_stops_on_sigterm():
    broker = BrokerProcess(wait=WAIT)  # fails unless the ready line names the port
    try:
        conn = BlockingConnection(broker.url, timeout=WAIT)
        sender = conn.create_sender("/queue/cliq")
        sender.send(Message(body="hello"))
        conn.close()
    finally:
        code = broker.stop()  # SIGTERM
    assert code == 0
    assert any("ready on 127.0.0.1:" in line for line in broker.tail)


def test_amqps_listener(tmp_path):
    from proton import SSLDomain

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with running_broker(tls_cert=str(cert), tls_key=str(key), tls_port=0) as b:
        management(b).declare_queue("tq", durable=False)
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
        conn = BlockingConnection(
            f"amqps://127.0.0.1:{b.server.tls_port}", timeout=WAIT, ssl_domain=domain
        )
        try:
            conn.create_sender("/queues/tq").send(Message(body="over tls"))
            receiver = conn.create_receiver("/queues/tq", credit=1)
            assert receiver.receive(timeout=WAIT).body == "over tls"
            receiver.accept()
        finally:
            conn.close()
