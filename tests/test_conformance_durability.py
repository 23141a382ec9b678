"""The durability cases (conformance/cases/s3_2_1_durability.py) against the reference broker
restarted through its admin API (POST /api/restart, runtime/server.py): OK on the clean
broker with a data dir, FAILED with each fault that loses durable messages at a restart,
UNSUPPORTED without a data dir (the broker refuses the restart) or without the profile's
restart adapter; and the restart itself: same ports, a new boot_id, durable queues and
their messages back, every connection dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator

import pytest
from broker_support import management, running_broker

from amqpspec.conformance.admin import make_admin
from amqpspec.conformance.profile import load_profile
from amqpspec.conformance.run.context import BrokerTarget
from amqpspec.conformance.run.registry import load_cases
from amqpspec.conformance.run.runner import run_case
from amqpspec.conformance.verdicts import Verdict
from amqpspec.reference_broker.admin.client import ManagementError
from amqpspec.reference_broker.runtime.server import BrokerThread

CASES = {case.case_id: case for case in load_cases()}
DURABLE = "3.2.1/durable-message-survives-restart"
UNSETTLED = "3.2.1/durable-unsettled-delivery-survives-restart"
TRANSIENT = "3.2.1/non-durable-message-restart"
PERSISTED = "3.5.5/dynamic-node-persisted"


@contextlib.contextmanager
def kept_broker(*faults: str) -> Iterator[BrokerThread]:
    """An in-process reference broker with `faults` and a data dir of its own."""
    with tempfile.TemporaryDirectory() as data, running_broker(faults=faults, data_dir=data) as b:
        yield b


def _run(case_id: str, broker: BrokerThread, profile=None):
    profile = profile or load_profile("reference")
    admin = make_admin(profile.admin, f"http://guest:guest@127.0.0.1:{broker.admin_port}")
    try:
        target = BrokerTarget.parse(f"amqp://127.0.0.1:{broker.port}")
        return run_case(CASES[case_id], target, profile, admin)
    finally:
        admin.close()


def test_restart_keeps_ports_and_durable_queues_and_drops_connections() -> None:
    with kept_broker() as b:
        admin = management(b)
        admin.declare_queue("kept", durable=True)
        admin.declare_queue("gone", durable=False)
        port, admin_port = b.port, b.admin_port
        before = admin.overview()["boot_id"]
        profile = load_profile("reference")
        make_admin(profile.admin, f"http://guest:guest@127.0.0.1:{admin_port}").restart()
        assert (b.port, b.admin_port) == (port, admin_port)
        assert management(b).overview()["boot_id"] != before
        names = {q["name"] for q in management(b).queues()}
        assert "kept" in names and "gone" not in names
        assert b.server.restarts == 1


def test_restart_refused_without_a_data_dir() -> None:
    with running_broker() as b, pytest.raises(ManagementError) as refused:
        management(b).restart()
    assert refused.value.status == 400 and "data-dir" in str(refused.value.reason)


@pytest.mark.parametrize("case_id", [DURABLE, UNSETTLED, TRANSIENT, PERSISTED])
def test_durability_cases_ok_on_the_clean_broker(case_id: str) -> None:
    with kept_broker() as b:
        result = _run(case_id, b)
    assert result.verdict == Verdict.OK, result.reason


@pytest.mark.parametrize(
    ("fault", "case_id", "verdict"),
    [
        ("durable-messages-in-memory", DURABLE, Verdict.FAILED),
        ("consume-on-delivery", UNSETTLED, Verdict.FAILED),
        ("forget-persistent-nodes", PERSISTED, Verdict.DIFFERS),  # the termdur model
    ],
)
def test_durability_cases_catch_the_faults(fault: str, case_id: str, verdict: Verdict) -> None:
    with kept_broker(fault) as b:
        result = _run(case_id, b)
    assert result.verdict == verdict, result.reason
    assert "restart" in result.reason


def test_unsupported_without_a_data_dir_or_a_restart_adapter() -> None:
    with running_broker() as b:
        result = _run(DURABLE, b)
    assert result.verdict == Verdict.UNSUPPORTED, result.reason
    assert "data-dir" in result.reason
    reference = load_profile("reference")
    without = dataclasses.replace(
        reference, admin=dataclasses.replace(reference.admin, restart="none")
    )
    with kept_broker() as b:
        result = _run(DURABLE, b, without)
    assert result.verdict == Verdict.UNSUPPORTED, result.reason


def test_only_the_reference_profile_claims_restart() -> None:
    for name in ("rabbitmq3", "proton-example", "proton-python"):
        assert not load_profile(name).has("restart"), name
    assert CASES[DURABLE].serial  # a restart drops every connection: the case runs alone
