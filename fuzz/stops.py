"""How a campaign's work stops short: the names fuzz.campaign shares with its worker
processes (fuzz.processes), its variants (fuzz.differential, fuzz.multiparty) and the CLIs.

Owns: `WORKER_FAILED` (the start of `Stats.stopped` for a campaign stopped by an error of
the fuzzer's own: no verdict, CLI exit 3) and `TriageAbandonedError` (a triage stopped
between two tests once the campaign's grace is over). Touches nothing else.
"""

from __future__ import annotations

WORKER_FAILED = "a worker failed"  # Stats.stopped of a campaign stopped by our own error


class TriageAbandonedError(Exception):
    """A triage stopped between two tests (the campaign's grace is over)."""
