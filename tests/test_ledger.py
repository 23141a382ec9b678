"""The reviewed ledger (conformance/audit/ledger.py): every non-OK verdict of each real broker's
expectations file has its entry, with the sentence that gives the verdict, the evidence and
a rationale; and the ledger's checks can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqpspec.conformance.audit import ledger
from amqpspec.conformance.run.results import format_expectations

REAL_BROKERS = ("rabbitmq3", "proton-example", "proton-python")


@pytest.mark.parametrize("broker", REAL_BROKERS)
def test_every_non_ok_verdict_is_reviewed(broker: str) -> None:
    assert ledger.problems(broker) == []


def test_the_reference_broker_needs_no_ledger() -> None:
    """Its expectations are all OK: nothing to review (a non-OK verdict there is a bug)."""
    assert ledger.problems("reference") == []


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    expectations = tmp_path / "expectations"
    (expectations / "ledger").mkdir(parents=True)
    monkeypatch.setattr(ledger, "EXPECTATIONS", expectations)
    monkeypatch.setattr(ledger, "LEDGER_DIR", expectations / "ledger")
    return expectations


def _write(scratch: Path, verdicts: dict[str, str], entries: dict[str, dict[str, str]]) -> None:
    (scratch / "b.toml").write_text(format_expectations("b", verdicts))
    (scratch / "ledger" / "b.toml").write_text(ledger.format_ledger("b", entries))


def test_a_failed_must_rest_on_a_must_binding_the_broker(scratch: Path) -> None:
    case = "2.6.7/credit-regrant-in-flight"
    entry = {"verdict": "FAILED", "evidence": "transfer #9", "rationale": "read"}
    # 2.7.4/flow.delivery-count.3 is a MUST; 2.3.2/amqp-frames.1 binds the probe's side
    _write(scratch, {case: "FAILED"}, {case: {**entry, "sentence": "2.6.7/flow-control.12"}})
    assert ledger.problems("b") == []
    _write(scratch, {case: "FAILED"}, {case: {**entry, "sentence": "3.2.1/header.ttl.2"}})
    assert "does not give it" in ledger.problems("b")[0]
    _write(scratch, {case: "FAILED"}, {case: {**entry, "sentence": "9.9/nothing.1"}})
    assert "not in the manifest" in ledger.problems("b")[0]


def test_missing_entries_rationale_and_stale_verdicts_are_listed(scratch: Path) -> None:
    _write(
        scratch,
        {"2.2/a": "FAILED", "2.2/b": "NON-STRICT", "2.2/c": "OK", "2.2/d": "DIFFERS"},
        {
            "2.2/b": {"verdict": "FAILED", "sentence": "x", "evidence": "e", "rationale": "r"},
            "2.2/c": {"verdict": "FAILED", "rationale": "r"},
            "2.2/d": {"verdict": "DIFFERS", "evidence": "e"},
        },
    )
    found = "\n".join(ledger.problems("b"))
    assert "2.2/a: FAILED with no ledger entry" in found
    assert "2.2/b: reviewed as FAILED, now NON-STRICT" in found
    assert "2.2/c: ledger entry for a OK verdict" in found
    assert "2.2/d: DIFFERS with no rationale" in found and "2.2/d: DIFFERS names no model" in found


def test_draft_fills_sentence_and_evidence_but_no_rationale(scratch: Path, tmp_path: Path) -> None:
    import json

    results = tmp_path / "r"
    results.mkdir()
    reason = (
        "checker: [MUST 2.7.4 link.flow.receiver-delivery-count-missing] frame 13 (server): "
        "flow without delivery-count | offending frame: [conn 1] #13 0 <- @flow(19) [handle=0]"
        "; in 3 finding(s) over 2 case(s): a, b"
    )
    row = "checker/2.7.4/link.flow.receiver-delivery-count-missing"
    index = {
        "b": {
            row: {"verdict": "FAILED", "reason": reason},
            "2.2/u": {"verdict": "UNSUPPORTED", "reason": "profile 'b' lacks queues"},
        }
    }
    (results / "index.json").write_text(json.dumps(index))
    (scratch / "b.toml").write_text(
        format_expectations("b", {row: "FAILED", "2.2/u": "UNSUPPORTED"})
    )
    total, open_ = ledger.draft(results, "b", scratch / "ledger" / "b.toml")
    assert (total, open_) == (2, 1)
    entries = ledger.load_ledger(scratch / "ledger" / "b.toml")
    assert entries[row]["sentence"] == "2.7.4/flow.delivery-count.3"
    assert entries[row]["evidence"] == "[conn 1] #13 0 <- @flow(19) [handle=0]"
    assert "rationale" not in entries[row]
    assert "without queues" in entries["2.2/u"]["rationale"]
