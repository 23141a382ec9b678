"""The recording proxy (`amqpspec capture`) between real AMQP 1.0 peers.

A python-qpid-proton sender and receiver talk to a proton broker (a Container listening
in a subprocess) through the proxy; the recording must hold every frame each endpoint
sent (compared with the endpoints' own PN_TRACE_FRM logs), the pcap must agree with the
Parquet log and with tshark field by field, and the relayed bytes must be the bytes sent.
A raw client/server pair with garbage bytes proves byte-for-byte relaying and raw
recording; a signal mid-connection must leave readable files.
"""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import subprocess
import threading
from collections import defaultdict

import pyarrow.parquet as pq
import pytest
from traces_support.processes import (
    free_port,
    run_proton_client,
    start_capture,
    start_proton_broker,
    stop,
)
from traces_support.proton_trace import frames as proton_frames
from traces_support.tshark import TSHARK, amqp_pdus

from amqpspec.amqp10.composites import Close, Open
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, ProtocolHeader, encode_frame
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.traces.framelog import SCHEMA_VERSION, read_frame_log, schema_version
from amqpspec.traces.load import open_trace

MESSAGES = 300


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One recorded run: a sender then a receiver (prefetch 7) through the proxy."""
    out = str(tmp_path_factory.mktemp("capture"))
    broker_port = free_port()
    broker = start_proton_broker(broker_port)
    capture = None
    try:
        capture = start_capture(broker_port, out, "session")
        _, sender_log = run_proton_client("send", capture.port, "q1", MESSAGES)
        _, receiver_log = run_proton_client("receive", capture.port, "q1", MESSAGES, "7")
        assert capture.stop(signal.SIGINT) == 0
        yield {
            "capture": capture,
            "broker_port": broker_port,
            "logs": {1: proton_frames(sender_log), 2: proton_frames(receiver_log)},
        }
    finally:
        if capture is not None:
            capture.stop()
        stop(broker)


def _items(path):
    trace = open_trace(path)
    items = list(trace)
    return trace, items


def test_every_connection_recorded_with_byte_digests(session):
    capture = session["capture"]
    with open(capture.index) as file:
        index = json.load(file)
    assert [c["connection_id"] for c in index["connections"]] == [1, 2]
    assert schema_version(capture.parquet) == SCHEMA_VERSION
    _, items = _items(capture.parquet)
    for connection in index["connections"]:
        assert connection["closed"]
        assert connection["server"] == f"127.0.0.1:{session['broker_port']}"
        for direction in (CLIENT, SERVER):
            stream = b"".join(
                i.raw
                for i in items
                if i.connection_id == connection["connection_id"] and i.direction == direction
            )
            assert len(stream) == connection["bytes"][direction] > 0
            assert hashlib.sha256(stream).hexdigest() == connection["sha256"][direction]


def test_pcap_and_parquet_hold_the_same_frames(session):
    capture = session["capture"]
    pcap_trace, from_pcap = _items(capture.pcap)
    _, from_parquet = _items(capture.parquet)
    assert len(from_pcap) == len(from_parquet) > 2 * MESSAGES

    def key(item):
        return (item.connection_id, item.direction, item.index, item.raw)

    assert sorted(map(key, from_pcap)) == sorted(map(key, from_parquet))
    assert all(item.item is not None for item in from_parquet)
    assert sorted(pcap_trace.connections) == [1, 2]


def _our_fields(frame: Frame) -> dict:
    fields = {}
    for name in frame.performative.FIELD_NAMES:
        value = getattr(frame.performative, name)
        if isinstance(value, bool | int):
            fields[name.replace("_", "-")] = value
    return fields


@pytest.mark.proton
def test_frames_equal_what_each_endpoint_logged(session):
    """Both proton clients logged every frame they sent and received (PN_TRACE_FRM)."""
    _, items = _items(session["capture"].parquet)
    compared = 0
    for connection_id, log in session["logs"].items():
        ours = [i for i in items if i.connection_id == connection_id]
        for arrow, direction in (("->", CLIENT), ("<-", SERVER)):
            logged = [f for f in log if f["direction"] == arrow]
            recorded = [i for i in ours if i.direction == direction]
            assert [f["name"] for f in logged] == [i.name for i in recorded]
            for entry, item in zip(logged, recorded):
                if isinstance(item.item, Frame):
                    assert entry["channel"] == item.item.channel
                    our_fields = _our_fields(item.item)
                    for name, value in entry["fields"].items():
                        assert our_fields.get(name) == value, (connection_id, item.index, name)
                        compared += 1
    assert compared > 3 * MESSAGES
    transfers = [i for i in items if i.name == "transfer"]
    assert len(transfers) == 2 * MESSAGES  # sender -> broker, broker -> receiver


# tshark field name -> our composite attribute
TSHARK_FIELDS = {
    "handle": "handle",
    "deliveryCount": "delivery_count",
    "linkCredit": "link_credit",
    "deliveryId": "delivery_id",
    "drain": "drain",
    "echo": "echo",
    "settled": "settled",
    "more": "more",
    "role": "role",
    "nextIncomingId": "next_incoming_id",
    "incomingWindow": "incoming_window",
    "nextOutgoingId": "next_outgoing_id",
    "outgoingWindow": "outgoing_window",
}


@pytest.mark.tshark
@pytest.mark.skipif(TSHARK is None, reason="tshark missing: apt-get install tshark")
def test_tshark_agrees_field_by_field(session):
    capture = session["capture"]
    _, ours = _items(capture.pcap)
    pdus = amqp_pdus(capture.pcap, session["broker_port"])
    assert len(pdus) == len(ours)
    compared = defaultdict(int)
    for pdu, item in zip(pdus, ours):
        if isinstance(item.item, ProtocolHeader):
            assert pdu == {"kind": "header", "code": item.item.protocol_id}
            continue
        assert pdu["kind"] == "frame"
        assert pdu["code"] == item.item.performative.DESCRIPTOR_CODE, item.index
        assert pdu["channel"] == item.item.channel
        for tshark_name, attribute in TSHARK_FIELDS.items():
            if tshark_name not in pdu["args"] or not hasattr(item.item.performative, attribute):
                continue
            value = getattr(item.item.performative, attribute)
            expected = str(int(value)) if value is not None else None
            assert pdu["args"][tshark_name] == expected, (item.index, tshark_name)
            compared[tshark_name] += 1
    for name in ("handle", "deliveryCount", "linkCredit", "deliveryId", "drain"):
        assert compared[name] >= MESSAGES // 10, (name, dict(compared))


def test_trace_check_is_clean_on_the_recording(session):
    """Nothing of the Proton broker's; the Proton receiver grants credit with delivery-count
    0 before the broker's attach (2.7.4 "...this field MUST NOT be set"): the client's, once."""
    for path in (session["capture"].pcap, session["capture"].parquet):
        result = subprocess.run(
            ["amqpspec", "trace", "check", "--json", path],
            capture_output=True,
            text=True,
            timeout=60,
        )
        found = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        assert [f for f in found if f["origin"] == "server"] == [], result.stdout
        client = [(f["connection"], f["rule_id"]) for f in found]
        assert client == [(2, "link.flow.receiver-delivery-count-before-attach")], result.stdout


class _RawServer:
    """Accepts one connection, reads until EOF, answers with known bytes, closes."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.received = b""
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(20)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.sock.accept()
        with connection:
            connection.settimeout(20)
            chunks = []
            while chunk := connection.recv(65536):
                chunks.append(chunk)
            self.received = b"".join(chunks)
            connection.sendall(self.reply)

    def close(self) -> None:
        self.thread.join(20)
        self.sock.close()


def _recv_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_relays_byte_for_byte_and_records_garbage_raw(tmp_path):
    client_bytes = (
        AMQP_HEADER.encode()
        + encode_frame(Open(container_id="raw-client"))
        + b"\x00\x00\x00\x0c\x01\x09garbage!"  # DOFF 1: a framing error for the core
        + bytes(range(256)) * 40
    )
    server_bytes = (
        AMQP_HEADER.encode() + encode_frame(Open(container_id="raw-server")) + encode_frame(Close())
    )
    server = _RawServer(server_bytes)
    capture = start_capture(server.port, str(tmp_path), "raw")
    try:
        with socket.create_connection(("127.0.0.1", capture.port), timeout=20) as sock:
            for start in range(0, len(client_bytes), 1000):  # several chunks
                sock.sendall(client_bytes[start : start + 1000])
            sock.shutdown(socket.SHUT_WR)
            received = _recv_all(sock)
        server.close()
        assert server.received == client_bytes
        assert received == server_bytes
    finally:
        assert capture.stop() == 0
    with open(capture.index) as file:
        (connection,) = json.load(file)["connections"]
    assert connection["bytes"] == {CLIENT: len(client_bytes), SERVER: len(server_bytes)}
    for path in (capture.pcap, capture.parquet):
        items = list(open_trace(path, ports=[server.port]))
        client = [i for i in items if i.direction == CLIENT]
        assert [i.kind for i in client[:2]] == ["protocol-header", "frame"]
        assert client[1].item.performative.container_id == "raw-client"
        assert {i.kind for i in client[2:]} == {"raw"}
        assert b"".join(i.raw for i in client) == client_bytes
        assert b"".join(i.raw for i in items if i.direction == SERVER) == server_bytes
        assert [i.name for i in items if i.direction == SERVER] == [
            "protocol-header",
            "open",
            "close",
        ]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_connection_leaves_readable_files(tmp_path, signum):
    server_sock = socket.create_server(("127.0.0.1", 0))
    server_sock.settimeout(20)
    capture = start_capture(server_sock.getsockname()[1], str(tmp_path), "sig")
    try:
        with socket.create_connection(("127.0.0.1", capture.port), timeout=20) as sock:
            peer, _ = server_sock.accept()
            with peer:
                peer.settimeout(20)
                sock.sendall(AMQP_HEADER.encode() + encode_frame(Open(container_id="c")))
                got = b""
                while len(got) < 8:
                    got += peer.recv(65536)
                peer.sendall(AMQP_HEADER.encode())
                assert sock.recv(8) == AMQP_HEADER.encode()
                # both sockets still open: the proxy is stopped mid-connection
                assert capture.stop(signum) == 0
    finally:
        capture.stop()
        server_sock.close()
    names = [i.name for i in open_trace(capture.pcap)]
    assert names.count("protocol-header") == 2 and "open" in names
    assert pq.read_table(capture.parquet).num_rows == len(names)
    assert [i.name for i in read_frame_log(capture.parquet)] == names
    if TSHARK:
        result = subprocess.run([TSHARK, "-r", capture.pcap], capture_output=True, timeout=30)
        assert result.returncode == 0


def _rss_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


def test_a_slow_reader_is_back_pressured_not_buffered(tmp_path):
    """64 MiB to a server that reads nothing for a while: the proxy's memory stays small
    and every byte arrives intact (the pair is slowed, nothing dropped)."""
    import time

    payload = bytes(range(256)) * (64 * 1024 * 4)  # 64 MiB
    server_sock = socket.create_server(("127.0.0.1", 0))
    server_sock.settimeout(20)
    capture = start_capture(server_sock.getsockname()[1], str(tmp_path), "bulk")
    received = hashlib.sha256()
    count = 0
    try:
        baseline = _rss_kib(capture.process.pid, "VmRSS")
        with socket.create_connection(("127.0.0.1", capture.port), timeout=30) as sock:
            peer, _ = server_sock.accept()
            sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
            sender.start()
            time.sleep(1.0)  # the server reads nothing yet: buffers fill, the proxy pauses
            peak_while_stalled = _rss_kib(capture.process.pid, "VmHWM")
            with peer:
                peer.settimeout(30)
                while count < len(payload):
                    chunk = peer.recv(1 << 20)
                    assert chunk
                    received.update(chunk)
                    count += len(chunk)
            sender.join(30)
        peak = _rss_kib(capture.process.pid, "VmHWM")
    finally:
        assert capture.stop() == 0
        server_sock.close()
    assert received.digest() == hashlib.sha256(payload).digest()
    assert peak_while_stalled - baseline < 32 * 1024, (baseline, peak_while_stalled)
    assert peak - baseline < 48 * 1024, (baseline, peak)  # well under the 64 MiB relayed
    with open(capture.index) as file:
        (connection,) = json.load(file)["connections"]
    assert connection["bytes"][CLIENT] == len(payload)
