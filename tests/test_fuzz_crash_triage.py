"""Crashes in a campaign (fuzz.crash_sites, fuzz.crash_triage, fuzz.campaign.triage): the
crash thresholds per mutation site (shared by worker processes, a skipped case never run
nor counted), a crash test judged by how soon the broker dropped it, a crash confirmed
while the cases run kept unminimised and written again once minimised, and an outage past
the share of time alone kept for after the budget, never lost."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time

from amqpspec.fuzz import campaign as campaign_module
from amqpspec.fuzz.campaign import Campaign, CampaignConfig, Gate, make_case, triage
from amqpspec.fuzz.case import Case, Step
from amqpspec.fuzz.crash_sites import CrashSites, site_keys
from amqpspec.fuzz.findings import FindingStore
from amqpspec.fuzz.model import Conversation, Handshake
from amqpspec.fuzz.oracle import CRASH, Outcome, Target, Verdict


def _case(*labels: str) -> Case:
    return Case([Step(b"\x00", label) for label in labels], "fields", "test:0")


def test_a_site_is_the_first_mutated_step_without_its_values() -> None:
    case = _case("protocol-header 3.1.0.0", "sasl-init", "open", "attach[size=200]", "flow")
    assert site_keys(case) == ("attach[size=#]", "attach")
    wrong_type = _case("open", "attach[snd-settle-mode constructor 0xd0]", "flow")
    assert site_keys(wrong_type) == ("attach[snd-settle-mode constructor #]", "attach")
    shrunk = _case("open[fields: container-id]", "begin[SIZE=7]")  # shrink's mark is no site
    assert site_keys(shrunk) == ("begin[SIZE=#]", "begin")
    assert site_keys(_case("protocol-header 3.1.0.0", "open", "begin")) is None


def test_an_element_is_exhausted_at_its_threshold_a_request_at_four_times_it() -> None:
    sites = CrashSites(element_threshold=3)
    one = _case("open", "attach[size=0]", "transfer")
    other = _case("open", "attach[target=null]", "transfer")
    elsewhere = _case("open", "flow[link-credit=0]")
    assert sites.record(one) == [] and sites.record(one) == []
    assert not sites.exhausted(one)
    assert sites.record(one) == ["attach[size=#]"]
    assert sites.exhausted(one) and not sites.exhausted(other)
    sites.record(other, 9)  # attach: 3 + 9 = 12 crashes
    assert sites.exhausted(other) and sites.exhausted(_case("attach[handle=7]"))
    assert not sites.exhausted(elsewhere)
    assert sites.crashes()["request:attach"] == 12
    off = CrashSites(element_threshold=0)
    off.record(one, 100)
    assert not off.exhausted(one)


def _child_sees(sites: CrashSites, case: Case, go, answers) -> None:
    go.wait(10)
    answers.put(sites.exhausted(case))


def test_the_exhausted_sites_reach_the_worker_processes() -> None:
    ctx = multiprocessing.get_context("fork")
    sites = CrashSites(ctx)
    case = _case("open", "attach[size=0]")
    go, answers = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_child_sees, args=(sites, case, go, answers))
    child.start()  # forked before the crashes are counted
    sites.record(case, 4)
    go.set()
    assert answers.get(timeout=10) is True
    child.join(10)


def test_a_case_of_an_exhausted_site_is_skipped_not_run_nor_counted(tmp_path) -> None:
    target = Target("127.0.0.1", 1, Handshake(sasl="none"))  # nothing to connect to
    campaign = Campaign(CampaignConfig(target, str(tmp_path), seed=3, cases=0))
    index = next(i for i in range(200) if site_keys(make_case(campaign.config, i)))
    campaign.crash_sites.record(make_case(campaign.config, index), 4)
    result = campaign._run_index(index)
    assert result.skipped
    campaign._account(result)
    assert campaign.stats.skipped == 1 and campaign.stats.cases == 0


def _crash_outcome(case: Case, lag: float | None) -> Outcome:
    verdict = Verdict(CRASH, "liveness", "2.4.1", "dropped", len(case.steps) - 1, lag=lag)
    return Outcome(verdict, None, len(case.steps))


def _steps() -> Case:
    conv = Conversation(Handshake(sasl="none"), container_id="crash-test").open()
    conv.attach_sender(conv.begin())
    return Case(conv.steps(), "fields", "test:1")


def test_a_crash_test_counts_only_if_the_broker_dropped_it_at_once(monkeypatch) -> None:
    case = _steps()
    runs: list[float | None] = []

    def replay(lag: float | None):
        def run(*args, **kwargs) -> Outcome:
            runs.append(lag)
            return _crash_outcome(case, lag)

        return run

    target = Target("127.0.0.1", 1, Handshake(sasl="none"))
    wanted = _crash_outcome(case, 0.0005)
    monkeypatch.setattr(campaign_module, "run_case", replay(0.3))  # down 0.3 s later
    assert triage(target, case, wanted, confirm=3, minimise=False) is None
    assert runs == [0.3]  # the first replay that misses ends it
    runs.clear()
    monkeypatch.setattr(campaign_module, "run_case", replay(None))  # refused: no drop seen
    assert triage(target, case, wanted, confirm=3, minimise=False) is None
    runs.clear()
    monkeypatch.setattr(campaign_module, "run_case", replay(0.0004))
    found = triage(target, case, wanted, confirm=3, minimise=False)
    assert found is not None and runs == [0.0004] * 3  # confirmed only: no ddmin test
    finding, small, _ = found
    assert finding.replays == "3/3" and not finding.minimal and small.steps == case.steps


def test_a_crash_minimised_later_is_written_again_under_its_id(tmp_path) -> None:
    case = _steps()
    target = Target("127.0.0.1", 1, Handshake(sasl="none"))
    store = FindingStore(str(tmp_path))
    outcome = _crash_outcome(case, 0.0004)
    first = campaign_module._finding(case, case, outcome, outcome.verdict, {"minimal": False})
    store.add(first, case, None)
    confirmed_at = store.findings[first.id].found_at
    small = case.with_steps(case.steps[:3])
    later = campaign_module._finding(case, small, outcome, outcome.verdict, {"minimal": True})
    later.id = first.id
    assert store.replace(later, small, None)
    kept = store.findings[first.id]
    assert kept.minimal and kept.found_at == confirmed_at and kept.signature == first.signature
    with open(os.path.join(tmp_path, "findings.json"), encoding="utf-8") as file:
        records = json.load(file)
    assert [r["frames"] for r in records] == [small.labels]
    with open(os.path.join(tmp_path, kept.reproducer), encoding="utf-8") as file:
        assert len(json.load(file)["steps"]) == 3
    assert target.port == 1


def test_an_outage_past_the_share_alone_waits_and_is_kept_if_the_grace_is_over(
    tmp_path,
) -> None:
    target = Target("127.0.0.1", 1, Handshake(sasl="none"))
    campaign = Campaign(CampaignConfig(target, str(tmp_path), cases=0))
    case = _steps()
    outcome = _crash_outcome(case, 0.001)
    outcome.verdict = Verdict(CRASH, "liveness", "2.4.1", "x", 3, lag=0.001, down=time.time())
    campaign._candidate(case, outcome)
    item = campaign._queue.get_nowait()
    campaign._alone_s = 1e9  # the share of time alone is spent
    campaign._triage_one(*item)  # nothing replayed (port 1), nothing paused
    assert len(campaign._late) == 1 and campaign.stats.queued == 0
    campaign._draining, campaign._grace_end = True, time.monotonic() - 1  # the grace is over
    campaign._stop.set()
    campaign._polish_crashes()
    assert campaign._late == [] and campaign.stats.kept == 1
    assert os.listdir(os.path.join(tmp_path, "candidates"))


def _hold_alone(gate, tests: bool, entered) -> None:
    with gate.exclusive(tests=tests):
        entered.set()


def test_a_crash_replay_waits_for_the_triage_tests_in_flight() -> None:
    """A test running beside a crash replay could bring the broker down and confirm a
    crash that is not there: `exclusive(tests=True)` waits for the tests in flight; a
    triage alone of another kind does not."""
    gate = Gate()
    gate.enter(test=True)  # a triage test in flight
    plain, crash = threading.Event(), threading.Event()
    threading.Thread(target=_hold_alone, args=(gate, False, plain), daemon=True).start()
    assert plain.wait(5)  # does not wait for the test
    waiter = threading.Thread(target=_hold_alone, args=(gate, True, crash), daemon=True)
    waiter.start()
    assert not crash.wait(0.3)  # waits while the test runs
    gate.leave(test=True)
    assert crash.wait(5)
    waiter.join(5)
