"""Divergences in `DIR/findings.md`: grouped by what the two brokers do, both sides' frames.

Owns: `behaviour_key(record)` (a divergence's behaviour: its kind and both reactions, from
its signature; the performative and field are the examples under it), `behaviour(members)`
(its `fuzz.behaviour.Behaviour`: title, level, the sentences the sides break) and
`group_lines(directory, group, campaign)` (its section of findings.md: both reactions,
which side breaks which rule with the spec sentence, the examples, the minimal
reproducer's frames on each broker with `!!` on the offending frame, the replay command
on both brokers and both pcaps). fuzz.findings_report calls these for findings of kind
`divergence` (fuzz.differential) and renders the rest as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex

from amqpspec.fuzz.behaviour import Behaviour, by_rule
from amqpspec.fuzz.divergence import (
    DIVERGENCE,
    SIDE_B_PCAP,
    SPEC_ALLOWS_BOTH,
    Reaction,
    signature_parts,
)
from amqpspec.fuzz.finding_view import (
    PCAP_NAME,
    Group,
    Loaded,
    cell,
    exchange_from_pcap,
    exchange_lines,
    offending_frame,
    sentence_lines,
    timeline,
    utc,
)

KIND_TEXT = {
    "answer-vs-silence": "one answers, the other stays silent",
    "crash": "one stops serving",
    "refuse-vs-accept": "one refuses, the other accepts",
    "refusal-scope": "both refuse, at different scopes",
    "error-condition": "both refuse, with different error conditions",
    "verdict": "the same reaction, but the oracle holds a verdict against one side",
}


def behaviour_key(record: dict) -> str:
    parts = signature_parts(str(record.get("signature", "")))
    key = f"{DIVERGENCE}|{parts['kind']}|A={parts['a']}|B={parts['b']}"
    return key + (f"|{parts['verdicts']}" if parts["verdicts"] else "")


def _sides(record: dict) -> tuple[dict, dict]:
    divergence = record.get("extra", {}).get("divergence", {})
    return divergence.get("a", {}), divergence.get("b", {})


def behaviour(members: list[Loaded]) -> Behaviour:
    record = members[0].record
    key = behaviour_key(record)
    parts = signature_parts(str(record.get("signature", "")))
    a, b = _sides(record)
    ra, rb = Reaction.from_key(parts["a"]), Reaction.from_key(parts["b"])
    title = (
        f"diverge ({parts['kind']}: {KIND_TEXT.get(parts['kind'], '')}): "
        f"{a.get('name', 'A')} {ra.text()}; {b.get('name', 'B')} {rb.text()}"
    )
    levels = [m.record.get("level", "") for m in members]
    level = "MUST" if "MUST" in levels else ("robustness" if "robustness" in levels else "")
    sentences: list[str] = []
    for m in members:
        for side in _sides(m.record):
            verdict = side.get("verdict") or {}
            if verdict.get("level") == "MUST" and verdict.get("sentence"):
                sentences.append(verdict["sentence"])
    return Behaviour(
        key=key,
        id="D-" + hashlib.sha1(key.encode()).hexdigest()[:8],
        kind=DIVERGENCE,
        rule=str(record.get("rule", "")),
        section=str(record.get("section", "-")),
        level=level or SPEC_ALLOWS_BOTH,
        title=title,
        expected=str(record.get("expected", "")),
        broker_sentences=tuple(dict.fromkeys(sentences)),
        input_sentences=(),
    )


def side_b(directory: str, finding: Loaded) -> Loaded | None:
    """The finding as the second broker saw it (its pcap, its verdict's offending frame)."""
    _, b = _sides(finding.record)
    pcap = os.path.join(directory, finding.folder, SIDE_B_PCAP)
    if not finding.steps or not os.path.exists(pcap):
        return None
    record = {"evidence": b.get("evidence", {}), "close_held": finding.record.get("close_held")}
    exchange = exchange_from_pcap(pcap, finding.steps, record)
    verdict = b.get("verdict") or {}
    offending = None
    if by_rule(verdict.get("kind", ""), verdict.get("rule", "")):
        offending = offending_frame(pcap, verdict["rule"])
    rule = verdict.get("rule", "")
    return dataclasses.replace(
        finding, exchange=exchange, offending=offending, record={**finding.record, "rule": rule}
    )


def side_a(directory: str, finding: Loaded) -> Loaded:
    a, _ = _sides(finding.record)
    verdict = a.get("verdict") or {}
    offending = None
    pcap = os.path.join(directory, finding.folder, PCAP_NAME)
    if finding.exchange is not None and by_rule(verdict.get("kind", ""), verdict.get("rule", "")):
        offending = offending_frame(pcap, verdict["rule"])
    record = {**finding.record, "rule": verdict.get("rule", "")}
    return dataclasses.replace(finding, offending=offending, record=record)


def replay_command(directory: str, finding: Loaded, campaign: dict) -> str:
    folder = os.path.join(directory, finding.folder)
    a, b = _sides(finding.record)
    broker = campaign.get("broker") or a.get("broker") or "amqp://HOST:PORT"
    broker2 = campaign.get("broker2") or b.get("broker") or "amqp://HOST2:PORT"
    profile = campaign.get("profile") or a.get("profile") or "PROFILE"
    profile2 = campaign.get("profile2") or b.get("profile") or profile
    return (
        f"amqpspec fuzz replay {shlex.quote(folder)} --broker {shlex.quote(broker)} "
        f"--profile {shlex.quote(profile)} --differential {shlex.quote(broker2)} "
        f"--profile2 {shlex.quote(profile2)} --times 3"
    )


def group_lines(directory: str, g: Group, campaign: dict) -> list[str]:
    b = g.behaviour
    first = g.findings[0].record
    sa, sb = _sides(first)
    lines = [
        f"## {b.id}",
        "",
        f"**The brokers {b.title}** ({len(g.findings)} finding(s); level {b.level}).",
        "",
        f"- {sa.get('name', 'A')}: {sa.get('reaction_text', '')}",
        f"- {sb.get('name', 'B')}: {sb.get('reaction_text', '')}",
    ]
    labels = first.get("extra", {}).get("divergence", {}).get("labels", [])
    if labels:
        lines += ["", "Which side breaks which rule (the single-broker oracle, on each side):"]
        lines += [f"- {cell(text)}" for text in labels]
    else:
        lines += [
            "",
            f"**{SPEC_ALLOWS_BOTH}**: the single-broker oracle holds no verdict against "
            "either side (no MUST its frames break, no crash, hang or missing refusal); "
            "the two brokers chose differently where the text lets them.",
        ]
    if b.broker_sentences:
        lines += ["", "Spec sentences a side breaks (normative manifest ids):"]
        lines += sentence_lines(b.broker_sentences, "the broker's")
    lines += [
        "",
        f"| finding | bad frame (performative/field) | {sa.get('name', 'A')} after it "
        f"| {sb.get('name', 'B')} after it | confirmed (UTC) | replays | reproducer |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [_finding_row(directory, f) for f in g.findings]
    example = g.example
    other = side_b(directory, example)
    lines += [
        "",
        f"Minimal reproducer (`{example.id}`, {len(example.steps)} steps), on "
        f"{sa.get('name', 'A')}:",
        "",
        "```",
        *exchange_lines(side_a(directory, example)),
        "```",
        "",
        f"on {sb.get('name', 'B')}:",
        "",
        "```",
        *(exchange_lines(other) if other is not None else ["(no pcap of the second broker)"]),
        "```",
        "",
        f"Replay on both: `{replay_command(directory, example, campaign)}`  ",
        f"pcaps: `{os.path.join(directory, example.folder, PCAP_NAME)}`, "
        f"`{os.path.join(directory, example.folder, SIDE_B_PCAP)}`",
        "",
    ]
    return lines


def _finding_row(directory: str, f: Loaded) -> str:
    """One divergence's row: the bad frame, each side after it, when, replays, folder."""
    what = f.record.get("extra", {}).get("divergence", {}).get("what", "")
    other = side_b(directory, f)
    return (
        f"| `{f.id}` | `{cell(what)}`: {cell(f.given.detail)} | {cell(timeline(f))} | "
        f"{cell(timeline(other)) if other is not None else '-'} | "
        f"{utc(f.found, with_date=True)} | {f.record.get('replays', '-')} | `{f.folder}/` |"
    )
