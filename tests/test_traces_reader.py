"""Reading foreign captures: real broker pcaps, crafted tcpdump-style pcaps in every
supported format, TCP reassembly (split, merged, retransmitted, overlapping and
out-of-order segments, sequence wrap), capture gaps and mid-connection starts."""

from __future__ import annotations

import gzip
import subprocess
from collections import Counter

import pytest
from capture_files import PROTON_C_PCAP, RABBITMQ_PCAP
from traces_support.crafted import exchange, segment_plan, write_capture
from traces_support.tshark import TSHARK, amqp_pdus

from amqpspec.amqp10.frames import Frame, ProtocolHeader, decode_stream
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.traces.load import TraceError, open_trace
from amqpspec.traces.pcap_writer import FORMS, PCAP_MICRO, PcapWriter, RecordWriter
from amqpspec.traces.reassembly import PcapTraceReader

RABBITMQ = str(RABBITMQ_PCAP)
PROTON_C = str(PROTON_C_PCAP)
PERFORMATIVES = (
    "open",
    "begin",
    "attach",
    "flow",
    "transfer",
    "disposition",
    "detach",
    "end",
    "close",
)


def _counts(path: str) -> dict[str, int]:
    counts = Counter(item.name for item in open_trace(path))
    return {name: counts[name] for name in PERFORMATIVES if counts[name]}


def test_rabbitmq_capture_counts_match_tshark():
    # tshark's counts, from tests/data/captures/README.md
    assert _counts(RABBITMQ) == {
        "open": 2,
        "begin": 2,
        "attach": 2,
        "flow": 19_994,
        "transfer": 10_000,
        "disposition": 9_963,
        "close": 2,
    }


def test_proton_c_capture_counts_match_tshark_and_multiframe_transfers_decode():
    assert _counts(PROTON_C) == {
        "open": 8,
        "begin": 8,
        "attach": 8,
        "flow": 464,
        "transfer": 4_200,
        "disposition": 421,
        "detach": 2,
        "end": 2,
        "close": 8,
    }
    trace = open_trace(PROTON_C)
    items = list(trace)
    assert len(trace.connections) == 4
    more = [i for i in items if i.name == "transfer" and i.item.performative.more]
    assert more, "the 100 kB messages are multi-frame transfers"
    assert not [i for i in items if i.kind == "raw"]
    # directions: every connection starts with the client's protocol header
    for connection_id in trace.connections:
        first = next(i for i in items if i.connection_id == connection_id)
        assert first.direction == CLIENT and isinstance(first.item, ProtocolHeader)


VARIANTS = {
    "ethernet-usec": {},
    "ethernet-nsec": {"nano": True},
    "big-endian": {"endianness": ">"},
    "linux-cooked": {"link": "sll"},
    "bsd-loopback": {"link": "null"},
    "ipv6": {"ip": 6},
    "ipv6-loopback": {"link": "null", "ip": 6},
    "pcapng": {"pcapng": True},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_reassembles_split_merged_retransmitted_and_reordered_segments(tmp_path, variant):
    path = str(tmp_path / f"{variant}.pcap")
    client, server = write_capture(path, **VARIANTS[variant])
    trace = open_trace(path)
    items = list(trace)
    for direction, stream in ((CLIENT, client), (SERVER, server)):
        ours = [i for i in items if i.direction == direction]
        expected = decode_stream(stream)
        assert [i.raw for i in ours] == [
            e.raw if isinstance(e, Frame) else e.encode() for e in expected
        ]
        assert [i.item for i in ours] == expected
    assert len(trace.connections) == 1
    info = trace.connections[1]
    assert info.client.endswith(":40000") and info.server.endswith(":5672")
    assert [i.index for i in items] == list(range(len(items)))
    assert items[0].time == pytest.approx(1_700_000_000.004, abs=1e-6)


def test_crafted_plan_really_is_disordered():
    client, server = exchange()
    plan = [p for p in segment_plan(client, server) if p[0] == CLIENT]
    offsets = [offset for _, offset, _ in plan]
    assert offsets != sorted(offsets)  # out of order
    assert len(set(offsets)) < len(offsets)  # retransmitted / overlapping
    lengths = {len(data) for _, _, data in plan}
    assert min(lengths) < 8 and max(lengths) > 500  # splits headers and merges frames


@pytest.mark.tshark
@pytest.mark.skipif(TSHARK is None, reason="tshark missing: apt-get install tshark")
def test_tshark_sees_the_same_pdus_in_a_crafted_capture(tmp_path):
    path = str(tmp_path / "crafted.pcap")
    write_capture(path)
    ours = list(open_trace(path))
    pdus = amqp_pdus(path, 5672)
    assert [p["code"] for p in pdus] == [
        i.item.protocol_id
        if isinstance(i.item, ProtocolHeader)
        else i.item.performative.DESCRIPTOR_CODE
        for i in ours
    ]


def test_a_lost_segment_turns_the_rest_of_that_direction_raw(tmp_path):
    client, server = exchange(10)
    path = str(tmp_path / "gap.pcap")
    with PcapWriter(path) as writer:
        writer.open_connection(1, "10.0.0.1:40000", "10.0.0.2:5672", 1.0)
        writer.data(1, CLIENT, client[:100], 1.1)
        writer._flows[1].next_seq[CLIENT] += 50  # 50 bytes never captured
        writer.data(1, CLIENT, client[150:], 1.2)
        writer.data(1, SERVER, server, 1.3)
    items = list(open_trace(path))
    client_items = [i for i in items if i.direction == CLIENT]
    assert client_items[0].name == "protocol-header"
    assert client_items[-1].kind == "raw"
    assert b"".join(i.raw for i in client_items) == client[:100] + client[150:]
    assert [i.item for i in items if i.direction == SERVER] == decode_stream(server)


def test_a_capture_started_mid_connection_decodes_frames(tmp_path):
    """No SYN and no protocol header: frames to a known AMQP port are still decoded."""
    client, _server = exchange(5)
    client_frames = decode_stream(client)[2:]  # from the begin frame on
    tail = b"".join(f.raw for f in client_frames)
    path = str(tmp_path / "mid.pcap")
    with PcapWriter(path) as writer:
        writer.open_connection(1, "10.0.0.1:40000", "10.0.0.2:5672", 1.0)
        writer.data(1, CLIENT, tail, 1.1)
    # drop the three handshake packets: re-read only data segments
    from amqpspec.traces.pcap_reader import iter_tcp_segments

    segments = [s for s in iter_tcp_segments(path) if s.payload]
    reader = PcapTraceReader(path)
    items = list(reader.items(segments))
    assert [i.item for i in items] == client_frames
    assert reader.connections[1].client == "10.0.0.1:40000"


def test_unreadable_input_is_a_trace_error(tmp_path):
    path = tmp_path / "junk.pcap"
    path.write_bytes(b"this is not a capture at all")
    with pytest.raises(TraceError):
        open_trace(str(path))
    with pytest.raises(TraceError):
        open_trace(str(tmp_path / "missing.pcap"))


def test_writer_ipv6_flows_read_back_and_tshark_dissects_them(tmp_path):
    client, server = exchange(3)
    path = str(tmp_path / "v6.pcap")
    with PcapWriter(path) as writer:
        writer.open_connection(7, "[::1]:40000", "[::1]:5672", 5.0)
        writer.data(7, CLIENT, client, 5.1)
        writer.data(7, SERVER, server, 5.2)
    trace = open_trace(path)
    items = list(trace)
    assert trace.connections[1].client == "[::1]:40000"
    assert [i.item for i in items if i.direction == CLIENT] == decode_stream(client)
    if TSHARK:
        assert len(amqp_pdus(path, 5672)) == len(items)


def test_a_growing_pcap_is_followed_to_its_end(tmp_path):
    """The proxy's frame-log builder reads the pcap while it is being written."""
    import threading
    import time

    from amqpspec.traces.framelog import read_frame_log
    from amqpspec.traces.framelog_process import build_frame_log

    client, server = exchange(20)
    pcap = str(tmp_path / "growing.pcap")
    parquet = str(tmp_path / "growing.parquet")
    done = threading.Event()
    file = open(pcap, "wb")  # noqa: SIM115 - closed by the writer below
    writer = PcapWriter(file)
    writer.open_connection(1, "127.0.0.1:40000", "127.0.0.1:5672", 1.0)
    file.flush()

    def produce() -> None:
        for start in range(0, len(client), 97):
            writer.data(1, CLIENT, client[start : start + 97], 2.0)
            file.flush()
            time.sleep(0.001)
        writer.data(1, SERVER, server, 3.0)
        writer.close()
        file.close()
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    rows = build_frame_log(pcap, parquet, "growing", done)
    producer.join(10)
    items = list(read_frame_log(parquet))
    assert rows == len(items) == len(decode_stream(client)) + len(decode_stream(server))
    assert [i.item for i in items if i.direction == CLIENT] == decode_stream(client)


def _prefixes():
    from hypothesis import strategies as st

    client, server = exchange(2)
    return st.sampled_from([b"", client[:8], client[:40], client, server, b"AMQP\x03\x01\x00\x00"])


def test_any_bytes_are_kept_whole_valid_or_not(tmp_path_factory):
    """Whatever a peer sends, the reader returns every byte once, in order (frames, then raw
    from the first undecodable byte on), and never raises."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    directory = tmp_path_factory.mktemp("anybytes")

    @settings(max_examples=60, deadline=None)
    @given(
        prefix=_prefixes(),
        junk=st.binary(max_size=300),
        cuts=st.lists(st.integers(1, 50), min_size=1, max_size=8),
    )
    def check(prefix: bytes, junk: bytes, cuts: list[int]) -> None:
        stream = prefix + junk
        path = str(directory / "any.pcap")
        with PcapWriter(path) as writer:
            writer.open_connection(1, "127.0.0.1:40000", "127.0.0.1:5672", 1.0)
            offset, turn = 0, 0
            while offset < len(stream):
                size = cuts[turn % len(cuts)]
                writer.data(1, CLIENT, stream[offset : offset + size], 1.0 + turn)
                offset, turn = offset + size, turn + 1
            writer.data(1, SERVER, junk[::-1], 2.0)
        items = list(open_trace(path))
        for direction, sent in ((CLIENT, stream), (SERVER, junk[::-1])):
            ours = [i for i in items if i.direction == direction]
            assert b"".join(i.raw for i in ours) == sent
            kinds = [i.kind for i in ours]
            if "raw" in kinds:
                assert set(kinds[kinds.index("raw") :]) == {"raw"}

    check()


@pytest.mark.parametrize("form", FORMS)
def test_every_written_form_reads_back_and_tshark_opens_it(tmp_path, form):
    """PcapWriter in each form (and gzip'd): the same items read back (to the form's
    timestamp resolution), and tshark opens it and dissects the same AMQP PDUs."""
    client, server = exchange(4)
    times = (5.123456789, 5.2, 5.3)  # floats exact to the nanosecond this near 0

    def write(target) -> int:
        writer = PcapWriter(target, form=form)
        writer.open_connection(1, "10.0.0.1:40000", "10.0.0.2:5672", times[0])
        writer.data(1, CLIENT, client, times[1])
        writer.data(1, SERVER, server, times[2])
        writer.close()
        return writer.packets

    plain = tmp_path / f"flow.{form}"
    packets = write(str(plain))
    with gzip.open(tmp_path / f"flow.{form}.gz", "wb") as compressed:
        write(compressed)
    assert gzip.decompress((tmp_path / f"flow.{form}.gz").read_bytes()) == plain.read_bytes()
    items = list(open_trace(str(plain)))
    assert [i.item for i in items if i.direction == CLIENT] == decode_stream(client)
    assert [i.item for i in items if i.direction == SERVER] == decode_stream(server)
    tick = 1e-6 if form == PCAP_MICRO else 1e-9
    assert abs(items[0].time - times[1]) <= tick
    if TSHARK:
        for path in (plain, tmp_path / f"flow.{form}.gz"):
            epochs = _tshark_fields(path, "frame.time_epoch")
            assert len(epochs) == packets
            digits = epochs[0].split(".")[1]
            assert digits.rstrip("0") == ("123456" if form == PCAP_MICRO else "123456789")
            assert len(amqp_pdus(str(path), 5672)) == len(items)


def test_a_cut_record_keeps_its_wire_length(tmp_path):
    """RecordWriter records a snap-length cut as tshark expects: caplen < wirelen."""
    for form in FORMS:
        path = tmp_path / f"cut.{form}"
        with RecordWriter(str(path), form) as records:
            records.write(1_000_000_000, b"\x02" * 40, wirelen=1500)
            records.write(2_000_000_000, b"\x02" * 61)
        if TSHARK:
            lengths = _tshark_fields(path, "frame.len", "frame.cap_len")
            assert lengths == ["1500\t40", "61\t61"]


def _tshark_fields(path, *fields: str) -> list[str]:
    command = [TSHARK, "-r", str(path), "-T", "fields"]
    for field in fields:
        command += ["-e", field]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    return result.stdout.splitlines()
