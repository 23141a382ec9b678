"""spark_triage.inputs: kinds by magic (gzip'd too), results dirs labelled by broker and read
once, non-trace files skipped inside directories, bad input named."""

from __future__ import annotations

import json
import shutil

import pytest
from capture_files import RABBITMQ_PCAP
from triage_support import gzipped

from amqpspec.spark_triage.inputs import FRAMELOG, PCAPNG, InputError, discover


def test_results_dir_traces_are_labelled_and_allure_copies_skipped(tmp_path):
    results = tmp_path / "results"
    (results / "traces" / "rabbitmq3").mkdir(parents=True)
    (results / "allure").mkdir()
    shutil.copy(RABBITMQ_PCAP, results / "traces" / "rabbitmq3" / "2_6_7_credit-1.pcap")
    shutil.copy(RABBITMQ_PCAP, results / "allure" / "copy-attachment.pcap")
    (results / "traces" / "rabbitmq3" / "2_6_7_credit-1.txt").write_text("text trace\n")
    (results / "index.json").write_text(json.dumps({"rabbitmq3": {"2.6.7/credit-1": {}}}))
    (found,) = discover([str(results)])
    assert found.broker == "rabbitmq3" and found.kind == PCAPNG
    assert found.path.endswith("traces/rabbitmq3/2_6_7_credit-1.pcap")


def test_gzip_and_frame_logs_by_magic(tmp_path):
    gz = gzipped(RABBITMQ_PCAP, tmp_path / "capture.bin")
    (tmp_path / "log.data").write_bytes(b"PAR1" + b"\0" * 16)
    kinds = {
        (item.path.rsplit("/", 1)[1], item.kind, item.gzip) for item in discover([str(tmp_path)])
    }
    assert kinds == {("capture.bin", PCAPNG, True), ("log.data", FRAMELOG, False)}
    assert str(gz).endswith("capture.bin")


def test_bad_inputs_are_named(tmp_path):
    with pytest.raises(InputError, match="missing"):
        discover([str(tmp_path / "missing")])
    (tmp_path / "fake.pcap").write_text("not a capture")
    with pytest.raises(InputError, match="fake"):
        discover([str(tmp_path)])
    texts = tmp_path / "texts"  # a gzip'd text trace is no claim to be a capture
    texts.mkdir()
    gzipped(RABBITMQ_PCAP, texts / "capture.pcap.gz")
    (texts / "client-trace.txt.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\0" * 16)
    assert [item.path.rsplit("/", 1)[1] for item in discover([str(texts)])] == ["capture.pcap.gz"]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing to triage")
    with pytest.raises(InputError, match="no pcap"):
        discover([str(empty)])


def test_relative_paths_and_file_urls_become_absolute(tmp_path, monkeypatch):
    """Executors run in their worker's directory: the driver hands them absolute paths."""
    (tmp_path / "captures").mkdir()
    shutil.copy(RABBITMQ_PCAP, tmp_path / "captures" / "a.pcap")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (found,) = discover(["../captures"])
    assert found.path == str(tmp_path / "captures" / "a.pcap")
    (by_url,) = discover([f"file://{tmp_path}/captures/a.pcap"])
    assert by_url.path == found.path
    (by_file,) = discover(["../captures/./a.pcap"])
    assert by_file.path == found.path


def test_every_unreadable_input_is_named_at_once(tmp_path, monkeypatch):
    shutil.copy(RABBITMQ_PCAP, tmp_path / "good.pcap")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as caught:
        discover(["good.pcap", "../nope-a", "nope-b.pcap", "hdfs://namenode/captures"])
    message = str(caught.value)
    assert f"../nope-a (= {tmp_path.parent / 'nope-a'}): no such file" in message
    assert f"nope-b.pcap (= {tmp_path / 'nope-b.pcap'}): no such file" in message
    # passed as given, and bad input here: pyarrow cannot open hdfs: without libhdfs
    assert "hdfs://namenode/captures: pyarrow cannot open hdfs: URLs here (" in message
    assert "libhdfs" in message
    assert "good.pcap" not in message.replace("nope-b.pcap", "")
