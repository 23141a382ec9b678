"""The reviewed ledger: why each non-OK verdict of a real broker is what it is.

    python -m amqpspec.conformance.ledger draft RESULTS_DIR BROKER [--ledger PATH]
    python -m amqpspec.conformance.ledger check [BROKER...]

Owns `conformance/expectations/ledger/<broker>.toml`: one table per non-OK verdict of the
broker's expectations file (`conformance/expectations/<broker>.toml`), with
- `verdict`: the verdict reviewed (the expectations file's);
- `sentence`: the manifest id the verdict rests on (a MUST-class sentence binding the broker
  in its role for FAILED, a SHOULD for NON-STRICT; for DIFFERS the model, `model:<name>`;
  none for UNSUPPORTED);
- `evidence`: what the broker did, the frame that shows it (from the run's reason);
- `rationale`: one line, written by the person who read the trace against the spec text;
- `reading` (optional): a DEBATABLE reading, both readings and the choice.
`draft` fills `sentence` and `evidence` from a run's index.json for the verdicts that have
no entry yet, and carries over what an entry already holds; it writes no rationale (that is
the review: a drafted entry has none until someone writes it), except for an UNSUPPORTED
case the profile opted out of, which did not run. `check` lists what
is missing or wrong; tests/test_ledger.py runs it on every real broker's ledger.
Touches only the ledger files it is asked to write.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

from amqpspec.amqp10.checker import RULES
from amqpspec.conformance.run.registry import (
    ALWAYS_BROKER,
    MUST_LEVELS,
    SHOULD_LEVELS,
    load_cases,
    manifest,
)
from amqpspec.conformance.run.results import load_expectations, load_index
from amqpspec.conformance.run.runner import ROW_PREFIX

EXPECTATIONS = Path(__file__).resolve().parents[1] / "expectations"
LEDGER_DIR = EXPECTATIONS / "ledger"
REVIEWED = ("FAILED", "NON-STRICT", "DIFFERS", "UNSUPPORTED", "ERROR")
FIELDS = ("verdict", "sentence", "evidence", "rationale", "reading")
SENTENCE_ID = re.compile(r"\b\d+(?:\.\d+)+/[A-Za-z0-9_.-]+\.\d+\b")
PROFILE_LACKS = re.compile(r"profile '([\w.-]+)' lacks (.+)$")
RULE_IN_REASON = re.compile(r"\[(?:MUST|SHOULD) [\d.]+ ([a-z0-9_.-]+)\]")


def ledger_path(broker: str) -> Path:
    return LEDGER_DIR / f"{broker}.toml"


def load_ledger(path: str | Path) -> dict[str, dict[str, str]]:
    """case id -> its entry (an empty dict for a file that does not exist yet)."""
    path = Path(path)
    if not path.exists():
        return {}
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    return {k: {f: str(v) for f, v in entry.items()} for k, entry in data.get("case", {}).items()}


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'"{escaped}"'


def format_ledger(broker: str, entries: dict[str, dict[str, str]]) -> str:
    lines = [
        f"# Reviewed ledger for {broker}: every non-OK verdict of",
        f"# conformance/expectations/{broker}.toml, read against the spec text",
        "# (conformance/audit/ledger.py says what each field holds; docs/conformance.md, Ledger).",
        f'broker = "{broker}"',
    ]
    for case_id in sorted(entries):
        lines.append("")
        lines.append(f"[case.{_toml_string(case_id)}]")
        for name in FIELDS:
            value = entries[case_id].get(name, "")
            if value:
                lines.append(f"{name} = {_toml_string(value)}")
    return "\n".join(lines) + "\n"


def sentence_of(case_id: str, verdict: str, reason: str, model: str | None) -> str:
    """The sentence (or model) a verdict rests on, read from its reason: the first
    manifest id of the right level the reason quotes, or a checker rule's."""
    if verdict == "DIFFERS":
        return f"model:{model}" if model else ""
    if verdict not in ("FAILED", "NON-STRICT"):
        return ""
    wanted = MUST_LEVELS if verdict == "FAILED" else SHOULD_LEVELS
    module = manifest()
    ids = list(dict.fromkeys(SENTENCE_ID.findall(reason)))
    match = RULE_IN_REASON.search(reason)
    if match and match.group(1) in RULES:
        ids = [*RULES[match.group(1)].sentences, *ids]
    if case_id.startswith(ROW_PREFIX):
        rule = RULES.get(case_id.rsplit("/", 1)[1])
        ids = [*(rule.sentences if rule else ()), *ids]
    for sentence_id in ids:
        try:
            if module is None or module.sentence(sentence_id).level in wanted:
                return sentence_id
        except KeyError:
            continue
    return ""


def evidence_of(reason: str) -> str:
    """What the broker did, from a reason: its offending frame, else its `observed` part."""
    if "offending frame: " in reason:
        frame = reason.split("offending frame: ", 1)[1]
        return frame.split("; case: ", 1)[0].split("; in ", 1)[0].strip()[:400]
    if "observed " in reason:
        return "observed " + reason.split("observed ", 1)[1].split(' ("', 1)[0].strip()[:400]
    return reason[:400]


def draft(results: str | Path, broker: str, path: Path) -> tuple[int, int]:
    """Fill the ledger at `path` from a run's index.json: an entry for each non-OK verdict
    of the expectations file, keeping what entries hold. Returns (entries, without
    rationale)."""
    index = load_index(results).get(broker, {})
    expected = load_expectations(EXPECTATIONS / f"{broker}.toml")
    models = {case.case_id: case.model for case in load_cases()}
    old = load_ledger(path)
    entries: dict[str, dict[str, str]] = {}
    for case_id, expectation in sorted(expected.items()):
        verdict = _graded(expectation.text)
        if verdict is None:
            continue
        entry = dict(old.get(case_id, {}))
        if entry.get("verdict") != expectation.text:  # a new or changed verdict: review again
            entry = {"verdict": expectation.text}
        reason = str(index.get(case_id, {}).get("reason", ""))
        if not entry.get("sentence"):
            base = case_id.removesuffix("/pipelined")
            found = sentence_of(case_id, verdict, reason, models.get(base))
            if found:
                entry["sentence"] = found
        if not entry.get("evidence") and reason:
            entry["evidence"] = evidence_of(reason)
        opted_out = PROFILE_LACKS.match(reason) if verdict == "UNSUPPORTED" else None
        if opted_out and not entry.get("rationale"):
            # not a reading of the broker's frames: the case did not run (the profile's
            # capabilities were reviewed when the profile was written)
            entry["rationale"] = (
                f"not run: conformance/profiles/{opted_out.group(1)}.toml declares the broker "
                f"without {opted_out.group(2)}"
            )
        entries[case_id] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_ledger(broker, entries), encoding="utf-8")
    return len(entries), sum(1 for e in entries.values() if not e.get("rationale"))


def _graded(text: str) -> str | None:
    """The verdict an expectation ("FAILED", "OK|FAILED") needs reviewed: its first one not
    OK (FAILED before the others), or None for an OK."""
    verdicts = text.split("|")
    for verdict in REVIEWED:
        if verdict in verdicts:
            return verdict
    return None


def problems(broker: str) -> list[str]:
    """What the broker's ledger lacks against its expectations file, one line each: a
    non-OK verdict with no entry, no rationale, no evidence, or a sentence that does not
    give its verdict (a FAILED resting on no MUST binding the broker, a NON-STRICT on no
    SHOULD); an entry whose verdict is no longer the expected one."""
    expected = load_expectations(EXPECTATIONS / f"{broker}.toml")
    ledger = load_ledger(ledger_path(broker))
    cases = {case.case_id: case for case in load_cases()}
    module = manifest()
    found = []
    for case_id, expectation in sorted(expected.items()):
        verdict = _graded(expectation.text)
        entry = ledger.get(case_id)
        if verdict is None:
            if entry is not None:
                found.append(f"{broker} {case_id}: ledger entry for a {expectation.text} verdict")
            continue
        if entry is None:
            found.append(f"{broker} {case_id}: {verdict} with no ledger entry")
            continue
        if entry.get("verdict") != expectation.text:
            found.append(
                f"{broker} {case_id}: reviewed as {entry.get('verdict')}, now {expectation.text}"
            )
        if not entry.get("rationale"):
            found.append(f"{broker} {case_id}: {verdict} with no rationale")
        if verdict == "UNSUPPORTED":
            continue
        if not entry.get("evidence"):
            found.append(f"{broker} {case_id}: {verdict} with no evidence")
        sentence_id = entry.get("sentence", "")
        if verdict == "DIFFERS":
            if not sentence_id.startswith("model:"):
                found.append(f"{broker} {case_id}: DIFFERS names no model")
            continue
        if verdict not in ("FAILED", "NON-STRICT") or module is None:
            continue
        try:
            sentence = module.sentence(sentence_id)
        except KeyError:
            found.append(f"{broker} {case_id}: sentence {sentence_id!r} not in the manifest")
            continue
        case = cases.get(case_id)
        roles = case.roles if case is not None else ALWAYS_BROKER | {"sender", "receiver"}
        wanted = MUST_LEVELS if verdict == "FAILED" else SHOULD_LEVELS
        if sentence.level not in wanted or sentence.binds not in roles:
            found.append(
                f"{broker} {case_id}: {verdict} rests on {sentence_id} ({sentence.level}, "
                f"binds {sentence.binds}), which does not give it for the broker as "
                f"{', '.join(sorted(roles))}"
            )
    for case_id in sorted(set(ledger) - set(expected)):
        found.append(f"{broker} {case_id}: ledger entry for a case not in the expectations")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m amqpspec.conformance.ledger")
    sub = parser.add_subparsers(dest="command", required=True)
    drafting = sub.add_parser("draft", help="fill sentence and evidence from a run")
    drafting.add_argument("results")
    drafting.add_argument("broker")
    drafting.add_argument("--ledger", help="default conformance/expectations/ledger/BROKER.toml")
    checking = sub.add_parser("check", help="list what the ledgers lack")
    checking.add_argument("brokers", nargs="*")
    args = parser.parse_args(argv)
    if args.command == "draft":
        path = Path(args.ledger) if args.ledger else ledger_path(args.broker)
        if not (Path(args.results) / "index.json").exists():
            print(f"no index.json in {args.results}", file=sys.stderr)
            return 2
        total, open_ = draft(args.results, args.broker, path)
        print(f"{path}: {total} entries, {open_} without a rationale")
        return 0
    brokers = args.brokers or sorted(p.stem for p in LEDGER_DIR.glob("*.toml"))
    found = [line for broker in brokers for line in problems(broker)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
