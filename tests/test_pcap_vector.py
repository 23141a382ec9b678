"""traces.pcap_vector: the numpy reader gives exactly the struct reader's TCP segments on real
captures and on crafted ones in every format (link layers, IPv4/IPv6, byte orders, micro
and nanosecond, pcapng), and byte-range splits add up to the whole file."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from capture_files import PROTON_C_PCAP, RABBITMQ_PCAP
from traces_support.crafted import write_capture

from amqpspec.traces.pcap_format import CaptureFormatError
from amqpspec.traces.pcap_reader import iter_tcp_segments
from amqpspec.traces.pcap_vector import SEGMENT_SCHEMA, plan_splits, read_segments


def _rows(path: str, start: int = 0, end: int | None = None) -> list[tuple]:
    table = pa.Table.from_batches(list(read_segments(path, start, end)), schema=SEGMENT_SCHEMA)
    d = table.to_pydict()
    return list(
        zip(
            d["time_ns"],
            d["src_ip"],
            d["src_port"],
            d["dst_ip"],
            d["dst_port"],
            d["seq"],
            d["ack"],
            d["flags"],
            d["payload"],
        )
    )


def _reference(path: str) -> list[tuple]:
    return [
        (
            round(s.time * 1e9),
            s.src[0],
            s.src[1],
            s.dst[0],
            s.dst[1],
            s.seq,
            s.ack,
            s.flags,
            s.payload,
        )
        for s in iter_tcp_segments(path)
    ]


def _same(rows: list[tuple], reference: list[tuple]) -> bool:
    assert len(rows) == len(reference)
    for row, ref in zip(rows, reference):
        assert abs(row[0] - ref[0]) <= 1000  # the float reference loses sub-microseconds
        assert row[1:] == ref[1:]
    return True


@pytest.mark.parametrize("path", [RABBITMQ_PCAP, PROTON_C_PCAP], ids=["rabbitmq", "proton-c"])
def test_real_captures_match_the_struct_reader(path):
    assert _same(_rows(str(path)), _reference(str(path)))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"link": "sll"},
        {"link": "null"},
        {"ip": 6},
        {"nano": True},
        {"endianness": ">"},
        {"pcapng": True},
        {"pcapng": True, "ip": 6, "link": "sll"},
    ],
    ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default",
)
def test_crafted_formats_match_the_struct_reader(tmp_path, options):
    path = str(tmp_path / "c.cap")
    write_capture(path, **options)
    rows = _rows(path)
    assert rows and any(row[-1] for row in rows)
    assert _same(rows, _reference(path))


@pytest.mark.parametrize("path", [RABBITMQ_PCAP, PROTON_C_PCAP], ids=["rabbitmq", "proton-c"])
def test_splits_start_at_records_and_add_up(path):
    splits = plan_splits(str(path), split_bytes=500_000)
    assert len(splits) > 5
    assert splits[0][0] == 0 and splits[-1][1] == path.stat().st_size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(splits))
    rows = [row for start, end in splits for row in _rows(str(path), start, end)]
    assert rows == _rows(str(path))


def test_not_a_capture(tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"hello world, not a pcap at all")
    with pytest.raises(CaptureFormatError, match=r"bad\.pcap"):
        list(read_segments(str(bad)))


def test_pcapng_splits_read_their_context_and_no_page_before_them(tmp_path):
    """A pcapng split reads the section and interface blocks the planner names, then its own
    blocks: the splits add up to the whole file, and a split still reads the same when every
    block between its context and its start is overwritten with zeros (never touched)."""
    from amqpspec.traces.pcap_vector import plan_splits_with_context

    path = tmp_path / "big.pcapng"
    write_capture(str(path), pcapng=True, transfers=250)
    planned = plan_splits_with_context(str(path), split_bytes=4_000)
    assert len(planned) > 3
    assert planned[0][2] is None and all(context for _, _, context in planned[1:])

    def split_table(capture, start, end, context):
        batches = list(read_segments(str(capture), start, end, context=context))
        return pa.Table.from_batches(batches, schema=SEGMENT_SCHEMA)

    parts = [split_table(path, *split) for split in planned]
    assert pa.concat_tables(parts).equals(_table(str(path)))

    start, end, context = planned[2]
    data = bytearray(path.read_bytes())
    last = max(context)
    after_context = last + int.from_bytes(data[last + 4 : last + 8], "little")
    assert after_context < start  # packet blocks lie between the context and the split
    data[after_context:start] = bytes(start - after_context)
    holed = tmp_path / "holed.pcapng"
    holed.write_bytes(bytes(data))
    original = split_table(path, start, end, context)
    assert original.num_rows > 0 and split_table(holed, start, end, context).equals(original)
    # without its context the split walks every block header from the file's start, into
    # the hole, where it stops: the context is what keeps it off those pages
    assert split_table(holed, start, end, None).num_rows == 0


def _table(path: str) -> pa.Table:
    return pa.Table.from_batches(list(read_segments(path)), schema=SEGMENT_SCHEMA)
