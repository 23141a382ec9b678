"""A broker that stops serving for good (fuzz.oracle.wait_back, fuzz.campaign's
`_broker_gone`; docs/fuzz.md, "A broker that does not come back"): a hung broker holds its
port but answers nothing (the Qpid Proton C example broker deadlocks so under fuzzing).
Once a wait for its return has lasted `--restart-wait`, later waits are one liveness check,
a campaign stops at once with the reason and keeps what is queued, and no wait runs past the
campaign's own end (`Target.waits_end`). A listening socket that never accepts, and the
reference broker stopped with SIGSTOP mid-campaign, over real sockets; bounded."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import threading
import time

import pytest

from amqpspec.fuzz.campaign import Campaign, CampaignConfig
from amqpspec.fuzz.detection import Supervised, target_for
from amqpspec.fuzz.oracle import CRASH, Bounds, Target, Verdict, not_back, wait_back
from amqpspec.fuzz.stops import BROKER_GONE


@pytest.fixture
def hung_port():
    """A port whose listener never accepts: the kernel completes the TCP handshakes into
    its queue, and nothing ever answers, as with a deadlocked broker."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1)
    yield listener.getsockname()[1]
    listener.close()


def test_once_given_up_a_wait_is_one_liveness_check(hung_port) -> None:
    target = Target("127.0.0.1", hung_port, bounds=Bounds(restart_wait=1.5, liveness=0.3))
    started = time.monotonic()
    assert wait_back(target) is False
    first = time.monotonic() - started
    assert first >= 1.5  # the whole --restart-wait, polled
    started = time.monotonic()
    assert wait_back(target) is False
    assert time.monotonic() - started < 1.0  # one check (0.3 s), not another 1.5 s


def test_no_wait_runs_past_the_campaigns_end(hung_port) -> None:
    target = Target("127.0.0.1", hung_port, bounds=Bounds(restart_wait=30.0, liveness=0.3))
    target.waits_end = time.monotonic() + 0.5
    started = time.monotonic()
    assert wait_back(target) is False
    assert time.monotonic() - started < 2.0  # the campaign's end, not the 30 s


def test_a_verdict_says_whether_the_broker_came_back() -> None:
    gone = Verdict(CRASH, "liveness", "2.4.1", "dropped; not back within 2.0s", 3)
    back = Verdict(CRASH, "liveness", "2.4.1", "the broker dropped us", 3)
    cut = Verdict(CRASH, "liveness", "2.4.1", "dropped; its return not waited for", 3)
    assert not_back(gone)
    assert not not_back(back) and not not_back(cut) and not not_back(None)


@pytest.fixture
def broker():
    running = Supervised([])
    yield running
    running.stop()


def test_a_campaign_stops_at_once_when_its_broker_hangs_for_good(broker, tmp_path) -> None:
    target = target_for(broker)
    target.bounds = dataclasses.replace(target.bounds, reply=1.0, liveness=1.0, restart_wait=2.0)
    config = CampaignConfig(
        target, str(tmp_path), seed=3, duration=60.0, workers=4, processes=2, triagers=2
    )
    campaign = Campaign(config)
    hung = broker.broker.proc.pid

    def hang() -> None:
        time.sleep(2.0)
        os.kill(hung, signal.SIGSTOP)  # alive, its port open, answering nothing

    threading.Thread(target=hang, daemon=True).start()
    started = time.monotonic()
    try:
        stats = campaign.run()
    finally:
        os.kill(hung, signal.SIGCONT)
    took = time.monotonic() - started
    assert stats.stopped == BROKER_GONE.format(seconds=2.0), stats.stopped
    assert took < 30.0, took  # not the 60 s budget and its grace, nor a wait per case
    assert stats.cases > 0
    # what the stop left untriaged is kept, replayable: the outage's cases among it
    kept = list((tmp_path / "candidates").glob("*/reproducer.json"))
    assert kept and stats.kept >= 1
    records = [json.loads(path.read_text()) for path in kept]
    assert any(record["kind"] == CRASH for record in records), records
