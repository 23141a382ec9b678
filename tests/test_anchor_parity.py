"""Anchor-suite parity (conformance/audit/anchor_parity.py): the data file cites only case ids
of the registry, every row not covered says why, Broker-J's 166 broker tests are all there, and
docs/anchor-parity.md is what the data renders to; and each of these checks can fail."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from amqpspec.conformance.audit import anchor_parity
from amqpspec.conformance.audit.anchor_parity import Row

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "anchor-parity.md"


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return anchor_parity.load()


@pytest.fixture(scope="module")
def case_ids() -> set[str]:
    return anchor_parity.registry_ids()


def test_the_data_has_no_problems(rows: list[Row], case_ids: set[str]) -> None:
    assert anchor_parity.problems(rows, case_ids) == []


def test_broker_j_has_its_166_broker_tests(rows: list[Row]) -> None:
    broker_j = [row for row in rows if row.suite == "broker-j"]
    assert len(broker_j) == anchor_parity.BROKER_J_TESTS == 166
    assert all(row.cases or row.reason for row in broker_j)


def test_the_page_is_current(rows: list[Row]) -> None:
    """Regenerate with `python -m amqpspec.conformance.anchor_parity` when this fails."""
    assert DOC.read_text(encoding="utf-8") == anchor_parity.render(rows)


def _one(**change: object) -> list[Row]:
    row = Row("broker-j", "area", "T.t", "covered", ("2.2/header-amqp-answered",), "")
    return [dataclasses.replace(row, **change)]


def _problems(rows: list[Row], case_ids: set[str]) -> list[str]:
    """The problems of `rows` other than the suite counts (a one-row list is never 166)."""
    return [p for p in anchor_parity.problems(rows, case_ids) if " rows, expected " not in p]


def test_a_case_id_that_left_the_registry_is_a_problem(case_ids: set[str]) -> None:
    assert _problems(_one(), case_ids) == []
    found = _problems(_one(cases=("2.2/no-such-case",)), case_ids)
    assert found == ["broker-j T.t: case '2.2/no-such-case' is not in the registry"]


def test_a_row_without_case_or_reason_is_a_problem(case_ids: set[str]) -> None:
    for status in ("partly", "missing", "not-applicable"):
        assert _problems(_one(status=status, cases=()), case_ids)
    assert _problems(_one(status="covered", cases=()), case_ids) == [
        "broker-j T.t: covered but no amqpspec case named"
    ]
    assert _problems(_one(status="missing", cases=(), reason="not built"), case_ids) == []


def test_a_wrong_broker_j_count_is_a_problem(rows: list[Row], case_ids: set[str]) -> None:
    assert "broker-j: 165 rows, expected 166" in anchor_parity.problems(rows[1:], case_ids)
    doubled = [*rows, rows[0]]
    assert any("listed 2 times" in p for p in anchor_parity.problems(doubled, case_ids))


def test_a_stale_page_fails_the_check(tmp_path: Path, rows: list[Row]) -> None:
    page = tmp_path / "anchor-parity.md"
    page.write_text(anchor_parity.render(rows[:-1]), encoding="utf-8")
    assert anchor_parity.main(["--check", "--out", str(page)]) == 1
    page.write_text(anchor_parity.render(rows), encoding="utf-8")
    assert anchor_parity.main(["--check", "--out", str(page)]) == 0
