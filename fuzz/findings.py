"""Findings: signatures, and the store that never loses one.

Owns: `signature(kind, rule, section, performative, state)` (versioned: "v2|kind|<the
checker's rule signature>|state", where the middle part is `amqp10.checker.signature`'s
name for the rule, section, performative and coarse endpoint state that the triage job
uses too; one bucket per distinct bug, no stack needed), `Finding` (the
record of findings.json: id, kind, signature, rule, section, summary, reproducer,
frames, original_frames, seed; plus replays and the broker; and what a broker team reads:
`expected`, `observed` (the broker's frames and TCP close timed from the bad frame),
`level` (MUST, or robustness: no MUST of the text is at stake), `sentence` (its manifest
id), `close_held` (the confirming runs held the fuzzer's close for the bound) and
`evidence` (every frame both ways, who sent it, ms after the bad frame: fuzz.evidence)),
`finding_of` (a verdict's finding) and `verdict_record` (what a reproducer.json carries of
a verdict), and `FindingStore`:
`DIR/findings.json` and `DIR/findings/<id>/` with `reproducer.json` (replayable by
`amqpspec fuzz replay`), `reproducer.txt` (expected, observed, then the exchange in time
order: each fuzzer frame labelled as a case step or its own teardown close, each broker
frame, its TCP close) and `reproducer.pcap` (the exchange as a TCP flow, `traces.pcap_writer`;
the broker's FIN first when it dropped the connection); then `DIR/findings.md`, the findings
grouped by broker behaviour (fuzz.findings_report), rewritten from what is on disk, and
`DIR/campaign.json` (`note_campaign`: broker, profile, seed; for the replay commands).
Every file is written to a temporary name and renamed (atomic), as soon as a finding
is confirmed, so a killed campaign keeps all of them, findings.md agreeing with them.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.checker.signature import endpoint_state
from amqpspec.amqp10.checker.signature import signature as rule_signature
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.probe import Recording
from amqpspec.fuzz.case import REPRODUCER_NAME, Case
from amqpspec.fuzz.evidence import Exchange
from amqpspec.fuzz.findings_report import CAMPAIGN_NAME, Group, write_report
from amqpspec.traces.pcap_writer import PcapWriter
from amqpspec.traces.render import show_line

if TYPE_CHECKING:
    from amqpspec.fuzz.oracle import Verdict

SIGNATURE_VERSION = "v2"
FINDINGS_JSON = "findings.json"
_CLOSING = ("CLOSE_SENT", "DISCARDING", "END", "CLOSE_PIPE", "OC_PIPE")


def signature(kind: str, rule: str, section: str, performative: str, state: str) -> str:
    """One bucket per distinct bug: kind + the rule signature (rule, section, triggering
    performative, coarse state) + the state it arrived in, as the reference model
    (fuzz.model.ServerModel) names it: 'OPENED/MAPPED/ATTACHED'."""
    base = performative.split("[", 1)[0].split("+", 1)[0].split(" ", 1)[0]
    connection = state.split("/", 1)[0]
    opened = connection.startswith("OPEN") or connection in _CLOSING
    coarse = endpoint_state(opened and connection != "OPEN_RCVD", connection in _CLOSING)
    return "|".join((SIGNATURE_VERSION, kind, rule_signature(rule, section, base, coarse), state))


def finding_id(sig: str) -> str:
    return hashlib.sha1(sig.encode()).hexdigest()[:12]


@dataclass(slots=True)
class Finding:
    id: str
    kind: str
    signature: str
    rule: str
    section: str
    summary: str
    reproducer: str  # path of the reproducer .json, relative to the campaign directory
    frames: list[str]  # labels of the minimised steps
    original_frames: list[str]  # labels of the steps as first found
    seed: str
    strategy: str = ""
    replays: str = ""  # "3/3"
    minimal: bool = True
    broker: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    expected: str = ""
    observed: str = ""
    level: str = ""
    sentence: str = ""
    close_held: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    found_at: str = ""  # when the store wrote it (confirmed), UTC ISO 8601

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def verdict_fields(self) -> dict[str, Any]:
        """What a reproducer.json carries of the verdict, beside the case it replays."""
        return verdict_record(self, self.signature)


def verdict_record(verdict: Verdict | Finding, sig: str) -> dict[str, Any]:
    """What a reproducer.json carries of `verdict` (bucketed under `sig`), beside the case
    it replays: a finding's, or a candidate's left untriaged (fuzz.intake)."""
    return {
        "kind": verdict.kind,
        "signature": sig,
        "rule": verdict.rule,
        "section": verdict.section,
        "summary": verdict.summary,
        "expected": verdict.expected,
        "observed": verdict.observed,
        "level": verdict.level,
    }


def finding_of(verdict: Verdict, sig: str, **fields: Any) -> Finding:
    """The finding of `verdict` in the bucket `sig` (its reproducer path is the store's to
    set); `fields`: the rest of the record (frames, original_frames, seed, strategy, ...)."""
    return Finding(
        id=finding_id(sig),
        reproducer="",
        sentence=verdict.sentence,
        **verdict_record(verdict, sig),
        **fields,
    )


def atomic_write(path: str, data: bytes) -> None:
    temporary = f"{path}.tmp{os.getpid()}.{threading.get_ident()}"
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


AMQP_PORT = 5672  # IANA's: tshark and the scapy layer dissect it as AMQP with no option


def write_pcap(path: str, recording: Recording, dropped: float | None = None) -> None:
    """The recorded exchange as one TCP flow (real framing: the chunks as they crossed),
    the broker's side on port 5672 whatever port it had, so dissectors take it as AMQP.
    `dropped`: when the broker closed the TCP stream (its FIN comes first); otherwise the
    fuzzer's FIN does, after the last chunk."""
    temporary = f"{path}.tmp{os.getpid()}"
    with PcapWriter(temporary) as writer:
        start = recording.start or (recording.chunks[0].time if recording.chunks else 0.0)
        server = f"{recording.server.rpartition(':')[0]}:{AMQP_PORT}"
        writer.open_connection(1, recording.client, server, start)
        for chunk in recording.chunks:
            writer.data(1, chunk.direction, chunk.data, chunk.time)
        if dropped is not None:
            writer.close_connection(1, dropped, closer=SERVER)
    os.replace(temporary, path)


def transcript(
    case: Case, recording: Recording | None, finding: Finding, exchange: Exchange | None = None
) -> str:
    level = f"  level: {finding.level}" if finding.level else ""
    sentence = f"  sentence: {finding.sentence}" if finding.sentence else ""
    lines = [
        f"{finding.kind}: {finding.summary}",
        f"signature: {finding.signature}",
        f"rule: {finding.rule} (section {finding.section}){level}{sentence}",
        f"seed: {finding.seed}  strategy: {finding.strategy}  replays: {finding.replays}"
        + ("  (the fuzzer held its close for the bound)" if finding.close_held else ""),
    ]
    if finding.expected or finding.observed:
        lines += ["", f"expected: {finding.expected}", f"observed: {finding.observed}"]
    lines += [
        "",
        "steps sent (minimised):",
        *(f"  {i:3d} {s.label}  [{len(s.data)} B]" for i, s in enumerate(case.steps)),
    ]
    if exchange is not None:
        lines += ["", f"exchange, timed from the bad frame ({exchange.bad_label}):"]
        lines += [f"  {line}" for line in exchange.lines()]
    if recording is not None:
        lines += ["", "as the core's monitor decoded it (-> fuzzer, <- broker):"]
        lines += [f"  {show_line(item)}" for item in recording.items]
    return "\n".join(lines) + "\n"


class FindingStore:
    """findings.json + findings/<id>/ under `directory`; thread-safe; dedupes by id."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(os.path.join(directory, "findings"), exist_ok=True)
        self._lock = threading.Lock()
        self.findings: dict[str, Finding] = {}
        self.behaviours: list[Group] = []  # findings.md's, as last written
        path = os.path.join(directory, FINDINGS_JSON)
        if os.path.exists(path):  # a resumed campaign keeps what it had
            with open(path, encoding="utf-8") as file:
                for record in json.load(file):
                    record.setdefault("extra", {})
                    self.findings[record["id"]] = Finding(**record)
        self._flush()

    def known(self, sig: str) -> bool:
        return finding_id(sig) in self.findings

    def add(
        self,
        finding: Finding,
        case: Case,
        recording: Recording | None,
        exchange: Exchange | None = None,
    ) -> bool:
        """Write the finding's files, then findings.json. False if its bucket exists."""
        with self._lock:
            if finding.id in self.findings:
                return False
            self._write(finding, case, recording, exchange)
            return True

    def replace(
        self,
        finding: Finding,
        case: Case,
        recording: Recording | None,
        exchange: Exchange | None = None,
    ) -> bool:
        """A finding kept earlier (same id: its bucket as first confirmed) written again
        from a smaller reproducer (a crash minimised after the budget: fuzz.campaign);
        its confirmation time stays. False if no finding has that id."""
        with self._lock:
            earlier = self.findings.get(finding.id)
            if earlier is None:
                return False
            finding.signature = earlier.signature
            finding.found_at = earlier.found_at
            finding.original_frames = earlier.original_frames or finding.original_frames
            self._write(finding, case, recording, exchange)
            return True

    def _write(
        self,
        finding: Finding,
        case: Case,
        recording: Recording | None,
        exchange: Exchange | None,
    ) -> None:
        """The finding's files under findings/<id>/, then findings.json (under the lock)."""
        folder = os.path.join(self.directory, "findings", finding.id)
        os.makedirs(folder, exist_ok=True)
        finding.reproducer = os.path.join("findings", finding.id, REPRODUCER_NAME)
        record = case.to_json(
            **finding.verdict_fields(),
            close_held=finding.close_held,
            original_steps=[s.to_json() for s in case.original],
        )
        atomic_write(os.path.join(folder, REPRODUCER_NAME), json_bytes(record))
        text = transcript(case, recording, finding, exchange).encode()
        atomic_write(os.path.join(folder, "reproducer.txt"), text)
        if recording is not None and recording.chunks:
            dropped = exchange.dropped if exchange is not None else None
            write_pcap(os.path.join(folder, "reproducer.pcap"), recording, dropped)
        finding.found_at = finding.found_at or _now()
        self.findings[finding.id] = finding
        self._flush()

    def add_written(self, finding: Finding, write: Callable[[str], None]) -> bool:
        """A finding whose files `write(folder)` puts in findings/<id>/ (a multi-party
        case: fuzz.multiparty), then findings.json. False if its bucket exists."""
        with self._lock:
            if finding.id in self.findings:
                return False
            folder = os.path.join(self.directory, "findings", finding.id)
            os.makedirs(folder, exist_ok=True)
            finding.reproducer = os.path.join("findings", finding.id, REPRODUCER_NAME)
            write(folder)
            finding.found_at = finding.found_at or _now()
            self.findings[finding.id] = finding
            self._flush()
            return True

    def note_campaign(self, **facts: Any) -> None:
        """Record the campaign's broker, profile, seed ... in DIR/campaign.json (merged
        with what an earlier run on this directory wrote); findings.md names them."""
        with self._lock:
            path = os.path.join(self.directory, CAMPAIGN_NAME)
            known: dict[str, Any] = {}
            if os.path.exists(path):
                with open(path, encoding="utf-8") as file:
                    known = json.load(file)
            known.update({k: v for k, v in facts.items() if v is not None})
            atomic_write(path, json_bytes(known))
            records = [f.to_json() for f in self.findings.values()]
            self.behaviours = write_report(self.directory, records=records)

    def _flush(self) -> None:
        """findings.md (grouped by behaviour: the findings' files are on disk already),
        then findings.json: a campaign killed between the two leaves a findings.md that
        lists every finding of findings.json (and the one whose files are all written)."""
        records = [f.to_json() for f in self.findings.values()]
        self.behaviours = write_report(self.directory, records=records)
        atomic_write(os.path.join(self.directory, FINDINGS_JSON), json_bytes(records))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=False) + "\n").encode()
