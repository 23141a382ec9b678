"""One finding as a maintainer reads it: what fuzz.findings_report (findings.md) and
fuzz.differential_report (divergences) both render.

Owns: `Loaded` (a finding of `DIR/findings.json` with its reproducer's steps and its
exchange, rebuilt from `findings/<id>/reproducer.pcap`: the bytes both ways as they
crossed, timed), `Group` (the findings of one broker behaviour, fuzz.behaviour),
`load_findings(directory)`, `offending_frame(pcap, rule)` (the broker's frame that breaks a
checker rule, found again by the checker), `exchange_from_pcap`, and the pieces of a
finding's text: `exchange_lines` (frames both ways, `!!` on the offending frame),
`observed`, `timeline`, `step_text`, `sentence_lines`, `utc`, `cell`. Decoding is the
core's (amqp10); nothing here parses AMQP bytes by hand.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime

from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import Frame, ProtocolHeader, decode_frame
from amqpspec.amqp10.monitor import ConnectionMonitor, TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.conformance.probe import Chunk, Recording
from amqpspec.fuzz.behaviour import Behaviour, InputClass, by_rule, input_class, sentence_text
from amqpspec.fuzz.case import REPRODUCER_NAME, CaseFileError, Step, load_case
from amqpspec.fuzz.evidence import (
    HEADER,
    RAW,
    TEARDOWN,
    UNDECODABLE,
    Exchange,
    read_exchange,
)
from amqpspec.fuzz.oracle import CLOSE_MISSING
from amqpspec.traces.pcap_format import TCP_FIN
from amqpspec.traces.pcap_reader import iter_tcp_segments
from amqpspec.traces.render import format_composite

PCAP_NAME = "reproducer.pcap"
AMQP_PORT = 5672  # the broker's side of a finding's pcap (fuzz.findings.write_pcap)
MARK = "!!"
ENDINGS = ("close", "end", "detach")
HEX_SHOWN = 48  # bytes of an undecodable step shown


@dataclass(slots=True)
class Loaded:
    """One finding as a maintainer reads it."""

    record: dict
    steps: list[Step]
    exchange: Exchange | None
    found: float | None  # when it was confirmed (older findings: its pcap's bad frame), epoch s
    given: InputClass
    folder: str  # relative to the campaign directory
    note: str = ""  # what could not be read
    offending: tuple[int, str] | None = None  # (position among the broker's items, name)
    # of the broker's frame that breaks the finding's checker rule, as the checker finds it
    # again in the pcap

    @property
    def id(self) -> str:
        return str(self.record["id"])


@dataclass(slots=True)
class Group:
    behaviour: Behaviour
    findings: list[Loaded]

    @property
    def example(self) -> Loaded:
        """The smallest reproducer: fewest steps, then fewest bytes."""
        return min(self.findings, key=lambda f: (len(f.steps), sum(len(s.data) for s in f.steps)))


def load_findings(directory: str, records: list[dict] | None = None) -> list[Loaded]:
    """The findings of `DIR/findings.json` (or `records`, the store's about to be written
    there), each with its files under `DIR/findings/<id>/`."""
    if records is None:
        path = os.path.join(directory, "findings.json")
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as file:
            records = json.load(file)
    return [_load(directory, record) for record in records]


def _load(directory: str, record: dict) -> Loaded:
    folder = os.path.join("findings", str(record["id"]))
    steps: list[Step] = []
    note = ""
    try:
        case, _ = load_case(os.path.join(directory, folder, REPRODUCER_NAME))
        steps = case.steps
    except CaseFileError as exc:
        note = f"reproducer unreadable: {exc}"
    exchange = None
    pcap = os.path.join(directory, folder, PCAP_NAME)
    if steps and os.path.exists(pcap):
        exchange = exchange_from_pcap(pcap, steps, record)
    bad = exchange.bad if exchange is not None and exchange.bad is not None else len(steps) - 1
    found = exchange.bad_time if exchange is not None and exchange.sent else None
    if record.get("found_at"):  # written by the store when it was confirmed
        found = datetime.fromisoformat(record["found_at"]).timestamp()
    offending = None
    if exchange is not None and by_rule(record["kind"], record["rule"]):
        offending = offending_frame(pcap, record["rule"])
    given = input_class(steps, bad)
    return Loaded(record, steps, exchange, found, given, folder, note, offending)


def offending_frame(pcap: str, rule: str) -> tuple[int, str] | None:
    """The broker's frame that breaks `rule` (its position among the broker's items, its
    name): the checker (amqp10.monitor) run again over the pcap's bytes, both ways."""
    monitor = ConnectionMonitor(1)
    items: dict[int, TraceItem] = {}
    server: list[int] = []  # trace indices of the broker's items, in order
    for segment in iter_tcp_segments(pcap):
        if not segment.payload:
            continue
        direction = SERVER if segment.src[1] == AMQP_PORT else CLIENT
        out = monitor.feed(direction, segment.payload, segment.time)
        for item in out.items:
            items[item.index] = item
            if item.direction == SERVER:
                server.append(item.index)
        for violation in out.violations:
            if violation.rule_id != rule or violation.origin != SERVER:
                continue
            item = items.get(violation.frame_index)
            if item is None or violation.frame_index not in server:
                continue
            name = item.item.name if isinstance(item.item, Frame) else HEADER
            if isinstance(item.item, (Frame, ProtocolHeader)):
                return server.index(violation.frame_index), name
    return None


def exchange_from_pcap(pcap: str, steps: list[Step], record: dict) -> Exchange:
    """The confirming run's exchange, from its pcap (and findings.json's evidence)."""
    recording = Recording(connection_id=1)
    server_fin = None
    for segment in iter_tcp_segments(pcap):
        if not recording.start:
            recording.start = segment.time
        direction = SERVER if segment.src[1] == AMQP_PORT else CLIENT
        if segment.payload:
            recording.chunks.append(Chunk(direction, segment.payload, segment.time))
        if segment.flags & TCP_FIN and server_fin is None:
            server_fin = segment.time if direction == SERVER else False
        recording.end = segment.time
    evidence = record.get("evidence") or {}
    bound = float(evidence.get("bound_s") or 0.0)
    exchange = read_exchange(
        recording, steps, len(steps), bool(server_fin), bound, bool(record.get("close_held"))
    )
    if server_fin:
        exchange.dropped = server_fin  # the broker closed the TCP stream first
    else:
        exchange.dropped = None
        ms = evidence.get("broker_dropped_ms_after_bad")
        if ms is not None:
            exchange.dropped = exchange.bad_time + float(ms) / 1000
    return exchange


def utc(epoch: float | None, with_date: bool = False) -> str:
    if not epoch:
        return "-"
    moment = datetime.fromtimestamp(epoch, UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S.%f" if with_date else "%H:%M:%S.%f")
    return text[:-3] + (" UTC" if with_date else "")


def step_text(step: Step) -> str:
    """A fuzzer step as the core decodes it: the performative with its fields, the header,
    or its bytes and why they do not decode."""
    data = step.data
    if step.is_header and len(data) == 8:
        h = ProtocolHeader.decode(data)
        return f"protocol header AMQP {h.protocol_id}.{h.major}.{h.minor}.{h.revision}"
    try:
        frame = decode_frame(data)
    except DecodeError as exc:
        shown = data[:HEX_SHOWN].hex() + ("..." if len(data) > HEX_SHOWN else "")
        why = step.malformed or f"{exc.condition}: {exc.expected}"
        return f"{len(data)} B {shown} (does not decode: {why})"
    body = "(empty frame)" if frame.performative is None else format_composite(frame.performative)
    return f"channel {frame.channel} {body}"


def exchange_lines(finding: Loaded) -> list[str]:
    """The reproducer as frames both ways in time order; `!!` on the offending frame: the
    broker's that breaks the finding's checker rule, else the case's bad frame."""
    exchange = finding.exchange
    offending = finding.offending
    multi = (finding.record.get("extra") or {}).get("multi_party")
    if exchange is None and not finding.steps and multi:
        # a multi-party case (fuzz.multiparty): its schedule; each party's frames are in
        # reproducer.txt and reproducer-<party>.pcap
        labels = finding.record.get("frames", [])
        return [f"   {i:>2} schedule: {label}" for i, label in enumerate(labels)]
    if exchange is None:
        return [f"   {i:>2} -> fuzzer: {step_text(s)}" for i, s in enumerate(finding.steps)]
    position, name = offending if offending is not None else (-1, "")
    if not (0 <= position < len(exchange.received) and exchange.received[position].name == name):
        offending = None  # not found again: mark the case's bad frame
    rows: list[tuple[float, int, str, str]] = []
    for sent in exchange.sent:
        if sent.role == TEARDOWN:
            who = "-> FUZZER'S OWN TEARDOWN close (the tool's frame, not a step of the case)"
            rows.append((sent.time, 0, "  ", who))
            continue
        assert sent.index is not None
        mark = MARK if sent.index == exchange.bad and offending is None else "  "
        step = finding.steps[sent.index]
        text = f"-> fuzzer step {sent.index} [{sent.label}]: {step_text(step)}"
        rows.append((sent.time, 0, mark, text))
    rule = finding.record.get("rule", "")
    for number, got in enumerate(exchange.received):
        if offending is not None and number == position:
            rows.append((got.time, 1, MARK, f"<- broker: {got.describe()}  <== breaks {rule}"))
            continue
        rows.append((got.time, 1, "  ", f"<- broker: {got.describe()}"))
    if exchange.dropped is not None:
        rows.append((exchange.dropped, 2, "  ", "<- broker: TCP close (FIN)"))
    rows.sort(key=lambda row: (row[0], row[1]))
    return [
        f"{mark} {utc(time)}  {exchange.after_bad(time):>11}  {text}"
        for time, _, mark, text in rows
    ]


def observed(finding: Loaded) -> str:
    """The broker's reaction to the bad frame, in its terms, without times: what it ended
    (close, end, detach, with their errors), what did not decode, its TCP close, each said
    to come before or after the fuzzer's own close. Other frames (its open, begin ...)
    are in `timeline(finding)`."""
    exchange = finding.exchange
    if exchange is None:
        return finding.record.get("observed") or finding.record.get("summary", "")
    ours = exchange.teardown

    def after(time: float) -> str:
        return " after the fuzzer's own close" if ours and time >= ours.time else ""

    parts = []
    for got in exchange.broker_after_bad():
        if got.name in ENDINGS or got.kind in (UNDECODABLE, RAW):
            parts.append(f"{got.short()}{after(got.time)}")
    if exchange.dropped is not None:
        parts.append("a TCP close")
    elif finding.record.get("rule") == CLOSE_MISSING[0]:
        parts.append("a TCP close (not in this older finding's pcap)")
    parts = [p for i, p in enumerate(parts) if not i or parts[i - 1] != p]
    return "; ".join(parts) if parts else "no close, end or detach, and no TCP close"


def timeline(finding: Loaded) -> str:
    """Everything the broker sent after the bad frame, timed from it."""
    exchange = finding.exchange
    if exchange is None:
        return "-"
    runs: list[list] = []  # [short, first time, count]: repeated frames said once
    for got in exchange.broker_after_bad():
        if runs and runs[-1][0] == got.short():
            runs[-1][2] += 1
        else:
            runs.append([got.short(), got.time, 1])
    parts = [
        f"{short}{f' x{n} from' if n > 1 else ' at'} {exchange.after_bad(time)}"
        for short, time, n in runs
    ]
    if exchange.dropped is not None:
        parts.append(f"a TCP close at {exchange.after_bad(exchange.dropped)}")
    text = "; ".join(parts) or "nothing"
    if exchange.dropped is None and finding.record.get("rule") == CLOSE_MISSING[0]:
        text += "; a TCP close (not in this older finding's pcap)"
    return text


def sentence_lines(ids: tuple[str, ...], who: str) -> list[str]:
    lines = []
    for sentence_id in ids:
        level, binds, text = sentence_text(sentence_id)
        lines.append(f'- `{sentence_id}` ({level}, binds: {binds}; {who}): "{text}"')
    return lines


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
