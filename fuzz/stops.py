"""How a campaign's work stops short: the names fuzz.campaign shares with its worker
processes (fuzz.processes), its variants (fuzz.differential, fuzz.multiparty) and the CLIs.

Owns: `WORKER_FAILED` (the start of `Stats.stopped` for a campaign stopped by an error of
the fuzzer's own: no verdict, CLI exit 3), `BROKER_GONE` and `broker_gone` (`Stats.stopped`
of a campaign whose broker did not come back within `--restart-wait`: the verdicts stand) and
`TriageAbandonedError` (a triage stopped between two tests once the campaign's grace is
over). Touches nothing else.
"""

from __future__ import annotations

WORKER_FAILED = "a worker failed"  # Stats.stopped of a campaign stopped by our own error
BROKER_GONE = (  # Stats.stopped of a campaign whose broker stopped serving for good
    "the broker stopped serving and was not back within {seconds}s (--restart-wait)"
)


def broker_gone(stopped: str) -> bool:
    """Whether `Stats.stopped` says the campaign's broker stopped serving for good."""
    return stopped.startswith(BROKER_GONE.split("{", 1)[0])


class TriageAbandonedError(Exception):
    """A triage stopped between two tests (the campaign's grace is over)."""
