"""The campaign's candidate intake (fuzz.intake): a full triage queue never makes a case
wait (with worker processes one wait there would stall every process), the overflow feeds
the queue as the triage threads take from it, and what is left at the end is kept under
DIR/candidates/, none lost; a growth of the broker's memory that goes once the cases
pause is not searched (the search pauses every case)."""

from __future__ import annotations

import os
import threading

from amqpspec.fuzz import memory_watch
from amqpspec.fuzz.campaign import TRIAGE_QUEUE, Campaign, CampaignConfig
from amqpspec.fuzz.case import Case, Step
from amqpspec.fuzz.intake import CANDIDATES_DIR
from amqpspec.fuzz.model import Handshake
from amqpspec.fuzz.oracle import Bounds, Outcome, Target, Verdict


def _candidate(n: int) -> tuple[Case, Outcome, str]:
    case = Case([Step(b"\x00", f"open[idle-time-out={n}]")], "fields", f"test:{n}")
    verdict = Verdict("frame", "undecodable", "2.3.2", f"example {n}", 0)
    return case, Outcome(verdict, None, 1), f"sig-{n}"


def _queued(campaign: Campaign, n: int) -> tuple[Case, Outcome, str]:
    item = _candidate(n)
    campaign.stats.queued += 1  # as fuzz.intake._candidate counts it
    campaign._waiting.add(item[2])
    return item


def test_a_full_queue_sends_candidates_to_the_overflow_without_waiting(tmp_path) -> None:
    target = Target("127.0.0.1", 1, Handshake(sasl="none"))  # nothing to connect to
    campaign = Campaign(CampaignConfig(target, str(tmp_path), seed=3, cases=0))
    extra = 5
    items = [_queued(campaign, n) for n in range(TRIAGE_QUEUE + extra)]

    def enqueue_all() -> None:
        for item in items:
            campaign._enqueue(*item)

    worker = threading.Thread(target=enqueue_all, daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "a case waited for the full triage queue"
    assert campaign._queue.qsize() == TRIAGE_QUEUE and len(campaign._overflow) == extra

    taken = campaign._queue.get_nowait()  # a triage thread takes one, then refills
    campaign._refill()
    assert taken[2] == "sig-0"
    assert campaign._queue.qsize() == TRIAGE_QUEUE and len(campaign._overflow) == extra - 1

    campaign._keep_left()  # the end: everything left is kept, none lost
    assert campaign._queue.qsize() == 0 and not campaign._overflow
    kept = os.listdir(os.path.join(tmp_path, CANDIDATES_DIR))
    assert len(kept) == TRIAGE_QUEUE + extra - 1
    assert campaign.stats.kept == TRIAGE_QUEUE + extra - 1 and campaign.stats.queued == 1


def _memory_campaign(tmp_path, before: int, readings: list[int]) -> Campaign:
    bounds = Bounds(memory_quiet=0.05, memory_settle=0.01)
    target = Target("127.0.0.1", 1, Handshake(sasl="none"), bounds)
    values = iter(readings)
    target.memory = lambda: next(values, readings[-1])  # then the last reading again
    campaign = Campaign(CampaignConfig(target, str(tmp_path), seed=3, cases=0))
    campaign._sampled = (0.0, before)  # the last sample, long ago
    return campaign


def test_a_memory_growth_freed_once_the_cases_pause_is_not_searched(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(memory_watch, "MEMORY_FREED_S", 0.05)
    mib = 1024 * 1024
    # grew by 300 MiB between two samples; once quiet, the peak read once more (a broker
    # refreshes its figure every few seconds), then back within one connection's bound
    transient = _memory_campaign(tmp_path / "a", 100 * mib, [400 * mib, 400 * mib, 110 * mib])
    transient._sample_memory()
    assert transient.stats.memory_transient == 1 and transient.stats.memory_searches == 0
    # the same growth still there once quiet: searched (no cases to search here)
    leak = _memory_campaign(tmp_path / "b", 100 * mib, [400 * mib, 390 * mib])
    leak._sample_memory()
    assert leak.stats.memory_transient == 0 and leak.stats.memory_searches == 1


def test_memory_searches_past_their_share_of_the_time_are_counted_not_run(tmp_path) -> None:
    mib = 1024 * 1024
    campaign = _memory_campaign(tmp_path, 100 * mib, [400 * mib])
    campaign.stats.memory_search_s = memory_watch.MEMORY_SHARE * 10  # of 10 s, 9 s ago
    campaign.stats.started -= 9
    campaign._sample_memory()
    assert campaign.stats.memory_unsearched == 1 and campaign.stats.memory_searches == 0
    assert campaign.stats.memory_transient == 0  # not even re-read: no pause at all
