"""The case runner: one case against one broker -> one graded verdict with its trace.

Owns: `BrokerTarget` (the --broker URL), `CaseContext` (what a case's run() gets besides
its first probe: fresh queues, address templates, more connections, capability checks,
outcome checks, SHOULD notes, the run's facts), `CaseResult` and `run_case()`, which runs
the case within its budget as a hard limit (the case's body runs in a thread; past the
budget its connections are dropped, its stoppers called, and the verdict is ERROR with what
was seen), asks the checker about every frame the broker sent, grades the verdict by the
case's level (OK, NON-STRICT, UNSUPPORTED, DIFFERS, FAILED, ERROR; docs/conformance.md,
"Verdicts") and renders the frame trace as text. A checker finding on a broker frame that
follows the probe's own deliberately malformed or illegal frame on that connection is not
graded (the checker's view of the probe's state is unreliable from there): the trace notes
it. Touches nothing on disk: `results` writes files.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback

from amqpspec.amqp10.checker import RULES, Violation
from amqpspec.amqp10.composites import Close
from amqpspec.amqp10.engine.transitions import UsageError
from amqpspec.amqp10.origins import CLIENT
from amqpspec.conformance.admin import Admin
from amqpspec.conformance.probe import Probe, Recording
from amqpspec.conformance.probe.observed import broker_did
from amqpspec.conformance.profile import Profile
from amqpspec.conformance.run.context import (
    BrokerTarget,
    CaseContext,
    CaseResult,
    CheckerFinding,
)
from amqpspec.conformance.run.facts import RunFacts
from amqpspec.conformance.run.registry import (
    MAY,
    MODEL,
    MUST,
    MUST_LEVELS,
    PIPELINED,
    SHOULD,
    SHOULD_LEVELS,
    Case,
    case_sentences,
    manifest,
    quote,
)
from amqpspec.conformance.verdicts import (
    SHORTFALL,
    UNANSWERED,
    CaseFailed,
    HarnessError,
    NoDelivery,
    ShouldNotMet,
    Unsupported,
    Verdict,
)
from amqpspec.traces.render import show_line

OVERRUN_S = 5.0  # past the budget before a case is stopped (its waits end at the budget)
ABORT_GRACE_S = 3.0  # after its connections are dropped, for its body to return


# what a case's CaseFailed is at each level
FAILING = {
    MUST: Verdict.FAILED,
    SHOULD: Verdict.NON_STRICT,
    MODEL: Verdict.DIFFERS,
    MAY: Verdict.OK,
    UNANSWERED: Verdict.UNSUPPORTED,
}


def failing_level(case: Case, exc: CaseFailed) -> str:
    """The level a failure is graded at: its own (`ctx.must`, `ctx.model`, a SHORTFALL)
    or the case's. A SHORTFALL (a delivery or credit that never came) is the case's level
    in a MODEL case (its model expects it) and MAY elsewhere (no sentence requires it); a
    model's expectation (an echo answered) in a case that names no model is MAY too; an
    answer a step needed (UNANSWERED) makes the case UNSUPPORTED, or recorded in a MAY case."""
    level = getattr(exc, "level", None) or case.level
    if level == UNANSWERED:  # the case could not get to its check (MAY: that is the record)
        return MAY if case.level == MAY else UNANSWERED
    if level == SHORTFALL:
        return MODEL if case.level == MODEL else MAY
    if level == MODEL and case.model is None:  # a model's expectation in a case naming none
        return MAY
    return level


def run_case(
    case: Case,
    target: BrokerTarget,
    profile: Profile,
    admin: Admin,
    *,
    pipelined: bool = False,
    facts: RunFacts | None = None,
) -> CaseResult:
    """Run `case` (`pipelined`, or a pipelined variant: its frames up to the first wait in
    one write) within its budget and grade it. `facts`: what earlier cases of
    the run learned about the broker (a fresh record by default: every wait in full)."""
    pipelined = pipelined or case.variant == PIPELINED
    started = time.monotonic()
    missing = sorted(case.requires - profile.capabilities)
    if missing:
        return CaseResult(
            case.case_id,
            case.level,
            Verdict.UNSUPPORTED,
            0.0,
            f"profile {profile.name!r} lacks {', '.join(missing)}",
        )
    budget = case.budget if case.budget is not None else profile.case_budget
    ctx = CaseContext(
        case, target, profile, admin, started + budget, pipelined=pipelined, facts=facts
    )
    try:
        verdict, reason = _run_bounded(case, ctx, budget)
    finally:
        ctx.close()
    recordings = [probe.recording for probe in ctx.probes]  # finished as they closed
    findings: list[CheckerFinding] = []
    verdict, reason = _judge(case, verdict, reason, recordings, ctx, findings)
    verdict, reason = _in_words(case, profile, verdict, reason, ctx)
    result = CaseResult(
        case.case_id,
        case.level,
        verdict,
        time.monotonic() - started,
        reason,
        ctx.notes,
        recordings=recordings,
        findings=findings,
    )
    result.trace_text = render_trace(case, result)
    return result


def _run_bounded(case: Case, ctx: CaseContext, budget: float) -> tuple[Verdict, str]:
    """The case's body in a thread, its budget a hard limit: a body still running
    OVERRUN_S past it is aborted (`CaseContext.abort`) and the verdict is ERROR with what
    the broker was last seen doing, whether or not the body then returns."""
    done: list[tuple[Verdict, str]] = []
    body = threading.Thread(
        target=lambda: done.append(_run_body(case, ctx)),
        name=f"amqpspec-case {case.case_id}",
        daemon=True,  # a body that never returns (a blocked library call) cannot hold the run
    )
    body.start()
    body.join(max(0.0, ctx.deadline - time.monotonic()) + OVERRUN_S)
    if done:
        return done[0]
    ctx.abort()
    body.join(ABORT_GRACE_S)
    stuck = "" if done else "; it still had not returned after its connections were dropped"
    return Verdict.ERROR, (
        f"the case did not end within its budget of {budget:g}s (a hard limit: its "
        f"connections were dropped{stuck}); {_last_seen(ctx)}"
    )


def _last_seen(ctx: CaseContext) -> str:
    """What the broker was last seen doing on the case's most recent connection."""
    recordings = [p.recording for p in ctx.probes if p.recording.items]
    if not recordings:
        return f"nothing recorded on {len(ctx.probes)} connection(s)"
    latest = max(recordings, key=lambda r: r.items[-1].time)
    return f"observed {broker_did(latest, 0)} (connection {latest.connection_id})"


def _run_body(case: Case, ctx: CaseContext) -> tuple[Verdict, str]:
    """Run the case's body and turn how it ended into a verdict by the case's level."""
    try:
        probe = ctx.probe()
        case.run(probe, ctx)
    except Unsupported as exc:
        return Verdict.UNSUPPORTED, str(exc)
    except ShouldNotMet as exc:
        return Verdict.NON_STRICT, str(exc)
    except CaseFailed as exc:
        level = failing_level(case, exc)
        ctx.failed_level = level
        ctx.resting_on = getattr(exc, "sentences", ()) or case.sentences
        return FAILING[level], str(exc)
    except HarnessError as exc:
        return Verdict.ERROR, str(exc)
    except UsageError as exc:
        closer = _closed_by_broker(ctx.probes)
        if closer is None:  # the case asked the engine for something wrong: a harness bug
            return Verdict.ERROR, f"UsageError: {exc} ({_where(exc)})"
        # the case's next step needed the connection the broker had closed: no sentence
        # forbids closing (a TCP close without a close frame is the checker's and
        # `outcome`'s), so it is a shortfall
        level = failing_level(case, NoDelivery(""))
        ctx.failed_level = level
        return FAILING[level], f"{closer} before the case's next step ({exc})"
    except Exception as exc:
        return Verdict.ERROR, f"{type(exc).__name__}: {exc} ({_where(exc)})"
    return Verdict.OK, ""


def _in_words(
    case: Case, profile: Profile, verdict: Verdict, reason: str, ctx: CaseContext
) -> tuple[Verdict, str]:
    """The reason as a broker developer reads it: a verdict against the spec ends with the
    sentences it rests on (quoted from the manifest), a DIFFERS says which model and whether
    the profile claims it, an OK that recorded a failure (a MAY case, a shortfall) says
    that no sentence binds the broker there."""
    if not reason:
        return verdict, reason
    if verdict == Verdict.DIFFERS:
        claim = (
            f"the profile {profile.name!r} claims it"
            if profile.claims(case.model)
            else f"the profile {profile.name!r} does not claim it"
        )
        return verdict, f"differs from the {case.model} model ({claim}): {reason}"
    if verdict == Verdict.OK and ctx.failed_level == MAY:
        return verdict, f"recorded (no sentence binds the broker here): {reason}"
    checked = verdict in (Verdict.FAILED, Verdict.NON_STRICT)
    if checked and ctx.resting_on and not reason.startswith("checker:"):
        quoted = "; ".join(quote(s) for s in _resting_on(ctx.resting_on, verdict))
        return verdict, f"{reason} ({quoted})"
    return verdict, reason


def _resting_on(sentences: tuple[str, ...], verdict: Verdict) -> tuple[str, ...]:
    """The sentences a FAILED (the MUST-class ones) or NON-STRICT (the SHOULD ones) rests
    on, by the manifest's levels; all of them without the manifest."""
    module = manifest()
    if module is None:
        return sentences
    wanted = MUST_LEVELS if verdict == Verdict.FAILED else SHOULD_LEVELS
    chosen = []
    for sentence_id in sentences:
        with contextlib.suppress(KeyError):
            if module.sentence(sentence_id).level in wanted:
                chosen.append(sentence_id)
    return tuple(chosen) or sentences


def _closed_by_broker(probes: list[Probe]) -> str | None:
    """How the broker closed one of the case's connections (its close frame or the TCP
    stream), or None when it closed none."""
    for probe in probes:
        remote = probe.conn.remote_close if probe.conn is not None else None
        if remote is not None:
            condition = remote.error.condition if remote.error is not None else None
            return f"the broker closed the connection (close {condition or 'without error'})"
        if probe.peer_closed:
            return "the broker closed the TCP connection"
        own = _probe_closed_on_broker_frame(probe.recording)
        if own is not None:
            return own
    return None


# the conditions the probe's engine closes with on a broker frame it cannot take (2.3.1
# frame size, 2.3.2 undecodable bytes): the connection ended because of the broker's frame
_ENGINE_CLOSE_CONDITIONS = ("amqp:connection:framing-error", "amqp:decode-error")


def _frame_the_probe_closed_on(recording: Recording) -> int | None:
    """The index of the broker frame the probe's engine closed the connection on (the
    broker's last item before that close), or None."""
    last_broker = None
    for item in recording.items:
        if item.direction != CLIENT:
            last_broker = item.index
            continue
        body = getattr(item.item, "performative", None)
        error = body.error if isinstance(body, Close) else None
        if error is not None and str(error.condition) in _ENGINE_CLOSE_CONDITIONS:
            return last_broker
    return None


def _probe_closed_on_broker_frame(recording: Recording) -> str | None:
    """How the probe's engine closed the connection on a broker frame it could not take
    (a frame over the negotiated max-frame-size, bytes that do not decode), or None."""
    for item in recording.items:
        frame = item.item
        body = getattr(frame, "performative", None)
        if item.direction != CLIENT or not isinstance(body, Close) or body.error is None:
            continue
        condition = str(body.error.condition)
        if condition in _ENGINE_CLOSE_CONDITIONS:
            description = body.error.description or ""
            return (
                f"the probe closed the connection (close {condition} '{description}') on a "
                f"broker frame it could not take (frame #{item.index - 1} or before)"
            )
    return None


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno}"


def unjudgeable_after(recording: Recording) -> int | None:
    """The index of the probe's first deliberately malformed item (bytes the monitor could
    not decode) or first frame breaking a rule (the checker's finding against the probe)
    on this connection; None when it sent neither. From there on the checker's model of
    the probe's state is not the broker's (it never saw that begin, or refused to count
    it), so its findings on the broker's later frames prove nothing: the broker's
    correct reply to the probe's malformed begin looks like a begin nobody asked for."""
    marks = [v.frame_index for v in recording.probe_violations]
    for item in recording.items:
        if item.direction == CLIENT and item.item is None:
            marks.append(item.index)
            break
    return min(marks) if marks else None


def broker_violations(case: Case, recordings: list[Recording]) -> list[tuple[Recording, Violation]]:
    """The checker's findings against the broker that grade the case: not those on frames
    after the probe's own malformed or illegal frame (`unjudgeable_after`), nor the rules
    the case's own deliberate misbehaviour may set off (`ignore_rules`)."""
    found = []
    for recording in recordings:
        after = unjudgeable_after(recording)
        for violation in recording.violations:
            if violation.rule_id in case.ignore_rules:
                continue
            if after is not None and violation.frame_index > after:
                continue
            found.append((recording, violation))
    return found


def ungraded_violations(case: Case, recordings: list[Recording]) -> list[tuple[int, Violation]]:
    """The broker's violations not graded because they follow the probe's own malformed or
    illegal frame: (that frame's index, the violation), for the trace."""
    skipped = []
    for recording in recordings:
        after = unjudgeable_after(recording)
        if after is None:
            continue
        for violation in recording.violations:
            if violation.rule_id not in case.ignore_rules and violation.frame_index > after:
                skipped.append((after, violation))
    return skipped


def grades_case(case: Case, rule_id: str) -> bool:
    """Whether a finding of `rule_id` grades `case`: the rule enforces one of the sentences
    the case checks. Any other finding (a rule broken on the traffic the case needed to get
    to its check: RabbitMQ 3.10's flows without delivery-count in every publisher's setup)
    is graded once for the whole run, in its rule's row (`checker_rows`), so that it neither
    hides nor stands in for the case's own answer. A rule the catalog does not know grades
    the case (the safe side)."""
    rule = RULES.get(rule_id)
    if rule is None or not rule.sentences:
        return True
    return not case_sentences(case).isdisjoint(rule.sentences)


def _judge(
    case: Case,
    verdict: Verdict,
    reason: str,
    recordings: list[Recording],
    ctx: CaseContext,
    findings: list[CheckerFinding] | None = None,
) -> tuple[Verdict, str]:
    for after, violation in ungraded_violations(case, recordings):
        ctx.note(
            f"not graded (after the probe's own malformed or illegal frame #{after}, the "
            f"checker does not know the probe's state): {violation}"
        )
    found = []
    ended_on = {id(r): _frame_the_probe_closed_on(r) for r in recordings}
    for recording, violation in broker_violations(case, recordings):
        # a finding on the broker frame that made the probe close the case's connection
        # grades the case whatever its rule: the case could not get past it
        graded = grades_case(case, violation.rule_id) or (
            violation.frame_index == ended_on[id(recording)]
        )
        if findings is not None:
            frame = _frame_line(recording, violation.frame_index).removeprefix(
                " | offending frame: "
            )
            findings.append(
                CheckerFinding(
                    violation.rule_id,
                    violation.section,
                    violation.level,
                    str(violation),
                    frame,
                    graded,
                )
            )
        if graded:
            found.append((recording, violation))
        else:
            ctx.note(
                f"graded in its rule's row {row_id(violation.rule_id)}, not here (the rule "
                f"enforces none of the case's sentences): {violation}"
            )
    must = [(r, v) for r, v in found if v.level == MUST]
    should = [(r, v) for r, v in found if v.level != MUST]
    if must and verdict != Verdict.FAILED:
        recording, first = must[0]
        text = f"checker: {first}" + _frame_line(recording, first.frame_index)
        if len(must) > 1:
            text += f" (+{len(must) - 1} more)"
        return Verdict.FAILED, text + (f"; case: {reason}" if reason else "")
    if must:  # the checker's proof (rule + offending frame) first, the case's view after
        recording, first = must[0]
        text = f"checker: {first}" + _frame_line(recording, first.frame_index)
        return verdict, f"{text}; case: {reason}"
    if verdict == Verdict.OK and (should or ctx.should_failures):
        texts = [str(v) for _, v in should] + ctx.should_failures
        return Verdict.NON_STRICT, "; ".join(texts)
    return verdict, reason


ROW_PREFIX = "checker/"  # the id of a checker rule's row: checker/<section>/<rule id>


def row_id(rule_id: str) -> str:
    """The results row of a checker rule (`checker_rows`): `checker/2.7.4/<rule id>`."""
    rule = RULES.get(rule_id)
    return f"{ROW_PREFIX}{rule.section if rule else '?'}/{rule_id}"


def _frame_line(recording: Recording, index: int) -> str:
    for item in recording.items:
        if item.index == index:
            return f" | offending frame: {show_line(item)}"
    return ""


_HEAD, _TAIL = 20000, 5000  # text traces show this many first and last items


def render_trace(case: Case, result: CaseResult) -> str:
    """The case's frame trace as text: header, every connection's items (the first 20,000
    and last 5,000 of a huge one, plus every item a violation cites), violations."""
    lines = [
        f"case {case.case_id} [{case.level}] verdict {result.verdict.value} "
        f"({result.duration:.3f}s)",
        f"spec: {case.sentence}" + (f" ({', '.join(case.sentences)})" if case.sentences else ""),
    ]
    if case.expectation and case.expectation != case.sentence:
        lines.append(f"expects: {case.expectation}")
    if case.model:
        lines.append(f"model: {case.model}")
    if case.outcomes:
        lines.append(f"acceptable outcomes: {', '.join(sorted(case.outcomes))}")
    if result.reason:
        lines.append(f"reason: {result.reason}")
    lines += [f"note: {note}" for note in result.notes]
    for recording in result.recordings:
        lines.append("")
        lines.append(
            f"== connection {recording.connection_id} {recording.client} -> {recording.server}"
        )
        start = recording.start
        cited = {v.frame_index for v in recording.violations}
        items = recording.items
        for position, item in enumerate(items):
            elided = _HEAD <= position < len(items) - _TAIL and item.index not in cited
            if elided:
                if position == _HEAD:
                    skipped = len(items) - _HEAD - _TAIL
                    lines.append(f"... {skipped} items not shown (all bytes are in the pcap)")
                continue
            lines.append(f"{item.time - start:9.6f} {show_line(item)}")
        for violation in recording.violations:
            lines.append(f"!! {violation}")
    return "\n".join(lines) + "\n"
