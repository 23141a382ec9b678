"""amqp10.checker.signature: exact, versioned, made of the bug's identity only."""

from __future__ import annotations

import pytest

from amqpspec.amqp10.checker import RULES
from amqpspec.amqp10.checker.signature import (
    CLOSE_SENT,
    OPENED,
    SIGNATURE_VERSION,
    endpoint_state,
    rule_of,
    signature,
)


def test_signature_names_rule_section_performative_state_and_version():
    sig = signature("link.credit.transfer-beyond-credit", "2.6.7", "transfer", OPENED)
    assert sig == "v1+link.credit.transfer-beyond-credit+2.6.7+transfer+opened"
    assert SIGNATURE_VERSION == 1
    assert rule_of(sig) == "link.credit.transfer-beyond-credit"


def test_every_catalog_rule_gives_distinct_file_safe_signatures():
    sigs = {signature(rule.rule_id, rule.section, "flow", OPENED) for rule in RULES.values()}
    assert len(sigs) == len(RULES)
    assert all("/" not in sig and " " not in sig for sig in sigs)


def test_state_distinguishes_and_unknown_state_is_refused():
    assert signature("r", "2.7.9", "flow", CLOSE_SENT) != signature("r", "2.7.9", "flow", OPENED)
    assert endpoint_state(True, True) == CLOSE_SENT
    assert endpoint_state(False, False) == "before-open"
    with pytest.raises(ValueError):
        signature("r", "1", "flow", "half-open")
