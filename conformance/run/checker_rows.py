"""The checker's rows of a run: one result per checker rule the broker broke.

Owns: `checker_rows()`, which folds the checker findings of every case of a run
(`CaseResult.findings`) into one result per rule, `checker/<section>/<rule id>`: FAILED for
a MUST rule, NON-STRICT for a SHOULD one (the rule's level is its sentence's:
amqp10/checker/rules.py), its reason the first finding with its offending frame and the
sentence quoted, its trace every case the rule fired in. A finding grades its case only when
the rule enforces one of the case's own sentences (`runner.grades_case`); the row grades the
rule over the whole run, so a violation in the traffic every case needs to reach its check
(a flow field missing in each publisher's setup) is one row, not a FAILED on every case
(docs/conformance.md, "Checker rows"). A rule with no finding has no row. Pure: `plugin`
writes the rows beside the cases.
"""

from __future__ import annotations

from collections import defaultdict

from amqpspec.amqp10.checker import RULES
from amqpspec.conformance.run.context import CaseResult, CheckerFinding
from amqpspec.conformance.run.registry import quote
from amqpspec.conformance.run.runner import ROW_PREFIX, row_id
from amqpspec.conformance.verdicts import Verdict

__all__ = ["ROW_PREFIX", "checker_rows", "is_checker_row", "row_id"]

SHOWN_CASES = 5  # cases named in a row's reason (its trace names them all)


def is_checker_row(case_id: str) -> bool:
    return case_id.startswith(ROW_PREFIX)


def checker_rows(results: list[CaseResult]) -> list[CaseResult]:
    """One result per checker rule with a finding in `results`, in rule-id order."""
    by_rule: dict[str, list[tuple[str, CheckerFinding]]] = defaultdict(list)
    for result in results:
        if is_checker_row(result.case_id):
            continue
        for finding in result.findings:
            by_rule[finding.rule_id].append((result.case_id, finding))
    return [_row(rule_id, found) for rule_id, found in sorted(by_rule.items())]


def _row(rule_id: str, found: list[tuple[str, CheckerFinding]]) -> CaseResult:
    rule = RULES.get(rule_id)
    first_case, first = found[0]
    level = rule.level if rule is not None else first.level
    verdict = Verdict.FAILED if level == "MUST" else Verdict.NON_STRICT
    cases = list(dict.fromkeys(case_id for case_id, _ in found))
    named = ", ".join(cases[:SHOWN_CASES]) + (
        f" and {len(cases) - SHOWN_CASES} more" if len(cases) > SHOWN_CASES else ""
    )
    frame = f" | offending frame: {first.frame}" if first.frame else ""
    sentences = "; ".join(quote(s) for s in rule.sentences) if rule is not None else ""
    reason = (
        f"checker: {first.text}{frame}; in {len(found)} finding(s) over {len(cases)} "
        f"case(s): {named}" + (f" ({sentences})" if sentences else "")
    )
    lines = [
        f"checker rule {rule_id} [{level}] verdict {verdict.value}",
        f"spec: {rule.sentence}" if rule is not None else "spec: (rule not in the catalog)",
    ]
    if rule is not None and rule.sentences:
        lines.append(f"sentences: {', '.join(rule.sentences)}")
    lines.append(f"reason: {reason}")
    lines.append("")
    lines.append("findings, by case (each case's trace and pcap hold its frames):")
    for case_id, finding in found:
        graded = "graded the case" if finding.graded else "graded here only"
        lines.append(f"{case_id} ({graded}): {finding.text}")
        if finding.frame:
            lines.append(f"    frame: {finding.frame}")
    result = CaseResult(row_id(rule_id), level, verdict, 0.0, reason)
    result.trace_text = "\n".join(lines) + "\n"
    result.notes.append(f"first seen in {first_case}")
    return result
