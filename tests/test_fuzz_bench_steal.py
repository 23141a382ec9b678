"""The campaign bench's steal figure: the hypervisor's share of the machine's CPU time while a
campaign ran (bench.fuzz_campaigns), read from /proc/stat as proc(5) lays it out."""

from __future__ import annotations

import sys
import time

import pytest

from amqpspec.bench.fuzz_campaigns import CampaignFigures, cpu_times, read_cpu_times, steal_share

# proc(5): cpu user nice system idle iowait irq softirq steal guest guest_nice
STAT = """cpu  5104238 48481 553186 3666393 11637 0 121016 157244 7 3
cpu0 2552119 24240 276593 1833196 5818 0 60508 78622 0 0
intr 1 2 3
"""


def test_cpu_times_reads_steal_and_the_total_of_the_first_eight_fields():
    steal, total = cpu_times(STAT)
    assert steal == 157244
    # guest and guest_nice are inside user and nice already: not counted twice
    assert total == 5104238 + 48481 + 553186 + 3666393 + 11637 + 0 + 121016 + 157244


def test_cpu_times_without_an_aggregate_line_or_its_steal_field():
    assert cpu_times("cpu0 1 2 3 4 5 6 7 8\n") is None
    assert cpu_times("cpu  1 2 3 4\n") is None  # a kernel too old to count steal
    assert cpu_times("") is None


def test_steal_share_is_the_stolen_part_of_the_ticks_between_two_readings():
    assert steal_share((100, 10_000), (130, 11_000)) == pytest.approx(0.03)
    assert steal_share((100, 10_000), (100, 11_000)) == 0.0
    assert steal_share(None, (100, 11_000)) is None
    assert steal_share((100, 10_000), None) is None
    assert steal_share((100, 10_000), (100, 10_000)) is None  # no time passed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_this_machines_readings_move_forward():
    first = read_cpu_times()
    assert first is not None
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        pass  # spend CPU so that the ticks move
    second = read_cpu_times()
    assert second is not None
    assert 0 <= first[0] <= first[1]
    assert second[1] > first[1] and second[0] >= first[0]
    share = steal_share(first, second)
    assert share is not None and 0.0 <= share <= 1.0


def _figures(steal: float | None) -> CampaignFigures:
    return CampaignFigures(
        workers=12,
        processes=2,
        cases=48_000,
        budget=120.0,
        wall=120.5,
        findings=0,
        triaged=3,
        kept=0,
        coverage=0.193,
        fuzzer_cpu=144.0,
        broker_cpu=57.6,
        steal=steal,
    )


def test_the_row_says_the_steal_after_the_cpu_per_case():
    label, figures = _figures(0.0275).row("reference")
    assert label == "reference, 12 workers in 2 process(es)"
    assert figures.endswith("CPU per case: fuzzer 3.00 ms, broker 1.20 ms; steal 2.8%")


def test_the_row_without_a_steal_reading_is_as_before():
    _, figures = _figures(None).row("reference")
    assert figures.endswith("CPU per case: fuzzer 3.00 ms, broker 1.20 ms")
    assert "steal" not in figures
