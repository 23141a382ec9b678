"""`amqpspec triage` on a real Spark standalone cluster: a master and two workers of one core
each on loopback (spark_triage.standalone: pyspark's own spark-class launcher, private free
ports, every daemon and what it started stopped by PID when the module ends, every wait
bounded). The corpus is named by a RELATIVE path from a working directory of the test's own,
while the executors run in their workers' directories: the run must find the same clusters,
signatures and violations as `--master local[2]` on the same corpus. Needs only a JRE, as
every triage test: it runs in CI (no skip)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from capture_files import PROTON_C_PCAP
from triage_support import editcap, gzipped, rabbit_overrun

from amqpspec.spark_triage import standalone

ROOT = Path(__file__).resolve().parents[1]
CREDIT = "v1+link.credit.transfer-beyond-credit+2.6.7+transfer+opened"
RUN_TIMEOUT_S = 400


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two workers of one core; their executors import this checkout, as if installed."""
    running = standalone.start(
        tmp_path_factory.mktemp("cluster"),
        workers=2,
        cores=1,
        memory="1g",
        env={"PYTHONPATH": str(ROOT)},
    )
    yield running
    pids = running.stop()
    assert len(pids) >= 3 and not any(standalone._alive(pid) for pid in pids)


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> Path:
    """captures/ (the corpus) and work/ (the user's working directory) side by side."""
    root = tmp_path_factory.mktemp("place")
    captures = root / "captures"
    captures.mkdir()
    # the RabbitMQ capture up to just past its credit overrun (frame 13655), as pcapng and
    # as a gzip'd classic pcap, and two connections of the Proton C capture
    rabbit = rabbit_overrun(captures / "rabbit.pcapng")
    micro = editcap(rabbit, root / "rabbit-micro.pcap", "-F", "pcap")
    gzipped(micro, captures / "rabbit-micro.pcap.gz")
    subprocess.run(
        ["tshark", "-r", str(PROTON_C_PCAP), "-Y", "tcp.stream<=1", "-w", str(root / "p.pcap")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    (captures / "proton").mkdir()
    (root / "p.pcap").rename(captures / "proton" / "proton-c.pcap")
    (root / "work").mkdir()
    return root


def _triage(
    place: Path, master: str, out: str, *more: str, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`amqpspec triage ../captures --out OUT --master MASTER` from work/, as a user types it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1", **(env or {}))
    env.pop("PYSPARK_GATEWAY_PORT", None)
    argv = ["triage", "../captures", "--out", out, "--master", master, *more]
    return subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", *argv],
        cwd=place / "work",
        capture_output=True,
        text=True,
        env=env,
        timeout=RUN_TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def on_cluster(cluster, place):
    # 400 kB splits: the pcapng and the Proton capture go through the amqpspec-pcap data
    # source and the shuffle on the executors, the gzip'd capture through one whole-file task
    result = _triage(place, cluster.url, "out-cluster", "--split-bytes", "400000")
    return result, place / "work" / "out-cluster"


@pytest.fixture(scope="module")
def on_local(place):
    result = _triage(place, "local[2]", "out-local")
    return result, place / "work" / "out-local"


def _clusters(out: Path) -> list[dict]:
    return sorted(json.loads((out / "clusters.json").read_text()), key=lambda c: c["signature"])


def _violations(out: Path) -> list[tuple]:
    table = pq.read_table(out / "violations.parquet").to_pandas()
    rows = table[["source", "connection_key", "frame_index", "signature", "origin"]]
    return sorted(map(tuple, rows.values.tolist()))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_relative_paths_on_a_standalone_cluster(cluster, place, on_cluster):
    """Both workers ran executors; the relative path reached them as the absolute path."""
    result, out = on_cluster
    assert result.returncode == 1, result.stderr[-4000:]  # MUST violations: the overrun
    assert "Traceback" not in result.stderr
    apps = cluster.status().get("completedapps", []) + cluster.status().get("activeapps", [])
    assert any(app.get("name") == "amqpspec-triage" for app in apps)
    executors = list(Path(cluster.workdir).glob("worker-*/app-*/*/stderr"))
    assert {path.parts[-4] for path in executors} == {"worker-0", "worker-1"}
    credit = {c["signature"]: c for c in _clusters(out)}[CREDIT]
    assert credit["known_issue"]["issue"] == "RabbitMQ #2597"
    assert credit["connections"] == 2  # the pcapng and the gzip'd pcap
    assert credit["reproducer"]["rechecked"] and credit["reproducer"]["frames"] <= 20
    sources = {path for row in _violations(out) for path in row[:1]}
    assert sources == {
        str(place / "captures" / "rabbit.pcapng"),
        str(place / "captures" / "rabbit-micro.pcap.gz"),
        str(place / "captures" / "proton" / "proton-c.pcap"),
    }


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_cluster_finds_what_local_2_finds(on_cluster, on_local):
    (cluster_result, cluster_out), (local_result, local_out) = on_cluster, on_local
    assert local_result.returncode == cluster_result.returncode == 1, local_result.stderr[-4000:]
    assert _clusters(cluster_out) == _clusters(local_out)
    assert _violations(cluster_out) == _violations(local_out)
    connections = [
        pq.read_table(out / "connections.parquet")
        .to_pandas()[["connection_key", "verdict", "frames", "must_violations"]]
        .sort_values("connection_key")
        .values.tolist()
        for out in (cluster_out, local_out)
    ]
    assert connections[0] == connections[1] and len(connections[0]) == 4


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_cluster_that_runs_no_task_ends_the_run_with_3(cluster, place):
    """Executors of 3g on workers of 1g are never started: Spark would wait for ever; the
    preflight's bounded wait ends the run with exit 3 and says why."""
    result = _triage(
        place,
        cluster.url,
        "out-starved",
        env={
            "PYSPARK_SUBMIT_ARGS": "--conf spark.executor.memory=3g pyspark-shell",
            "AMQPSPEC_TRIAGE_PREFLIGHT_TIMEOUT": "20",
        },
    )
    assert result.returncode == 3, result.stderr[-3000:]
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("amqpspec triage:")]
    assert "the job failed in step 'check what the executors see'" in line
    assert f"NoExecutorsError: no executor of {cluster.url} ran a task in 20 s" in line
    assert (place / "work" / "out-starved" / "triage-error.log").is_file()
