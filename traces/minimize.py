"""Delta debugging (ddmin, Zeller & Hildebrandt 2002) over a sequence of trace items.

Owns: `ddmin(items, still_fails, ...)` — the smallest sub-sequence (order kept) for which
`still_fails` is still true, 1-minimal: removing any one remaining removable item makes it
pass. Used offline by the Spark triage job (the checker is a pure function, so a candidate is
judged by re-checking its frames) and by the fuzzer (a candidate is judged by replaying it
against a broker). Knows nothing about AMQP: what an item is and what "fails" means is the
caller's. Items for which `keep(item)` is true (protocol headers, say) are never removed.
Every run is bounded by `max_tests` predicate calls; results of tested candidates are cached.
With `parallel=N` the candidates of one round (the subsets, then the complements) are tested
N at a time on threads, and the first of them in order that fails is taken: the result is
the sequential one (for a deterministic predicate), reached in fewer rounds of waiting, at
the cost of the tests after the first failure of a batch. For a predicate that waits on a
slow peer (the fuzzer replaying a case against a broker that answers seconds later).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


class _BudgetExhaustedError(Exception):
    """Raised inside the search when `max_tests` predicate calls have been spent."""


@dataclass
class MinimizeResult(Generic[T]):
    items: list[T]
    tests: int  # predicate calls actually made (cache hits not counted)
    minimal: bool  # True: 1-minimal; False: the budget ran out first (still failing, smaller)
    removed: int = field(default=0)


class _Oracle(Generic[T]):
    def __init__(
        self, items: Sequence[T], still_fails: Callable[[list[T]], bool], max_tests: int
    ) -> None:
        self.items = items
        self.still_fails = still_fails
        self.max_tests = max_tests
        self.tests = 0
        self.cache: dict[tuple[int, ...], bool] = {}
        self.pool: ThreadPoolExecutor | None = None  # parallel tests (ddmin's `parallel`)
        self.width = 1  # candidates tested at once with the pool

    def fails(self, positions: tuple[int, ...]) -> bool:
        cached = self.cache.get(positions)
        if cached is not None:
            return cached
        if self.tests >= self.max_tests:
            raise _BudgetExhaustedError
        self.tests += 1
        verdict = bool(self.still_fails([self.items[p] for p in positions]))
        self.cache[positions] = verdict
        return verdict

    def first_failing(self, candidates: list[tuple[int, ...]]) -> int | None:
        """The index of the first candidate (in order) that fails, or None."""
        if self.pool is None:
            for index, positions in enumerate(candidates):
                if self.fails(positions):
                    return index
            return None
        width = self.width
        for start in range(0, len(candidates), width):
            batch = candidates[start : start + width]
            new = [p for p in dict.fromkeys(batch) if p not in self.cache]
            room = self.max_tests - self.tests
            tested = new[: max(0, room)]
            self.tests += len(tested)
            results = self.pool.map(
                lambda p: bool(self.still_fails([self.items[i] for i in p])), tested
            )
            self.cache.update(zip(tested, results))
            for index, positions in enumerate(batch, start):
                verdict = self.cache.get(positions)
                if verdict is None:  # the budget ran out before this one
                    raise _BudgetExhaustedError
                if verdict:
                    return index
        return None


def _split(positions: list[int], parts: int) -> list[list[int]]:
    size, extra = divmod(len(positions), parts)
    chunks, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        chunks.append(positions[start:end])
        start = end
    return [c for c in chunks if c]


def _merge(fixed: list[int], removable: list[int]) -> tuple[int, ...]:
    return tuple(sorted(fixed + removable))


def ddmin(
    items: Sequence[T],
    still_fails: Callable[[list[T]], bool],
    *,
    keep: Callable[[T], bool] | None = None,
    max_tests: int = 5000,
    check_input: bool = True,
    parallel: int = 1,
) -> MinimizeResult[T]:
    """Minimise `items` while `still_fails(candidate)` holds.

    `check_input` first confirms that the whole input fails (ValueError if it does not: a
    minimiser must never "minimise" something that does not reproduce).
    """
    oracle: _Oracle[T] = _Oracle(items, still_fails, max_tests)
    fixed = [i for i, item in enumerate(items) if keep is not None and keep(item)]
    current = [i for i in range(len(items)) if i not in set(fixed)]
    if check_input and not oracle.fails(tuple(range(len(items)))):
        raise ValueError("ddmin: the input does not fail; nothing to minimise")
    minimal = True
    if parallel > 1:
        oracle.pool = ThreadPoolExecutor(parallel, thread_name_prefix="ddmin")
        oracle.width = parallel
    try:
        current = _search(oracle, fixed, current)
    except _BudgetExhaustedError:
        minimal = False
        current = list(_best_so_far(oracle, fixed, current))
    finally:
        if oracle.pool is not None:
            oracle.pool.shutdown(wait=True)
    chosen = _merge(fixed, current)
    return MinimizeResult(
        [items[p] for p in chosen], oracle.tests, minimal, removed=len(items) - len(chosen)
    )


def _search(oracle: _Oracle[T], fixed: list[int], current: list[int]) -> list[int]:
    parts = 2
    while len(current) >= 1:
        if len(current) == 1:
            # 1-minimal check for the last removable item: can it go too?
            return [] if oracle.fails(_merge(fixed, [])) else current
        chunks = _split(current, min(parts, len(current)))
        reduced = False
        found = oracle.first_failing([_merge(fixed, chunk) for chunk in chunks])
        if found is not None:  # reduce to a subset
            current, parts, reduced = chunks[found], 2, True
        if not reduced:  # reduce to a complement
            complements = [[p for p in current if p not in set(chunk)] for chunk in chunks]
            complements = [c for c in complements if c != current]
            found = oracle.first_failing([_merge(fixed, c) for c in complements])
            if found is not None:
                current, parts, reduced = complements[found], max(parts - 1, 2), True
        if not reduced:
            if parts >= len(current):
                return current
            parts = min(parts * 2, len(current))
    return current


def _best_so_far(oracle: _Oracle[T], fixed: list[int], current: list[int]) -> tuple[int, ...]:
    """The smallest cached candidate that failed (the input itself at worst)."""
    failing = [p for p, verdict in oracle.cache.items() if verdict]
    if not failing:
        return tuple(current)
    best = min(failing, key=len)
    fixed_set = set(fixed)
    return tuple(p for p in best if p not in fixed_set)
