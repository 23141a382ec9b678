"""A real Spark standalone cluster on loopback: one master and N workers, started with
pyspark's own launcher (`bin/spark-class org.apache.spark.deploy.master.Master` and
`...deploy.worker.Worker`; pyspark's wheel has no `sbin/start-*.sh`), for the tests and
benchmarks of triage on a cluster (docs/triage.md, "On a cluster").

Owns: `start(workdir, workers, cores, memory) -> Cluster` (free ports on 127.0.0.1, each
daemon's log and work directory under `workdir`, a bounded wait until every worker is ALIVE
in the master's JSON status) and `Cluster.stop()` (every daemon and the processes it
started, executors and Python workers, stopped by PID: SIGTERM, a bounded wait, SIGKILL).
`python -m amqpspec.spark_triage.standalone DIR` starts one, prints the master URL and its
PIDs, and stops it on Enter or SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0


class ClusterError(Exception):
    """The cluster did not come up in time (the message names the daemon logs)."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (from /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = Path(f"/proc/{pid}/stat")
    try:
        return state.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    status_url: str  # the master's JSON status (http://127.0.0.1:PORT/json/)
    workdir: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def status(self) -> dict:
        with urllib.request.urlopen(self.status_url, timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> int:
        try:
            workers = self.status().get("workers", [])
        except (OSError, ValueError):
            return 0
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def stop(self) -> list[int]:
        """Stops the workers, then the master, and whatever they started, each by PID;
        returns the PIDs that were signalled."""
        pids: list[int] = []
        for process in reversed(self.processes):  # workers first, the master last
            pids.extend([process.pid, *_children(process.pid)])
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.2)
        for pid in pids:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for process in self.processes:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        return pids


def start(
    workdir: Path,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> Cluster:
    """A master and `workers` workers of `cores` cores and `memory` each on 127.0.0.1, up
    and registered (bounded wait); stop it with `Cluster.stop()` (also on failure here).
    `python`: the executors' interpreter (default this one); `env`: more environment for
    the daemons and so for their executors (e.g. PYTHONPATH, as if installed on a node)."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    env = dict(
        os.environ,
        **(env or {}),
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP=HOST,
        SPARK_LOG_DIR=str(workdir / "logs"),
        PYSPARK_PYTHON=python or os.environ.get("PYSPARK_PYTHON") or sys.executable,
    )
    port, web = free_port(), free_port()
    cluster = Cluster(f"spark://{HOST}:{port}", f"http://{HOST}:{web}/json/", workdir)
    launch = _launcher(cluster, str(home / "bin" / "spark-class"), env)
    try:
        master = "org.apache.spark.deploy.master.Master"
        launch("master", master, "--host", HOST, "--port", str(port), "--webui-port", str(web))
        for index in range(workers):
            work = workdir / f"worker-{index}"
            work.mkdir(exist_ok=True)
            launch(
                f"worker-{index}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", HOST, "--port", str(free_port()), "--webui-port", str(free_port())),
                *("--cores", str(cores), "--memory", memory, "--work-dir", str(work)),
                cluster.url,
            )
        _wait_for_workers(cluster, workers)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _launcher(cluster: Cluster, launcher: str, env: dict[str, str]) -> Callable[..., None]:
    """`launch(name, *argv)`: start one Spark daemon, its output in WORKDIR/NAME.log."""

    def launch(name: str, *argv: str) -> None:
        log = (cluster.workdir / f"{name}.log").open("wb")
        with log:
            cluster.processes.append(
                subprocess.Popen(
                    [launcher, *argv],
                    cwd=cluster.workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    return launch


def _wait_for_workers(cluster: Cluster, workers: int) -> None:
    """Until `workers` workers are registered with the master (at most START_TIMEOUT_S);
    ClusterError if a daemon exits or the time runs out."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while cluster.alive_workers() < workers:
        dead = [p for p in cluster.processes if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"exited ({dead[0].args[1]})" if dead else f"not up in {START_TIMEOUT_S} s"
            raise ClusterError(
                f"Spark standalone cluster {why}: {cluster.alive_workers()} of {workers} "
                f"workers alive; logs in {cluster.workdir}"
            )
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--memory", default="1g")
    args = parser.parse_args(argv)
    cluster = start(Path(args.workdir), args.workers, args.cores, args.memory)
    print(f"{cluster.url} pids {' '.join(map(str, cluster.pids))}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        sys.stdin.readline()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
