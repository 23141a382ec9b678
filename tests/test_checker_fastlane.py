"""The checker's fast lane (amqp10/checker/fastlane.py) against the general rule code: the
same frames through `Checker(fast=True)` and `Checker(fast=False)` give identical
violations, on the shared captures, a synthetic triage corpus, every checker and monitor
test's own frame sequences (the checker_twin plugin) and fuzzed frame sequences."""

from __future__ import annotations

import functools
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from capture_files import PROTON_C_PCAP, RABBITMQ_PCAP
from checker_support import C, S, Trace
from checker_twin import vars_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import amqpspec.amqp10.monitor
from amqpspec.amqp10.checker import Checker
from amqpspec.amqp10.composites import Open
from amqpspec.amqp10.monitor import KIND_RAW
from amqpspec.spark_triage.check import check_flow, items_of, segments_of
from amqpspec.traces.pcap_vector import read_segments

TESTS = Path(__file__).resolve().parent


def _both(items, liveness_bound=None, now=None) -> tuple[list, list, int]:
    """Violations of the fast and the general checker on (origin, item, time, index)."""
    fast, general = Checker(liveness_bound), Checker(liveness_bound, fast=False)
    for origin, item, time, index in items:
        assert vars_of_all(fast.feed(origin, item, time, index)) == vars_of_all(
            general.feed(origin, item, time, index)
        )
    fast.finish(now)
    general.finish(now)
    return vars_of_all(fast.violations), vars_of_all(general.violations), len(items)


def vars_of_all(violations) -> list[tuple]:
    return [vars_of(v) for v in violations]


def _flows(path: Path) -> dict[tuple, list]:
    flows: dict[tuple, list] = {}
    for entry in segments_of(read_segments(str(path))):
        flows.setdefault(tuple(sorted((entry[0].src, entry[0].dst))), []).append(entry)
    return flows


def _capture_items(path: Path) -> list[list[tuple]]:
    """Per connection: its decoded items as (origin, item, time, index)."""
    connections = []
    for segments in _flows(path).values():
        for items in items_of(str(path), segments).values():
            connections.append(
                [(i.direction, i.item, i.time, i.index) for i in items if i.kind != KIND_RAW]
            )
    return connections


def _corpus_files(root: Path, work: Path) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*")):
        if path.suffix == ".gz":
            target = work / path.stem
            with gzip.open(path, "rb") as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            path = target
        if path.suffix in (".pcap", ".pcapng"):
            files.append(path)
    return files


@pytest.fixture(scope="module")
def synthetic_corpus(tmp_path_factory) -> list[Path]:
    """A small `amqpspec triage synth` corpus: every fault kind once, plus noise."""
    from amqpspec.spark_triage.synth import KINDS, synthesize

    out = tmp_path_factory.mktemp("synth")
    assert synthesize(str(out), len(KINDS) + 1, 7, cases_per_kind=1) == 0
    return _corpus_files(out / "corpus", out)


@pytest.mark.parametrize("path", [RABBITMQ_PCAP, PROTON_C_PCAP], ids=lambda p: p.name)
@pytest.mark.parametrize("bound", [None, 0.5])
def test_shared_captures_judged_alike(path, bound):
    checked = 0
    for items in _capture_items(path):
        fast, general, count = _both(items, bound)
        assert fast == general
        checked += count
    assert checked > 100


def test_the_rabbitmq_overdelivery_is_still_found_by_the_fast_checker():
    found = [v for items in _capture_items(RABBITMQ_PCAP) for v in _both(items)[0]]
    assert "link.credit.transfer-beyond-credit" in {v[0] for v in found}


def _rows(path: Path, monkeypatch, fast: bool):
    monkeypatch.setattr(amqpspec.amqp10.monitor, "Checker", functools.partial(Checker, fast=fast))
    violations, connections = [], []
    for segments in _flows(path).values():
        found, rows = check_flow(str(path), segments, liveness_bound=1.0)
        violations += found
        connections += rows
    return violations, connections


def test_synthetic_corpus_triaged_alike(synthetic_corpus, monkeypatch):
    """End to end (reassembly, monitor, signatures, verdicts): rows equal either way."""
    kinds, connections = set(), 0
    for path in synthetic_corpus:
        fast = _rows(path, monkeypatch, True)
        general = _rows(path, monkeypatch, False)
        assert fast == general, path
        kinds |= {row.rule for row in fast[0]}
        connections += len(fast[1])
    assert connections > 10
    assert len(kinds) >= 5  # the corpus carries faults: the comparison covers violations


def test_the_existing_checker_and_monitor_tests_pass_with_a_general_twin():
    """Every frame sequence of those tests, fed to a fast and a general checker at once."""
    modules = [
        "test_checker_rules.py",
        "test_checker_credit.py",
        "test_checker_capture.py",
        "test_checker_signature.py",
        "test_monitor.py",
    ]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "checker_twin"]
        + [str(TESTS / m) for m in modules],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=TESTS.parent,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    compared = int(result.stdout.split("checker twin: ")[1].split()[0])
    assert compared > 10_000


# --- fuzzed frame sequences ---------------------------------------------------------------
TRANSFER = st.tuples(
    st.just("transfer"),
    # (origin, handle): S sends on handle 0, C on handle 1; the others are wrong (roles, 7
    # never attached)
    st.sampled_from([(S, 0)] * 6 + [(C, 1)] * 2 + [(C, 0), (S, 1), (S, 7)]),
    st.sampled_from([3, 3, 3, 3, 700]),  # payload bytes: 700 is past a 512/600 max-frame-size
    st.sampled_from([-1, -1, -1, -1, -1, None, 0, 3]),  # next id, omitted, or out of line
    st.sampled_from([None, False, True]),  # settled
    st.sampled_from([False, False, False, True]),  # more
    st.sampled_from([None] * 8 + [True]),  # aborted
    st.sampled_from([None, None, None, 0, 1]),  # rcv-settle-mode
    st.sampled_from([0.0, 0.0, 0.01, 0.4, 3.0]),  # time since the last frame
)
FLOW = st.tuples(
    st.just("flow"),
    st.sampled_from([C, C, C, S]),
    st.sampled_from([0, 0, 0, 1, 7]),
    st.sampled_from([0, 0, 0, -2, -1, 1, 3]),  # delivery-count off the sender's by this much
    st.sampled_from([0, 1, 2, 5, 100, 100]),  # link-credit
    st.sampled_from([False, False, False, True]),  # drain
    st.sampled_from([False, False, True]),  # echo
    st.sampled_from([0, 1, 3, 1000, 1000, 1000]),  # incoming-window
    st.sampled_from([0.0, 0.01, 3.0]),
)
DISPOSITION = st.tuples(
    st.just("disposition"),
    st.sampled_from([C, S]),
    st.integers(-2, 8),  # first
    st.sampled_from([None, 0, 1, 4, -3]),  # last - first
    st.booleans(),  # settled
    st.sampled_from([0.0, 0.02]),
)
STEP = st.one_of(TRANSFER, TRANSFER, TRANSFER, FLOW, FLOW, DISPOSITION)
# (kind, origin, where among the steps): at most one detach, end or close per sequence
ENDING = st.one_of(
    st.none(),
    st.tuples(
        st.sampled_from(["detach", "end", "close"]), st.sampled_from([C, S]), st.integers(0, 60)
    ),
)
OPEN = st.fixed_dictionaries(
    {
        "max_frame_size": st.sampled_from([None, None, 512, 600, 100_000]),
        "idle_time_out": st.sampled_from([None, None, 0, 1000, 50_000]),
    }
)


def _fuzzed(opens, link, steps, ending, grant_first) -> Trace:
    trace = Trace()
    now = 1000.0
    trace.connect(
        time=now,
        client_open=Open(container_id="client", **opens[0]),
        server_open=Open(container_id="server", **opens[1]),
    )
    trace.begin(window=link.pop("window"), time=now)
    trace.link(time=now, **link)
    trace.link(name="other", handle=1, time=now, sender=C)
    count = {0: link["initial_delivery_count"], 1: 0}
    if ending is not None:
        steps = [*steps[: ending[2]], ending[:2], *steps[ending[2] :]]
    if grant_first:  # both receivers grant credit before the steps begin
        trace.flow(C, count[0], 100, 0, time=now)
        trace.flow(S, count[1], 100, 1, time=now)
    for step in steps:
        now = _apply(trace, step, count, now)
    return trace


def _apply(trace: Trace, step: tuple, count: dict[int, int], now: float) -> float:
    """One fuzzed step added to `trace` after its gap from `now` (transfers and flows keep
    `count`, the delivery-count per handle, up to date); returns the step's time."""
    kind, origin = step[0], step[1]
    if kind == "transfer":
        _, (origin, handle), size, delivery_id, settled, more, aborted, mode, gap = step
        now += gap
        if delivery_id not in (-1, None):
            delivery_id = trace.next_delivery[origin] + delivery_id - 1
        trace.transfer(
            origin,
            handle,
            time=now,
            delivery_id=delivery_id,
            payload=b"x" * size,
            settled=settled,
            more=more,
            aborted=aborted,
            rcv_settle_mode=mode,
        )
        if handle in count:
            count[handle] += 1
    elif kind == "flow":
        _, _, handle, skew, credit, drain, echo, window, gap = step
        now += gap
        trace.flow(
            origin,
            (count.get(handle, 0) + skew) & 0xFFFFFFFF,
            credit,
            handle,
            time=now,
            drain=drain,
            echo=echo,
            incoming_window=window,
        )
    elif kind == "disposition":
        _, _, first, span, settled, gap = step
        now += gap
        first &= 0xFFFFFFFF
        last = None if span is None else (first + span) & 0xFFFFFFFF
        trace.disposition(origin, first, last, settled=settled, time=now)
    elif kind == "detach":
        trace.detach(origin, time=now)
    elif kind == "end":
        trace.end(origin, time=now)
    else:
        trace.close(origin, time=now)
    return now


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.tuples(OPEN, OPEN),
    st.fixed_dictionaries(
        {
            "snd_settle_mode": st.sampled_from([0, 1, 2]),
            "rcv_settle_mode": st.sampled_from([0, 1]),
            "initial_delivery_count": st.sampled_from([0, 5, 0xFFFFFFFE]),
            "window": st.sampled_from([1, 3, 1000, 1000]),
        }
    ),
    st.lists(STEP, max_size=60),
    ENDING,
    st.sampled_from([True, True, False]),
    st.sampled_from([None, 0.5]),
)
def test_fuzzed_sequences_judged_alike(opens, link, steps, ending, grant_first, bound):
    trace = _fuzzed(opens, link, steps, ending, grant_first)
    items = [(o, item, t, i) for i, (o, item, t) in enumerate(trace.items)]
    fast, general, _ = _both(items, bound)
    assert fast == general


def test_the_fast_lane_is_taken_and_left():
    """A clean transfer takes the lane; one beyond credit leaves it (the general code
    reports it), so the differential tests above compare both branches."""
    trace = Trace().setup()
    trace.flow(C, 0, 1)
    clean = trace.transfer(S)
    over = trace.transfer(S)
    taken = []
    checker = Checker()
    lane = checker._fast_transfer

    def spy(origin, peer, frame, transfer, time, idx):
        taken.append((idx, lane(origin, peer, frame, transfer, time, idx)))
        return taken[-1][1]

    checker._fast_transfer = spy
    for origin, item, time in trace.items:
        checker.feed(origin, item, time)
    assert taken == [(clean, True), (over, False)]
    assert [v.rule_id for v in checker.violations] == ["link.credit.transfer-beyond-credit"]
