"""Worker processes (fuzz.processes): a campaign whose workers run in two processes finds,
minimises and writes a fault's finding as a threaded one does, counts every case and its
state coverage in the parent, stops on a worker's failure (WORKER_FAILED), and its children
end with it: after Ctrl-C, and when the campaign's process is SIGKILLed. Reference broker
with one parser fault, free ports, fixed seed, bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fuzz_support import REPO

from amqpspec.fuzz import campaign as campaign_module
from amqpspec.fuzz import processes
from amqpspec.fuzz.campaign import WORKER_FAILED, Campaign, CampaignConfig
from amqpspec.fuzz.detection import Supervised, target_for

FAULT = "die-on-channel-reuse"


@pytest.fixture(scope="module")
def broker():
    running = Supervised([FAULT])
    yield running
    running.stop()


def test_split_and_counter() -> None:
    assert processes.split(5, 2) == [3, 2]
    assert processes.split(1, 2) == [1]
    assert processes.split(128, 2) == [64, 64]
    counter = processes.Counter(processes.context())
    assert [counter.take(3) for _ in range(4)] == [0, 1, 2, None]


def test_two_processes_find_and_keep_the_fault(broker, tmp_path) -> None:
    config = CampaignConfig(
        target_for(broker),
        str(tmp_path),
        strategies=("sequences",),
        seed=1,
        duration=8.0,
        workers=2,
        processes=2,
    )
    campaign = Campaign(config)
    assert campaign._shares == [1, 1]
    stats = campaign.run()
    assert not stats.stopped, stats.stopped
    assert stats.cases >= 50 and stats.coverage > 0.05, (stats.cases, stats.coverage)
    findings = json.loads((tmp_path / "findings.json").read_text())
    found = [f for f in findings if f["rule"] == "connection.close-missing"]
    assert found, findings
    assert found[0]["replays"] == "3/3"
    assert os.path.isfile(tmp_path / "findings" / found[0]["id"] / "reproducer.json")


def test_a_worker_process_failure_stops_the_campaign(broker, tmp_path, monkeypatch) -> None:
    made = campaign_module.make_case

    def failing(config, index):  # type: ignore[no-untyped-def]
        if index == 20:
            raise RuntimeError("planted in a worker process")
        return made(config, index)

    monkeypatch.setattr(campaign_module, "make_case", failing)  # inherited by the fork
    config = CampaignConfig(
        target_for(broker), str(tmp_path), seed=1, duration=20.0, workers=2, processes=2
    )
    stats = Campaign(config).run()
    assert stats.stopped.startswith(WORKER_FAILED), stats.stopped
    assert "planted in a worker process" in stats.stopped
    assert stats.cases < 2000


def _campaign_with_children(broker, out):  # type: ignore[no-untyped-def]
    """`amqpspec fuzz` with two worker processes, SIGINT at its default (a shell's
    background job ignores it), once its children are up: (process, children's pids)."""
    command = [sys.executable, "-m", "amqpspec.cli", "fuzz", "--broker", broker.url]
    command += ["--profile", "reference", "--duration", "60", "--processes", "2"]
    command += ["--workers", "2", "--quiet", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 30
    children: list[str] = []
    while len(children) < 2 and time.monotonic() < deadline:
        time.sleep(0.002)  # soon after the second fork: Ctrl-C can meet the forks
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children", encoding="ascii") as file:
            children = file.read().split()
    assert len(children) == 2, "the worker processes did not start"
    return proc, children


def _gone(pids: list[str], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(os.path.exists(f"/proc/{pid}") for pid in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("after", [0.0, 1.0], ids=["as-the-children-start", "mid-campaign"])
def test_ctrl_c_ends_the_campaign_and_its_worker_processes(broker, tmp_path, after) -> None:
    """At once (the parent may still be forking: a child must not die of it as a failed
    worker, the parent must stop as interrupted) and once cases run."""
    proc, children = _campaign_with_children(broker, tmp_path)
    time.sleep(after)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert "[interrupted]" in out, out
    assert "worker failed" not in out, out
    assert _gone(children, 10), "a worker process outlived the interrupted campaign"


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler, as `amqpspec fuzz` runs with it, whatever an earlier
    test of this process left (a SparkContext made in the main thread installs its own and
    never puts the old one back); the handler found is put back after."""
    found = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, found)


def test_a_ctrl_c_inside_a_finaliser_still_stops_the_campaign(
    broker, tmp_path, default_sigint
) -> None:
    """Python drops a KeyboardInterrupt raised in a `__del__`: the campaign's own SIGINT
    handler stops it instead, and a second Ctrl-C raises as usual."""
    campaign = Campaign(CampaignConfig(target_for(broker), str(tmp_path), seed=1, duration=5.0))

    class SignalsWhenCollected:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)

    restore = campaign._catch_ctrl_c()
    try:
        SignalsWhenCollected()  # collected at once: SIGINT inside its __del__
        assert campaign.stats.stopped == "interrupted", campaign.stats.stopped
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    finally:
        restore()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_embedders_sigint_handler_is_left_alone(broker, tmp_path, default_sigint) -> None:
    """A process with a SIGINT handler of its own (an embedder's, or PySpark's) keeps it
    while a campaign runs: the campaign catches Ctrl-C only where Python's default is."""
    interrupts: list[int] = []

    def embedders(signum: int, frame: object) -> None:
        interrupts.append(signum)

    signal.signal(signal.SIGINT, embedders)
    campaign = Campaign(CampaignConfig(target_for(broker), str(tmp_path), seed=1, duration=5.0))
    restore = campaign._catch_ctrl_c()
    try:
        assert signal.getsignal(signal.SIGINT) is embedders
        signal.raise_signal(signal.SIGINT)
        assert interrupts == [signal.SIGINT] and not campaign.stats.stopped
    finally:
        restore()
    assert signal.getsignal(signal.SIGINT) is embedders


def test_worker_processes_end_when_the_campaign_is_killed(broker, tmp_path) -> None:
    proc, children = _campaign_with_children(broker, tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _gone(children, 10), "a worker process outlived its SIGKILLed campaign"
