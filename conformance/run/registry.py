"""The case registry: declarative conformance cases, one module per spec section.

Owns: `Case` and the `case(...)` decorator that registers a run function under a stable
id (`<spec section>/<slug>`, e.g. `2.6.7/drain-empty-queue`), `case_function` (names a run
function a factory made), `load_cases()`, which imports every module of
`conformance/cases/` and returns the cases in definition order, and the aliases of renamed
ids (`conformance/aliases.toml`: `current_id(old) -> id`, `old_ids(id)`), through which old
ids still select with `-k` and old expectations files and results directories still load.
A case names the spec sentences it checks (`sentences=`: ids of the normative manifest,
`amqpspec.conformance.manifest`) and the role the broker plays in it (`role=`: the link's
sender or receiver, or none); its level follows from them (`level_from_sentences`): MUST
when a MUST / MUST NOT / SHALL / REQUIRED / prohibition among them binds the broker in that
role, SHOULD when only a SHOULD does, MAY when none binds the broker (the spec leaves its
answer open: the case records it), MODEL when the case checks behaviour no sentence
requires, part of a named model (`model=`, e.g. RabbitMQ 4's requeue on detach) that a
profile may claim (docs/conformance.md, "Verdicts"). `sentence_problems()` checks the ids
and levels against the manifest.
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
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from amqpspec.conformance.probe import Probe

ALIASES = Path(__file__).resolve().parents[1] / "aliases.toml"

Level = Literal["MUST", "SHOULD", "MAY", "MODEL"]
PipelinedMode = Literal["only", "also", "never"]
PIPELINED = "pipelined"  # the variant's id suffix: `<case id>/pipelined`
MUST: Level = "MUST"  # a sentence that binds the broker: not met -> FAILED
SHOULD: Level = "SHOULD"  # a SHOULD that binds the broker: not met -> NON-STRICT
MAY: Level = "MAY"  # no sentence binds the broker here: its answer is recorded, OK
MODEL: Level = "MODEL"  # a model's behaviour, no sentence: not met -> DIFFERS
LEVELS = (MUST, SHOULD, MAY, MODEL)
# the broker's role in a case (`role=`): the link (or transfer) sender or receiver; every
# case also has the broker as the TCP / SASL server, a container and the node's holder
Role = Literal["sender", "receiver"]
# (the coordinator too: the suite only ever plays the transaction controller, Part 4)
ALWAYS_BROKER = frozenset({"server", "either", "container", "node", "intermediary", "coordinator"})
# manifest levels (amqpspec.conformance.manifest.Sentence.level) by the case level they give
MUST_LEVELS = frozenset({"MUST", "MUST NOT", "SHALL", "SHALL NOT", "REQUIRED", "PROHIBITED"})
SHOULD_LEVELS = frozenset({"SHOULD", "SHOULD NOT"})
SENTENCE_ID = re.compile(r"\d+(\.\d+)*/[a-z0-9][a-z0-9.-]*\.\d+")
# a case body: (the case's first probe, its run.context.CaseContext); the context is not named
# here, because the context module reads the levels above (no import cycle)
RunFunction = Callable[["Probe", Any], None]
# capabilities whose cases change what every connection sees (a memory alarm blocks every
# publisher of the broker; a restart drops every connection): such a case is serial, it
# never runs beside another
BROKER_GLOBAL = frozenset({"alarms", "restart"})
# of those, the capabilities whose cases nothing may run beside, not even a profile's
# `beside_serial` cases: a restart drops every connection (they run last: plugin.py)
ALONE = frozenset({"restart"})


@dataclass(frozen=True, slots=True)
class Case:
    case_id: str
    level: Level
    sentence: str  # its first sentence as the spec says it (the manifest's text), or
    # what it expects when it names none
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
    beside_serial: bool = False  # runs while the serial cases do (a profile's [jobs] beside_serial)
    sentences: tuple[str, ...] = ()  # manifest ids of the spec sentences it checks
    role: Role | None = None  # the broker's link role in the case
    model: str | None = None  # the model (profile.MODELS) a MODEL case or `ctx.model` checks
    expectation: str = ""  # what the case expects, in a line (its own words)

    def __repr__(self) -> str:
        """`Case('2.6.7/drain-exact')`: stable from run to run (allure's history id hashes
        the parameters' reprs; the default one holds the run function's address)."""
        return f"Case({self.case_id!r})"

    @property
    def roles(self) -> frozenset[str]:
        """Every role the broker plays in the case (a sentence binding one binds it)."""
        return ALWAYS_BROKER | ({self.role} if self.role else set())

    @property
    def section(self) -> str:
        return self.case_id.split("/", 1)[0]

    @property
    def alone(self) -> bool:
        """Nothing runs beside it, not even the `beside_serial` cases (ALONE)."""
        return bool(ALONE & self.requires)

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
    sentences: Iterable[str] = (),
    role: Role | None = None,
    model: str | None = None,
    requires: Iterable[str] = (),
    outcomes: Iterable[str] = (),
    lenient: Iterable[str] = (),
    budget: float | None = None,
    ignore_rules: Iterable[str] = (),
    pipelined: bool = True,
    serial: bool = False,
) -> Callable[[RunFunction], RunFunction]:
    """Register the decorated `run(probe, ctx)` as a case. Its docstring describes it.

    `level` (MUST, SHOULD, MAY, MODEL) is the one its `sentences` (manifest ids) give in
    the broker's `role` (`level_from_sentences`; `sentence_problems` checks it); `sentence`
    says in a line what the case expects (its `expectation`; the case's `sentence` is the
    first named sentence quoted from the manifest). A MODEL case names its `model` (profile.MODELS),
    as does a case of another level whose run checks part of that model (`ctx.model`).
    `outcomes`: the acceptable outcomes (OK); `lenient`: outcomes that still show the broker
    noticed (the MUST) but not in the way the spec names (NON-STRICT). An outcome ending in
    `*` matches by prefix (`close:*` = a close with any condition). `pipelined=False`: no
    pipelined variant, because the case builds or checks its frames from the broker's open
    or begin (the probe's pipelined mode does not wait for them), or because it sends
    nothing after its open before its first wait (headers, SASL, an open alone).
    `serial=True`: never run beside another case under `--jobs N` (implied by a
    BROKER_GLOBAL capability in `requires`)."""
    _check_declaration(case_id, level, role, model)
    required, named = frozenset(requires), tuple(sentences)

    def register(run: RunFunction) -> RunFunction:
        if case_id in _REGISTRY and _REGISTRY[case_id].run.__qualname__ != run.__qualname__:
            raise ValueError(f"duplicate case id {case_id!r}")
        expectation = " ".join(sentence.split())
        _REGISTRY[case_id] = Case(
            case_id,
            level,
            _quoted(named) or expectation,
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
            sentences=named,
            role=role,
            model=model,
            expectation=expectation,
        )
        return run

    return register


def _check_declaration(case_id: str, level: str, role: str | None, model: str | None) -> None:
    """ValueError for a case declared wrong: its id, level, role, a MODEL case's model."""
    if "/" not in case_id:
        raise ValueError(f"case id {case_id!r} must be '<section>/<slug>'")
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if level == MODEL and model is None:
        raise ValueError(f"{case_id}: a MODEL case names its model")
    if role not in (None, "sender", "receiver"):
        raise ValueError(f"{case_id}: role must be sender, receiver or None, got {role!r}")


def _quoted(sentence_ids: tuple[str, ...]) -> str:
    """The first sentence's text as the manifest holds it (exactly as in the XML), or ""."""
    module = manifest()
    if module is None or not sentence_ids:
        return ""
    try:
        return str(module.sentence(sentence_ids[0]).text)
    except KeyError:
        return ""


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


def beside_serial(cases: list[Case], names: Iterable[str]) -> list[Case]:
    """`cases` with those named in `names` (base ids: a profile's `[jobs] beside_serial`,
    cases that nothing a serial case changes on this broker can reach, e.g. ones that never
    begin a session beside a memory alarm) marked to run while the serial cases do, both
    variants. ValueError for a name that is no registered case, or a serial one."""
    named = frozenset(names)
    known = {c.base_id: c for c in load_cases()}
    for case_id in sorted(named):
        if case_id not in known:
            raise ValueError(f"{case_id!r} is not a registered case")
        if known[case_id].serial:
            raise ValueError(f"{case_id!r} is a serial case: it runs alone")
    return [dataclasses.replace(c, beside_serial=True) if c.base_id in named else c for c in cases]


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


# --- the cases' sentences against the normative manifest ---------------------------------


def manifest() -> Any:
    """The normative manifest module (`amqpspec.conformance.manifest`), or None while it is
    not installed in this checkout."""
    try:
        return importlib.import_module("amqpspec.conformance.manifest")
    except ImportError:
        return None


@functools.cache
def _linked_sentences() -> dict[str, tuple[str, ...]]:
    """case id -> the sentences the manifest's links.toml says the case tests."""
    module = manifest()
    linked: dict[str, list[str]] = {}
    if module is not None:
        for item in module.sentences().values():
            for case_id in item.cases:
                linked.setdefault(case_id, []).append(item.id)
    return {case_id: tuple(ids) for case_id, ids in linked.items()}


def case_sentences(item: Case) -> frozenset[str]:
    """Every sentence a case checks: its own `sentences=` and those links.toml gives it
    (a variant's are its base case's)."""
    return frozenset(item.sentences) | frozenset(_linked_sentences().get(item.base_id, ()))


def level_from_sentences(
    levels_and_binds: Iterable[tuple[str, str]], roles: Iterable[str]
) -> Level:
    """The case level that sentences give (each as (manifest level, who it binds)) for a
    broker in `roles`: MUST when a MUST-class one binds it, SHOULD when only a SHOULD does,
    MAY when none does. (MODEL is no sentence's: a model case names its model.)"""
    playing = frozenset(roles)
    binding = [level for level, binds in levels_and_binds if binds in playing]
    if any(level in MUST_LEVELS for level in binding):
        return MUST
    if any(level in SHOULD_LEVELS for level in binding):
        return SHOULD
    return MAY


def quote(sentence_id: str) -> str:
    """`<id>: "<the sentence as the spec says it>"` (the id alone without the manifest)."""
    module = manifest()
    if module is None:
        return sentence_id
    try:
        return f'{sentence_id}: "{module.sentence(sentence_id).text}"'
    except KeyError:
        return sentence_id


def sentence_problems(cases: Iterable[Case]) -> list[str]:
    """What is wrong with the cases' sentences, one line each: an id not in the manifest's
    format; a MUST or SHOULD case with none (its own `sentences=` or the manifest's
    links.toml naming it); with the manifest installed, an id it does not know and a MUST or
    SHOULD level its sentences (with their `binds`) do not give (a MODEL or MAY case's
    sentences are those its `ctx.must` checks enforce, or the probe's side of the case)."""
    module = manifest()
    problems = []
    linked: dict[str, list[str]] = {}  # case id -> the manifest's links.toml sentences
    if module is not None:
        for item in module.sentences().values():
            for case_id in item.cases:
                linked.setdefault(case_id, []).append(item.id)
    for item in cases:
        if item.variant:
            continue
        for sentence_id in item.sentences:
            if not SENTENCE_ID.fullmatch(sentence_id):
                problems.append(f"{item.case_id}: {sentence_id!r} is no manifest id")
        graded = item.level in (MUST, SHOULD)
        ids = tuple(dict.fromkeys((*item.sentences, *linked.get(item.case_id, ()))))
        if graded and not ids:
            problems.append(f"{item.case_id}: a {item.level} case names no sentence")
        if module is None:
            continue
        known = []
        for sentence_id in ids:
            try:
                known.append(module.sentence(sentence_id))
            except KeyError:
                problems.append(f"{item.case_id}: {sentence_id} is not in the manifest")
        if not graded or not known or not all(s.binds for s in known):
            continue  # a sentence whose binds is not reviewed yet decides nothing
        derived = level_from_sentences(((s.level, s.binds) for s in known), item.roles)
        if derived != item.level:
            problems.append(
                f"{item.case_id}: level {item.level}, its sentences ({', '.join(ids)}) give "
                f"{derived} (broker as {', '.join(sorted(item.roles))})"
            )
    return problems
