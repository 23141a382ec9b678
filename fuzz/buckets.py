"""Where a verdict goes: its signature (the bucket of one finding) and its broker behaviour
(the grouping of findings.md), for a single-connection or a multi-party case.

Owns: `case_signature(case, verdict)` (kind, rule, section, the triggering step's label
and the state the reference model, fuzz.model.ServerModel, says it arrived in; a
multi-party case's: fuzz.multiparty.multi_signature) and `case_behaviour(case, verdict)`
(fuzz.behaviour's key: kind, rule and class of input; '' for a multi-party case, whose
every signature is triaged). Builds no AMQP bytes.
"""

from __future__ import annotations

from amqpspec.fuzz import multiparty
from amqpspec.fuzz.behaviour import behaviour_key, input_class
from amqpspec.fuzz.case import Case
from amqpspec.fuzz.findings import signature
from amqpspec.fuzz.model import ServerModel
from amqpspec.fuzz.oracle import Verdict


def case_signature(case: Case | multiparty.MultiCase, verdict: Verdict) -> str:
    if isinstance(case, multiparty.MultiCase):
        return multiparty.multi_signature(verdict)
    position = verdict.step if verdict.step is not None else len(case.steps) - 1
    position = max(0, min(position, len(case.steps) - 1))
    model = ServerModel()
    state = "START/-/-"
    for i, s in enumerate(case.steps[: position + 1]):
        state = model.feed(s)
        if i == position:
            break
    label = case.steps[position].label if case.steps else "none"
    return signature(verdict.kind, verdict.rule, verdict.section, label, state)


def case_behaviour(case: Case | multiparty.MultiCase, verdict: Verdict) -> str:
    """The broker behaviour a verdict groups under (fuzz.behaviour; '' for a multi-party
    case: every signature of those is triaged)."""
    if isinstance(case, multiparty.MultiCase):
        return ""
    position = verdict.step if verdict.step is not None else len(case.steps) - 1
    return behaviour_key(verdict.kind, verdict.rule, input_class(case.steps, position))
