"""Spec coverage of a conformance run (docs/conformance.md "Spec coverage"), measured from what the
run recorded:

- fields: every field of open, begin, attach, flow, transfer, disposition, detach, end and
  close (the spec table), and whether some case's probe sent it with a value other than
  its default (absent or the spec default does not count);
- error conditions: every condition of amqp-error, connection-error, session-error and
  link-error, and whether the broker sent it (close, end, detach, or a rejected outcome)
  in some case;
- transitions: every (state, input) pair of the engine's connection, session, link and SASL
  tables, and whether some case's probe engine applied it
  (`DIR/coverage/<broker>.transitions.json`, written by the run);
- checker rules: every rule of the catalog, and whether some case's frames (from either
  peer: negative cases break rules on purpose) made it fire;
- the normative manifest (conformance/manifest/report.py): every normative sentence of the
  spec, per part and section, tested by a case, by a checker rule, untestable, or not yet;
  the reports lead with it (which sentences are tested), the other measures follow.

Owns `measure(results_dir, broker) -> Coverage` and the Markdown / HTML renderings.
Reads the results directory (index.json, pcaps through `traces.load`, the transitions
file); writes nothing itself (`coverage_cli` writes the reports).
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amqpspec.amqp10.checker import RULES
from amqpspec.amqp10.engine.transitions import TABLES
from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.spec import COMPOSITES, RESTRICTED, default_value
from amqpspec.conformance.manifest.report import (
    ManifestCoverage,
    measure_manifest,
    render_manifest_html,
    render_manifest_markdown,
)
from amqpspec.conformance.run.results import TRANSITIONS_DIR, case_file_stem, load_index
from amqpspec.traces.check import check_trace
from amqpspec.traces.load import open_trace

PERFORMATIVES = (
    "open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close",
)  # fmt: skip
CONDITION_TYPES = ("amqp-error", "connection-error", "session-error", "link-error")
# what no case can cover from a client, and why: listed in the report apart from the gaps
# (a field only the broker's side sets, an error condition no client input provokes)
NO_CLIENT_CAN: dict[str, str] = {
    "begin.remote-channel": "set only when answering a begin the broker initiated; "
    "brokers do not begin sessions",
    "amqp:internal-error": "a broker sends it when it fails inside; no conformant input "
    "should provoke it (the fuzzer hunts for inputs that do)",
    "amqp:connection:redirect": "sent by a broker configured to move its clients to another "
    "host; no client input asks for it",
    "amqp:link:redirect": "sent by a broker configured to move a node elsewhere; no client "
    "input asks for it",
    "amqp:link:detach-forced": "an operator detaching a link; no client input or admin "
    "operation of the profiles does",
    "amqp:session:errant-link": "frames on a link the broker detached with an error: it "
    "cannot tell those sent after its detach arrived from those in flight before it (2.6.6), "
    "so brokers (the reference broker too) drop them instead of ending the session over a "
    "race",
}


@dataclass
class Category:
    """One kind of thing to cover: each item -> the cases that covered it (empty: none)."""

    title: str
    items: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # item -> why no case can

    @property
    def covered(self) -> int:
        return sum(1 for cases in self.items.values() if cases)

    def uncovered(self) -> list[str]:
        """Items no case covered, whether or not a client could (see `gaps`)."""
        return [item for item, cases in self.items.items() if not cases]

    def gaps(self) -> list[str]:
        """Items no case covered that a case could (no reason in `notes` says otherwise)."""
        return [item for item in self.uncovered() if item not in self.notes]

    def beyond_clients(self) -> list[str]:
        """Items no case covered because no client can (their reason in `notes`)."""
        return [item for item in self.uncovered() if item in self.notes]


@dataclass
class Coverage:
    broker: str
    cases: int
    categories: list[Category]
    manifest: ManifestCoverage | None = None  # the spec's normative sentences (static)


def measure(results: str | Path, broker: str | None = None) -> Coverage:
    """The coverage of one broker's run in `results` (the only broker, or `broker`)."""
    root = Path(results)
    index = load_index(root)
    if broker is None:
        if len(index) != 1:
            raise ValueError(f"{root}: brokers {', '.join(sorted(index))}: name one")
        broker = next(iter(index))
    entries = index[broker]
    fields = Category("Performative fields sent with a non-default value")
    for name in PERFORMATIVES:
        for spec_field in COMPOSITES[name].fields:
            key = f"{name}.{spec_field.name}"
            fields.items[key] = []
    conditions = Category("Error conditions the broker sent")
    for type_name in CONDITION_TYPES:
        for _, value in RESTRICTED[type_name].choices:
            conditions.items[value] = []
    rules = Category("Checker rules that fired (either peer)")
    rules.items = {rule_id: [] for rule_id in RULES}
    for case_id, entry in sorted(entries.items()):
        pcap = entry.get("pcap")
        if pcap and (root / pcap).exists():
            _read_case(case_id, root / pcap, fields, conditions, rules)
    for category in (fields, conditions):
        category.notes.update({k: why for k, why in NO_CLIENT_CAN.items() if k in category.items})
    transitions = _transitions(root, broker)
    categories = [fields, conditions, transitions, rules]
    return Coverage(broker, len(entries), categories, measure_manifest())


def _read_case(
    case_id: str, pcap: Path, fields: Category, conditions: Category, rules: Category
) -> None:
    items = list(open_trace(str(pcap)))
    for trace_item in items:
        frame = trace_item.item
        if not isinstance(frame, Frame) or frame.performative is None:
            continue
        name = frame.name
        performative = frame.performative
        if trace_item.direction == CLIENT and name in PERFORMATIVES:
            for spec_field in COMPOSITES[name].fields:
                value = getattr(performative, spec_field.attr, None)
                if value is not None and value != default_value(spec_field):
                    _add(fields.items, f"{name}.{spec_field.name}", case_id)
        elif trace_item.direction == SERVER:
            for condition in _conditions_of(performative):
                if condition in conditions.items:
                    _add(conditions.items, condition, case_id)
    for finding in check_trace(items):
        if finding.violation is not None and finding.violation.rule_id in rules.items:
            _add(rules.items, finding.violation.rule_id, case_id)


def _conditions_of(performative: Any) -> list[str]:
    """Error conditions a broker frame carries: its error, or a rejected outcome's."""
    found = []
    error = getattr(performative, "error", None)
    if error is not None and getattr(error, "condition", None) is not None:
        found.append(str(error.condition))
    state = getattr(performative, "state", None)
    error = getattr(state, "error", None)
    if error is not None and getattr(error, "condition", None) is not None:
        found.append(str(error.condition))
    return found


def _add(items: dict[str, list[str]], key: str, case_id: str) -> None:
    cases = items[key]
    if case_id not in cases:
        cases.append(case_id)


def _transitions(root: Path, broker: str) -> Category:
    category = Category("Engine transitions the probe reached (state, input)")
    for kind, _, _, table, _ in TABLES:
        for state, inp in table:
            category.items[f"{kind}:{state.value}:{inp.value}"] = []
    path = root / TRANSITIONS_DIR / f"{case_file_stem(broker)}.transitions.json"
    used: dict[str, list[str]] = json.loads(path.read_text()) if path.exists() else {}
    for case_id, pairs in sorted(used.items()):
        for pair in pairs:
            if pair in category.items:
                _add(category.items, pair, case_id)
    if not used:
        category.notes["*"] = f"no {path.name}: the run recorded no transitions"
    return category


# --- rendering -------------------------------------------------------------------------


def _percent(category: Category) -> str:
    total = len(category.items)
    return f"{category.covered}/{total} ({100 * category.covered / max(total, 1):.0f}%)"


def _beyond(category: Category) -> str:
    return str(len(category.beyond_clients()))


def render_markdown(coverage: Coverage) -> str:
    lines = [
        f"# Spec coverage: {coverage.broker}",
        "",
        f"Generated by `amqpspec coverage` from a run of {coverage.cases} cases.",
        "",
        "| what | covered | no client can (reason below) |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {c.title} | {_percent(c)} | {_beyond(c)} |" for c in coverage.categories]
    if coverage.manifest is not None:  # which sentences of the spec are tested: first
        lines += ["", render_manifest_markdown(coverage.manifest, heading="##").rstrip("\n")]
        lines += ["", "## Fields, error conditions, transitions and rules"]
    for category in coverage.categories:
        lines += ["", f"## {category.title}: {_percent(category)}", ""]
        if "*" in category.notes:
            lines += [category.notes["*"], ""]
        missing = category.gaps()
        lines.append(f"Not covered ({len(missing)}):" if missing else "No gap a case could close.")
        lines += [""] + [f"- `{item}`" for item in missing]
        beyond = category.beyond_clients()
        if beyond:
            lines += ["", f"No client can cover ({len(beyond)}):", "", "| item | why |"]
            lines += ["| --- | --- |"] + [f"| `{i}` | {category.notes[i]} |" for i in beyond]
        lines += ["", "<details><summary>Covered, with the first case</summary>", ""]
        lines += [
            f"- `{item}`: `{cases[0]}`" + (f" (+{len(cases) - 1})" if len(cases) > 1 else "")
            for item, cases in category.items.items()
            if cases
        ]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def render_html(coverage: Coverage) -> str:
    esc = html.escape
    parts = [
        "<!doctype html><meta charset='utf-8'>",
        f"<title>Spec coverage: {esc(coverage.broker)}</title>",
        "<style>body{font-family:sans-serif}td{padding:2px 8px}.no{color:#b00}"
        ".yes{color:#070}</style>",
        f"<h1>Spec coverage: {esc(coverage.broker)}</h1>",
        f"<p>From a run of {coverage.cases} cases.</p>",
    ]
    if coverage.manifest is not None:  # which sentences of the spec are tested: first
        parts.append(render_manifest_html(coverage.manifest).rstrip("\n"))
    for category in coverage.categories:
        parts.append(f"<h2>{esc(category.title)}: {_percent(category)}</h2><table>")
        by_state: dict[bool, list[str]] = defaultdict(list)
        for item, cases in category.items.items():
            covered = bool(cases)
            why = category.notes.get(item)
            detail = esc(cases[0] if cases else f"no client can: {why}" if why else "no case")
            css = "yes" if covered else "no"
            by_state[covered].append(
                f"<tr class='{css}'><td><code>{esc(item)}</code></td><td>{detail}</td></tr>"
            )
        parts += by_state[False] + by_state[True] + ["</table>"]
    return "\n".join(parts) + "\n"
