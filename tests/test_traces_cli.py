"""`amqpspec trace show|check|convert` and the Parquet frame log they read and write."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from capture_files import CAPTURES, PROTON_C_PCAP
from traces_support.crafted import session_frames

from amqpspec.amqp10.composites import (
    Detach,
    Disposition,
    Error,
    Open,
)
from amqpspec.amqp10.frames import AMQP_HEADER, encode_frame
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.spec import Cond, Role
from amqpspec.traces.framelog import (
    METADATA_KEY_VERSION,
    SCHEMA,
    SCHEMA_VERSION,
    FrameLogWriter,
    read_connections,
    read_frame_log,
)
from amqpspec.traces.load import open_trace
from amqpspec.traces.pcap_writer import PcapWriter

AMQPSPEC = [sys.executable, "-m", "amqpspec.cli"]


def amqpspec(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*AMQPSPEC, *args], capture_output=True, text=True, timeout=timeout)


def write_session(path: str, frames: list[tuple[str, bytes]]) -> None:
    with PcapWriter(path) as writer:
        writer.open_connection(1, "127.0.0.1:40001", "127.0.0.1:5672", 100.0)
        for number, (direction, data) in enumerate(frames):
            writer.data(1, direction, data, 100.0 + number / 100)


@pytest.fixture
def clean_pcap(tmp_path):
    path = str(tmp_path / "clean.pcap")
    write_session(path, session_frames(transfers=2, credit=2))
    return path


@pytest.fixture
def overdelivery_pcap(tmp_path):
    path = str(tmp_path / "over.pcap")
    write_session(path, session_frames(transfers=3, credit=2))
    return path


def test_check_names_the_credit_rule_and_the_frame_of_an_overdelivery(overdelivery_pcap, tmp_path):
    third_transfer = len(session_frames(transfers=3, credit=2)) - 1
    parquet = str(tmp_path / "over.parquet")
    assert amqpspec("trace", "convert", overdelivery_pcap, parquet).returncode == 0
    for path in (overdelivery_pcap, parquet):
        result = amqpspec("trace", "check", path)
        assert result.returncode == 1, result.stdout + result.stderr
        lines = [line for line in result.stdout.splitlines() if "MUST" in line]
        assert len(lines) == 1, result.stdout
        assert "link.credit" in lines[0] and "2.6.7" in lines[0]
        assert lines[0].startswith(f"[conn 1] #{third_transfer} ")
        records = [
            json.loads(x) for x in amqpspec("trace", "check", "--json", path).stdout.splitlines()
        ]
        assert [(r["index"], r["level"], r["origin"]) for r in records] == [
            (third_transfer, "MUST", SERVER)
        ]


def test_check_is_clean_within_credit(clean_pcap):
    result = amqpspec("trace", "check", clean_pcap)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MUST" not in result.stdout


def test_unreadable_input_exits_2_with_a_message(tmp_path):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture")
    for action in ("show", "check"):
        for path in (str(junk), str(tmp_path / "missing.pcap")):
            result = amqpspec("trace", action, path)
            assert result.returncode == 2
            assert "cannot read" in result.stderr and path in result.stderr
    assert amqpspec("trace").returncode == 2


def test_show_prints_one_line_per_item(clean_pcap):
    result = amqpspec("trace", "show", clean_pcap)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert len(lines) == len(session_frames(transfers=2, credit=2))
    assert lines[0] == "[conn 1] #0 -> AMQP 1.0.0"
    assert lines[2] == "[conn 1] #2 <- AMQP 1.0.0"
    flow = lines[8]
    assert flow.startswith("[conn 1] #8 0 -> @flow(19) [next-incoming-id=0, incoming-window=100")
    assert "link-credit=2" in flow and "drain=false" in flow
    assert lines[9].startswith("[conn 1] #9 0 <- @transfer(20) [handle=0, delivery-id=0")


def test_show_json_has_the_fields(clean_pcap):
    result = amqpspec("trace", "show", "--json", clean_pcap)
    records = [json.loads(line) for line in result.stdout.splitlines()]
    flow = records[8]
    assert flow["name"] == "flow" and flow["direction"] == CLIENT and flow["channel"] == 0
    assert flow["fields"]["link-credit"] == 2 and flow["fields"]["delivery-count"] == 0
    assert flow["time"] == pytest.approx(100.08)
    transfer = records[9]
    assert transfer["fields"]["delivery-tag"] == {"@binary": "AA=="}
    assert transfer["payload_size"] == len(Message.of(b"hello").encode())


def test_convert_writes_a_versioned_frame_log_with_flattened_fields(overdelivery_pcap, tmp_path):
    out = str(tmp_path / "frames.parquet")
    result = amqpspec("trace", "convert", overdelivery_pcap, out, "--trace-id", "over-1")
    assert result.returncode == 0, result.stderr
    table = pq.read_table(out)
    assert table.schema.metadata[METADATA_KEY_VERSION] == SCHEMA_VERSION.encode()
    assert table.schema.remove_metadata() == SCHEMA.remove_metadata()
    rows = table.to_pylist()
    assert {row["trace_id"] for row in rows} == {"over-1"}
    flow = next(r for r in rows if r["performative"] == "flow")
    assert (flow["handle"], flow["link_credit"], flow["delivery_count"]) == (0, 2, 0)
    assert (flow["incoming_window"], flow["next_outgoing_id"], flow["drain"]) == (100, 0, False)
    assert flow["direction"] == CLIENT and flow["descriptor_code"] == 0x13
    attach = [r for r in rows if r["performative"] == "attach"]
    assert [a["role"] for a in attach] == ["receiver", "sender"]
    assert attach[0]["source_address"] == "q" and attach[0]["link_name"] == "r"
    transfers = [r for r in rows if r["performative"] == "transfer"]
    assert [t["delivery_id"] for t in transfers] == [0, 1, 2]
    assert all(t["settled"] and t["more"] is False for t in transfers)
    headers = [r for r in rows if r["kind"] == "protocol-header"]
    assert [h["protocol_id"] for h in headers] == [0, 0]
    assert [r["frame_index"] for r in rows] == list(range(len(rows)))
    assert rows[0]["timestamp"].timestamp() == pytest.approx(100.0)
    assert rows[0]["client"] == "127.0.0.1:40001" and rows[0]["server"] == "127.0.0.1:5672"
    connections = read_connections(out)
    assert connections[1].client == "127.0.0.1:40001"
    assert connections[1].byte_counts[SERVER] == sum(
        len(d) for s, d in session_frames(3, 2) if s == SERVER
    )
    for name, type_ in zip(table.schema.names, table.schema.types):
        assert not pa.types.is_unsigned_integer(type_), name  # Spark-friendly types


def test_frame_log_rows_for_errors_dispositions_and_row_groups(tmp_path):
    frames = [
        (CLIENT, AMQP_HEADER.encode()),
        (CLIENT, encode_frame(Open(container_id="c", max_frame_size=4096, channel_max=9))),
        (SERVER, AMQP_HEADER.encode()),
        (
            SERVER,
            encode_frame(Disposition(role=Role.RECEIVER, first=3, last=7, settled=True), channel=2),
        ),
        (
            SERVER,
            encode_frame(
                Detach(
                    handle=5,
                    closed=True,
                    error=Error(condition=Cond.WINDOW_VIOLATION, description="too many"),
                ),
                channel=2,
            ),
        ),
        (CLIENT, encode_frame(None)),  # an empty (heartbeat) frame
    ]
    pcap = str(tmp_path / "misc.pcap")
    write_session(pcap, frames)
    out = str(tmp_path / "misc.parquet")
    writer = FrameLogWriter(out, "misc", rows_per_group=2)
    trace = open_trace(pcap)
    items = list(trace)
    for item in items:
        writer.add(item, trace.connections[1])
    writer.close(trace.connections.values())
    assert pq.ParquetFile(out).metadata.num_row_groups == 3
    rows = pq.read_table(out).to_pylist()
    assert (rows[1]["max_frame_size"], rows[1]["channel_max"], rows[1]["container_id"]) == (
        4096,
        9,
        "c",
    )
    disposition = rows[3]
    assert (disposition["first"], disposition["last"], disposition["role"]) == (3, 7, "receiver")
    assert disposition["channel"] == 2 and disposition["settled"] is True
    detach = rows[4]
    assert detach["error_condition"] == str(Cond.WINDOW_VIOLATION)
    assert detach["error_description"] == "too many" and detach["closed"] is True
    assert rows[5]["performative"] == "empty" and rows[5]["frame_size"] == 8
    assert not [r for r in rows if r["kind"] == "raw"]
    again = list(read_frame_log(out))
    assert [(i.direction, i.index, i.raw, i.item) for i in again] == [
        (i.direction, i.index, i.raw, i.item) for i in items
    ]


def test_convert_of_a_real_capture_round_trips(tmp_path):
    capture = str(PROTON_C_PCAP)
    out = str(tmp_path / "proton.parquet")
    assert amqpspec("trace", "convert", capture, out).returncode == 0
    from_pcap = list(open_trace(capture))
    from_parquet = list(read_frame_log(out))
    assert [(i.connection_id, i.index, i.raw) for i in from_pcap] == [
        (i.connection_id, i.index, i.raw) for i in from_parquet
    ]
    show = amqpspec("trace", "show", out)
    assert len(show.stdout.splitlines()) == len(from_pcap)


REAL = str(CAPTURES)


def test_check_finds_the_rabbitmq_overdelivery_in_the_real_capture():
    """README: the broker sent delivery-id 0xf93 after the receiver granted 0xf91 + 2."""
    result = amqpspec("trace", "check", f"{REAL}/rabbitmq-3.10.8-prefetch2-overdelivery.pcap")
    assert result.returncode == 1
    credit = [line for line in result.stdout.splitlines() if "link.credit" in line]
    assert any("delivery-id 0xf93" in line and line.startswith("[conn 1] #") for line in credit)
    assert all(" MUST " in line and "server" in line for line in credit)
    result = amqpspec("trace", "check", f"{REAL}/proton-c-example-broker-basic-and-multiframe.pcap")
    # the broker is clean; its Proton receivers set delivery-count before its attach (2.7.4)
    lines = result.stdout.splitlines()
    assert [line for line in lines if " server: " in line] == [], result.stdout
    assert all("receiver-delivery-count-before-attach" in line for line in lines if "[conn" in line)


def test_check_does_not_judge_a_connection_captured_mid_way(tmp_path):
    frames = session_frames(transfers=3, credit=2)[4:]  # no headers, no open
    path = str(tmp_path / "mid.pcap")
    with PcapWriter(path) as writer:
        writer.open_connection(1, "127.0.0.1:40001", "127.0.0.1:5672", 100.0)
        for direction, data in frames:
            writer.data(1, direction, data, 100.0)
    # drop the SYN handshake so the capture really starts mid-connection
    from amqpspec.traces.pcap_reader import iter_tcp_segments
    from amqpspec.traces.reassembly import PcapTraceReader

    segments = [s for s in iter_tcp_segments(path) if s.payload]
    items = list(PcapTraceReader(path).items(segments))
    assert [i.name for i in items][:2] == ["begin", "begin"]
    from amqpspec.traces.check import check_trace

    findings = check_trace(items)
    assert [f.level for f in findings] == ["NOTE"]
    assert "mid-connection" in findings[0].line()
