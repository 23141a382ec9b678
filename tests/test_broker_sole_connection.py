"""The reference broker's sole connection for container
(reference_broker/features/sole_connection.py,
OASIS soleconn v1.0 as Qpid Broker-J checks it) over real sockets: the capability and
policies in its open, refuse-connection and close-existing per container-id, the policy of
the connection already open deciding, strong detection, and the
`sole-connection-weak-detection` fault; and the conformance cases (2.7.1/sole-connection-*)
grading it: OK clean, DIFFERS with the fault, UNSUPPORTED on a profile without the
capability."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from broker_support import EngineClient, running_broker
from broker_support.case_verdicts import case_verdicts

from amqpspec.amqp10.engine import RemoteClose, RemoteOpen
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import symbol, uint
from amqpspec.conformance.verdicts import Verdict
from amqpspec.reference_broker.features.sole_connection import (
    CAPABILITY,
    CONTAINER_ID,
    DETECTION_POLICY,
    ENFORCEMENT,
    ENFORCEMENT_POLICY,
    ESTABLISHMENT_FAILED,
    INVALID_FIELD,
)

REFUSE, CLOSE = 0, 1


@contextlib.contextmanager
def _client(broker, container: str, policy: int | None = None, *, desire: bool = True):
    """An engine client of `container`, its open sent (asking for the capability with
    `policy` when `desire`); closed on leaving."""
    options: dict = {}
    if desire:
        options["desired_capabilities"] = [symbol(CAPABILITY)]
        if policy is not None:
            options["properties"] = {ENFORCEMENT_POLICY: uint(policy)}
    client = EngineClient(broker.port, **options)
    client.conn.container_id = container
    try:
        client.conn.open()
        client.wait_event(RemoteOpen, "open")
        yield client
    finally:
        client.close()


def _open(client) -> dict:
    return client.of(RemoteOpen)[0].open.properties or {}


def _closed(client) -> RemoteClose:
    return client.wait_event(RemoteClose, "close", timeout=3.0)


def _assert_refused(client) -> None:
    assert _open(client).get(ESTABLISHMENT_FAILED) is True
    error = _closed(client).error
    assert error.condition == Cond.INVALID_FIELD
    assert error.info == {INVALID_FIELD: CONTAINER_ID}


def _assert_replaced(client) -> None:
    error = _closed(client).error
    assert error.condition == Cond.RESOURCE_LOCKED
    assert error.info == {ENFORCEMENT: True}


def _still_open(client) -> bool:
    client.settle(0.2)
    return not client.of(RemoteClose) and not client.closed


@contextlib.contextmanager
def _broker(*faults: str) -> Iterator:
    with running_broker(faults=faults) as broker:
        yield broker


def test_the_open_offers_the_capability_and_echoes_the_policy():
    with _broker() as b, _client(b, "c-neg", CLOSE) as c:
        opened = c.of(RemoteOpen)[0].open
        assert CAPABILITY in [str(x) for x in opened.offered_capabilities]
        assert opened.properties[ENFORCEMENT_POLICY] == CLOSE
        assert opened.properties[DETECTION_POLICY] == 0  # strong


def test_refuse_connection_refuses_the_new_one_and_is_the_default():
    with _broker() as b:
        for policy in (REFUSE, None):
            with _client(b, f"c-ref-{policy}", policy) as first:
                with _client(b, f"c-ref-{policy}", policy) as second:
                    _assert_refused(second)
                assert _still_open(first)


def test_close_existing_closes_the_old_one():
    with _broker() as b, _client(b, "c-close", CLOSE) as first, _client(b, "c-close", CLOSE) as s:
        _assert_replaced(first)
        assert not _open(s).get(ESTABLISHMENT_FAILED)
        assert _still_open(s)


def test_the_open_connection_policy_decides_and_other_containers_are_apart():
    with _broker() as b:
        with _client(b, "c-mix1", REFUSE) as first, _client(b, "c-mix1", CLOSE) as second:
            _assert_refused(second)
            assert _still_open(first)
        with _client(b, "c-mix2", CLOSE) as first, _client(b, "c-mix2", REFUSE) as second:
            _assert_replaced(first)
            with _client(b, "c-mix2", CLOSE) as third:
                _assert_refused(third)
            with _client(b, "c-other", REFUSE) as other:
                assert _still_open(other)
        with _client(b, "c-mix1", REFUSE) as again:  # the container is free once closed
            assert _still_open(again)


def test_strong_detection_counts_connections_without_the_capability():
    with _broker() as b:
        with _client(b, "c-strong1", desire=False) as first, _client(b, "c-strong1") as second:
            _assert_refused(second)
            assert _still_open(first)
        with _client(b, "c-strong2", CLOSE) as first, _client(b, "c-strong2", desire=False):
            _assert_replaced(first)


def test_the_weak_detection_fault_lets_a_connection_without_the_capability_through():
    with (
        _broker("sole-connection-weak-detection") as b,
        _client(b, "c-weak", desire=False) as first,
        _client(b, "c-weak") as second,
    ):
        assert not _open(second).get(ESTABLISHMENT_FAILED)
        assert _still_open(second) and _still_open(first)


DETECTION_CASES = (
    "2.7.1/sole-connection-strong-detection-refuse",
    "2.7.1/sole-connection-strong-detection-first-without-capability-close-existing",
)


def test_the_conformance_cases_grade_the_clean_broker_ok_and_the_fault_differs():
    with _broker() as b:
        clean = case_verdicts(b, "2.7.1/sole-connection-mixed-close-then-refuse", *DETECTION_CASES)
        assert {v for v, _ in clean.values()} == {Verdict.OK}, clean
        other = case_verdicts(b, *DETECTION_CASES, profile_name="rabbitmq3")
        assert {v for v, _ in other.values()} == {Verdict.UNSUPPORTED}, other
    with _broker("sole-connection-weak-detection") as b:
        faulty = case_verdicts(b, *DETECTION_CASES)
    assert {v for v, _ in faulty.values()} == {Verdict.DIFFERS}, faulty
    reason = faulty[DETECTION_CASES[0]][1]
    assert "expected the second connection refused" in reason and "soleconn" in reason
