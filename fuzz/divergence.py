"""What a divergence is: two brokers' reactions to one case, compared.

Owns: `Reaction` / `reaction_of(outcome)` (what one broker did with a case, coarse enough
to compare across brokers; fuzz.differential's module doc says which reaction is the
strongest), `Divergence` and `compare(steps, a, b)` (the divergence kinds, first match),
`input_name(label)` (the bad step's performative and field), `signature_parts(sig)` and
the names fuzz.differential and fuzz.differential_report share: DIVERGENCE (Finding.kind),
SPEC_ALLOWS_BOTH, ROBUSTNESS, the reaction outcomes and the kinds, SIDE_B_PCAP / SIDE_B_TXT.
Nothing here builds or parses AMQP bytes: fuzz.evidence reads them through amqp10.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from amqpspec.fuzz.case import Step, mutation_label
from amqpspec.fuzz.evidence import bad_step
from amqpspec.fuzz.oracle import CRASH, Outcome, Verdict

DIVERGENCE = "divergence"  # Finding.kind
SPEC_ALLOWS_BOTH = "spec allows both"  # Finding.level when no side breaks a rule
ROBUSTNESS = "robustness"
SIGNATURE_VERSION = "d1"
SIDE_B_PCAP = "reproducer-b.pcap"  # the second broker's exchange, beside reproducer.pcap
SIDE_B_TXT = "reproducer-b.txt"

REFUSED, DROPPED, ACCEPTED, SILENT, CRASHED = "refused", "dropped", "accepted", "silent", "crashed"
_SCOPES = {"close": "connection", "end": "session", "detach": "link"}

ANSWER_VS_SILENCE = "answer-vs-silence"
CRASH_DIVERGENCE = "crash"
REFUSE_VS_ACCEPT = "refuse-vs-accept"
REFUSAL_SCOPE = "refusal-scope"
ERROR_CONDITION = "error-condition"
VERDICT = "verdict"
KINDS = (ANSWER_VS_SILENCE, CRASH_DIVERGENCE, REFUSE_VS_ACCEPT, REFUSAL_SCOPE, ERROR_CONDITION)
KINDS += (VERDICT,)


@dataclass(frozen=True, slots=True)
class Reaction:
    """What one broker did with a case, comparable across brokers."""

    outcome: str  # REFUSED, DROPPED, ACCEPTED, SILENT, CRASHED
    scope: str = ""  # sasl, connection, session, link (REFUSED); tcp (DROPPED)
    condition: str = ""  # the error condition, or "sasl code N"

    @property
    def key(self) -> str:
        """'refused:connection:amqp:decode-error', 'accepted', ..."""
        return ":".join(p for p in (self.outcome, self.scope, self.condition) if p)

    def text(self) -> str:
        if self.outcome == REFUSED:
            if self.scope == "sasl":
                return f"refuses the login ({self.condition})"
            frame = {"connection": "close", "session": "end", "link": "detach"}[self.scope]
            return f"refuses the {self.scope} ({frame} with {self.condition})"
        if self.outcome == DROPPED:
            return "drops the TCP connection without a close frame"
        if self.outcome == ACCEPTED:
            return "accepts it (no error; it answers the fuzzer's close)"
        if self.outcome == SILENT:
            return "stays silent (no close and no TCP close, even after the fuzzer's close)"
        return "stops serving (a fresh connection fails)"

    @classmethod
    def from_key(cls, key: str) -> Reaction:
        outcome, _, rest = key.partition(":")
        scope, _, condition = rest.partition(":")
        return cls(outcome, scope, condition)


def reaction_of(outcome: Outcome) -> Reaction:
    """The broker's strongest reaction to the whole case (module doc): a failed login,
    else a close with an error, else a TCP close without a close frame, else an end with
    an error, else a detach with one (the first of that scope); else accepted or silent.
    The strongest, not the first: the order in which one broker meets two errors of one
    case depends on how its reads cut the bytes, and two runs of one broker differ in it."""
    if outcome.verdict is not None and outcome.verdict.kind == CRASH:
        return Reaction(CRASHED)
    exchange = outcome.exchange
    if exchange is None:
        return Reaction(CRASHED)
    refusals: dict[str, str] = {}
    for got in exchange.received:
        if got.name == "sasl-outcome":
            code = getattr(got.item.performative, "code", 0)  # type: ignore[union-attr]
            if code:
                return Reaction(REFUSED, "sasl", f"sasl code {code}")
        condition = got.condition
        if condition:
            refusals.setdefault(_SCOPES[got.name], condition)
    if "connection" in refusals:
        return Reaction(REFUSED, "connection", refusals["connection"])
    if exchange.dropped is not None and exchange.first_close() is None:
        return Reaction(DROPPED, "tcp")
    for scope in ("session", "link"):
        if scope in refusals:
            return Reaction(REFUSED, scope, refusals[scope])
    if exchange.first_close() is not None or exchange.dropped is not None:
        return Reaction(ACCEPTED)
    return Reaction(SILENT)


def _verdict_key(verdict: Verdict | None) -> str:
    return f"{verdict.kind}/{verdict.rule}" if verdict is not None else "none"


def input_name(label: str) -> str:
    """The bad step's performative and field, without the mutation's value:
    'begin[remote-channel=ulong]' -> 'begin/remote-channel', 'flow[drain storm x64]' ->
    'flow/drain storm xN'."""
    base = mutation_label(label).strip()
    performative, _, rest = base.partition("[")
    what = re.split(r"=| constructor ", rest.rstrip("]"), maxsplit=1)[0]
    text = f"{performative}/{what}" if what else performative
    return re.sub(r"\d+", "N", text) or "none"


@dataclass(frozen=True, slots=True)
class Divergence:
    kind: str
    a: Reaction
    b: Reaction
    what: str  # input_name of the bad step
    verdicts: tuple[str, str] = ("none", "none")  # (kind/rule) per side, for VERDICT

    @property
    def behaviour(self) -> str:
        """The kind and both reactions (and verdicts): what minimising keeps."""
        text = f"{self.kind}|A={self.a.key}|B={self.b.key}"
        if self.kind == VERDICT:
            text += f"|A={self.verdicts[0]}|B={self.verdicts[1]}"
        return text

    @property
    def signature(self) -> str:
        return f"{SIGNATURE_VERSION}|{DIVERGENCE}|{self.what}|{self.behaviour}"


def compare(steps: list[Step], a: Outcome, b: Outcome) -> Divergence | None:
    """How the two brokers' outcomes of one case differ (module doc), or None."""
    ra, rb = reaction_of(a), reaction_of(b)
    what = input_name(steps[bad_step(steps, len(steps))].label) if steps else "none"
    outcomes = {ra.outcome, rb.outcome}
    kind = ""
    if ra.outcome != rb.outcome:
        if CRASHED in outcomes:
            kind = CRASH_DIVERGENCE
        elif SILENT in outcomes:
            kind = ANSWER_VS_SILENCE
        elif outcomes == {REFUSED, DROPPED}:
            kind = REFUSAL_SCOPE
        else:
            kind = REFUSE_VS_ACCEPT
    elif ra.scope != rb.scope:
        kind = REFUSAL_SCOPE
    elif ra.condition != rb.condition:
        kind = ERROR_CONDITION
    verdicts = (_verdict_key(a.verdict), _verdict_key(b.verdict))
    if not kind and verdicts[0] != verdicts[1]:
        kind = VERDICT
    if not kind:
        return None
    return Divergence(kind, ra, rb, what, verdicts if kind == VERDICT else ("none", "none"))


def signature_parts(sig: str) -> dict[str, str]:
    """A divergence signature taken apart: kind, what, a, b (reaction keys)."""
    parts = sig.split("|")
    out = {"kind": parts[3] if len(parts) > 3 else "", "what": parts[2] if len(parts) > 2 else ""}
    sides = [p[2:] for p in parts[4:] if p.startswith(("A=", "B="))]
    out["a"], out["b"] = [*sides, "", ""][:2]
    out["verdicts"] = "|".join(sides[2:4])
    return out
