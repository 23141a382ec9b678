"""SASL EXTERNAL with TLS client certificates (5.3.3.1, RFC 4422 appendix A) against the
reference broker over a real amqps socket.

Owns: certificates made here with openssl (a CA, the broker's certificate, client
certificates for a configured user and for a name no user has), the broker's `tls_ca`
(client certificates asked for, EXTERNAL offered, the user is the certificate's CN), and
what a client sees: EXTERNAL accepted as the CN's user (the admin API shows it), refused
with sasl-outcome auth for an unknown CN, not offered without a certificate. Every wait
is bounded.
"""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from broker_support import EngineClient, running_broker

from amqpspec.amqp10.engine import ClientSasl, SaslMechanismsOffered, SaslOutcomeReceived
from amqpspec.amqp10.spec import SaslCode
from amqpspec.reference_broker.config import User


def openssl(command: str) -> None:
    """One openssl command (the paths are pytest's, without spaces)."""
    subprocess.run(["openssl", *command.split()], check=True, capture_output=True, timeout=60)


def issue(tmp: Path, name: str, cn: str, ca: Path, ca_key: Path) -> tuple[Path, Path]:
    """A key and a certificate for `cn`, signed by the CA (SAN localhost, 127.0.0.1)."""
    key, csr, cert = tmp / f"{name}.key", tmp / f"{name}.csr", tmp / f"{name}.pem"
    ext = tmp / f"{name}.ext"
    ext.write_text("subjectAltName = DNS:localhost, IP:127.0.0.1\n")
    openssl(f"req -new -newkey rsa:2048 -nodes -subj /CN={cn} -keyout {key} -out {csr}")
    openssl(
        f"x509 -req -in {csr} -CA {ca} -CAkey {ca_key} -CAcreateserial -days 1 "
        f"-extfile {ext} -out {cert}"
    )
    return cert, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("certs")
    ca, ca_key = tmp / "ca.pem", tmp / "ca.key"
    openssl(
        f"req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=amqpspec-test-CA "
        f"-keyout {ca_key} -out {ca}"
    )
    names = (("server", "localhost"), ("alice", "alice"), ("mallory", "mallory"))
    made = {name: issue(tmp, name, cn, ca, ca_key) for name, cn in names}
    made["ca"] = (ca, ca_key)
    return made


@pytest.fixture(scope="module")
def broker(certs):
    cert, key = certs["server"]
    users = (User("guest", "guest"), User("alice", "not-used-by-external"))
    with running_broker(
        tls_cert=str(cert),
        tls_key=str(key),
        tls_ca=str(certs["ca"][0]),
        tls_port=0,
        users=users,
    ) as b:
        yield b


def client_tls(certs, who: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs["ca"][0]))
    if who is not None:
        context.load_cert_chain(*map(str, certs[who]))
    return context


def connect(broker, certs, who: str | None, sasl: ClientSasl) -> EngineClient:
    return EngineClient(broker.server.tls_port, sasl=sasl, tls=client_tls(certs, who))


def test_external_logs_in_as_the_certificates_cn(broker, certs) -> None:
    client = connect(broker, certs, "alice", ClientSasl("EXTERNAL"))
    try:
        client.open()
        offered = client.wait_event(SaslMechanismsOffered).mechanisms
        assert "EXTERNAL" in offered and "PLAIN" in offered
        assert client.wait_event(SaslOutcomeReceived).code == SaslCode.OK
        users = broker.call(lambda: [c.user for c in broker.server.vhost.connections.values()])
        assert users == ["alice"]
    finally:
        client.sock.close()


def test_external_with_an_unknown_cn_is_refused(broker, certs) -> None:
    client = connect(broker, certs, "mallory", ClientSasl("EXTERNAL"))
    try:
        client.conn.open()
        outcome = client.wait_event(SaslOutcomeReceived)
        assert outcome.code == SaslCode.AUTH
        client.wait_for(lambda: client.closed or client.conn.finished, "the broker's close")
        assert client.conn.remote_open is None
    finally:
        client.sock.close()


def test_external_acting_as_another_user_is_refused(broker, certs) -> None:
    client = connect(broker, certs, "alice", ClientSasl("EXTERNAL", authzid="guest"))
    try:
        client.conn.open()
        assert client.wait_event(SaslOutcomeReceived).code == SaslCode.AUTH
    finally:
        client.sock.close()


def test_without_a_client_certificate_external_is_not_offered(broker, certs) -> None:
    client = connect(broker, certs, None, ClientSasl("PLAIN", "guest", "guest"))
    try:
        client.open()
        offered = client.wait_event(SaslMechanismsOffered).mechanisms
        assert "EXTERNAL" not in offered
        assert client.wait_event(SaslOutcomeReceived).code == SaslCode.OK
    finally:
        client.sock.close()
