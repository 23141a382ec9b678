"""The case runner: one case against one broker -> one graded verdict with its trace.

Owns: `BrokerTarget` (the --broker URL), `CaseContext` (what a case's run() gets besides
its first probe: fresh queues, address templates, more connections, capability checks,
outcome checks, SHOULD notes, the run's facts), `CaseResult` and `run_case()`, which runs
the case, asks the checker about every frame the broker sent, grades the verdict (OK,
NON-STRICT, UNSUPPORTED, FAILED, ERROR) and renders the frame trace as text. Touches
nothing on disk: `results` writes files.
"""

from __future__ import annotations

import itertools
import time
import traceback
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from amqpspec.amqp10.checker import Violation
from amqpspec.amqp10.engine.transitions import UsageError
from amqpspec.conformance.admin import Admin
from amqpspec.conformance.facts import RunFacts
from amqpspec.conformance.probe import Probe, Recording
from amqpspec.conformance.profile import Profile
from amqpspec.conformance.registry import MUST, PIPELINED, Case
from amqpspec.conformance.relay import Relay
from amqpspec.conformance.verdicts import (
    CaseFailed,
    HarnessError,
    ShouldNotMet,
    Unsupported,
    Verdict,
)
from amqpspec.traces.render import show_line

_queue_counter = itertools.count(1)


@dataclass(frozen=True, slots=True)
class BrokerTarget:
    host: str
    port: int
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> BrokerTarget:
        """amqp://[user:pass@]HOST[:PORT] (port 5672 by default)."""
        parts = urlsplit(url if "://" in url else f"amqp://{url}")
        if parts.scheme not in ("amqp", ""):
            raise ValueError(f"unsupported broker URL scheme {parts.scheme!r} (amqp:// only)")
        return cls(
            parts.hostname or "127.0.0.1",
            parts.port or 5672,
            unquote(parts.username) if parts.username else None,
            unquote(parts.password) if parts.password else None,
        )

    def __str__(self) -> str:
        return f"amqp://{self.host}:{self.port}"


@dataclass(slots=True)
class CaseResult:
    case_id: str
    level: str
    verdict: Verdict
    duration: float
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    trace_text: str = ""
    recordings: list[Recording] = field(default_factory=list)


class CaseContext:
    """Everything a case may use besides its first probe."""

    def __init__(
        self,
        case: Case,
        target: BrokerTarget,
        profile: Profile,
        admin: Admin,
        deadline: float,
        *,
        pipelined: bool = False,
        facts: RunFacts | None = None,
    ) -> None:
        self.case = case
        self.pipelined = pipelined  # every probe holds its frames until the first wait
        self.facts = RunFacts() if facts is None else facts  # what earlier cases learned
        self.target = target
        self.profile = profile
        self.admin = admin
        self.deadline = deadline
        self.probes: list[Probe] = []
        self.queues: list[str] = []
        self.notes: list[str] = []
        self.should_failures: list[str] = []

    # --- connections --------------------------------------------------------------------
    def probe(self, *, sasl_mechanism: str | None = None, **kw: object) -> Probe:
        """A new connection to the broker (recorded in this case's trace)."""
        mechanism = self.profile.sasl if sasl_mechanism is None else sasl_mechanism
        probe = Probe(
            self.target.host,
            self.target.port,
            username=self.target.username or self.profile.username,
            password=self.target.password or self.profile.password,
            sasl_mechanism=None if mechanism == "none" else mechanism,
            hostname=self.profile.hostname,
            wait=self.profile.wait,
            deadline=self.deadline,
            pipelined=self.pipelined,
            **kw,  # type: ignore[arg-type]
        )
        self.probes.append(probe)
        return probe

    def relay(self) -> Relay:
        """A recording relay to the broker for a real client library (its traffic is judged
        and traced like a probe's); connect the client to 127.0.0.1:<relay.port>."""
        relay = Relay(self.target.host, self.target.port, self.deadline)
        self.probes.append(relay)  # type: ignore[arg-type]
        return relay

    # --- queues and addresses -----------------------------------------------------------
    def queue(
        self, tag: str = "q", arguments: dict[str, Any] | None = None, *, declare: bool = True
    ) -> str:
        """A fresh, empty queue for this case (declared through the admin adapter when the
        profile says queues must be declared, or when it needs `arguments`: a stream or
        quorum queue's x-queue-type...; `declare=False`: only the name, the case declares
        it its own way)."""
        self.require("queues")
        slug = "".join(ch if ch.isalnum() else "-" for ch in self.case.case_id)
        name = f"amqpspec-{slug}-{tag}-{next(_queue_counter)}-{int(time.time() * 1000) % 100000}"
        if not declare:
            pass
        elif arguments is not None:
            self.admin.declare_queue(name, arguments)
        elif self.profile.declare_queues:
            self.admin.declare_queue(name)
        self.queues.append(name)
        return name

    def source(self, queue: str) -> str:
        return self.profile.source(queue)

    def target_address(self, queue: str) -> str:
        return self.profile.target(queue)

    def depth(self, queue: str) -> int:
        self.require("queue-depth")
        return self.admin.queue_depth(queue)

    # --- judgement ----------------------------------------------------------------------
    def require(self, *capabilities: str) -> None:
        missing = [c for c in capabilities if not self.profile.has(c)]
        if missing:
            raise Unsupported(f"profile {self.profile.name!r} lacks {', '.join(missing)}")

    def outcome(self, observed: str, outcomes: set[str] | frozenset[str] | None = None) -> str:
        """Grade an observed outcome: in the acceptable set (the case's by default) -> OK; in
        the case's lenient set -> NON-STRICT; otherwise CaseFailed."""
        acceptable = self.case.outcomes if outcomes is None else frozenset(outcomes)
        self.note(f"outcome {observed}")
        if outcome_matches(observed, acceptable):
            return observed
        if outcome_matches(observed, self.case.lenient):
            self.should_failures.append(
                f"observed {observed!r}; the spec names {', '.join(sorted(acceptable))}"
            )
            return observed
        raise CaseFailed(f"observed {observed!r}; acceptable: {', '.join(sorted(acceptable))}")

    def check(self, condition: bool, message: str) -> None:
        """A requirement of the case's level (MUST -> FAILED, SHOULD -> NON-STRICT)."""
        if not condition:
            raise CaseFailed(message)

    def should(self, condition: bool, message: str) -> None:
        """A SHOULD inside the case: not met -> NON-STRICT (the case goes on)."""
        if not condition:
            self.should_failures.append(message)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def close(self) -> None:
        # newest connection first: a consumer opened to check redelivery goes away before
        # the connection holding unsettled deliveries, so teardown cannot race a requeue
        # into a closing connection (keeps verdicts deterministic)
        for probe in reversed(self.probes):
            try:
                if not probe.closed:
                    if probe.conn is not None:
                        probe.close(wait=True)
                    else:
                        probe.disconnect()
            except Exception:
                probe.disconnect()
        for queue in self.queues:
            if self.profile.declare_queues:
                try:
                    self.admin.delete_queue(queue)
                except Exception:
                    pass


def outcome_matches(observed: str, patterns: frozenset[str]) -> bool:
    return any(observed.startswith(p[:-1]) if p.endswith("*") else observed == p for p in patterns)


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
    one write) and grade it. `facts`: what earlier cases of the run learned
    about the broker (a fresh record by default: every wait in full)."""
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
    verdict, reason = Verdict.OK, ""
    try:
        probe = ctx.probe()
        case.run(probe, ctx)
    except Unsupported as exc:
        verdict, reason = Verdict.UNSUPPORTED, str(exc)
    except ShouldNotMet as exc:
        verdict, reason = Verdict.NON_STRICT, str(exc)
    except CaseFailed as exc:
        verdict = Verdict.FAILED if case.level == MUST else Verdict.NON_STRICT
        reason = str(exc)
    except HarnessError as exc:
        verdict, reason = Verdict.ERROR, str(exc)
    except UsageError as exc:
        closer = _closed_by_broker(ctx.probes)
        if closer is None:  # the case asked the engine for something wrong: a harness bug
            verdict, reason = Verdict.ERROR, f"UsageError: {exc} ({_where(exc)})"
        else:  # the case's next step needed the connection the broker had closed
            verdict = Verdict.FAILED if case.level == MUST else Verdict.NON_STRICT
            reason = f"{closer} before the case's next step ({exc})"
    except Exception as exc:
        verdict = Verdict.ERROR
        reason = f"{type(exc).__name__}: {exc} ({_where(exc)})"
    finally:
        ctx.close()
    recordings = [probe.recording for probe in ctx.probes]  # finished as they closed
    verdict, reason = _judge(case, verdict, reason, recordings, ctx)
    result = CaseResult(
        case.case_id,
        case.level,
        verdict,
        time.monotonic() - started,
        reason,
        ctx.notes,
        recordings=recordings,
    )
    result.trace_text = render_trace(case, result)
    return result


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
    return None


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno}"


def broker_violations(case: Case, recordings: list[Recording]) -> list[tuple[Recording, Violation]]:
    """The checker's findings against the broker (a recording's monitor keeps only the
    broker's violations: `probe.broker_monitor`), minus the rules the case's own
    deliberate misbehaviour may set off."""
    found = []
    for recording in recordings:
        for violation in recording.violations:
            if violation.rule_id not in case.ignore_rules:
                found.append((recording, violation))
    return found


def _judge(
    case: Case,
    verdict: Verdict,
    reason: str,
    recordings: list[Recording],
    ctx: CaseContext,
) -> tuple[Verdict, str]:
    found = broker_violations(case, recordings)
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
        f"spec: {case.sentence}",
    ]
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
