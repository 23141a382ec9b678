"""Graded verdicts (h2spec / autobahn style) and the exceptions a case raises to reach them.

Owns: `Verdict` and the case-side signals `Unsupported`, `CaseFailed`, `ShouldNotMet`,
`HarnessError`. A case's run() raises these; the runner turns them (plus the checker's
violations) into one verdict. Touches nothing else.
"""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    OK = "OK"
    NON_STRICT = "NON-STRICT"  # a SHOULD not met
    UNSUPPORTED = "UNSUPPORTED"  # the profile says the broker lacks a needed capability
    FAILED = "FAILED"  # a MUST broken
    ERROR = "ERROR"  # the harness could not run the case

    @classmethod
    def parse(cls, text: str) -> Verdict:
        return cls(text.strip().upper().replace("_", "-"))


PASSING = frozenset({Verdict.OK, Verdict.NON_STRICT, Verdict.UNSUPPORTED})


class Unsupported(Exception):  # noqa: N818 - named after the verdict it yields
    """The broker (per its profile, or as observed) lacks what the case needs."""


class CaseFailed(AssertionError):  # noqa: N818 - named after the verdict it yields
    """The broker did not do what the case's requirement says. For a MUST case this is
    FAILED; for a SHOULD case NON-STRICT."""


class ShouldNotMet(Exception):  # noqa: N818 - named after the verdict it yields
    """A SHOULD-level expectation inside a MUST case was not met: NON-STRICT at worst."""


class HarnessError(Exception):
    """The harness could not run the case (connection refused, admin API down...)."""
