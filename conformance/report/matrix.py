"""The brokers x cases matrix: the model a report is drawn from.

Owns: `Matrix` (merged results of one or more results directories, with each broker's run
header from `DIR/runs/<broker>.json`, its expectations file and the cell facts a report shows:
regression against the expectations, flaky when retried attempts differed, UNSUPPORTED
split into "profile opted out" and "broker lacks it", pipelined twins folded into their
base case), `failures()` (MUST before SHOULD before DIFFERS), and the names, colours and
headings every rendering shares. The Markdown is `markdown.py`'s, the HTML page `html.py`'s,
the conformance statement `statement.py`'s. Case metadata (level, sentences, sections' titles)
comes from the registry and the normative manifest. The cases of a model's behaviour
(level MODEL, verdict DIFFERS when the broker differs) are shown apart and never counted as
non-conformance (docs/conformance.md, "Verdicts"). Pure functions of their inputs apart from
reading the results, expectations and traces named; `cli.py` writes the files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amqpspec.conformance.run.registry import case_sentences, load_cases, manifest
from amqpspec.conformance.run.results import Expectation, load_expectations, load_index, load_runs
from amqpspec.conformance.run.run_info import RunInfo
from amqpspec.conformance.verdicts import Verdict

REPO = Path(__file__).resolve().parents[2]
EXPECTATIONS_DIR = REPO / "conformance" / "expectations"

# verdict -> (background, text colour): every pair at least 4.5:1 (WCAG 2.1 AA, tested)
PALETTE = {
    "OK": ("#2e7d32", "#ffffff"),
    "NON-STRICT": ("#f9a825", "#000000"),
    "UNSUPPORTED": ("#616161", "#ffffff"),  # the broker lacks it
    "FAILED": ("#c62828", "#ffffff"),
    "ERROR": ("#6a1b9a", "#ffffff"),
    "DIFFERS": ("#01579b", "#ffffff"),
}
OPTED_OUT = ("#e0e0e0", "#212121")  # UNSUPPORTED because the profile opted out: never run
COLOURS = {v: PALETTE[v][0] for v in ("OK", "NON-STRICT", "UNSUPPORTED", "FAILED", "ERROR")}
DIFFERS = "DIFFERS"  # shown apart: its own totals column, table and reasons
DIFFERS_COLOUR = PALETTE[DIFFERS][0]
MODEL_LEVEL = "MODEL"
PIPELINED = "/pipelined"
CHECKER = "checker/"
# what a report lists first, most severe first: a MUST broken (and a run that could not
# judge), then a SHOULD not met, then a model's behaviour not followed
SEVERITY = ("FAILED", "ERROR", "NON-STRICT", DIFFERS)
_OPTED_OUT = re.compile(r"^profile '[^']*' lacks ")
TRACES_SEARCHED = 400  # results without a run header: traces read for the broker's open
_OPEN_LINE = re.compile(r"<- @open\(16\) \[(?P<fields>.*)\]$", re.M)


def shown_path(path: str | Path) -> str:
    """A file of the project as its path in the repository (a published report names no
    machine's folders); another file as given."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def section_of(case_id: str) -> str:
    """'2.6.7' for a case, the rule's section for a checker row ('checker/2.7.4/...')."""
    parts = case_id.split("/")
    return parts[1] if parts[0] == "checker" and len(parts) > 2 else parts[0]


def section_key(section: str) -> tuple[Any, ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in section.split("."))


def section_title(section: str) -> str:
    module = manifest()
    title = module.sections().get(section, "") if module is not None else ""
    return f"{section} {title}".strip()


def anchor(text: str) -> str:
    """An HTML id / Markdown fragment for a case id or section."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def is_opted_out(cell: dict[str, Any]) -> bool:
    """UNSUPPORTED because the profile says the broker lacks a capability (never run), not
    because the broker showed it lacks it."""
    return cell.get("verdict") == "UNSUPPORTED" and bool(_OPTED_OUT.match(cell.get("reason", "")))


def opted_out_capability(cell: dict[str, Any]) -> str:
    reason = cell.get("reason", "")
    return _OPTED_OUT.sub("", reason).split(" ", 1)[0].rstrip(".,;:") if is_opted_out(cell) else ""


def is_flaky(cell: dict[str, Any]) -> bool:
    """The case was run again (--expect-retries) and its attempts did not agree."""
    return len(set(cell.get("attempts", []))) > 1


def identity_from_trace(path: Path) -> dict[str, str]:
    """product and version from the open line of a text trace (results written before
    index.json recorded them, `run_info`)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    found = _OPEN_LINE.search(text)
    if found is None:
        return {}
    identity = {}
    container = re.search(r'container-id="([^"]*)"', found.group("fields"))
    if container:
        identity["container-id"] = container.group(1)
    for key in ("product", "version", "platform"):
        value = re.search(rf':{key}="([^"]*)"', found.group("fields"))
        if value:
            identity[key] = value.group(1)
    return identity


@dataclass
class Matrix:
    brokers: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)
    cells: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    roots: dict[str, Path] = field(default_factory=dict)  # broker -> its results DIR
    levels: dict[str, str] = field(default_factory=dict)
    sentences: dict[str, str] = field(default_factory=dict)
    sentence_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)  # MODEL cases: their model
    runs: dict[str, RunInfo] = field(default_factory=dict)  # broker -> its run header
    expectations: dict[str, dict[str, Expectation]] = field(default_factory=dict)
    expectation_files: dict[str, str] = field(default_factory=dict)
    # (broker, case) -> its page (case_page), for the cells that have one
    pages: dict[tuple[str, str], Path] = field(default_factory=dict)
    history: Any = None  # history.History: earlier runs the report opens with

    @classmethod
    def load(
        cls, dirs: list[str | Path], expectations: dict[str, str | Path] | None = None
    ) -> Matrix:
        """The results of `dirs`; each broker's expectations from `expectations[broker]`,
        else the file its run compared against, else conformance/expectations/<broker>.toml
        when there is one."""
        matrix = cls()
        known = {case.case_id: case for case in load_cases()}
        order = {case_id: n for n, case_id in enumerate(known)}
        seen: set[str] = set()
        for directory in dirs:
            root = Path(directory)
            runs = load_runs(root)
            for broker, entries in load_index(root).items():
                if broker not in matrix.brokers:
                    matrix.brokers.append(broker)
                matrix.roots[broker] = root
                info = RunInfo.from_dict(runs.get(broker, {"broker": broker}))
                matrix.runs[broker] = info
                for case_id, entry in entries.items():
                    matrix.cells[(broker, case_id)] = entry
                    seen.add(case_id)
                    matrix.levels.setdefault(case_id, entry.get("level", ""))
                first = next(iter(entries.values()), {})
                if not info.identity and first.get("broker_product"):
                    info.identity = {
                        "product": first["broker_product"],
                        "version": first.get("broker_version", ""),
                    }
                traces = [e["trace"] for e in entries.values() if e.get("trace")]
                for traced in traces[:TRACES_SEARCHED] if not info.identity else []:
                    info.identity = identity_from_trace(root / traced)
                    if info.identity:
                        break
        matrix.cases = sorted(
            seen, key=lambda c: (section_key(section_of(c)), order.get(c, len(order)), c)
        )
        for case_id in matrix.cases:
            if case_id in known:
                case = known[case_id]
                matrix.levels[case_id] = case.level
                ids = case.sentences or tuple(sorted(case_sentences(case)))
                matrix.sentence_ids[case_id] = ids
                matrix.sentences[case_id] = case.sentence + (f" ({', '.join(ids)})" if ids else "")
                if case.model:
                    matrix.models[case_id] = case.model
        for broker in matrix.brokers:
            matrix._load_expectations(broker, (expectations or {}).get(broker))
        return matrix

    def _load_expectations(self, broker: str, given: str | Path | None) -> None:
        recorded = self.runs[broker].expectations
        candidates = [given, recorded, EXPECTATIONS_DIR / f"{broker}.toml"]
        for candidate in candidates:
            if candidate and Path(candidate).is_file():
                self.expectations[broker] = load_expectations(candidate)
                self.expectation_files[broker] = shown_path(candidate)
                return

    # --- which cases ---

    def spec_cases(self) -> list[str]:
        """The cases graded against the spec's sentences (not a model's)."""
        return [c for c in self.cases if self.levels.get(c) != MODEL_LEVEL]

    def model_cases(self) -> list[str]:
        """The cases of a model's behaviour (shown apart)."""
        return [c for c in self.cases if self.levels.get(c) == MODEL_LEVEL]

    def twin(self, case_id: str) -> str | None:
        """The pipelined variant of a base case, when it ran."""
        twin = case_id + PIPELINED
        return twin if twin in self.levels else None

    def row_of(self, case_id: str) -> str:
        """The row a case shows in: its base case's when it is a folded pipelined twin."""
        base = case_id.removesuffix(PIPELINED)
        return base if base != case_id and base in self.levels else case_id

    def row_cases(self, cases: list[str]) -> list[str]:
        """`cases` without the pipelined twins whose base case is there (folded into it)."""
        present = set(cases)
        return [c for c in cases if not (c.endswith(PIPELINED) and c[: -len(PIPELINED)] in present)]

    def sections(self, cases: list[str]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for case_id in cases:
            key = "checker" if case_id.startswith(CHECKER) else section_of(case_id)
            grouped.setdefault(key, []).append(case_id)

        def order(item: tuple[str, list[str]]) -> tuple[Any, ...]:
            return (item[0] == "checker", section_key(item[0]))

        return dict(sorted(grouped.items(), key=order))

    # --- cell facts ---

    def totals(self, broker: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for case_id in self.cases:
            cell = self.cells.get((broker, case_id))
            if cell is not None:
                counts[cell["verdict"]] = counts.get(cell["verdict"], 0) + 1
        return counts

    def expected(self, broker: str, case_id: str) -> Expectation | None:
        return self.expectations.get(broker, {}).get(case_id)

    def regression(self, broker: str, case_id: str) -> str:
        """ "" when the verdict matches the broker's expectations (or there are none);
        else what was expected ("expected FAILED (issue)")."""
        cell = self.cells.get((broker, case_id))
        expectation = self.expected(broker, case_id)
        if cell is None or broker not in self.expectations:
            return ""
        if expectation is None:
            return "not in the expectations file"
        if Verdict.parse(cell["verdict"]) in expectation.accepted:
            return ""
        issue = f" ({expectation.issue})" if expectation.issue else ""
        return f"expected {expectation.text}{issue}"

    def link(self, broker: str, path: str, out_dir: Path) -> str:
        return os.path.relpath(self.roots[broker] / path, out_dir)

    def cell_link(self, broker: str, case_id: str, out_dir: Path) -> str:
        """A cell's page when it has one, else its trace."""
        page = self.pages.get((broker, case_id))
        if page is not None:
            return os.path.relpath(page, out_dir)
        return self.link(broker, self.cells[(broker, case_id)]["trace"], out_dir)

    def failures(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(broker, case, cell) for every FAILED, ERROR, NON-STRICT and DIFFERS verdict,
        most severe first, then in section order."""
        found = [
            (broker, case_id, cell)
            for case_id in self.cases
            for broker in self.brokers
            if (cell := self.cells.get((broker, case_id))) and cell["verdict"] in SEVERITY
        ]
        return sorted(found, key=lambda f: SEVERITY.index(f[2]["verdict"]))

    def unsupported_split(self, broker: str) -> tuple[int, int]:
        """(profile opted out, broker lacks it) among the broker's UNSUPPORTED."""
        cells = [self.cells[(broker, c)] for c in self.cases if (broker, c) in self.cells]
        unsupported = [c for c in cells if c["verdict"] == "UNSUPPORTED"]
        opted = sum(1 for c in unsupported if is_opted_out(c))
        return opted, len(unsupported) - opted

    def checker_rows(self, broker: str) -> int:
        return sum(1 for c in self.cases if c.startswith(CHECKER) and (broker, c) in self.cells)

    def flaky(self, broker: str) -> list[str]:
        return [c for c in self.cases if is_flaky(self.cells.get((broker, c), {}))]

    def regressions(self, broker: str) -> list[str]:
        return [c for c in self.cases if self.regression(broker, c)]

    def summary_line(self, broker: str) -> str:
        totals = self.totals(broker)
        rows = self.checker_rows(broker)
        opted, lacks = self.unsupported_split(broker)
        product = self.runs[broker].product
        who = f"**{broker}**" + (f" ({product})" if product else "")
        parts = [
            f"{totals.get('FAILED', 0)} FAILED",
            f"{totals.get('ERROR', 0)} ERROR",
            f"{totals.get('NON-STRICT', 0)} NON-STRICT",
            f"{totals.get(DIFFERS, 0)} DIFFERS (model)",
            f"{totals.get('UNSUPPORTED', 0)} UNSUPPORTED ({opted} profile opted out, "
            f"{lacks} broker lacks it)",
            f"{totals.get('OK', 0)} OK",
        ]
        counted = sum(totals.values())
        tail = f" of {counted} ({rows} checker rows)"
        if broker in self.expectations:
            tail += f"; {len(self.regressions(broker))} differ from the expectations"
        tail += f"; {len(self.flaky(broker))} flaky"
        return f"{who}: " + ", ".join(parts) + tail


FAILURE_HEADINGS = {
    "FAILED": "FAILED: a MUST broken",
    "ERROR": "ERROR: the case could not be judged",
    "NON-STRICT": "NON-STRICT: a SHOULD not met",
    DIFFERS: "DIFFERS: a model's behaviour, not required by the spec",
}
