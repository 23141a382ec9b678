"""The capture readers on URLs (traces/urlfs.py), against moto's S3 server on loopback
(tests/s3_support.py): the split planner walks a URL's headers to the ranges (and pcapng
contexts) it finds in the local file, every range read by URL gives the local range's
segments, a gzip'd capture and a Parquet frame log read by URL give the local file's rows,
and a URL the readers cannot open is said in one line. No Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from capture_files import PROTON_C_PCAP, RABBITMQ_PCAP
from s3_support import BUCKET
from triage_support import gzipped, rabbit_overrun

from amqpspec.traces import urlfs
from amqpspec.traces.pcap_vector import SEGMENT_SCHEMA, plan_splits_with_context, read_segments

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("captures")
    rabbit_overrun(root / "rabbit.pcapng")
    (root / "proton-c.pcap").write_bytes(PROTON_C_PCAP.read_bytes())
    gzipped(root / "proton-c.pcap", root / "proton-c.pcap.gz")
    return root


def _table(batches) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=SEGMENT_SCHEMA)


def test_splits_by_url_are_the_local_splits(s3, captures):
    for name in ("rabbit.pcapng", "proton-c.pcap"):
        local = str(captures / name)
        url = s3.upload(captures / name, f"splits/{name}")
        split = (captures / name).stat().st_size // 5  # five splits or six
        planned = plan_splits_with_context(local, split)
        assert len(planned) > 3 and plan_splits_with_context(url, split) == planned
        if name.endswith(".pcapng"):  # later splits name their section and interface blocks
            assert all(context for _s, _e, context in planned[1:])
        else:  # a classic pcap split past the first reads the 24-byte header, then its range
            assert planned[1][0] > 24
        for start, end, context in planned:
            there = _table(read_segments(url, start, end, context=context))
            assert there.num_rows and there.equals(
                _table(read_segments(local, start, end, context=context))
            )
        assert _table(read_segments(url)).equals(_table(read_segments(local)))


def test_a_gzip_capture_and_a_frame_log_by_url(s3, captures, tmp_path):
    from amqpspec.spark_triage.datasource import Split, read_input
    from amqpspec.spark_triage.framelog_segments import framelog_segments

    local = str(captures / "proton-c.pcap.gz")
    url = s3.upload(captures / "proton-c.pcap.gz", "gz/proton-c.pcap.gz")
    here = _rows(read_input(Split(local, "pcap", True, None, 0, None)))
    there = _rows(read_input(Split(url, "pcap", True, None, 0, None)))
    assert here and there == [(url, *row[1:]) for row in here]
    log = tmp_path / "rabbit.parquet"  # the RabbitMQ capture's first 2,000 packets
    cut = tmp_path / "r.pcap"
    subprocess.run(["editcap", "-r", str(RABBITMQ_PCAP), str(cut), "1-2000"], check=True)
    subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "trace", "convert", str(cut), str(log)],
        check=True,
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    log_url = s3.upload(log, "logs/rabbit.parquet")
    expected = _table(framelog_segments(str(log)))
    assert expected.num_rows and _table(framelog_segments(log_url)).equals(expected)


def _rows(batches) -> list[tuple]:
    table = pa.Table.from_batches(list(batches))
    columns = [table.column(name).to_pylist() for name in ("source", "ordinal", "payload")]
    return list(zip(*columns))


def test_urls_that_cannot_be_read_are_said_in_one_line(s3):
    problems = urlfs.unreadable(
        [f"s3a://{BUCKET}/nothing/here.pcap", "hdfs://namenode:8020/x", "nosuch://a/b"]
    )
    assert problems[0].startswith("hdfs://namenode:8020/x: pyarrow cannot open hdfs: URLs here")
    assert "libhdfs" in problems[0] and "\n" not in problems[0]
    assert problems[1].startswith("nosuch://a/b: pyarrow cannot open nosuch: URLs here")
    assert problems[2] == f"s3a://{BUCKET}/nothing/here.pcap: no such file or directory"
    # an object's URL under a prefix keeps the prefix's spelling (and query)
    assert (
        urlfs.child_url("s3a://b/runs?region=x", "b/runs", "b/runs/a b/c.pcap")
        == "s3a://b/runs/a%20b/c.pcap?region=x"
    )
