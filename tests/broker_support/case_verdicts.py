"""Conformance cases run in-process against a broker a test started (tests/test_broker_*.py).

Owns: `case_verdicts(broker, *case_ids, profile_name=)`, the cases' verdicts and reasons
against any broker object with `port` and `admin_port` (the profile's waits cut to 1 s).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from amqpspec.conformance.admin import make_admin
from amqpspec.conformance.profile import load_profile
from amqpspec.conformance.run.context import BrokerTarget
from amqpspec.conformance.run.registry import load_cases
from amqpspec.conformance.run.runner import run_case


def case_verdicts(broker: Any, *case_ids: str, profile_name: str = "reference") -> dict:
    """The conformance cases `case_ids` against `broker` (profile `profile_name`, waits of
    1 s): case id -> (verdict, reason)."""
    cases = {case.case_id: case for case in load_cases()}
    profile = dataclasses.replace(load_profile(profile_name), wait=1.0)
    admin = make_admin(profile.admin, f"http://guest:guest@127.0.0.1:{broker.admin_port}")
    target = BrokerTarget.parse(f"amqp://127.0.0.1:{broker.port}")
    try:
        results = [run_case(cases[c], target, profile, admin) for c in case_ids]
    finally:
        admin.close()
    return {r.case_id: (r.verdict, r.reason) for r in results}
