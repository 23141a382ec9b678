"""AMQP over WebSocket (docs/websocket.md): the reference broker's WebSocket listener
(reference_broker/runtime/websocket.py), `amqpspec run --broker ws://...` through the loopback
bridge (conformance/run/ws_bridge.py) with the same verdicts as over TCP, the run recording
its transport, the binding's own cases (2.1/websocket-*), and the fault they catch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.run.context import BrokerTarget
from amqpspec.reference_broker.runtime.process import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
# headers, SASL, open, credit, drain, an admin-closed connection and the binding's own cases
SELECTION = (
    "2.2/header or credit-single-grant or drain-empty-queue or 2.7.1/open-every-field "
    "or connection-forced or websocket"
)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = reference_broker()  # with --ws-port 0, as the fault matrix starts it
    yield running
    running.stop()


def _run(
    url: str, broker: BrokerProcess, results: Path, *extra: str, env: dict | None = None
) -> dict[str, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "run", "--broker", url, "--profile", "reference",
         "--admin", broker.admin_url, "--results", str(results), "-q", "--jobs", "4", *extra],
        cwd=REPO, capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((results / "index.json").read_text())["reference"]


def test_the_suite_over_websocket_gives_the_verdicts_it_gives_over_tcp(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    assert broker.ws_port is not None
    over_tcp = _run(broker.url, broker, tmp_path / "tcp", "-k", SELECTION)
    over_ws = _run(broker.ws_url, broker, tmp_path / "ws", "-k", SELECTION)
    verdicts = {case: entry["verdict"] for case, entry in over_ws.items()}
    assert verdicts == {case: entry["verdict"] for case, entry in over_tcp.items()}
    assert len(verdicts) >= 20 and set(verdicts.values()) == {"OK"}, verdicts
    binding = [case for case in verdicts if case.startswith("2.1/websocket-")]
    assert len(binding) == 6  # run in both: over TCP through the admin API's ws listener
    # the run records its transport: the run header, each entry, the JUnit properties
    assert {entry.get("transport") for entry in over_ws.values()} == {"websocket"}
    assert {entry.get("transport") for entry in over_tcp.values()} == {None}
    header = json.loads((tmp_path / "ws" / "runs" / "reference.json").read_text())
    assert header["transport"] == "websocket" and header["broker_url"].startswith("ws://")
    junit = (tmp_path / "ws" / "junit-reference.xml").read_text()
    assert 'name="broker.transport" value="websocket"' in junit
    trace = (tmp_path / "ws" / over_ws["2.1/websocket-byte-per-message"]["trace"]).read_text()
    assert "binary WebSocket messages carried" in trace and "<- @transfer" in trace


@pytest.mark.parametrize(
    ("fault", "catcher", "reason"),
    [
        ("ws-drop-short-messages", "2.1/websocket-byte-per-message", "binary WebSocket messages"),
        ("ws-close-without-handshake", "2.1/websocket-close-handshake", "close codes [1006]"),
    ],
)
def test_each_websocket_fault_is_caught_over_websocket(
    fault: str, catcher: str, reason: str, tmp_path: Path
) -> None:
    faulty = reference_broker(fault)
    try:
        entries = _run(faulty.ws_url, faulty, tmp_path, "-k", "websocket", "--pipelined", "never")
    finally:
        faulty.stop()
    verdicts = {case: entry["verdict"] for case, entry in entries.items()}
    assert verdicts[catcher] == "DIFFERS" and reason in entries[catcher]["reason"], entries
    others = {v for case, v in verdicts.items() if case != catcher}
    assert others == {"OK"}, verdicts


def test_broker_urls_name_their_transport() -> None:
    ws = BrokerTarget.parse("ws://user:pw@example.test:8080/amqp")
    assert (ws.host, ws.port, ws.username, ws.password) == ("example.test", 8080, "user", "pw")
    assert ws.transport == "websocket" and str(ws) == "ws://example.test:8080/amqp"
    bridged = ws.bridged(40000)
    assert (bridged.host, bridged.port, bridged.websocket) == ("127.0.0.1", 40000, ws.websocket)
    # the open names the broker's host, not the bridge's (2.7.1 hostname)
    assert bridged.open_hostname == "example.test"
    assert BrokerTarget.parse("wss://h/").port == 443
    assert BrokerTarget.parse("amqp://h").transport == "tcp"
    assert BrokerTarget.parse("amqp://h").open_hostname is None
    with pytest.raises(ValueError, match="ws://"):
        BrokerTarget.parse("http://h")


def test_the_suite_runs_over_wss_with_a_trusted_certificate(tmp_path: Path) -> None:
    """--ws-tls: wss:// with the amqps certificate; the run verifies it (SSL_CERT_FILE
    trusts this self-signed one), and without that trust the preflight says why."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1", "-keyout", str(key),
         "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    broker = BrokerProcess(
        "--ws-port", "0", "--ws-tls", "--tls-cert", str(cert), "--tls-key", str(key),
        "--tls-port", "0", admin=True,
    )  # fmt: skip
    try:
        assert broker.ws_url.startswith("wss://")
        env = {**os.environ, "SSL_CERT_FILE": str(cert)}
        selection = "websocket or 2.2/header-amqp-answered or credit-single-grant"
        entries = _run(broker.ws_url, broker, tmp_path / "r", "-k", selection, env=env)
        verdicts = {case: (e["verdict"], e["reason"]) for case, e in entries.items()}
        assert len(entries) >= 7 and {v for v, _ in verdicts.values()} == {"OK"}, verdicts
        untrusted = {k: v for k, v in os.environ.items() if k != "SSL_CERT_FILE"}
        refused = subprocess.run(
            [sys.executable, "-m", "amqpspec.cli", "run", "--broker", broker.ws_url,
             "--profile", "reference", "--results", str(tmp_path / "u"), "-k", "2.2/header"],
            cwd=REPO, capture_output=True, text=True, timeout=120, env=untrusted,
        )  # fmt: skip
        assert refused.returncode == 2 and "CERTIFICATE_VERIFY_FAILED" in refused.stderr
    finally:
        broker.stop()
