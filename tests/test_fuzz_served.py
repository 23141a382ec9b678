"""The liveness proof a case running beside another gives (fuzz.served), against the
reference broker over real sockets: a case the broker drops without a close is judged
without a liveness connection of its own when a case that connected after the drop got
the broker's attach; alone, it still makes its own; and a broker that went down gives no
proof, so the oracle's own check still calls the crash."""

from __future__ import annotations

import threading

from amqpspec.amqp10.builder import sasl_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.frames import SASL_HEADER
from amqpspec.fuzz import oracle
from amqpspec.fuzz.case import Step, step
from amqpspec.fuzz.model import QUEUE_HANDSHAKE, Conversation, with_container_id
from amqpspec.fuzz.oracle import CRASH, Bounds, Target, run_case
from amqpspec.fuzz.served import ServedConnections
from amqpspec.reference_broker.runtime.process import BrokerProcess

C = COMPOSITE_CLASSES
OTHER_PROTOCOL = b"AMQP\x09\x01\x00\x00"  # a protocol id no broker speaks: answered, dropped


def test_a_connection_started_at_or_after_the_moment_is_the_proof() -> None:
    served = ServedConnections()
    served.entered()  # the asker's own case
    served.note(10.0)
    assert served.since(10.0) and served.since(5.0)
    assert not served.since(10.5, wait=30.0)  # nobody beside it: no wait, no proof


def test_the_asker_waits_for_the_case_beside_it_and_the_wait_is_bounded() -> None:
    served = ServedConnections()
    served.entered()
    served.entered()  # one case beside the asker's
    timer = threading.Timer(0.05, served.note, args=(20.0,))
    timer.start()
    assert served.since(20.0, wait=30.0)  # its proof comes in
    timer.join()
    assert not served.since(21.0, wait=0.1)  # none comes: False once the bound passes
    served.left()
    served.left()


def _counting_alive(monkeypatch) -> list[Target]:
    calls: list[Target] = []
    real = oracle.alive

    def alive(target: Target, timeout: float | None = None) -> bool:
        calls.append(target)
        return real(target, timeout)

    monkeypatch.setattr(oracle, "alive", alive)
    return calls


def _legal_steps() -> list[Step]:
    conv = Conversation(QUEUE_HANDSHAKE).open()
    conv.attach_sender(conv.begin())
    return conv.steps()


def test_a_dropped_case_is_judged_by_the_case_beside_it(monkeypatch) -> None:
    calls = _counting_alive(monkeypatch)
    with BrokerProcess() as broker:
        target = Target("127.0.0.1", broker.port, QUEUE_HANDSHAKE, Bounds(evidence=30.0))
        legal, stop = _legal_steps(), threading.Event()

        def beside() -> None:  # a worker running legal cases back to back
            target.served.entered()
            try:
                index = 0
                while not stop.is_set():
                    run_case(target, with_container_id(legal, f"beside-{index}"), quick=True)
                    index += 1
            finally:
                target.served.left()

        thread = threading.Thread(target=beside)
        thread.start()
        try:
            outcome = run_case(target, [step(OTHER_PROTOCOL)], quick=True)
        finally:
            stop.set()
            thread.join(60)
        assert outcome.exchange is not None and outcome.exchange.dropped is not None
        assert outcome.verdict is None  # dropped rightly (2.2), and the broker serves
        assert calls == []  # the case beside it was the fresh connection


def test_alone_a_dropped_case_makes_its_own_liveness_connection(monkeypatch) -> None:
    calls = _counting_alive(monkeypatch)
    with BrokerProcess() as broker:
        target = Target("127.0.0.1", broker.port, QUEUE_HANDSHAKE, Bounds(evidence=30.0))
        outcome = run_case(target, [step(OTHER_PROTOCOL)], quick=True)
        assert outcome.exchange is not None and outcome.exchange.dropped is not None
        assert outcome.verdict is None
        assert calls == [target]


def test_a_broker_that_went_down_gives_no_proof_and_is_a_crash(monkeypatch) -> None:
    calls = _counting_alive(monkeypatch)
    broker = BrokerProcess(faults=["exit-on-illegal-sasl"])
    try:
        bounds = Bounds(evidence=0.5, liveness=2.0, restart_wait=1.0)
        target = Target("127.0.0.1", broker.port, QUEUE_HANDSHAKE, bounds)
        target.served.entered()  # a case beside this one, that the exit stops short
        steps = [step(SASL_HEADER.encode()), step(sasl_frame(C["sasl-response"](response=b"x")))]
        outcome = run_case(target, steps, quick=True)
        target.served.left()
        assert outcome.verdict is not None and outcome.verdict.kind == CRASH
        assert "refuses fresh connections" in outcome.verdict.summary
        assert calls  # no proof came: its own check found the broker gone (and the
        # wait for a restart polls on)
    finally:
        broker.kill()
