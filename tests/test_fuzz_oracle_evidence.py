"""The oracle's kinds, each proved by its own evidence, against a real socket peer.

The peer (`Peer`, a TCP server on a free port) speaks AMQP through amqp10 (it decodes the
fuzzer's stream with the core's FrameDecoder and writes frames built by amqp10.builder) and
reacts to the fuzzer's undecodable frame as a broker under test might: it refuses it with a
close 3 ms later (while the fuzzer, in quick mode, closes too), answers the fuzzer's open
with an open it cannot decode and then a close (RabbitMQ 3.10 echoes a channel-max sent as
ulong), goes silent but answers the fuzzer's close, goes deaf, or drops the socket without
a close. A hang is claimed only when the peer sent no close and no drop within the bound
after the bad frame, with the fuzzer's own close held that long; never when the fuzzer
closed first, and never when the peer's close came but did not decode as the checker's
monitor expected. Every verdict states expected and observed, the fuzzer's teardown close
named as such.
"""

from __future__ import annotations

import socket
import time

import pytest
from peer_support import LoopbackPeer, chunks, closed_after

from amqpspec.amqp10.builder import build_frame, mutate
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, FrameDecoder, ProtocolHeader
from amqpspec.amqp10.types import symbol, ulong
from amqpspec.fuzz.case import Case, Step, step
from amqpspec.fuzz.evidence import STEP, TEARDOWN
from amqpspec.fuzz.findings import Finding, FindingStore
from amqpspec.fuzz.model import Conversation, Handshake
from amqpspec.fuzz.oracle import (
    ERROR_MISSING,
    HANG,
    MUST,
    ROBUSTNESS,
    VIOLATION,
    Bounds,
    Target,
    run_case,
)

C = COMPOSITE_CLASSES
BOUND = 0.8


def _close(condition: str | None = None) -> bytes:
    error = C["error"](condition=symbol(condition)) if condition else None
    return build_frame(C["close"](error=error))


def _answer(frame: Frame) -> bytes:
    """A begin answering a begin, an attach answering an attach (2.5.2, 2.6.3)."""
    p = frame.performative
    if frame.name == "begin":
        begin = C["begin"](
            remote_channel=frame.channel, next_outgoing_id=0, incoming_window=9, outgoing_window=9
        )
        return build_frame(begin, frame.channel)
    attach = C["attach"](
        name=p.name, handle=p.handle, role=not p.role, source=p.source, target=p.target
    )
    return build_frame(attach, frame.channel)


class Peer(LoopbackPeer):
    """A one-behaviour AMQP peer. `react`, on the fuzzer's first undecodable frame:
    'refuse' (a close with amqp:decode-error after `delay`), 'ignore' (nothing, but a close
    is answered), 'deaf' (nothing more, ever), 'drop' (the socket closed after `delay`, no
    close). `bad_open`: the fuzzer's open is answered with an open whose channel-max is a
    ulong (undecodable), and the fuzzer's close with a close. Begins and attaches are
    answered (a liveness check opens, begins and attaches)."""

    def __init__(self, react: str = "ignore", delay: float = 0.003, bad_open: bool = False):
        self.react, self.delay, self.bad_open = react, delay, bad_open
        super().__init__(accept_poll=0.1)

    def _open(self) -> bytes:
        if self.bad_open:
            return mutate(C["open"](container_id="peer")).set_field("channel-max", ulong(1)).frame()
        return build_frame(C["open"](container_id="peer"))

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        decoder = FrameDecoder(expect_header=True)
        deaf = False
        with conn:
            for data in chunks(conn, self.stop):
                if deaf:
                    continue
                decoder.feed(data)
                while True:
                    try:
                        item = decoder.next_item()
                    except DecodeError:
                        if self.react == "deaf":
                            deaf = True
                            break
                        if self.react in ("refuse", "drop"):
                            time.sleep(self.delay)
                            if self.react == "drop":
                                conn.shutdown(socket.SHUT_RDWR)
                                return
                            conn.sendall(_close("amqp:decode-error"))
                            return  # 2.4.3: its close is the last thing it writes
                        continue
                    if item is None:
                        break
                    if isinstance(item, ProtocolHeader):
                        conn.sendall(AMQP_HEADER.encode())
                    elif isinstance(item, Frame) and item.name == "open":
                        conn.sendall(self._open())
                    elif isinstance(item, Frame) and item.name == "close":
                        conn.sendall(_close())
                    elif isinstance(item, Frame) and item.name in ("begin", "attach"):
                        conn.sendall(_answer(item))  # the liveness check's session and link

    def close(self) -> None:
        super().close()
        for thread in self.threads:
            thread.join(2)


@pytest.fixture
def peer():
    with closed_after(Peer) as make:
        yield lambda **kw: Target(
            "127.0.0.1", make(**kw).port, Handshake(sasl="none"), Bounds(reply=BOUND)
        )


def _steps() -> list[Step]:
    """The AMQP header, an open, then a begin whose incoming-window is a string."""
    head = Conversation(Handshake(sasl="none")).open().steps()
    begin = C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)
    bad = mutate(begin).set_field("incoming-window", "nine").frame(0)
    return [*head, step(bad, "begin[incoming-window=string]")]


def _roles(outcome) -> list[str]:
    return [s.role for s in outcome.exchange.sent]


def test_a_fast_refusal_while_the_fuzzer_closes_too_is_no_finding(peer):
    # the peer closes with decode-error 3 ms after the bad frame; the quick fuzzer's close
    # went out microseconds after it: both closes cross, nothing is wrong
    target = peer(react="refuse", delay=0.003)
    quick = run_case(target, _steps(), quick=True)
    assert quick.verdict is None, quick.verdict
    assert quick.exchange.closed_first()  # the fuzzer's teardown did go first
    held = run_case(target, _steps())
    assert held.verdict is None, held.verdict
    assert not held.exchange.closed_first()  # held: the peer's close came first
    close = held.exchange.first_close()
    assert close is not None and close.condition == "amqp:decode-error"
    assert 0 <= close.time - held.exchange.bad_time < BOUND


def test_an_undecodable_reply_then_a_close_is_a_violation_not_a_hang(peer):
    # RabbitMQ 3.10 answered an open whose channel-max was a ulong with an open echoing it,
    # then a close: the monitor stops decoding at the bad open, the close was not seen, and
    # "no close and no drop within 5.0s" was claimed for a close that came 3.3 ms later
    target = peer(bad_open=True)
    for quick in (True, False):
        outcome = run_case(target, _steps(), quick=quick)
        verdict = outcome.verdict
        assert verdict is not None and verdict.kind == VIOLATION, verdict
        assert (verdict.rule, verdict.section, verdict.level) == (
            "frame.undecodable",
            "2.3.2",
            MUST,
        )
        assert verdict.sentence == "2.3.2/amqp-frames.1"
        assert "open.channel-max of type ushort" in verdict.observed
        assert "The performative MUST be one of those defined" in verdict.expected
        names = [r.name for r in outcome.exchange.received]
        assert names[-2:] == ["undecodable", "close"]  # the close after it is read too
        assert "hang" not in verdict.observed


def test_silence_after_the_bad_frame_is_a_hang_only_with_the_close_held(peer):
    target = peer(react="deaf")
    started = time.monotonic()
    held = run_case(target, _steps())
    elapsed = time.monotonic() - started
    verdict = held.verdict
    assert verdict is not None and verdict.kind == HANG and verdict.level == ROBUSTNESS
    ours = held.exchange.teardown
    assert ours is not None and ours.time - held.exchange.bad_time >= BOUND  # held the bound
    assert elapsed >= 2 * BOUND  # the bound after the bad frame, then after our close
    assert "the fuzzer held its close" in verdict.observed
    assert "after the bad frame (step 2 begin[incoming-window=string])" in verdict.observed
    assert not held.inconclusive
    quick = run_case(target, _steps(), quick=True)
    assert quick.verdict is not None and quick.verdict.kind == HANG
    assert quick.inconclusive.startswith("the fuzzer closed")  # at most a candidate
    assert "INCONCLUSIVE" in quick.verdict.observed


def test_an_ignored_bad_frame_is_error_missing_measured_from_the_bad_frame(peer):
    target = peer(react="ignore")
    held = run_case(target, _steps())
    verdict = held.verdict
    assert verdict is not None and verdict.kind == ERROR_MISSING
    assert verdict.level == ROBUSTNESS and "No MUST of the text" in verdict.expected
    assert f"no error from the broker within {BOUND}s of the bad frame" in verdict.observed
    assert "close without an error" in verdict.observed  # it answered our teardown
    assert _roles(held) == [STEP, STEP, STEP, TEARDOWN]
    quick = run_case(target, _steps(), quick=True)
    assert quick.verdict is not None and quick.verdict.kind == ERROR_MISSING
    assert quick.inconclusive  # the fuzzer's close raced the bad frame


def test_a_drop_without_close_is_close_missing_with_its_time(peer):
    target = peer(react="drop", delay=0.2)
    for quick in (True, False):
        outcome = run_case(target, _steps(), quick=quick)
        verdict = outcome.verdict
        assert verdict is not None and verdict.rule == "connection.close-missing", verdict
        dropped = outcome.exchange.dropped
        assert dropped is not None and 0.15 < dropped - outcome.exchange.bad_time < BOUND
        assert "closed the TCP connection" in verdict.observed
        assert "MUST write a close frame" in verdict.expected
    assert not outcome.exchange.teardown  # held: the peer dropped before our close


def test_the_finding_report_labels_the_fuzzers_own_frames(peer, tmp_path):
    target = peer(react="ignore")
    outcome = run_case(target, _steps())
    verdict = outcome.verdict
    assert verdict is not None
    case = Case(_steps(), "fields", "0:1")
    finding = Finding(
        "abc",
        verdict.kind,
        "sig",
        verdict.rule,
        verdict.section,
        verdict.summary,
        "",
        case.labels,
        case.labels,
        case.seed,
        expected=verdict.expected,
        observed=verdict.observed,
        level=verdict.level,
        close_held=True,
        evidence=outcome.exchange.record(),
    )
    store = FindingStore(str(tmp_path))
    assert store.add(finding, case, outcome.recording, outcome.exchange)
    text = (tmp_path / "findings" / "abc" / "reproducer.txt").read_text()
    assert "expected: the broker refuses the undecodable frame" in text
    assert "-> fuzzer TEARDOWN: close" in text
    assert "-> fuzzer step 2: begin[incoming-window=string]  <== the bad frame" in text
    evidence = finding.evidence
    assert evidence["fuzzer_frames"][-1]["role"] == TEARDOWN
    assert evidence["fuzzer_frames"][-1]["ms_after_bad"] >= BOUND * 1000
    assert evidence["fuzzer_held_close_until_bound"] is True
    assert evidence["broker_frames"][-1]["frame"] == "close"
    reloaded = FindingStore(str(tmp_path)).findings["abc"]
    assert reloaded.observed == verdict.observed and reloaded.close_held


def test_no_teardown_close_after_the_cases_own_close(peer):
    # a second close from the fuzzer would be its own violation (2.7.9), and a broker that
    # answers it would be judged on the fuzzer's frame, not the case's
    target = peer(react="ignore")
    head = Conversation(Handshake(sasl="none")).open().steps()
    close = step(build_frame(C["close"]()), "close[at 2]")
    for quick in (True, False):
        outcome = run_case(target, [*head, close], quick=quick)
        assert outcome.verdict is None, outcome.verdict
        assert TEARDOWN not in _roles(outcome)
        assert outcome.exchange.first_close() is not None  # the peer answered the case's
