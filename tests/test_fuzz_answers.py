"""The campaign's waits against a fast broker (fuzz.answers, fuzz.oracle.wait_back,
fuzz.campaign's outages): a quick run waits a bound learnt from the broker's answers, a
silence for that bound only is run again with the full bound before it is a candidate (a
slow but legal answer is no hang, and is learnt), the waits for a restart are shared and
bounded, and the cases in flight at one outage are triaged as one."""

from __future__ import annotations

import socket
import threading
import time

from peer_support import LoopbackPeer, chunks

from amqpspec.amqp10.builder import build_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.frames import ProtocolHeader
from amqpspec.fuzz import oracle
from amqpspec.fuzz.answers import FLOOR, WARMUP, AnswerTimes
from amqpspec.fuzz.campaign import Campaign, CampaignConfig, recheck_short
from amqpspec.fuzz.case import Case
from amqpspec.fuzz.model import Conversation, Handshake
from amqpspec.fuzz.oracle import CRASH, HANG, Bounds, Outcome, Target, Verdict, run_case, wait_back

C = COMPOSITE_CLASSES
FULL = 2.0


class LateCloser(LoopbackPeer):
    """Answers the protocol header with its own and an open at once; our close with a
    close `delay` seconds later (None: never), holding the socket meanwhile."""

    def __init__(self, delay: float | None) -> None:
        self.delay = delay
        self.closing = build_frame(C["close"]())
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.1)
        got, opened = b"", False
        with conn:
            for data in chunks(conn, self.stop, 4096):
                got += data
                if not opened:
                    opened = True
                    header = ProtocolHeader(0, 1, 0, 0).encode()
                    conn.sendall(header + build_frame(C["open"](container_id="late")))
                if self.closing in got and self.delay is not None:
                    time.sleep(self.delay)
                    conn.sendall(self.closing)
                    return


def _serves(target: Target, timeout: float | None = None) -> bool:
    """The liveness check, for a stub that answers no begin or attach: it serves."""
    return True


def _warm(target: Target, seconds: float = 0.01) -> None:
    for _ in range(WARMUP):
        target.answers.add(seconds)


def _case(begin: bool = False) -> Case:
    conv = Conversation(Handshake(sasl="none")).open()
    if begin:
        conv.begin()
    return Case(conv.steps(), "none", "test:0", "")


def test_the_quick_bound_is_the_full_one_until_answers_are_in_then_follows_them() -> None:
    answers = AnswerTimes()
    assert answers.bound(FULL) == FULL
    for _ in range(WARMUP):
        answers.add(0.001)
    assert answers.bound(FULL) == FLOOR  # a broker that answers in a millisecond
    for _ in range(WARMUP):
        answers.add(1.6)  # RabbitMQ 3.10's late error answers, often
    assert answers.bound(FULL) == FULL
    answers.silent("hang|reply-bound|framing")
    assert answers.known_silent("hang|reply-bound|framing")
    assert not answers.known_silent("hang|reply-bound|malformed")


def test_a_slow_but_legal_answer_is_no_hang_and_is_learnt(monkeypatch) -> None:
    monkeypatch.setattr(oracle, "alive", _serves)
    broker = LateCloser(delay=0.8)  # slower than the quick bound, within the full one
    try:
        target = Target("127.0.0.1", broker.port, Handshake(sasl="none"), Bounds(reply=FULL))
        _warm(target)
        case = _case()
        first = run_case(target, case.steps, quick=True)
        assert first.verdict is not None and first.verdict.kind == HANG
        assert first.short == FLOOR and "quick bound" in first.inconclusive
        settled = recheck_short(target, case, first)
        assert settled.verdict is None  # the full bound got its close: no hang, no candidate
        assert not settled.short
        assert target.answers.bound(FULL) == FULL  # 4 x 0.8 s, within the full bound
    finally:
        broker.close()


def test_a_silence_that_lasts_the_full_bound_is_learnt_per_behaviour(monkeypatch) -> None:
    monkeypatch.setattr(oracle, "alive", _serves)
    broker = LateCloser(delay=None)  # never answers our close
    try:
        target = Target(
            "127.0.0.1", broker.port, Handshake(sasl="none"), Bounds(reply=1.0, liveness=1.0)
        )
        _warm(target)
        case = _case()
        first = run_case(target, case.steps, quick=True)
        assert first.short == FLOOR
        settled = recheck_short(target, case, first)
        assert settled.verdict is not None and settled.verdict.kind == HANG
        assert not settled.short  # proved with the full bound
        again = run_case(target, case.steps, quick=True)
        started = time.monotonic()
        assert recheck_short(target, case, again) is again  # known silent: not run again
        assert time.monotonic() - started < 0.5
    finally:
        broker.close()


def test_the_waits_for_a_restart_are_shared_and_bounded() -> None:
    spare = socket.create_server(("127.0.0.1", 0))
    port = spare.getsockname()[1]
    spare.close()  # nothing listens there: every connection is refused at once
    target = Target("127.0.0.1", port, bounds=Bounds(restart_wait=0.4, liveness=0.3))
    results: list[bool] = []
    started = time.monotonic()
    threads = [threading.Thread(target=lambda: results.append(wait_back(target))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert results == [False] * 8
    assert time.monotonic() - started < 8 * 0.4  # each within its own bound, not in turn


def _crash(label: str, down: float, lag: float) -> tuple[Case, Outcome]:
    case = _case(begin=label in "be")  # the culprits end with a begin, the others an open
    case.seed = f"test:{label}"
    last = len(case.steps) - 1
    verdict = Verdict(CRASH, "liveness", "2.4.1", f"dropped ({label})", last, lag=lag, down=down)
    return case, Outcome(verdict, None, len(case.steps))


def test_the_cases_in_flight_at_one_outage_are_one_triage(tmp_path) -> None:
    target = Target("127.0.0.1", 1, Handshake(sasl="none"))
    campaign = Campaign(CampaignConfig(target, str(tmp_path), cases=0))
    now = time.time()
    # two outages of the broker while the first waits for triage: drops 1 s apart; in each,
    # the culprit is the case whose last step went out last before the drop
    for label, down, lag in [
        ("a", now, 0.3),
        ("b", now + 0.01, 0.001),
        ("c", now, 0.05),
        ("d", now + 1.0, 0.2),
        ("e", now + 1.01, 0.002),
    ]:
        campaign._candidate(*_crash(label, down, lag))
    assert campaign.stats.candidates == 1 and campaign._queue.qsize() == 1
    assert campaign.stats.suspects == 4
    outage = campaign._outage
    assert outage is not None
    clusters = outage.clusters()
    assert [[s[0].seed for s in group] for group in clusters] == [
        ["test:b", "test:c", "test:a"],
        ["test:e", "test:d"],
    ]
    culprit, other = clusters[0][0][2], clusters[0][1][2]
    assert culprit != other
    lead = outage.suspects[0]
    campaign._triaged.add(other)  # a case only in flight has a confirmed crash signature
    assert not campaign._explained(lead[2])  # that explains nothing
    # the likeliest culprits' crash is confirmed: both outages are counted, nothing is
    # replayed (the target is port 1) and nothing pauses the workers
    campaign._triaged.add(culprit)
    assert campaign._explained(lead[2])
    assert campaign._outage is None  # taken: a later crash is a later outage
    assert campaign.stats.duplicates == 5
