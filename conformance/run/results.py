"""Result files of a conformance run, and expectations files.

Owns: the results directory layout (`DIR/index.json` autobahn-style
`{broker: {case_id: {verdict, duration, trace, pcap, reason, level}}}`, merged across runs
so several brokers share one DIR; `DIR/traces/<broker>/<case>.txt|.pcap`;
`DIR/coverage/<broker>.transitions.json`: the (machine, state, input) pairs of the engine's
tables each case's probes used; `DIR/runs/<broker>.json`: the run's header, a
`run_info.RunInfo`, and in each index.json entry the added fields `broker_product` and
`broker_version`, as the broker's open announced them, and `transport` = "websocket" in a
run over ws:// or wss:// (none over TCP); index.json keeps its shape, a
broker per top-level key), writing a
case's trace as text and pcap (`traces.pcap_writer.PcapWriter`), and expectations files
(`conformance/expectations/<broker>.toml`: one line per case with its verdict and, for
failures, the upstream issue) with their comparison. Old, renamed case ids in an
index.json or an expectations file load under their current ids (conformance/aliases.toml).
Touches only files under DIR and the expectations file it is asked to write.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amqpspec.amqp10.origins import CLIENT
from amqpspec.conformance.probe import Recording
from amqpspec.conformance.run.context import CaseResult
from amqpspec.conformance.run.registry import by_current_id
from amqpspec.conformance.verdicts import Verdict
from amqpspec.traces.pcap_writer import PcapWriter

INDEX = "index.json"
RUNS_DIR = "runs"  # DIR/runs/<broker>.json: the run header (run_info.RunInfo)
TRANSITIONS_DIR = "coverage"  # DIR/coverage/<broker>.transitions.json: case -> pairs used


def case_file_stem(case_id: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in case_id)


def write_pcap(recordings: list[Recording], path: Path) -> None:
    """Every connection of a case as one TCP flow each, bytes as they crossed the socket."""
    with PcapWriter(str(path)) as writer:
        for recording in recordings:
            writer.open_connection(
                recording.connection_id, recording.client, recording.server, recording.start
            )
            last = recording.start
            for chunk in recording.chunks:
                writer.data(recording.connection_id, chunk.direction, chunk.data, chunk.time)
                last = chunk.time
            writer.close_connection(recording.connection_id, recording.end or last, CLIENT)


class ResultsDir:
    """One broker's results in DIR (other brokers' entries in index.json are kept)."""

    def __init__(self, root: str | Path, broker: str) -> None:
        self.root = Path(root)
        self.broker = broker
        self.trace_dir = self.root / "traces" / case_file_stem(broker)
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        self.entries: dict[str, dict[str, Any]] = {}
        # case id -> "machine:state:input" of the probe engine's tables its connections used
        self.transitions: dict[str, list[str]] = {}
        self.run_info: dict[str, Any] | None = None  # DIR/runs/<broker>.json (run_info)

    def add(self, result: CaseResult) -> dict[str, Any]:
        stem = case_file_stem(result.case_id)
        text_path = self.trace_dir / f"{stem}.txt"
        text_path.write_text(result.trace_text, encoding="utf-8")
        entry: dict[str, Any] = {
            "verdict": result.verdict.value,
            "level": result.level,
            "duration": round(result.duration, 4),
            "trace": os.path.relpath(text_path, self.root),
            "reason": result.reason,
        }
        if result.recordings:
            pcap_path = self.trace_dir / f"{stem}.pcap"
            write_pcap(result.recordings, pcap_path)
            entry["pcap"] = os.path.relpath(pcap_path, self.root)
        self.entries[result.case_id] = entry
        used = set().union(*(r.transitions for r in result.recordings))
        self.transitions[result.case_id] = sorted(":".join(t) for t in used)
        return entry

    def write_index(self) -> Path:
        path = self.root / INDEX
        index: dict[str, Any] = load_index(path) if path.exists() else {}
        identity = (self.run_info or {}).get("identity", {})
        for entry in self.entries.values():  # what the broker's open said it is
            for field_name, key in (("broker_product", "product"), ("broker_version", "version")):
                if identity.get(key):
                    entry[field_name] = identity[key]
            if (self.run_info or {}).get("transport") == "websocket":  # ws_bridge.py
                entry["transport"] = "websocket"
        index[self.broker] = dict(sorted(self.entries.items()))
        if self.run_info is not None:
            runs = self.root / RUNS_DIR
            runs.mkdir(exist_ok=True)
            header = runs / f"{case_file_stem(self.broker)}.json"
            header.write_text(json.dumps(self.run_info, indent=1, sort_keys=True), "utf-8")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
        used = self.root / TRANSITIONS_DIR / f"{case_file_stem(self.broker)}.transitions.json"
        used.parent.mkdir(exist_ok=True)
        used.write_text(json.dumps(self.transitions, indent=1, sort_keys=True), encoding="utf-8")
        return path


def load_index(path: str | Path) -> dict[str, dict[str, dict[str, Any]]]:
    """A results DIR's index.json (or the file itself), case ids renamed since it was written
    under their current ids."""
    path = Path(path)
    if path.is_dir():
        path = path / INDEX
    index = json.loads(path.read_text(encoding="utf-8"))
    return {
        broker: by_current_id(entries)
        for broker, entries in index.items()
        if not broker.startswith("_")  # never a broker: room for what a DIR may add
    }


def load_runs(path: str | Path) -> dict[str, dict[str, Any]]:
    """broker -> its run's header (`DIR/runs/<broker>.json`, a `run_info.RunInfo` as a
    dict), for the brokers of the DIR's index.json; none for a DIR written before runs
    were recorded."""
    root = Path(path)
    if not root.is_dir():
        root = root.parent
    runs = {}
    for broker in load_index(root):
        header = root / RUNS_DIR / f"{case_file_stem(broker)}.json"
        if header.is_file():
            runs[broker] = json.loads(header.read_text(encoding="utf-8"))
    return runs


# --- expectations --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expectation:
    verdict: Verdict
    issue: str = ""
    also: frozenset[Verdict] = frozenset()  # other verdicts accepted (a probabilistic bug)

    @property
    def accepted(self) -> frozenset[Verdict]:
        return self.also | {self.verdict}

    @property
    def text(self) -> str:
        return "|".join([self.verdict.value, *sorted(v.value for v in self.also)])


def _parse_verdicts(text: str) -> tuple[Verdict, frozenset[Verdict]]:
    """ "FAILED" or "FAILED|OK" (the first is the usual one; the others are accepted too)."""
    first, *others = (Verdict.parse(part) for part in text.split("|"))
    return first, frozenset(others)


def load_expectations(path: str | Path) -> dict[str, Expectation]:
    """`"case-id" = { verdict = "FAILED", issue = "rabbitmq/rabbitmq-server#2597" }` lines
    under a `[cases]` table; a renamed case's old id counts as its current id."""
    with Path(path).open("rb") as handle:
        data = tomllib.load(handle)
    cases = data.get("cases", {})
    expectations = {}
    for case_id, value in cases.items():
        text = value if isinstance(value, str) else value["verdict"]
        issue = "" if isinstance(value, str) else str(value.get("issue", ""))
        verdict, also = _parse_verdicts(text)
        expectations[case_id] = Expectation(verdict, issue, also)
    return by_current_id(expectations)


def compare(expected: dict[str, Expectation], verdicts: dict[str, str]) -> list[str]:
    """Differences between a run's verdicts and the expectations, one line each. Only cases
    that ran are compared (a -k selection does not count as missing)."""
    lines = []
    for case_id, verdict in sorted(verdicts.items()):
        expectation = expected.get(case_id)
        if expectation is None:
            lines.append(f"{case_id}: {verdict}, not in the expectations file")
        elif Verdict.parse(verdict) not in expectation.accepted:
            issue = f" ({expectation.issue})" if expectation.issue else ""
            lines.append(f"{case_id}: expected {expectation.text}{issue}, got {verdict}")
    return lines


def format_expectations(
    broker: str,
    verdicts: dict[str, str],
    issues: dict[str, str] | None = None,
    also: dict[str, str] | None = None,
) -> str:
    """An expectations file for `verdicts` (issues, and verdicts accepted besides, kept from
    an older file when given: `also[case] = "OK"` writes `verdict = "FAILED|OK"`)."""
    issues = issues or {}
    also = also or {}
    lines = [
        f"# Expected conformance verdicts for {broker}: one line per case.",
        "# `amqpspec run --expect` fails on any difference; update this file in the commit",
        "# that changes a verdict on purpose. `issue` names the upstream bug a failure matches;",
        '# "FAILED|OK" accepts either (a bug that shows only in some runs).',
        f'broker = "{broker}"',
        "",
        "[cases]",
    ]
    for case_id, verdict in sorted(verdicts.items()):
        issue = issues.get(case_id, "")
        extra = f', issue = "{issue}"' if issue else ""
        others = [v for v in also.get(case_id, "").split("|") if v and v != verdict]
        text = "|".join([verdict, *others])
        lines.append(f'"{case_id}" = {{ verdict = "{text}"{extra} }}')
    return "\n".join(lines) + "\n"
