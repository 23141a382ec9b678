"""Graded verdicts (h2spec / autobahn style) and the exceptions a case raises to reach them.

Owns: `Verdict`, `PASSING` (the verdicts that never fail a run by themselves) and the
case-side signals `Unsupported`, `CaseFailed`, `ShouldNotMet`, `HarnessError`. A case's
run() raises these; the runner turns them (plus the checker's violations) into one verdict
according to the case's level (docs/conformance.md, "Verdicts"). Touches nothing else.
"""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    OK = "OK"
    NON_STRICT = "NON-STRICT"  # a SHOULD not met
    UNSUPPORTED = "UNSUPPORTED"  # the profile says the broker lacks a needed capability
    DIFFERS = "DIFFERS"  # differs from the model the profile declares; the spec requires none
    FAILED = "FAILED"  # a MUST that binds the broker broken
    ERROR = "ERROR"  # the harness could not run the case

    @classmethod
    def parse(cls, text: str) -> Verdict:
        return cls(text.strip().upper().replace("_", "-"))


# never non-conformance: DIFFERS fails a run only under `amqpspec run --gate-differs`, and
# then only for a model the broker's profile claims (plugin.RunState.exit_status)
PASSING = frozenset({Verdict.OK, Verdict.NON_STRICT, Verdict.UNSUPPORTED, Verdict.DIFFERS})
# what each verdict means, one line (the report's legend, the run's summary)
MEANING = {
    Verdict.OK: "the broker did what the case's sentence requires",
    Verdict.NON_STRICT: "a SHOULD not met",
    Verdict.UNSUPPORTED: "the broker lacks a capability the case needs",
    Verdict.DIFFERS: "differs from the model the profile declares (the spec requires none)",
    Verdict.FAILED: "a MUST that binds the broker broken",
    Verdict.ERROR: "the harness could not run the case",
}


class Unsupported(Exception):  # noqa: N818 - named after the verdict it yields
    """The broker (per its profile, or as observed) lacks what the case needs."""


class CaseFailed(AssertionError):  # noqa: N818 - named after the verdict it yields
    """The broker did not do what the case expects. The case's level decides the verdict
    (MUST -> FAILED, SHOULD -> NON-STRICT, MODEL -> DIFFERS, MAY -> OK, recorded), unless
    the failure names its own `level` and `sentences` (`CaseContext.must`: a MUST a MODEL
    or MAY case meets on its way, e.g. an accepted message resent, 3.5.2)."""

    def __init__(self, message: str, *, level: str | None = None, sentences=()) -> None:
        super().__init__(message)
        self.level = level
        self.sentences = tuple(sentences)


# CaseFailed.level of a delivery (or a publisher's credit) that never came: no sentence
# requires a sender to use the credit it has, so a MUST, SHOULD or MAY case records it (OK,
# the reason kept) and a MODEL case whose model expects it is DIFFERS (runner.FAILING)
SHORTFALL = "SHORTFALL"
MODEL_LEVEL = "MODEL"  # CaseFailed.level of an expectation of the case's model (registry.MODEL)


class NoDelivery(CaseFailed):
    """A delivery the case waited for did not come (the broker sent nothing, or ended the
    link, session or connection instead): a SHORTFALL unless the case says otherwise."""

    def __init__(self, message: str) -> None:
        super().__init__(message, level=SHORTFALL)


# CaseFailed.level of an answer a step of the case needed and did not get (the broker's open,
# begin, attach, detach or end): no sentence requires most of them, and the case could not
# get to its own check, so it is UNSUPPORTED (a MAY case records it: runner.failing_level)
UNANSWERED = "UNANSWERED"


class Unanswered(CaseFailed):
    """The broker did not answer a step the case needs (or refused the link it needs)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, level=UNANSWERED)


class ShouldNotMet(Exception):  # noqa: N818 - named after the verdict it yields
    """A SHOULD-level expectation inside a MUST case was not met: NON-STRICT at worst."""


class HarnessError(Exception):
    """The harness could not run the case (connection refused, admin API down...)."""
