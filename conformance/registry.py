"""The case registry: declarative conformance cases, one module per spec section.

Owns: `Case` and the `case(...)` decorator that registers a run function under a stable
id (`<spec section>/<slug>`, e.g. `2.6.7/drain-empty-queue`), `case_function` (names a run
function a factory made), `load_cases()`, which imports every module of
`conformance/cases/` and returns the cases in definition order, and the aliases of renamed
ids (`conformance/aliases.toml`: `current_id(old) -> id`, `old_ids(id)`), through which old
ids still select with `-k` and old expectations files and results directories still load.
Adding a case = one decorated function in the module of its section. A case marked
`serial` (it touches broker-global state: every case needing the `alarms` capability, or
one that shows a third-party broker's race only when others run beside it) runs alone
under `amqpspec run --jobs N`. Reads aliases.toml; touches nothing else.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from amqpspec.conformance.probe import Probe
    from amqpspec.conformance.runner import CaseContext

ALIASES = Path(__file__).with_name("aliases.toml")

Level = Literal["MUST", "SHOULD"]
PipelinedMode = Literal["only", "also", "never"]
PIPELINED = "pipelined"  # the variant's id suffix: `<case id>/pipelined`
MUST: Level = "MUST"
SHOULD: Level = "SHOULD"
RunFunction = Callable[["Probe", "CaseContext"], None]
# capabilities whose cases change what every connection sees (a memory alarm blocks every
# publisher of the broker): such a case is serial, it never runs beside another
BROKER_GLOBAL = frozenset({"alarms"})


@dataclass(frozen=True, slots=True)
class Case:
    case_id: str
    level: Level
    sentence: str  # the spec sentence it checks (paraphrased where long)
    description: str
    requires: frozenset[str]  # profile capabilities needed
    outcomes: frozenset[str]  # acceptable outcomes, h2spec-style (empty: case-defined)
    lenient: frozenset[str]  # outcomes that meet the MUST but not the exact SHOULD (NON-STRICT)
    run: RunFunction
    budget: float | None  # seconds; None = the profile's case_budget
    ignore_rules: frozenset[str]  # checker rules a deliberately bad probe frame may trigger
    module: str
    pipelined: bool = True  # its frames need no broker reply before the first wait
    variant: str = ""  # PIPELINED: this is the pipelined variant of the case `base_id`
    serial: bool = False  # runs alone under --jobs N (broker-global state)

    @property
    def section(self) -> str:
        return self.case_id.split("/", 1)[0]

    @property
    def base_id(self) -> str:
        """The case's id without its variant suffix."""
        return self.case_id.removesuffix(f"/{self.variant}") if self.variant else self.case_id

    @property
    def slug(self) -> str:
        return self.case_id.replace("/", "__").replace(".", "_")


_REGISTRY: dict[str, Case] = {}


def case(
    case_id: str,
    level: Level,
    sentence: str,
    *,
    requires: Iterable[str] = (),
    outcomes: Iterable[str] = (),
    lenient: Iterable[str] = (),
    budget: float | None = None,
    ignore_rules: Iterable[str] = (),
    pipelined: bool = True,
    serial: bool = False,
) -> Callable[[RunFunction], RunFunction]:
    """Register the decorated `run(probe, ctx)` as a case. Its docstring describes it.

    `outcomes`: the acceptable outcomes (OK); `lenient`: outcomes that still show the broker
    noticed (the MUST) but not in the way the spec names (NON-STRICT). An outcome ending in
    `*` matches by prefix (`close:*` = a close with any condition). `pipelined=False`: no
    pipelined variant, because the case builds or checks its frames from the broker's open
    or begin (the probe's pipelined mode does not wait for them), or because it sends
    nothing after its open before its first wait (headers, SASL, an open alone).
    `serial=True`: never run beside another case under `--jobs N` (implied by a
    BROKER_GLOBAL capability in `requires`)."""
    if "/" not in case_id:
        raise ValueError(f"case id {case_id!r} must be '<section>/<slug>'")
    if level not in (MUST, SHOULD):
        raise ValueError(f"level must be MUST or SHOULD, got {level!r}")
    required = frozenset(requires)

    def register(run: RunFunction) -> RunFunction:
        if case_id in _REGISTRY and _REGISTRY[case_id].run.__qualname__ != run.__qualname__:
            raise ValueError(f"duplicate case id {case_id!r}")
        _REGISTRY[case_id] = Case(
            case_id,
            level,
            " ".join(sentence.split()),
            " ".join((run.__doc__ or "").split()),
            required,
            frozenset(outcomes),
            frozenset(lenient),
            run,
            budget,
            frozenset(ignore_rules),
            run.__module__,
            pipelined,
            serial=serial or bool(BROKER_GLOBAL & required),
        )
        return run

    return register


def case_function(run: RunFunction, name: str, doc: str, module: str) -> RunFunction:
    """Give a run function made by a factory (one function, several cases) its case's
    name, docstring (the registry's description) and case module (the registry's
    `module`), before `case(...)` registers it."""
    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    run.__module__ = module
    return run


def load_cases() -> list[Case]:
    """Every registered case (importing all of conformance.cases), in definition order."""
    import amqpspec.conformance.cases as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{package.__name__}.{info.name}")
    return list(_REGISTRY.values())


def beside_others(cases: list[Case], concurrent: Iterable[str]) -> list[Case]:
    """`cases` with the serial cases named in `concurrent` (base ids: a profile's `[jobs]
    concurrent`, the cases serialised for another broker's races that this broker runs
    beside others) no longer serial, both variants. ValueError for a name that is no
    registered serial case, or one on BROKER_GLOBAL state (those always run alone)."""
    named = frozenset(concurrent)
    serial = {c.base_id: c for c in load_cases() if c.serial}
    for case_id in sorted(named):
        if case_id not in serial:
            raise ValueError(f"{case_id!r} is not a serial case")
        if BROKER_GLOBAL & serial[case_id].requires:
            raise ValueError(f"{case_id!r} changes broker-global state: it always runs alone")
    return [dataclasses.replace(c, serial=False) if c.base_id in named else c for c in cases]


def pipelined_variant(case: Case) -> Case:
    """The case run pipelined (2.4.1, 2.5.1): every frame up to the first one that needs a
    broker reply in one write, same outcomes, id `<case id>/pipelined`."""
    return dataclasses.replace(case, case_id=f"{case.case_id}/{PIPELINED}", variant=PIPELINED)


def suite_cases(pipelined: PipelinedMode = "also") -> list[Case]:
    """The cases a run has: `never` the cases as registered; `also` each followed by its
    pipelined variant when it has one; `only` just the pipelined variants."""
    if pipelined not in ("only", "also", "never"):
        raise ValueError(f"pipelined must be only, also or never, got {pipelined!r}")
    cases = []
    for case in load_cases():
        if pipelined != "only":
            cases.append(case)
        if pipelined != "never" and case.pipelined:
            cases.append(pipelined_variant(case))
    return cases


@functools.cache
def aliases() -> dict[str, str]:
    """Renamed case ids: old id -> current id (`conformance/aliases.toml`)."""
    with ALIASES.open("rb") as handle:
        return dict(tomllib.load(handle)["aliases"])


def current_id(case_id: str) -> str:
    """The id a case has now (`case_id` itself unless it is an old, renamed id)."""
    return aliases().get(case_id, case_id)


def old_ids(case_id: str) -> list[str]:
    """The ids the case `case_id` had before it was renamed (a pipelined variant: its
    case's old ids with the suffix)."""
    base, suffix = case_id, ""
    if case_id.endswith(f"/{PIPELINED}"):
        base, suffix = case_id.removesuffix(f"/{PIPELINED}"), f"/{PIPELINED}"
    return [old + suffix for old, new in aliases().items() if new == base]


def by_current_id(entries: dict[str, Any]) -> dict[str, Any]:
    """`entries` keyed by case id (an expectations file, a broker's index.json entries) with
    old ids renamed to current ones; an entry already under the current id wins over one
    under an old id."""
    renamed: dict[str, Any] = {}
    for case_id, value in entries.items():
        current = current_id(case_id)
        if current != case_id and current in entries:
            continue
        renamed[current] = value
    return renamed
