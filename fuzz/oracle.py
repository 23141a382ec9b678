"""The oracle: send one case to a broker over a real socket and judge what came back.

Owns: `Target` (where the broker is, how to log in, optional memory reader), `Bounds`
(every wait), `Verdict` and `Outcome`, `run_case(target, steps)`, `alive(target)`,
`wait_back(target)` (a crash's wait for the broker's return, shared by the threads of a
process and cut at `Target.waits_end`) and `not_back(verdict)`.

One case = one new TCP connection: the steps are sent in order (waiting, bounded, for
sasl-mechanisms and sasl-outcome at the SASL steps). Then the fuzzer HOLDS its own close:
the broker has `Bounds.reply`, measured from the last step (so at least that long from the
bad frame), to react (a close, an end or detach with an error, or a drop); only then, or
once it reacted, does the fuzzer send its teardown close (none after a close of the
case's own: a second close would be the fuzzer's violation) and wait the bound again for the
answer. `quick=True` (the campaign's first look at a case, and minimising) sends the close
at once: faster, but a verdict that rests on the broker's silence (hang, error-missing) is
then only a candidate, marked `Outcome.inconclusive`, and a finding is kept only when it
comes back on replays that held the close (fuzz.campaign.triage). Judged, first match:
- violation: the checker (amqp10.checker, fed both directions by the probe's recording)
  flags a MUST rule in the broker's frames; or a frame of the broker does not decode
  (2.3.2, pseudo-rule `frame.undecodable`: the frames after it are still read, by length);
- crash: the connection cannot be made, or the case ends with no reply or a drop and a
  fresh connection then fails to open, begin and attach within `Bounds.liveness` (a case
  running beside it that connected after the drop and got its attach is that fresh
  connection: fuzz.served);
- violation: the broker dropped the socket after its open without a close frame (2.4.3,
  pseudo-rule `connection.close-missing`);
- hang: no close and no drop from the broker within the bound after the bad frame, nor
  within the bound after the fuzzer's close, while it still serves a fresh connection
  (unless the client stream ends inside an unfinished frame: then the broker may rightly
  wait, and nothing is judged; nor after a failed login: nothing is owed);
- error-missing: the client stream holds bytes the core decoder rejects and the broker
  refused nothing (no close/end/detach with an error, no drop) within the bound: a
  robustness finding (no MUST says how a receiver answers undecodable bytes; 2.3.2 binds
  their sender);
- resource: with a memory reader and `careful=True`, the broker's memory grew past
  `Bounds.memory_growth` while the case's connection was open (readings are taken after
  `Bounds.memory_settle`, since brokers refresh them periodically; a campaign samples
  memory every second and replays the cases since the last sample carefully).
Every verdict says what was expected and what the broker did (`Verdict.expected`,
`.observed`: its frames and TCP close timed from the bad frame, the fuzzer's own close
named as such; fuzz.evidence reads the recording). Builds bytes only through amqp10
(builder); the network client is `conformance.probe`.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.builder import build_frame
from amqpspec.amqp10.checker.fields import FRAME_CONTENT_RULES
from amqpspec.amqp10.checker.rules import RULES
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import SASL_HEADER, Frame, ProtocolHeader, decode_frame
from amqpspec.amqp10.origins import CLIENT
from amqpspec.conformance.probe import Probe, Recording
from amqpspec.conformance.verdicts import CaseFailed, HarnessError
from amqpspec.fuzz.answers import AnswerTimes
from amqpspec.fuzz.case import FRAME, Step, mutation_label
from amqpspec.fuzz.consequences import attributable
from amqpspec.fuzz.evidence import HEADER as HEADER_KIND
from amqpspec.fuzz.evidence import (
    BrokerStream,
    Exchange,
    Received,
    bad_time,
    read_exchange,
    stream_status,
)
from amqpspec.fuzz.model import (
    FUZZ_CONTAINER,
    Conversation,
    Handshake,
    ServerModel,
    with_container_id,
)
from amqpspec.fuzz.served import EVIDENCE_WAIT_S, ServedConnections

CRASH, HANG, VIOLATION, ERROR_MISSING, RESOURCE = (
    "crash",
    "hang",
    "violation",
    "error-missing",
    "resource",
)
KINDS = (CRASH, HANG, VIOLATION, ERROR_MISSING, RESOURCE)
CLOSE_MISSING = ("connection.close-missing", "2.4.3")  # close before the socket goes
UNDECODABLE = ("frame.undecodable", "2.3.2")  # the broker's own frame does not decode
MUST, ROBUSTNESS = "MUST", "robustness"  # Verdict.level: a MUST of the text, or not one
CLOSE_SENTENCE = (
    "2.4.3/closing-a-connection.1",
    "Prior to closing a Connection, each peer MUST write a close frame with a code "
    "indicating the reason for closing.",
)
FRAME_SENTENCE = (
    "2.3.2/amqp-frames.1",
    "The performative MUST be one of those defined in performatives and is encoded as a "
    "described type in the AMQP type system.",
)
_CLOSING = build_frame(COMPOSITE_CLASSES["close"]())
_SASL_HEADER = SASL_HEADER.encode()
_liveness = itertools.count(1)  # each liveness check's container-id


@dataclass(frozen=True, slots=True)
class Bounds:
    reply: float = 2.0  # the broker answers our close (or drops us) within this
    liveness: float = 5.0  # a fresh connection opens, begins and attaches within this
    evidence: float = EVIDENCE_WAIT_S  # a case beside this one may show that first (fuzz.served)
    connect: float = 3.0
    sasl: float = 1.0  # per SASL round trip
    restart_wait: float = 30.0  # after a crash, how long to wait for the broker to return
    restart_poll: float = 0.05  # while it is down, a fresh connection is tried at most this
    # far apart (from 0.01 s, doubling: a refused connect costs microseconds, and a broker
    # under a restart loop is back in 0.25-0.4 s)
    memory_growth: int = 32 * 1024 * 1024  # bytes one connection may add to the broker's
    memory_settle: float = 0.6  # how long a memory reading takes to show a change
    memory_quiet: float = 3.5  # after growth, how long a broker may take to free it


@dataclass(slots=True)
class Target:
    host: str
    port: int
    handshake: Handshake = field(default_factory=Handshake)
    bounds: Bounds = field(default_factory=Bounds)
    memory: Callable[[], int | None] | None = None  # the broker's memory in bytes
    profile: Any = None  # the conformance Profile it was made from, if any
    quiet_until: float = 0.0  # careful runs wait for memory a grown case may still hold
    answers: AnswerTimes = field(default_factory=AnswerTimes, repr=False)  # quick bound
    _liveness: list[Step] | None = field(default=None, repr=False)  # liveness_steps' template
    _restart: threading.Lock = field(default_factory=threading.Lock, repr=False)  # wait_back
    served: ServedConnections = field(default_factory=ServedConnections, repr=False)
    _back_at: float = field(default=-1.0, repr=False)  # when wait_back last saw it serve
    _gone_at: float = field(default=-1.0, repr=False)  # when a wait_back last gave it up
    waits_end: float = field(default=math.inf, repr=False)  # no wait_back waits past this
    # (monotonic): a campaign sets it to its triage grace's end, and to now when it stops

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def reset_waits(self) -> None:
        """A new campaign's waits for a restart: no end set, the broker not given up."""
        self.waits_end = math.inf
        self._gone_at = -1.0

    def liveness_steps(self) -> list[Step]:
        """A fresh connection's open, begin and attach, under a container-id of its own
        (2.6.1: never the link of a case running beside it): the conversation built once
        (an engine pair's work), its container-id set per check."""
        if self._liveness is None:
            conv = Conversation(self.handshake, container_id=f"{FUZZ_CONTAINER}-liveness").open()
            conv.attach_sender(conv.begin())
            self._liveness = conv.steps()
        return with_container_id(self._liveness, f"{FUZZ_CONTAINER}-liveness-{next(_liveness)}")


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str
    rule: str  # checker rule id, or the oracle's: liveness, reply-bound, decode-refusal, ...
    section: str
    summary: str
    step: int | None = None  # the step the finding is tied to (the last one sent before it)
    expected: str = ""  # what a spec-following broker does here (the sentence, if a MUST)
    observed: str = ""  # what this broker did: its frames and TCP close, timed
    level: str = ""  # MUST (a MUST / MUST NOT of the text binds the broker) or robustness
    sentence: str = ""  # the manifest id of that sentence (conformance.manifest)
    lag: float | None = None  # a crash: seconds from the case's last step to the broker's
    # drop (None: no drop seen); the cases of one outage are replayed in this order
    down: float | None = None  # a crash: when the broker dropped the case (wall clock)


@dataclass(slots=True)
class Outcome:
    verdict: Verdict | None
    recording: Recording | None
    sent: int  # steps sent before the broker went away
    inconclusive: str = ""  # why the verdict is only a candidate (quick: the close raced)
    exchange: Exchange | None = None  # the connection in broker terms (fuzz.evidence)
    short: float = 0.0  # the broker was silent for this quick bound only, shorter than the
    # full reply bound (fuzz.answers): no hang until a run with the full bound says so


# ----------------------------------------------------------------- one connection


def _connect(target: Target, wait: float) -> Probe:
    return Probe(target.host, target.port, wait=wait, connect_timeout=target.bounds.connect)


def _send(probe: Probe, steps: list[Step], sasl_wait: float, pace: float = 0.0) -> int:
    """Send the steps (with `pace`, after each wait until the broker has been silent that
    long, at most a second); returns how many went out before the socket closed."""
    for index, s in enumerate(steps):
        if probe.closed:
            return index
        probe.send_raw(s.data)
        awaited = _sasl_answer(probe, s)
        if awaited:
            _await(probe, awaited, sasl_wait)
        elif pace:
            end = time.monotonic() + 1.0
            while probe.pump(pace) and time.monotonic() < end:
                pass
        else:
            probe.pump(0)
    return len(steps)


def _sasl_answer(probe: Probe, sent: Step) -> str | None:
    """The SASL frame the broker owes us right after `sent`, if any: sasl-mechanisms
    after the SASL header, sasl-outcome after a whole sasl-init once the mechanisms came
    (5.3.1). Nothing is owed twice, nor after a header or sasl-init the broker cannot
    take as one (a mutated header, a cut or undecodable frame): no wait for it."""
    if sent.data == _SASL_HEADER and not probe.server_frames("sasl-mechanisms"):
        return "sasl-mechanisms"
    if (
        sent.kind == FRAME
        and sent.malformed is None
        and sent.label.startswith("sasl-init")
        and probe.server_frames("sasl-mechanisms")
        and not probe.server_frames("sasl-outcome")
    ):
        return "sasl-outcome"
    return None


def _await(probe: Probe, name: str, timeout: float) -> None:
    try:
        probe.wait_for_frame(name, timeout)
    except CaseFailed:
        pass


def alive(target: Target, timeout: float | None = None) -> bool:
    """A fresh connection opens, begins and attaches (the broker answers the attach)."""
    timeout = target.bounds.liveness if timeout is None else timeout
    deadline = time.monotonic() + timeout
    try:
        probe = Probe(
            target.host, target.port, wait=timeout, deadline=deadline, connect_timeout=timeout
        )
    except HarnessError:
        return False
    try:
        _send(probe, target.liveness_steps(), min(timeout, target.bounds.sasl * 3))
        probe.wait_for_frame("attach", max(0.0, deadline - time.monotonic()))
        target.served.note(probe.recording.start)
        return True
    except CaseFailed:
        return False
    finally:
        probe.disconnect()


def wait_back(target: Target) -> bool:
    """After a crash, or a connection refused: poll until the broker serves again or
    `restart_wait` passes (or `Target.waits_end`, the campaign's). One thread of a process
    polls (a fresh connection from 0.01 s apart, doubling up to `Bounds.restart_poll`: a
    refused connect fails at once); the others wait for it, and a thread that asked before
    the poller saw the broker back returns True at once, one that asked before the poller
    gave it up returns False at once: a restart, or a broker gone for good, costs the
    workers one poller's wait, not one wait per case in flight. Once given up and not seen
    back since, a wait is one liveness check."""
    asked = time.monotonic()
    end = min(asked + target.bounds.restart_wait, target.waits_end)
    if not target._restart.acquire(timeout=max(0.0, end - asked)):
        return False
    try:
        if target._back_at >= asked:
            return True
        if target._gone_at >= asked:
            return False  # the poller waited it out while this thread waited for it
        if target._gone_at > target._back_at:
            end = asked  # given up, not seen back since: one check
        pause = 0.01
        while True:
            if alive(target, min(2.0, target.bounds.liveness)):
                target._back_at = time.monotonic()
                return True
            left = min(end, target.waits_end) - time.monotonic()
            if left <= 0:
                target._gone_at = time.monotonic()
                return False
            time.sleep(min(pause, left))
            pause = min(2 * pause, target.bounds.restart_poll)
    finally:
        target._restart.release()


def run_case(
    target: Target,
    steps: list[Step],
    careful: bool = False,
    pace: float = 0.0,
    quick: bool = False,
    reply: float | None = None,
) -> Outcome:
    """Send `steps` on a new connection, then close; judge the broker (see module doc).
    `careful`: also measure the broker's memory around the case (slow); `pace`: after
    each step wait up to that long for an answer (a recorded conversation's rhythm);
    `quick`: send the fuzzer's close at once instead of holding it for the bound, then
    wait `reply` for the broker's answer (None: the quick bound learnt from its answers,
    `fuzz.answers`; a silence for a bound shorter than `Bounds.reply` is `Outcome.short`)."""
    target.served.entered()  # in flight: its attach may show the broker serves (fuzz.served)
    try:
        return _run_case(target, steps, careful, pace, quick, reply)
    finally:
        target.served.left()


def _run_case(
    target: Target,
    steps: list[Step],
    careful: bool,
    pace: float,
    quick: bool,
    reply: float | None,
) -> Outcome:
    bounds = target.bounds
    before = None
    if careful and target.memory is not None:
        time.sleep(max(bounds.memory_settle, target.quiet_until - time.monotonic()))
        before = _reading(target, min)
    try:
        probe = _connect(target, bounds.reply)
    except HarnessError as exc:
        # down before this case started (restarting after an earlier one): not this case's
        # doing; wait for it, and call it a crash only if it never comes back
        if wait_back(target):
            return _run_case(target, steps, careful, pace, quick, reply)
        summary = f"broker unreachable: {exc}{_not_back_note(target)}"
        return Outcome(_unreachable(summary), None, 0)
    stream = BrokerStream(monitored=True)  # the probe's monitor decoded it (fuzz.evidence)
    try:
        run = _converse(target, probe, stream, steps, pace, quick, reply, before)
    finally:
        peer_closed = probe.peer_closed
        probe.disconnect()
    sent = run.sent
    bound = run.wait if quick else bounds.reply
    exchange = read_exchange(
        probe.recording, steps, sent, peer_closed, bound, not quick and not run.pending, stream
    )
    if stream.first("attach") is not None:  # a fresh connection it served (fuzz.served)
        target.served.note(probe.recording.start)
    outcome = Outcome(None, probe.recording, sent, exchange=exchange)
    during = run.during
    growth = during - before if during is not None and before is not None else None
    if growth is not None and growth > bounds.memory_growth:
        target.quiet_until = time.monotonic() + bounds.memory_quiet
    outcome.verdict = _judge(target, steps, probe.recording, sent, growth, run.status, exchange)
    _qualify(outcome, bounds, run.short, quick)
    return outcome


@dataclass(slots=True)
class _Run:
    """What `_converse` leaves for the judgement."""

    sent: int
    status: tuple
    pending: bool
    during: int | None
    wait: float
    short: float


def _converse(
    target: Target,
    probe: Probe,
    stream: BrokerStream,
    steps: list[Step],
    pace: float,
    quick: bool,
    reply: float | None,
    before: int | None,
) -> _Run:
    """Send the case, give the broker its turn, close (run_case's conversation)."""
    bounds = target.bounds
    during = None
    sent = _send(probe, steps, bounds.sasl, pace)
    # a stream that ends inside a frame swallows our close: no answer is due, so the
    # reply bound is not waited out (a crash still shows in the liveness checks)
    status = stream_status(steps[:sent] if sent else steps)
    pending = status[0] == "pending"
    if not quick and not pending:
        # the broker's turn: the bound, from the last step, to react to the bad frame
        # (a close, or an end or detach with an error, after it) before our close
        since = bad_time(probe.recording, steps, sent)
        _wait_broker(probe, stream, bounds.reply, lambda s: s.closed or s.reacted(since))
    if before is not None and target.memory is not None:
        probe.idle(bounds.memory_settle)  # let the broker's reading catch up
        during = _reading(target, max, before)  # before our close
    if not probe.closed and not _case_closed(steps[:sent]):
        # the teardown (it answers the broker's close, if any); never a second close
        # after the case's own (2.7.9: nothing after a close): the broker would be
        # judged on an answer to the fuzzer's violation, not the case's
        probe.send_raw(_CLOSING)
    # event-driven: done as soon as the broker's close is in (it may have come
    # before ours), or the socket closes
    wait = bounds.reply
    if quick:
        wait = reply if reply is not None else target.answers.bound(bounds.reply)
    started = time.monotonic()
    _wait_broker(probe, stream, min(wait, 0.05) if pending else wait, lambda s: s.closed)
    if stream.closed:
        probe.pump(0)  # what is already there (a drop) goes in the recording
        if quick and not pending:
            target.answers.add(time.monotonic() - started)
    short = wait if quick and not pending and wait < bounds.reply else 0.0
    return _Run(sent, status, pending, during, wait, short)


def _qualify(outcome: Outcome, bounds: Bounds, short: float, quick: bool) -> None:
    """A quick run's verdict that rests on a silence it did not wait out is inconclusive."""
    exchange = outcome.exchange
    assert exchange is not None
    racy = outcome.verdict is not None and outcome.verdict.kind in (HANG, ERROR_MISSING)
    if short and outcome.verdict is not None and outcome.verdict.kind == HANG:
        outcome.short = short
        outcome.inconclusive = (
            f"silent for the quick bound of {short:.2f}s only (learnt from its answers), "
            f"not the full {bounds.reply}s"
        )
    elif quick and racy and exchange.closed_first():
        ours = exchange.teardown
        at = exchange.when(ours.time) if ours is not None else "after the bad frame"
        outcome.inconclusive = f"the fuzzer closed {at}, before the {bounds.reply}s bound"


def _case_closed(sent: list[Step]) -> bool:
    """A step already sent is a whole, decodable close frame of the case's own: by its
    bytes, not its label (a close whose header a mutation changed may decode as an empty
    frame, which closes nothing: 2.3.1)."""
    return any(
        s.kind == FRAME
        and s.malformed is None
        and mutation_label(s.label).startswith("close")
        and _is_close(s.data)
        for s in sent
    )


def _is_close(data: bytes) -> bool:
    try:
        return decode_frame(data).name == "close"
    except DecodeError:
        return False


def _wait_broker(
    probe: Probe, stream: BrokerStream, seconds: float, done: Callable[[BrokerStream], bool]
) -> None:
    """Read what the broker sends for up to `seconds`, until `done(stream)` or a drop."""
    end = time.monotonic() + seconds
    while not probe.closed:
        if done(stream.update(probe.recording)):
            return
        left = end - time.monotonic()
        if left <= 0:
            probe.pump(0)  # what came while this thread waited for a core is not late
            break
        probe.pump(min(0.05, left))
    stream.update(probe.recording)


NOT_BACK = "not back within"  # in a crash verdict's summary: wait_back gave the broker up


def not_back(verdict: Verdict | None) -> bool:
    """A crash after which the broker did not serve again within `Bounds.restart_wait`."""
    return verdict is not None and verdict.kind == CRASH and NOT_BACK in verdict.summary


def _not_back_note(target: Target) -> str:
    """What a crash's summary says of a wait_back that returned False."""
    if time.monotonic() >= target.waits_end:
        return "; its return not waited for (the campaign is ending)"
    return f"; {NOT_BACK} {target.bounds.restart_wait}s"


def _unreachable(summary: str) -> Verdict:
    return Verdict(
        CRASH,
        "liveness",
        "2.4.1",
        summary,
        None,
        "the broker accepts a TCP connection",
        summary,
        ROBUSTNESS,
    )


def _reading(target: Target, pick: Callable, before: int | None = None) -> int | None:
    """The broker's memory over `memory_settle` (readings lag: brokers refresh them
    periodically): the lowest of a few (before a case) or the highest (during one, early
    once past the bound)."""
    assert target.memory is not None
    values: list[int] = []
    end = time.monotonic() + target.bounds.memory_settle
    while True:
        value = target.memory()
        if value is not None:
            values.append(value)
            if before is not None and value - before > target.bounds.memory_growth:
                break
        if time.monotonic() >= end:
            break
        time.sleep(0.1)
    return pick(values) if values else None


def _other_protocol(steps: list[Step], exchange: Exchange, first_bad: Received) -> bool:
    """The case opened with the header of another protocol (AMQP 0-9-1, say) and the broker
    answered in it: no AMQP 1.0 protocol header came before its bytes. Those bytes are that
    protocol's, not AMQP 1.0 frames; 2.2 lets a broker that speaks the requested protocol
    answer in it (RabbitMQ 3.10 sends 0-9-1's connection.start)."""
    if not steps or not steps[0].is_header:
        return False
    try:
        if ProtocolHeader.decode(steps[0].data).is_supported:
            return False
    except (DecodeError, ValueError):
        return False  # not an AMQP header of any version: the broker's answer is judged
    for item in exchange.received:
        if item is first_bad:
            return True
        if item.kind == HEADER_KIND:
            return False
    return False


def _judge(
    target: Target,
    steps: list[Step],
    recording: Recording,
    sent: int,
    memory_growth: int | None,
    client_stream: tuple[str, int | None, str],
    exchange: Exchange,
) -> Verdict | None:
    last = max(0, min(sent, len(steps)) - 1)
    frames = [r.item for r in exchange.received if isinstance(r.item, Frame)]
    names = [f.name for f in frames]
    peer_closed = exchange.dropped is not None
    judged = judged_items(recording)
    violations = [
        v
        for v in attributable(recording.violations, recording.probe_violations)
        if v.level == "MUST" and (v.frame_index < judged or v.rule_id in _JUDGED_PAST_CUT)
    ]
    if violations:
        return _rule_broken(violations[0], recording, exchange, last)
    undecodable = next((r for r in exchange.received if r.kind in ("undecodable", "raw")), None)
    if undecodable is not None and _other_protocol(steps, exchange, undecodable):
        return None  # it accepted the other protocol the case asked for: no AMQP 1.0 bytes
    if undecodable is not None:
        return _undecodable(exchange, undecodable, last)
    status, where, reason = client_stream  # stream_status of what was sent
    replied = "close" in names
    if not replied and not peer_closed:
        if status == "pending" or _login_refused(frames):
            # the broker may rightly wait for the rest of a frame; after a failed login
            # nothing more is owed (RabbitMQ 3.10 drops the socket 3 s after its outcome)
            return None
        if not _still_serves(target, time.time()):
            return _crash(target, last, "no reply, and a fresh connection is refused", exchange)
        return _hang(target, last, exchange)
    # a drop (in the SASL layer too, where it may be right): is the broker still there?
    if peer_closed and not replied and not _still_serves(target, exchange.dropped):
        return _crash(target, last, "the broker dropped us and refuses fresh connections", exchange)
    if peer_closed and not replied and ("open" in names or _opened(steps[:sent], frames)):
        return _close_missing(exchange, last)
    if status == "malformed" and not peer_closed and not _refused(frames):
        return _error_missing(exchange, reason, where)
    if memory_growth is not None and memory_growth > target.bounds.memory_growth:
        return _memory_grew(target, memory_growth, last)
    return None


def _still_serves(target: Target, since: float | None) -> bool:
    """A connection started at or after `since` opens, begins and attaches: a case in
    flight beside this one showed it (fuzz.served), or a fresh check does (`alive`)."""
    if since is not None and target.served.since(since, target.bounds.evidence):
        return True
    return alive(target)


def _undecodable(exchange: Exchange, undecodable: Any, last: int) -> Verdict:
    """2.3.2: a frame of the broker's that does not decode."""
    rule, section = UNDECODABLE
    sentence, text = FRAME_SENTENCE
    observed = (
        f"{exchange.when(undecodable.time)} ({exchange.bad_label}) the broker sent "
        f"{undecodable.short()}; all it sent after the bad frame: "
        f"{exchange.broker_summary()}"
    )
    expected = (
        f"every frame the broker writes decodes as the performative it names (2.3.2: '{text}')"
    )
    summary = f"the broker sent {undecodable.short()}"
    return Verdict(VIOLATION, rule, section, summary, last, expected, observed, MUST, sentence)


def _close_missing(exchange: Exchange, last: int) -> Verdict:
    """2.4.3: the broker closed the socket after its open without a close frame."""
    rule, section = CLOSE_MISSING
    sentence, text = CLOSE_SENTENCE
    assert exchange.dropped is not None
    observed = (
        f"the broker closed the TCP connection {exchange.when(exchange.dropped)} "
        f"({exchange.bad_label}) without a close frame; after the bad frame "
        f"it sent: {exchange.broker_summary()}; {exchange.teardown_note()}"
    )
    expected = f"a close frame before the broker closes the connection (2.4.3: '{text}')"
    summary = "socket closed after open with no close"
    return Verdict(VIOLATION, rule, section, summary, last, expected, observed, MUST, sentence)


def _memory_grew(target: Target, memory_growth: int, last: int) -> Verdict:
    grown = memory_growth // (1024 * 1024)
    summary = f"memory grew {grown} MiB"
    expected = f"the broker's memory grows by less than {target.bounds.memory_growth} B"
    return Verdict(
        RESOURCE,
        "memory-growth",
        "-",
        summary,
        last,
        expected,
        f"{summary} while the case's connection was open",
        ROBUSTNESS,
    )


def _rule_broken(v: Any, recording: Recording, exchange: Exchange, last: int) -> Verdict:
    """A checker violation, with the broker's frame that broke it and when."""
    item = next((t for t in recording.items if t.index == v.frame_index), None)
    where = ""
    if item is not None:
        where = (
            f"the broker's {item.name} (trace #{item.index}) {exchange.when(item.time)} "
            f"({exchange.bad_label}): "
        )
    rule = RULES.get(v.rule_id)
    sentences = tuple(getattr(rule, "sentences", ()) or ())
    quote = getattr(rule, "sentence", "") if rule is not None else ""
    expected = f"{v.section}: '{quote}'" if quote else f"rule {v.rule_id} ({v.section})"
    return Verdict(
        VIOLATION,
        v.rule_id,
        v.section,
        v.reason,
        last,
        expected,
        f"{where}{v.reason}; {exchange.teardown_note()}",
        MUST,
        sentences[0] if sentences else "",
    )


def _hang(target: Target, last: int, exchange: Exchange) -> Verdict:
    bound = round(exchange.bound, 2)  # the full reply bound, or a quick run's (Outcome.short)
    held = (
        "the fuzzer held its close until the broker reacted or the bound passed"
        if exchange.strict
        else "INCONCLUSIVE as a hang on its own: the fuzzer did not hold its close"
    )
    observed = (
        f"no close and no TCP close from the broker within {bound}s after the bad frame "
        f"({exchange.bad_label}) ({held}), nor within {bound}s after "
        f"{exchange.teardown_note().replace('went out', 'sent')}; after the bad frame "
        f"it sent: {exchange.broker_summary()}; a fresh connection still opened, began and "
        "attached"
    )
    expected = (
        "the broker reacts within the bound: a close (with an error, if it refuses the "
        "bad frame) or a TCP close, or at least it answers the fuzzer's close with its own "
        "(2.4.3)"
    )
    return Verdict(
        HANG,
        "reply-bound",
        "2.4.3",
        f"no close and no drop within {bound}s",
        last,
        expected,
        observed,
        ROBUSTNESS,
    )


def _error_missing(exchange: Exchange, reason: str, where: int | None) -> Verdict:
    expected = (
        f"the broker refuses the undecodable frame ({reason}): a close, end or detach with "
        "an error, or a TCP close. No MUST of the text says how a receiver answers "
        "undecodable bytes (2.3.2 binds their sender): a robustness finding"
    )
    window = (
        f"within {exchange.bound}s of the bad frame (the fuzzer held its close that long)"
        if exchange.strict
        else "before the fuzzer's close was answered"
    )
    close = exchange.first_close()
    answered = ""
    if close is not None:
        answered = f"; the broker's close ({close.short()}) came {exchange.when(close.time)}"
    observed = (
        f"no error from the broker {window}, after the bad frame ({exchange.bad_label}); "
        f"it sent: {exchange.broker_summary()}; {exchange.teardown_note()}{answered}"
    )
    return Verdict(
        ERROR_MISSING, "decode-refusal", "2.3.1", reason, where, expected, observed, ROBUSTNESS
    )


_ENDINGS = frozenset({"close", "end", "detach"})
# what the broker writes after its OWN close races with nothing of ours (2.4.3: "This
# frame MUST be the last thing ever written onto a Connection"): judged past the cut
_OWN_CLOSE_RULE = "connection.frame-after-close"
# judged past the cut too: what a frame's own fields show (amqp10.checker.fields): our
# ending, unread yet, cannot excuse them
_JUDGED_PAST_CUT = FRAME_CONTENT_RULES | {_OWN_CLOSE_RULE}


def judged_items(recording: Recording) -> int:
    """The trace index up to which (exclusive) the broker is judged: up to the client's
    first close, end or detach (after it, what the broker sends races with what it had
    not read yet: work started before, answered after), or up to where the client side
    became undecodable (raw: the checker no longer knows what the broker answers).
    The frame-content rules and the broker's frames after its own close are judged past it
    (`_JUDGED_PAST_CUT`). Violations cite trace indices (`amqp10.monitor`); the recording
    holds only the broker's."""
    for item in recording.items:
        if item.direction != CLIENT:
            continue
        if item.item is None:
            return item.index
        if getattr(item.item, "name", "") in _ENDINGS:
            return item.index + 1
    return len(recording.items)


def _opened(sent: list[Step], frames: list[Frame]) -> bool:
    """Our open went out whole after a clean handshake: from then on the broker owes us
    its open and a close before it drops the socket (2.4.1, 2.4.3)."""
    position = next((i for i, s in enumerate(sent) if mutation_label(s.label) == "open"), None)
    if position is None or stream_status(sent[: position + 1])[0] != "ok":
        return False
    if _login_refused(frames):
        return False
    model = ServerModel()  # the engine, as a spec-following broker, took it all
    for s in sent[: position + 1]:
        model.feed(s)
    return not model.dead and model.state_of(None).startswith(("OPEN_RCVD", "OPENED"))


def _crash(target: Target, step: int, summary: str, exchange: Exchange) -> Verdict:
    back = wait_back(target)
    note = "" if back else _not_back_note(target)
    observed = (
        f"{summary}{note}; after the bad frame ({exchange.bad_label}) the broker sent: "
        f"{exchange.broker_summary()}; {exchange.teardown_note()}"
    )
    expected = (
        f"the broker goes on serving: a fresh connection opens, begins and attaches within "
        f"{target.bounds.liveness}s"
    )
    steps = [s.time for s in exchange.sent if s.index is not None]
    lag = None
    if exchange.dropped is not None:
        lag = exchange.dropped - (steps[-1] if steps else exchange.start)
    return Verdict(
        CRASH,
        "liveness",
        "2.4.1",
        summary + note,
        step,
        expected,
        observed,
        ROBUSTNESS,
        lag=lag,
        down=exchange.dropped,
    )


def _login_refused(frames: list[Frame]) -> bool:
    """The broker answered the SASL exchange with a failure (5.3.3.6)."""
    return any(f.name == "sasl-outcome" and f.performative.code != 0 for f in frames)


def _refused(frames: list[Frame]) -> bool:
    """The broker ended something with an error, or refused SASL."""
    for frame in frames:
        if frame.name in ("close", "end", "detach") and frame.performative.error is not None:
            return True
        if frame.name == "sasl-outcome" and frame.performative.code != 0:
            return True
    return False


def number_liveness_checks(start: int, step: int) -> None:
    """Number this process's liveness checks start, start + step, ...: worker process k
    of n (fuzz.processes) takes k + 1 and step n, so no two checks of one campaign share a
    container-id, hence a link (2.6.1)."""
    global _liveness
    _liveness = itertools.count(start, step)
