"""Each checker rule that links.toml gives a reference-broker fault fires, on the broker's
frames, with that fault switched on (the scenarios of tests/test_broker_faults.py), and the
clean broker's run of the same scenario is free of it: the fault proves the rule can fail."""

from __future__ import annotations

import pytest
from broker_support import EngineClient, running_broker_with_queue
from test_broker_faults import SCENARIOS

from amqpspec.conformance import manifest

FAULTS = sorted(
    (fault, rule_id)
    for rule_id, note in manifest.rule_notes().items()
    for fault in note.get("faults", ())
)


def _server_rules(fault: str, enabled: bool) -> set[str]:
    scenario, limits = SCENARIOS[fault]
    with running_broker_with_queue(faults=(fault,) if enabled else (), limits=limits or None) as b:
        client = EngineClient(b.port, liveness_bound=0.2)  # drain and echo replies are owed
        try:
            client.open()
            scenario(b, client)
            client.end_trace()  # what is still owed at the end of the trace is reported
        finally:
            client.close()
    return {v.rule_id for v in client.violations if v.origin == "server"}


def test_some_rules_have_a_fault() -> None:
    assert len(FAULTS) >= 5


@pytest.mark.parametrize(("fault", "rule_id"), FAULTS)
def test_the_fault_makes_the_rule_fire(fault: str, rule_id: str) -> None:
    assert rule_id in _server_rules(fault, enabled=True), f"{fault} did not fire {rule_id}"
    assert rule_id not in _server_rules(fault, enabled=False), f"{rule_id} fires on a clean broker"
