"""`DIR/findings.md`: a campaign's findings grouped by broker behaviour, for a maintainer.

Owns: `group(findings)` (one `Group` per broker behaviour, fuzz.behaviour, of the findings
fuzz.finding_view loads: each with its reproducer's steps and its exchange, rebuilt from
`findings/<id>/reproducer.pcap`), `render(directory)`, `write_report(directory)` (atomic) and
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

from amqpspec.fuzz.behaviour import behaviour_key, behaviour_of, by_rule
from amqpspec.fuzz.finding_view import (
    MARK,
    PCAP_NAME,
    Group,
    Loaded,
    cell,
    exchange_lines,
    load_findings,
    observed,
    sentence_lines,
    timeline,
    utc,
)

REPORT_NAME = "findings.md"
CAMPAIGN_NAME = "campaign.json"  # broker, profile, seed of the campaign (fuzz.cli)


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
    when = utc(generated, with_date=True) if generated else "-"
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
        lines += sentence_lines(b.broker_sentences, "the broker's")
    else:
        lines += ["", "No MUST of the text binds the broker here (a robustness finding)."]
    if b.input_sentences:
        lines += ["", "The bad frame itself breaks (the fuzzer's, on purpose):"]
        lines += sentence_lines(b.input_sentences, "the frame's sender")
    lines += [
        "",
        "| finding | bad frame: what is wrong with it | the broker after it | confirmed (UTC) "
        "| replays | reproducer | pcap |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [_finding_row(directory, f) for f in g.findings]
    example = g.example
    lines += [
        "",
        f"Minimal reproducer (`{example.id}`, {len(example.steps)} steps; the oracle: "
        f"{cell(example.record.get('summary', ''))}):",
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


def _finding_row(directory: str, f: Loaded) -> str:
    """One finding's row: its bad frame, the broker after it, when, replays, files."""
    pcap = os.path.join(f.folder, PCAP_NAME)
    has_pcap = os.path.exists(os.path.join(directory, pcap))
    return (
        f"| `{f.id}` | {cell(f.given.detail)} | {cell(timeline(f))} | "
        f"{utc(f.found, with_date=True)} | "
        f"{f.record.get('replays', '-')} | `{f.folder}/` | "
        + (f"`{pcap}`" if has_pcap else "none")
        + " |"
    )


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
