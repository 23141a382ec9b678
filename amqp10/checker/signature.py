"""Violation signatures: one stable name per distinct bug, for clustering and deduplication.

Owns: `SIGNATURE_VERSION`, `signature(...)` and `endpoint_state(...)`. A signature is made
only of what identifies the bug: the rule (id, spec section), the performative that broke
it and the sending endpoint's connection state (2.4.1 states, coarsened to before-open,
opened, close-sent). Never times, frame indices, ports, channel or handle numbers, so the
same bug gets the same signature on any run, any partitioning, any machine. Triage
(spark_triage) and the fuzzer (fuzz, docs/fuzz.md) both name their clusters with it. Pure; no I/O.
Bump SIGNATURE_VERSION on any change of the inputs or the format (old clusters then no
longer compare equal, which is the point).
"""

from __future__ import annotations

import re

SIGNATURE_VERSION = 1

BEFORE_OPEN = "before-open"
OPENED = "opened"
CLOSE_SENT = "close-sent"
ENDPOINT_STATES = (BEFORE_OPEN, OPENED, CLOSE_SENT)

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def endpoint_state(sent_open: bool, sent_close: bool) -> str:
    """The sending endpoint's connection state (2.4.6 diagram), coarsened."""
    if sent_close:
        return CLOSE_SENT
    return OPENED if sent_open else BEFORE_OPEN


def signature(rule_id: str, section: str, performative: str, state: str) -> str:
    """'v1+<rule id>+<section>+<performative>+<state>': readable, file-name safe, exact.

    `performative` is the frame's name ('transfer', 'empty', 'protocol-header', ...).
    """
    if state not in ENDPOINT_STATES:
        raise ValueError(f"unknown endpoint state {state!r}")
    parts = (rule_id, section, performative or "none", state)
    return "+".join([f"v{SIGNATURE_VERSION}", *(_SAFE.sub("_", part) for part in parts)])


def rule_of(sig: str) -> str:
    """The rule id a signature names (for version 1 signatures)."""
    return sig.split("+")[1]
