"""The triage job on a real local Spark: the real captures land where they must, every input
format gives identical results, the partitioning changes nothing, the CLI's exit codes.

One SparkSession for the module (a JVM start is ~8 s); inputs are kept small (CI budget)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from capture_files import PROTON_C_PCAP
from cli_support import run_amqpspec
from triage_support import QuietProgress, big_endian, editcap, gzipped, rabbit_overrun

from amqpspec.spark_triage.inputs import discover
from amqpspec.spark_triage.job import run_job

CREDIT = "v1+link.credit.transfer-beyond-credit+2.6.7+transfer+opened"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The first 14,000 packets of the RabbitMQ capture (a credit overrun at frame 13655) in
    five capture formats and as a frame log, and the Proton C capture."""
    root = tmp_path_factory.mktemp("corpus")
    ng = rabbit_overrun(root / "rabbit.pcapng")
    micro = editcap(ng, root / "rabbit-micro.pcap", "-F", "pcap")
    editcap(ng, root / "rabbit-nano.pcap", "-F", "nsecpcap")
    big_endian(micro, root / "rabbit-big-endian.pcap")
    gzipped(micro, root / "rabbit-micro.pcap.gz")
    subprocess.run(  # the project's Parquet frame log of the same packets
        [
            sys.executable,
            "-m",
            "amqpspec.cli",
            "trace",
            "convert",
            str(ng),
            str(root / "rabbit-framelog.parquet"),
        ],
        check=True,
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    (root / "proton").mkdir()
    (root / "proton" / "proton-c.pcap").write_bytes(PROTON_C_PCAP.read_bytes())
    (root / "notes.txt").write_text("not a trace: skipped inside a directory\n")
    return root


@pytest.fixture(scope="module")
def triaged(spark, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    # captures read in 400 kB byte-range splits (several per file), as files over 2 GiB are
    code = run_job(spark, discover([str(corpus)]), out, 2, None, QuietProgress(), None, 400_000)
    return code, out


def _violations(out: Path):
    return pq.read_table(out / "violations.parquet").to_pandas()


def test_rabbitmq_lands_in_the_credit_cluster_linked_to_2597(triaged):
    code, out = triaged
    assert code == 1
    clusters = {c["signature"]: c for c in json.loads((out / "clusters.json").read_text())}
    credit = clusters[CREDIT]
    assert credit["known_issue"]["issue"] == "RabbitMQ #2597"
    assert credit["brokers"] == ["RabbitMQ 3.10.8"]
    assert credit["connections"] == 6  # one per format
    reproducer = credit["reproducer"]
    assert reproducer["rechecked"] and reproducer["frames"] <= 20
    assert (out / reproducer["pcap"]).exists() and (out / reproducer["text"]).exists()
    # a plot only where it says more than the table (spark_triage/report.py), each embedded
    plots = len(list((out / "plots").glob("*.png")))
    assert (out / "report.html").read_text().count("data:image/png") == plots
    markdown = (out / "report.md").read_text()
    assert "[RabbitMQ #2597](https://github.com/rabbitmq/rabbitmq-server/" in markdown
    assert f"]({reproducer['text']})" in markdown and f"]({reproducer['pcap']})" in markdown


def test_proton_c_broker_has_no_must_violation(triaged):
    """The Proton C broker is clean; two of its Proton clients' receivers grant credit with
    delivery-count 0 before the broker's attach (2.7.4: "...this field MUST NOT be set")."""
    _code, out = triaged
    connections = pq.read_table(out / "connections.parquet").to_pandas()
    proton = connections[connections["source"].str.endswith("proton-c.pcap")]
    assert len(proton) == 4
    assert sorted(proton["verdict"]) == ["MUST", "MUST", "OK", "OK"]
    violations = _violations(out)
    proton_violations = violations[violations["source"].str.endswith("proton-c.pcap")]
    assert set(proton_violations["origin"]) == {"client"}
    assert {s.split("+")[1] for s in proton_violations["signature"]} == {
        "link.flow.receiver-delivery-count-before-attach"
    }


def test_every_format_gives_identical_results(corpus, triaged):
    from amqpspec.spark_triage.datasource import plan

    inputs = discover([str(corpus)])
    assert len(plan(inputs, 400_000)) >= len(inputs) + 8  # the captures were read in splits
    _code, out = triaged
    violations = _violations(out)
    per_source = {}
    for source, rows in violations.groupby("source"):
        rows = rows.sort_values("frame_index")
        per_source[Path(source).name] = list(
            zip(rows["frame_index"], rows["signature"], rows["time"])
        )
    rabbit = {name: rows for name, rows in per_source.items() if name.startswith("rabbit")}
    assert len(rabbit) == 6
    first = next(iter(rabbit.values()))
    assert [index for index, sig, _t in first if sig == CREDIT] == [13655]
    for rows in rabbit.values():  # the pcapng is in ns; micro variants round
        assert [(index, sig) for index, sig, _t in rows] == [(i, s) for i, s, _t in first]
        assert all(abs(t - t0) < 2e-6 for (_i, _s, t), (_i0, _s0, t0) in zip(rows, first))


def test_local_1_cli_run_gives_the_signatures_of_local_2(corpus, triaged, tmp_path):
    """The same input through `amqpspec triage --master local[1] --partitions 1` (a
    separate JVM, one core, the file in one split) and the module's local[2] session with 2
    partitions and 400 kB splits."""
    _code, out = triaged
    ng = corpus / "rabbit.pcapng"
    result = _cli(
        str(ng), "--out", str(tmp_path / "one"), "--master", "local[1]", "--partitions", "1"
    )
    assert result.returncode == 1, result.stderr[-2000:]
    many = _violations(out)
    many = many[many["source"] == str(ng)]
    single = _violations(tmp_path / "one")
    key = ["connection_key", "frame_index", "signature"]
    # the credit over-delivery (the broker's) and the Proton receiver's delivery-count
    # before the broker's attach (the client's, 2.7.4)
    assert sorted(s.split("+")[1] for s in single["signature"]) == [
        "link.credit.transfer-beyond-credit",
        "link.flow.receiver-delivery-count-before-attach",
    ]
    assert (
        single[key].sort_values(key).values.tolist() == many[key].sort_values(key).values.tolist()
    )


def _tshark_packets(path: Path) -> int:
    result = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return len(result.stdout.split())


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1")
    return run_amqpspec("triage", *args, env=env)


def test_cli_bad_input_exits_2_naming_the_file(tmp_path):
    bad = tmp_path / "broken.pcap"
    bad.write_bytes(b"\x00" * 64)
    result = _cli(str(bad), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "broken.pcap" in result.stderr
    missing = _cli(str(tmp_path / "nope"), "--out", str(tmp_path / "out"))
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_synthetic_corpus_is_triaged_and_scored(spark, tmp_path):
    """Every injected fault kind (>= 15: broker faults and faulty clients), two connections
    each and two clean ones, with noise: each kind in its own exact signature cluster."""
    from amqpspec.spark_triage.score import score_main
    from amqpspec.spark_triage.synth import KINDS, LIVENESS_BOUND, synthesize

    assert len(KINDS) >= 15 and len({kind.signature for kind in KINDS}) == len(KINDS)
    assert synthesize(str(tmp_path), 2 * (len(KINDS) + 1), 2, cases_per_kind=1) == 0
    truth = json.loads((tmp_path / "truth.json").read_text())
    faults = {entry["fault"] for entry in truth["connections"] if entry["fault"]}
    assert faults == {kind.name for kind in KINDS}
    assert any(not entry["fault"] for entry in truth["connections"])
    files = {path.name.split(".", 1)[1]: path for path in (tmp_path / "corpus").iterdir()}
    assert set(files) == {"pcap", "pcapng", "pcap.gz"}
    for path in files.values():  # one of each form opens in tshark
        assert _tshark_packets(path) > 0
    out = tmp_path / "triage"
    code = run_job(
        spark, discover([str(tmp_path / "corpus")]), out, 2, None, QuietProgress(), LIVENESS_BOUND
    )
    assert code == 1
    assert score_main(str(out), str(tmp_path / "truth.json")) == 0
    result = json.loads((out / "score.json").read_text())
    assert result["matched"] == result["connections"] == 2 * (len(KINDS) + 1)
    assert result["pairwise_precision"] >= 0.99
    assert result["pairwise_recall"] >= 0.95
    assert result["signature_exact"] == 1.0
    assert result["false_clusters_on_defect_only"] == 0 and result["clean_with_cluster"] == 0
    assert result["median_reproducer_frames"] <= 20
    clusters = json.loads((out / "clusters.json").read_text())
    assert {c["signature"] for c in clusters} == {kind.signature for kind in KINDS}
    assert all(c["reproducer"] and c["reproducer"]["rechecked"] for c in clusters)
    assert result["reproducers"] == result["reproducers_rechecked"] == len(KINDS)


def test_the_flow_name_is_the_same_whole_split_or_shuffled(spark):
    """check_split names flows in Python (flow_of), the shuffled path in Spark (with_flow):
    a connection must get one name whichever path its file takes."""
    from amqpspec.spark_triage.job import flow_of, with_flow

    v4a, v4b = bytes([10, 0, 0, 2]), bytes([10, 0, 0, 10])
    v6a, v6b = bytes(15) + b"\x01", bytes.fromhex("fe80" + "00" * 12 + "abcd")
    ends = [
        (v4a, 5672, v4b, 40000),
        (v4b, 40000, v4a, 5672),  # the other direction: the same flow
        (v4a, 9, v4a, 10),  # same address, ports decide
        (v6a, 5672, v6b, 1),
        (v6b, 65535, v6a, 0),
    ]
    frame = spark.createDataFrame(ends, "src_ip binary, src_port int, dst_ip binary, dst_port int")
    in_spark = [row["flow"] for row in with_flow(frame).collect()]
    assert in_spark == [flow_of(*end) for end in ends]
    assert in_spark[0] == in_spark[1] and in_spark[0] != in_spark[2]


def _triage_in_process(*argv: str) -> int:
    """`amqpspec triage ARGV` in this process (the module's Spark session is the active one)."""
    import argparse

    from amqpspec.spark_triage import job

    parser = argparse.ArgumentParser()
    job.add_arguments(parser)
    return job.triage(parser.parse_args(list(argv)))


def _clean_capture(target: Path) -> Path:
    """The first connection of the Proton C capture: no violation at all."""
    subprocess.run(
        ["tshark", "-r", str(PROTON_C_PCAP), "-Y", "tcp.stream==0", "-w", str(target)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return target


def test_exit_0_when_no_must_violation(spark, tmp_path, monkeypatch):
    _clean_capture(tmp_path / "clean.pcap")
    monkeypatch.chdir(tmp_path)
    assert _triage_in_process("clean.pcap", "--out", "out") == 0
    connections = pq.read_table(tmp_path / "out" / "connections.parquet").to_pandas()
    assert list(connections["verdict"]) == ["OK"]
    assert list(connections["source"]) == [str(tmp_path / "clean.pcap")]  # made absolute


def test_exit_2_names_every_unreadable_input_and_an_absent_master(tmp_path, monkeypatch, capsys):
    """Bad input or usage: said before any Spark job (no session needed to say it)."""
    _clean_capture(tmp_path / "clean.pcap")
    monkeypatch.chdir(tmp_path)
    # hdfs: without libhdfs is refused here at once (no lookup leaves the machine)
    assert _triage_in_process("clean.pcap", "../gone", "hdfs://nowhere/x.pcap", "--out", "o") == 2
    err = capsys.readouterr().err
    assert f"../gone (= {tmp_path.parent / 'gone'}): no such file or directory" in err
    assert "hdfs://nowhere/x.pcap" in err and "Traceback" not in err
    from amqpspec.reference_broker.runtime.process import free_port

    port = free_port()  # nothing listens there
    code = _triage_in_process("clean.pcap", "--out", "o", "--master", f"spark://127.0.0.1:{port}")
    assert code == 2
    assert f"no Spark master answers at 127.0.0.1:{port}" in capsys.readouterr().err
    assert _triage_in_process("clean.pcap", "--out", "o", "--split-bytes", "10") == 2


def test_a_failed_job_exits_3_naming_the_step_and_the_executor_error(
    spark, tmp_path, monkeypatch, capsys
):
    """A file that changes under the job (here: replaced by a directory after discovery):
    the executor's error ends the job; exit 3, never 1, one line naming the step, Spark's
    stage and the executor's first error, the whole trace in OUT/triage-error.log."""
    from amqpspec.spark_triage import inputs

    capture = gzipped(_clean_capture(tmp_path / "clean.pcap"), tmp_path / "clean.pcap.gz")
    (tmp_path / "clean.pcap").unlink()
    real = inputs.discover

    def discover_then_replace(paths: list[str]) -> list:
        found = real(paths)
        capture.unlink()
        capture.mkdir()  # the executor's gzip.open now meets a directory
        return found

    monkeypatch.setattr(inputs, "discover", discover_then_replace)
    code = _triage_in_process(str(capture), "--out", str(tmp_path / "out"))
    err = capsys.readouterr().err
    assert code == 3, err
    (line,) = [x for x in err.splitlines() if x.startswith("amqpspec triage:")]
    assert re.search(
        r"the job failed in step 'read \+ check connections' "
        r"\(Spark job \d+, stage \d+ \(.+\), 1 of 1 tasks failed\): ",
        line,
    ), line
    assert f"IsADirectoryError: [Errno 21] Is a directory: '{capture}'" in line
    log = tmp_path / "out" / "triage-error.log"
    assert f"(full trace: {log})" in line
    assert "IsADirectoryError" in log.read_text() and "Traceback" in log.read_text()
    assert "Traceback" not in err


def _old_frame_log(tmp_path: Path) -> Path:
    """A frame log of the clean capture whose schema version is one the readers refuse: it
    passes discovery (a Parquet file) and is refused by the executor that reads it."""
    from amqpspec.traces.framelog import METADATA_KEY_VERSION

    capture = _clean_capture(tmp_path / "clean.pcap")
    log = tmp_path / "old.parquet"
    subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "trace", "convert", str(capture), str(log)],
        check=True,
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    capture.unlink()
    table = pq.read_table(log)
    metadata = dict(table.schema.metadata) | {METADATA_KEY_VERSION: b"0"}
    pq.write_table(table.replace_schema_metadata(metadata), log)
    return log


@pytest.mark.parametrize("split_bytes", [None, "4096"])  # the whole-split and shuffled paths
def test_bad_input_found_by_an_executor_exits_2(spark, tmp_path, capsys, split_bytes):
    """The executor's reader refuses the file (traces.framelog.FrameLogSchemaError): the
    refusal reaches the driver as a result row of kind BAD_INPUT (its text is only shown),
    exit 2 naming the file, in the task that reads a whole file and through the shuffle.
    (tests/test_error_kinds.py: the same with the message reworded.)"""
    log = _old_frame_log(tmp_path)
    argv = [str(log), "--out", str(tmp_path / "out")]
    if split_bytes:
        argv += ["--split-bytes", split_bytes]  # 4 kB: the log goes through the shuffle
    code = _triage_in_process(*argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"amqpspec triage: bad input: {log}: frame log schema version '0'" in err
