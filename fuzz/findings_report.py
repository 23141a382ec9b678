"""`DIR/findings.md`: a campaign's findings grouped by broker behaviour, for a maintainer.

Owns: `load_findings(directory)` (each finding of `DIR/findings.json` with its reproducer's
steps and its exchange, rebuilt from `findings/<id>/reproducer.pcap`: the bytes both ways
as they crossed, timed), `group(findings)` (one `Group` per broker behaviour,
fuzz.behaviour), `render(directory)`, `write_report(directory)` (atomic) and
`summary_lines(groups)` (one line per behaviour, for the CLI).

Per behaviour, findings.md says what was expected and what the broker did (its frames after
the bad frame, in its terms), the spec sentences at stake by normative manifest id with
their text, the examples (each finding: its bad frame and what is wrong with it, when it
was found, its replays, reproducer and pcap), and the smallest example's reproducer as
frames both ways, each with its UTC time and its time from the bad frame: `!!` marks the
bad frame; the fuzzer's teardown close is labelled as the tool's own, not a step of the
case. Everything is read from the campaign directory, so a killed campaign's findings.md
(rewritten by fuzz.findings.FindingStore at each confirmed finding) agrees with the
findings on disk, and `amqpspec fuzz report DIR` writes it again for any directory,
older campaigns' included (their pcaps lack the broker's TCP close; findings.json's
`evidence` gives it when present). Decoding is the core's (amqp10); nothing here parses
AMQP bytes by hand.
"""

from __future__ import annotations

import json
import os
import shlex
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import Frame, ProtocolHeader, decode_frame
from amqpspec.amqp10.monitor import ConnectionMonitor, TraceItem
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.conformance.probe import Chunk, Recording
from amqpspec.fuzz.behaviour import (
    Behaviour,
    InputClass,
    behaviour_key,
    behaviour_of,
    by_rule,
    input_class,
    sentence_text,
)
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

REPORT_NAME = "findings.md"
CAMPAIGN_NAME = "campaign.json"  # broker, profile, seed of the campaign (fuzz.cli)
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
        exchange = _exchange(pcap, steps, record)
    bad = exchange.bad if exchange is not None and exchange.bad is not None else len(steps) - 1
    found = exchange.bad_time if exchange is not None and exchange.sent else None
    if record.get("found_at"):  # written by the store when it was confirmed
        found = datetime.fromisoformat(record["found_at"]).timestamp()
    offending = None
    if exchange is not None and by_rule(record["kind"], record["rule"]):
        offending = _offending(pcap, record["rule"])
    given = input_class(steps, bad)
    return Loaded(record, steps, exchange, found, given, folder, note, offending)


def _offending(pcap: str, rule: str) -> tuple[int, str] | None:
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


def _exchange(pcap: str, steps: list[Step], record: dict) -> Exchange:
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


def group(findings: list[Loaded]) -> list[Group]:
    """One group per (kind, rule, input class), MUST before robustness, larger first."""
    from amqpspec.fuzz import differential_report as diverged  # both brokers' findings

    buckets: dict[str, list[Loaded]] = {}
    for f in findings:
        r = f.record
        if r["kind"] == "divergence":
            buckets.setdefault(diverged.behaviour_key(r), []).append(f)
            continue
        buckets.setdefault(behaviour_key(r["kind"], r["rule"], f.given), []).append(f)
    groups = []
    for members in buckets.values():
        r = members[0].record
        if r["kind"] == "divergence":
            groups.append(Group(diverged.behaviour(members), members))
            continue
        sentence = next((m.record.get("sentence") for m in members if m.record.get("sentence")), "")
        level = next((m.record.get("level") for m in members if m.record.get("level")), "")
        behaviour = behaviour_of(
            r["kind"],
            r["rule"],
            r["section"],
            sentence or "",
            level or "",
            [m.given for m in members],
        )
        groups.append(Group(behaviour, members))
    groups.sort(key=lambda g: (g.behaviour.level != "MUST", -len(g.findings), g.behaviour.key))
    return groups


# ----------------------------------------------------------------- rendering


def _utc(epoch: float | None, with_date: bool = False) -> str:
    if not epoch:
        return "-"
    moment = datetime.fromtimestamp(epoch, UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S.%f" if with_date else "%H:%M:%S.%f")
    return text[:-3] + (" UTC" if with_date else "")


def _campaign(directory: str) -> dict:
    path = os.path.join(directory, CAMPAIGN_NAME)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def replay_command(directory: str, finding: Loaded, campaign: dict) -> str:
    broker = campaign.get("broker") or finding.record.get("broker") or "amqp://HOST:PORT"
    profile = campaign.get("profile") or "PROFILE"
    folder = os.path.join(directory, finding.folder)
    admin = f" --admin {shlex.quote(campaign['admin'])}" if campaign.get("admin") else ""
    return (
        f"amqpspec fuzz replay {shlex.quote(folder)} --broker {shlex.quote(broker)} "
        f"--profile {shlex.quote(profile)}{admin} --times 3"
    )


def _step_text(step: Step) -> str:
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
        return [f"   {i:>2} -> fuzzer: {_step_text(s)}" for i, s in enumerate(finding.steps)]
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
        text = f"-> fuzzer step {sent.index} [{sent.label}]: {_step_text(step)}"
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
        f"{mark} {_utc(time)}  {exchange.after_bad(time):>11}  {text}"
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


def _sentence_lines(ids: tuple[str, ...], who: str) -> list[str]:
    lines = []
    for sentence_id in ids:
        level, binds, text = sentence_text(sentence_id)
        lines.append(f'- `{sentence_id}` ({level}, binds: {binds}; {who}): "{text}"')
    return lines


def render(directory: str, generated: float | None = None) -> str:
    return _render(directory, load_findings(directory), generated)[0]


def _render(
    directory: str, findings: list[Loaded], generated: float | None
) -> tuple[str, list[Group]]:
    groups = group(findings)
    campaign = _campaign(directory)
    broker = campaign.get("broker") or next(
        (f.record.get("broker") for f in findings if f.record.get("broker")), "the broker"
    )
    if campaign.get("broker2"):  # a differential campaign (fuzz.differential)
        broker = f"{broker} and {campaign['broker2']} side by side"
    when = _utc(generated, with_date=True) if generated else "-"
    lines = [
        f"# Findings against {broker}: {len(findings)} finding(s), {len(groups)} behaviour(s)",
        "",
        f"Campaign directory `{directory}`"
        + (f", profile `{campaign['profile']}`" if campaign.get("profile") else "")
        + (f", seed {campaign['seed']}" if campaign.get("seed") is not None else "")
        + f". Written {when} from `findings.json` and `findings/<id>/` (rewritten at each "
        f"confirmed finding; `amqpspec fuzz report {shlex.quote(directory)}` writes it again).",
        "One behaviour is one thing the broker does (the oracle's verdict on the same kind "
        "of bad frame); each finding under it is a separate, replayable example. In the "
        f"reproducers, `{MARK}` marks the offending frame (the broker's frame that breaks "
        "the rule, for a checker rule; else the case's bad frame); times are UTC and from "
        "the case's bad frame.",
        "",
    ]
    if groups:
        lines += ["| behaviour | the broker ... | level | spec sentences | findings |"]
        lines += ["|---|---|---|---|---|"]
        for g in groups:
            b = g.behaviour
            ids = ", ".join(f"`{i}`" for i in (b.broker_sentences or b.input_sentences)) or "-"
            lines.append(
                f"| [{b.id}](#{b.id.lower()}) | {b.title} | {b.level} | {ids} | {len(g.findings)} |"
            )
        lines.append("")
    for g in groups:
        lines += _group_lines(directory, g, campaign)
    return "\n".join(lines).rstrip() + "\n", groups


def _group_lines(directory: str, g: Group, campaign: dict) -> list[str]:
    b = g.behaviour
    if b.kind == "divergence":  # two brokers' frames (fuzz.differential_report)
        from amqpspec.fuzz.differential_report import group_lines

        return group_lines(directory, g, campaign)
    seen = Counter(observed(f) for f in g.findings)
    common, count = seen.most_common(1)[0]
    lines = [
        f"## {b.id}",
        "",
        f"**The broker {b.title}** ({len(g.findings)} finding(s); verdict {b.kind} "
        f"`{b.rule}` ({b.section}); level {b.level}).",
        "",
        f"- Expected: {b.expected}.",
        f"- Observed ({count} of {len(g.findings)}): after the bad frame, {common}.",
    ]
    lines += [f"- Observed otherwise ({n}): {text}." for text, n in seen.most_common()[1:]]
    if by_rule(b.kind, b.rule):  # the checker's words on the broker's frame, per example
        lines += [f"- The checker on `{f.id}`: {f.record.get('summary', '')}." for f in g.findings]
    if b.broker_sentences:
        lines += ["", "Spec sentences the broker breaks (normative manifest ids):"]
        lines += _sentence_lines(b.broker_sentences, "the broker's")
    else:
        lines += ["", "No MUST of the text binds the broker here (a robustness finding)."]
    if b.input_sentences:
        lines += ["", "The bad frame itself breaks (the fuzzer's, on purpose):"]
        lines += _sentence_lines(b.input_sentences, "the frame's sender")
    lines += [
        "",
        "| finding | bad frame: what is wrong with it | the broker after it | confirmed (UTC) "
        "| replays | reproducer | pcap |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in g.findings:
        pcap = os.path.join(f.folder, PCAP_NAME)
        has_pcap = os.path.exists(os.path.join(directory, pcap))
        lines.append(
            f"| `{f.id}` | {_cell(f.given.detail)} | {_cell(timeline(f))} | "
            f"{_utc(f.found, with_date=True)} | "
            f"{f.record.get('replays', '-')} | `{f.folder}/` | "
            + (f"`{pcap}`" if has_pcap else "none")
            + " |"
        )
    example = g.example
    lines += [
        "",
        f"Minimal reproducer (`{example.id}`, {len(example.steps)} steps; the oracle: "
        f"{_cell(example.record.get('summary', ''))}):",
        "",
        "```",
        *exchange_lines(example),
        "```",
        "",
        f"Replay: `{replay_command(directory, example, campaign)}`  ",
        f"pcap: `{os.path.join(directory, example.folder, PCAP_NAME)}`",
        "",
    ]
    if example.note:
        lines.insert(-1, f"Note: {example.note}")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def summary_lines(groups: list[Group]) -> list[str]:
    """'6x accepts a field of the wrong type instead of refusing it [error-missing ...]'."""
    return [
        f"{len(g.findings)}x {g.behaviour.title} [{g.behaviour.kind} {g.behaviour.rule}: "
        f"{', '.join(f.id for f in g.findings)}]"
        for g in groups
    ]


def write_report(
    directory: str, generated: float | None = None, records: list[dict] | None = None
) -> list[Group]:
    """Write `DIR/findings.md` atomically from what is on disk (findings.json, or the
    `records` the store writes there next); return its behaviours."""
    findings = load_findings(directory, records)
    text, groups = _render(directory, findings, generated or time.time())
    path = os.path.join(directory, REPORT_NAME)
    temporary = f"{path}.tmp{os.getpid()}.{threading.get_ident()}"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)
    return groups
