"""Anchor-suite parity: the two strongest upstream AMQP 1.0 test suites, test by test, against
the amqpspec conformance cases.

Owns `conformance/anchor_parity.toml` (one `[[test]]` per upstream test: Qpid Broker-J's 166
broker tests of systests/protocol-tests-amqp-1-0 and RabbitMQ's 162 amqp_client_SUITE cases;
its header says what each field holds), the checks on it (`problems`: every cited case id is
a current id of the registry, every row not covered says why, a covered or partly row names
its cases, 166 Broker-J rows) and `docs/anchor-parity.md`, which `render` writes from it.
`python -m amqpspec.conformance.anchor_parity` rewrites the doc; `--check` writes nothing and
exits 1 when the doc is stale or the data has a problem (tests/test_anchor_parity.py runs
both checks). The verdict rules (covered, partly, missing, not-applicable) are the data
file's header. Touches nothing else.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "anchor_parity.toml"
DOC = Path("docs/anchor-parity.md")
SUITES = {"broker-j": "Qpid Broker-J protocol tests", "rabbitmq": "RabbitMQ amqp_client_SUITE"}
STATUSES = ("covered", "partly", "missing", "not-applicable")
FLAGS = ("disabled", "broker-j-specific", "parameterized")
FLAG_LETTERS = {"disabled": "D", "broker-j-specific": "J", "parameterized": "P"}  # in the doc
# systests/protocol-tests-amqp-1-0 @ 1df338ce: 172 @Test + 1 @ParameterizedTest, less the 7
# self-tests of its own admin harness (ExistingQueueAdminTest)
BROKER_J_TESTS = 166
PENDING = "not yet built"  # in a missing row's reason: an area another change is adding
RABBITMQ_TESTS = 162  # amqp_client_SUITE.erl @ 5b09e556: all three CT groups


@dataclass(frozen=True, slots=True)
class Row:
    suite: str
    area: str
    name: str
    status: str
    cases: tuple[str, ...]
    reason: str
    section: str = ""
    flags: tuple[str, ...] = ()
    group: str = ""


def load(path: Path = DATA) -> list[Row]:
    """The rows of the data file, in its order; ValueError on a malformed entry."""
    with path.open("rb") as handle:
        entries = tomllib.load(handle).get("test", [])
    rows = []
    for number, entry in enumerate(entries, 1):
        where = f"{path.name} entry {number} ({entry.get('name', '?')})"
        if entry.get("suite") not in SUITES:
            raise ValueError(f"{where}: suite must be one of {sorted(SUITES)}")
        if entry.get("status") not in STATUSES:
            raise ValueError(f"{where}: status must be one of {STATUSES}")
        flags = tuple(entry.get("flags", ()))
        if not set(flags) <= set(FLAGS):
            raise ValueError(f"{where}: unknown flags {sorted(set(flags) - set(FLAGS))}")
        rows.append(
            Row(
                suite=entry["suite"],
                area=str(entry["area"]),
                name=str(entry["name"]),
                status=entry["status"],
                cases=tuple(entry.get("cases", ())),
                reason=str(entry.get("reason", "")).strip(),
                section=str(entry.get("section", "")),
                flags=flags,
                group=str(entry.get("group", "")),
            )
        )
    return rows


def problems(rows: Iterable[Row], case_ids: set[str]) -> list[str]:
    """What is wrong with the rows against the registry's case ids (empty: nothing)."""
    rows = list(rows)
    found = []
    seen: Counter[tuple[str, str]] = Counter((row.suite, row.name) for row in rows)
    found += [f"{suite} {name}: listed {n} times" for (suite, name), n in seen.items() if n > 1]
    for row in rows:
        label = f"{row.suite} {row.name}"
        for case_id in row.cases:
            if case_id not in case_ids:
                found.append(f"{label}: case {case_id!r} is not in the registry")
        if row.status in ("covered", "partly") and not row.cases:
            found.append(f"{label}: {row.status} but no amqpspec case named")
        if row.status != "covered" and not row.reason:
            found.append(f"{label}: {row.status} without a reason")
    per_suite = Counter(row.suite for row in rows)
    for suite, expected in (("broker-j", BROKER_J_TESTS), ("rabbitmq", RABBITMQ_TESTS)):
        if per_suite[suite] != expected:
            found.append(f"{suite}: {per_suite[suite]} rows, expected {expected}")
    return found


def counts(rows: Iterable[Row]) -> Counter[str]:
    return Counter(row.status for row in rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cases(row: Row) -> str:
    return ", ".join(f"`{case_id}`" for case_id in row.cases) or "—"


def _summary(rows: list[Row]) -> list[str]:
    lines = [
        "| Suite | tests | covered | partly | missing (with reason) | not applicable |",
        "|---|---|---|---|---|---|",
    ]
    for suite, title in SUITES.items():
        mine = [row for row in rows if row.suite == suite]
        n = counts(mine)
        lines.append(
            f"| {title} | {len(mine)} | {n['covered']} | {n['partly']} | {n['missing']} | "
            f"{n['not-applicable']} |"
        )
    return lines


def _by_area(rows: list[Row]) -> list[str]:
    lines = [
        "| Area | tests | covered | partly | missing | not applicable |",
        "|---|---|---|---|---|---|",
    ]
    for area in dict.fromkeys(row.area for row in rows):
        n = counts(row for row in rows if row.area == area)
        lines.append(
            f"| {area} | {n.total()} | {n['covered']} | {n['partly']} | {n['missing']} | "
            f"{n['not-applicable']} |"
        )
    return lines


def _area_heading(area: str, rows: list[Row]) -> str:
    n = counts(rows)
    parts = [f"{n[status]} {status}" for status in STATUSES if n[status]]
    return f"### {area} ({len(rows)}: {', '.join(parts)})"


def render(rows: list[Row]) -> str:
    """docs/anchor-parity.md for the rows."""
    broker_j = [row for row in rows if row.suite == "broker-j"]
    unexplained = [row for row in broker_j if not row.cases and not row.reason]
    pending = sum(row.status == "missing" and PENDING in row.reason for row in rows)
    lines = [
        "# Anchor-suite parity: Qpid Broker-J and RabbitMQ tests vs amqpspec cases",
        "",
        "<!-- Generated by `python -m amqpspec.conformance.anchor_parity` from",
        "conformance/anchor_parity.toml: edit the data, then regenerate. -->",
        "",
        "Each broker test of Qpid Broker-J's AMQP 1.0 protocol suite (apache/qpid-broker-j @",
        "`1df338ce`, systests/protocol-tests-amqp-1-0: 172 `@Test` and one `@ParameterizedTest`,",
        "less the 7 self-tests of its admin harness) and each case of RabbitMQ's",
        "amqp_client_SUITE (rabbitmq/rabbitmq-server @ `5b09e556`), mapped to the amqpspec",
        "conformance cases that cover it, or the reason none does. tests/test_anchor_parity.py",
        "fails when a case id cited here leaves the registry, when a row has neither a case nor",
        "a reason, or when this page is stale.",
        "",
        "Status: **covered**, an amqpspec case provokes the same broker behaviour and grades the",
        "same outcome (differences of values in the reason); **partly**, a case grades part of it",
        "(the reason says what is not); **missing**, no case (the reason says why: an area not",
        "built yet, or a trigger no case sends); **not applicable**, no AMQP 1.0 conformance",
        "claim: a RabbitMQ-only feature, or a RabbitMQ test that is not black-box on the wire",
        "(rpc into the node, node stops, rabbitmqctl, AMQP 0.9.1 interop, metrics).",
        "Flags (Broker-J): D = `@Disabled`/`@Ignore` upstream, J = `@BrokerSpecific`",
        "(Broker-J), P = parameterized.",
        "",
        *_summary(rows),
        "",
        f"Broker-J rows without a counterpart or a reason: **{len(unexplained)}**. Of the "
        f"missing rows, {pending} are in areas being built now (reason: not yet built).",
        "",
        "Broker-J by area:",
        "",
        *_by_area(broker_j),
        "",
        "RabbitMQ by area:",
        "",
        *_by_area([row for row in rows if row.suite == "rabbitmq"]),
        "",
        f"## {SUITES['broker-j']}",
        "",
    ]
    lines += _broker_j_tables(broker_j)
    lines += _rabbitmq_tables([row for row in rows if row.suite == "rabbitmq"])
    return "\n".join(lines).rstrip("\n") + "\n"


def _broker_j_tables(broker_j: list[Row]) -> list[str]:
    """The Broker-J rows of docs/anchor-parity.md: a table per area (its heading is the
    section's, written by `render`)."""
    columns = ("Test", "§", "Flags", "Status", "amqpspec case(s)", "Reason")
    return _area_tables(broker_j, columns, _broker_j_cells)


def _broker_j_cells(row: Row) -> list[str]:
    flags = " ".join(FLAG_LETTERS[flag] for flag in row.flags)
    return [f"`{row.name}`", _cell(row.section), flags, row.status, _cases(row), _cell(row.reason)]


def _rabbitmq_tables(rabbitmq: list[Row]) -> list[str]:
    """The RabbitMQ section of docs/anchor-parity.md: its heading, a table per area."""
    columns = ("Test", "Group", "Status", "amqpspec case(s)", "Reason")
    return [f"## {SUITES['rabbitmq']}", "", *_area_tables(rabbitmq, columns, _rabbitmq_cells)]


def _rabbitmq_cells(row: Row) -> list[str]:
    return [f"`{row.name}`", row.group, row.status, _cases(row), _cell(row.reason)]


def _area_tables(
    rows: list[Row], columns: tuple[str, ...], cells: Callable[[Row], list[str]]
) -> list[str]:
    """A Markdown table per area of `rows` (in their order): its heading, then `columns`,
    then a line of `cells` per row."""
    lines: list[str] = []
    for area in dict.fromkeys(row.area for row in rows):
        mine = [row for row in rows if row.area == area]
        lines += [_area_heading(area, mine), "", _table_line(columns), "|" + "---|" * len(columns)]
        lines += [_table_line(cells(row)) for row in mine]
        lines.append("")
    return lines


def _table_line(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def registry_ids() -> set[str]:
    from amqpspec.conformance.run.registry import load_cases

    return {case.case_id for case in load_cases()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amqpspec.conformance.anchor_parity",
        description="Write docs/anchor-parity.md from conformance/anchor_parity.toml.",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="the parity data file")
    parser.add_argument("--out", type=Path, default=DOC, help="the page (docs/anchor-parity.md)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing: exit 1 if the page is stale or the data has a problem",
    )
    args = parser.parse_args(argv)
    rows = load(args.data)
    found = problems(rows, registry_ids())
    for problem in found:
        print(f"anchor parity: {problem}", file=sys.stderr)
    text = render(rows)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"anchor parity: {args.out} is stale: regenerate it", file=sys.stderr)
            return 1
        return 1 if found else 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: " + ", ".join(f"{n} {s}" for s, n in counts(rows).items()))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
