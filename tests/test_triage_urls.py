"""Triage inputs by URL, on an S3-compatible server on loopback (moto's server,
tests/s3_support.py; objects uploaded with boto3): discovery under a prefix finds what the
local tree holds (kinds, sizes, results-dir labels, non-traces skipped), and a whole triage
on local[2] over `s3a://captures/runs/corpus` gives what the same files give by local path
(exit code, clusters, violations, connections). The executors read the URLs with their own
environment (here handed to them as spark.executorEnv.*), and the preflight asks them about
URLs too. A scheme pyarrow cannot open here is bad input: exit 2 and one line saying what is
missing. The readers themselves: tests/test_urlfs.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from capture_files import PROTON_C_PCAP, RABBITMQ_PCAP
from s3_support import BUCKET
from triage_support import QuietProgress, gzipped, local_spark, rabbit_overrun

from amqpspec.spark_triage.inputs import FRAMELOG, PCAP, PCAPNG, InputError, discover

ROOT = Path(__file__).resolve().parents[1]
SPLIT = 400_000  # the pcapng in several splits, as a file over 2 GiB is read


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The RabbitMQ capture's first 14,000 packets (its credit overrun at frame 13655) as
    pcapng, read in several splits; two connections of the Proton C capture, plain and
    gzip'd, each read whole; a text file, skipped."""
    root = tmp_path_factory.mktemp("corpus")
    rabbit_overrun(root / "rabbit.pcapng")
    (root / "proton").mkdir()
    proton = root / "proton" / "proton-c.pcap"
    cut = ["-Y", "tcp.stream<=1", "-F", "pcap"]  # two connections, as classic pcap
    subprocess.run(
        ["tshark", "-r", str(PROTON_C_PCAP), *cut, "-w", str(proton)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    gzipped(proton, root / "proton" / "proton-c.pcap.gz")
    (root / "notes.txt").write_text("not a trace: skipped inside a directory\n")
    return root


@pytest.fixture(scope="module")
def prefix(s3, corpus) -> str:
    return s3.upload_tree(corpus, "runs/corpus")


def _relative(text: str, local_root: Path, prefix: str) -> str:
    """`text` (a source, a connection key) the same whether its input came by local path
    or by URL."""
    return text.replace(f"{local_root}/", "").replace(f"{prefix}/", "")


def test_discovery_under_a_prefix_matches_the_local_tree(s3, corpus, prefix, tmp_path):
    local = {_relative(i.path, corpus, prefix): i for i in discover([str(corpus)])}
    remote = {_relative(i.path, corpus, prefix): i for i in discover([prefix])}
    names = ["proton/proton-c.pcap", "proton/proton-c.pcap.gz", "rabbit.pcapng"]
    assert sorted(local) == sorted(remote) == names
    for name, item in remote.items():
        assert item.path == f"{prefix}/{name}"  # spelt as given: s3a:, not s3:
        assert (item.kind, item.gzip, item.size) == (
            local[name].kind,
            local[name].gzip,
            local[name].size,
        )
    assert [(i.kind, i.gzip) for i in sorted(remote.values(), key=lambda i: i.path)] == [
        (PCAP, False),
        (PCAP, True),
        (PCAPNG, False),
    ]
    s3.client.put_object(Bucket=BUCKET, Key="runs/kinds/log.data", Body=b"PAR1" + bytes(16))
    (log,) = discover([f"s3a://{BUCKET}/runs/kinds"])
    assert (log.kind, log.size) == (FRAMELOG, 20)
    # a conformance results dir under a prefix: traces/<broker>/ only, labelled
    results = tmp_path / "results"
    (results / "traces" / "rabbitmq3").mkdir(parents=True)
    (results / "allure").mkdir()
    (results / "traces" / "rabbitmq3" / "credit-1.pcap").write_bytes(RABBITMQ_PCAP.read_bytes())
    (results / "allure" / "copy.pcap").write_bytes(RABBITMQ_PCAP.read_bytes())
    (results / "index.json").write_text(json.dumps({"rabbitmq3": {}}))
    (found,) = discover([s3.upload_tree(results, "runs/results")])
    assert found.path == f"s3a://{BUCKET}/runs/results/traces/rabbitmq3/credit-1.pcap"
    assert found.broker == "rabbitmq3"
    # one object, by its URL; a missing one and a false capture are named
    (one,) = discover([f"{prefix}/rabbit.pcapng"])
    assert one.kind == PCAPNG and one.size == (corpus / "rabbit.pcapng").stat().st_size
    with pytest.raises(InputError, match=f"{prefix}/nope: no such file"):
        discover([f"{prefix}/nope"])
    s3.client.put_object(Bucket=BUCKET, Key="runs/fake/x.pcap", Body=b"not a capture")
    with pytest.raises(InputError, match=r"runs/fake/x\.pcap: not a pcap"):
        discover([f"s3a://{BUCKET}/runs/fake"])


@pytest.fixture(scope="module")
def spark(s3):
    # the executors read the bucket with their own environment: this process's JVM may
    # predate the server (an earlier module's), so the settings go as spark.executorEnv
    conf = {f"spark.executorEnv.{name}": value for name, value in s3.env.items()}
    with local_spark(conf) as session:
        yield session


def _triaged(spark, inputs: list, out: Path) -> int:
    from amqpspec.spark_triage.job import run_job

    return run_job(spark, inputs, out, 2, None, QuietProgress(), None, SPLIT)


def _rows(out: Path, name: str, local_root: Path, prefix: str) -> list[tuple]:
    table = pq.read_table(out / name).to_pandas()
    rows = [
        tuple(_relative(str(value), local_root, prefix) for value in row)
        for row in table.values.tolist()
    ]
    return sorted(rows)


def test_triage_by_url_finds_what_local_paths_find(spark, corpus, prefix, tmp_path):
    local_code = _triaged(spark, discover([str(corpus)]), tmp_path / "local")
    url_code = _triaged(spark, discover([prefix]), tmp_path / "s3")
    assert local_code == url_code == 1  # the RabbitMQ credit overrun: a MUST violation
    for name in ("violations.parquet", "connections.parquet"):
        local = _rows(tmp_path / "local", name, corpus, prefix)
        assert local and _rows(tmp_path / "s3", name, corpus, prefix) == local
    clusters = {}
    for side in ("local", "s3"):
        text = (tmp_path / side / "clusters.json").read_text()
        found = json.loads(_relative(text, corpus, prefix))
        clusters[side] = sorted(found, key=lambda cluster: cluster["signature"])
    assert clusters["local"] and clusters["s3"] == clusters["local"]
    credit = [c for c in clusters["s3"] if "transfer-beyond-credit" in c["signature"]]
    assert credit and credit[0]["reproducer"]["rechecked"]


def test_the_preflight_asks_the_executors_about_urls(spark, prefix):
    from amqpspec.spark_triage.preflight import executor_problems

    good = [f"{prefix}/rabbit.pcapng", f"{prefix}/proton/proton-c.pcap.gz"]
    assert executor_problems(spark, good) == []
    problems = executor_problems(spark, [*good, f"{prefix}/gone.pcap"])
    assert len(problems) == 1, problems
    assert "cannot read 1 input URL(s)" in problems[0]
    assert f"{prefix}/gone.pcap: no such file or directory" in problems[0]


def test_a_scheme_pyarrow_cannot_open_is_bad_input_in_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("ARROW_LIBHDFS_DIR", None)
    env.pop("HADOOP_HOME", None)
    argv = ["triage", "hdfs://namenode:8020/captures", "--out", str(tmp_path / "out")]
    result = subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(
        "amqpspec triage: bad input: hdfs://namenode:8020/captures: "
        "pyarrow cannot open hdfs: URLs here ("
    )
    assert "libhdfs" in lines[0] and "CLASSPATH" in lines[0]
    assert not (tmp_path / "out").exists()  # nothing started
