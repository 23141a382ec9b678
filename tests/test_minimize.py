"""traces.minimize.ddmin: smallest failing sub-sequence, 1-minimal, bounded, order kept."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpspec.traces.minimize import ddmin


def test_finds_the_two_items_that_together_fail() -> None:
    items = list(range(40))
    result = ddmin(items, lambda xs: 7 in xs and 31 in xs)
    assert result.items == [7, 31]
    assert result.minimal
    assert result.removed == 38


def test_order_is_kept_and_kept_items_stay() -> None:
    items = ["H", "a", "b", "c", "d", "H2", "e"]
    result = ddmin(items, lambda xs: "d" in xs, keep=lambda x: x.startswith("H"))
    assert result.items == ["H", "d", "H2"]


def test_input_that_does_not_fail_is_refused() -> None:
    with pytest.raises(ValueError, match="does not fail"):
        ddmin([1, 2, 3], lambda xs: False)


def test_budget_bounds_the_calls_and_returns_a_failing_candidate() -> None:
    calls = []

    def still_fails(xs: list[int]) -> bool:
        calls.append(len(xs))
        return sum(xs) >= 50

    result = ddmin(list(range(30)), still_fails, max_tests=5)
    assert len(calls) <= 5
    assert not result.minimal
    assert sum(result.items) >= 50


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=30),
    st.sets(st.integers(0, 20), min_size=1, max_size=3),
)
def test_result_fails_and_is_one_minimal(items: list[int], needed: set[int]) -> None:
    def still_fails(xs: list[int]) -> bool:
        return needed <= set(xs)

    if not still_fails(items):
        return
    result = ddmin(items, still_fails)
    assert still_fails(result.items)
    assert result.minimal
    for i in range(len(result.items)):  # 1-minimal: no single item can go
        assert not still_fails(result.items[:i] + result.items[i + 1 :])
    # a subsequence of the input, order kept
    it = iter(items)
    assert all(any(x == y for y in it) for x in result.items)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=30),
    st.sets(st.integers(0, 20), min_size=1, max_size=3),
    st.integers(2, 6),
)
def test_parallel_tests_reach_the_sequential_result(
    items: list[int], needed: set[int], parallel: int
) -> None:
    def still_fails(xs: list[int]) -> bool:
        return needed <= set(xs)

    if not still_fails(items):
        return
    sequential = ddmin(items, still_fails)
    concurrent = ddmin(items, still_fails, parallel=parallel)
    assert concurrent.items == sequential.items
    assert concurrent.minimal


def test_parallel_tests_run_at_once_and_keep_the_budget() -> None:
    import threading
    import time

    lock = threading.Lock()
    running, most, calls = [0], [0], []

    def still_fails(xs: list[int]) -> bool:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            calls.append(len(xs))
        time.sleep(0.01)  # a slow peer: the tests of a batch overlap
        with lock:
            running[0] -= 1
        return 17 in xs

    result = ddmin(list(range(64)), still_fails, parallel=4)
    assert result.items == [17] and result.minimal
    assert most[0] > 1  # tests overlapped
    calls.clear()
    bounded = ddmin(list(range(64)), still_fails, parallel=4, max_tests=6)
    assert len(calls) <= 6
    assert not bounded.minimal and 17 in bounded.items
