"""The oracle: send one case to a broker over a real socket and judge what came back.

Owns: `Target` (where the broker is, how to log in, optional memory reader), `Bounds`
(every wait), `Verdict` and `Outcome`, `run_case(target, steps)` and `alive(target)`.

One case = one new TCP connection: the steps are sent in order (waiting, bounded, for
sasl-mechanisms and sasl-outcome at the SASL steps), then a closing `close`; the broker
must answer with close or drop the socket within `Bounds.reply`. Judged, first match:
- crash: the connection cannot be made, or the case ends with no reply or a drop and a
  fresh connection then fails to open, begin and attach within `Bounds.liveness`;
- violation: the checker (amqp10.checker, fed both directions by the probe's recording)
  flags a MUST rule in the broker's frames; or the broker dropped the socket after its
  open without a close frame (2.4.3, pseudo-rule `connection.close-missing`);
- error-missing: the client stream holds bytes the core decoder rejects (a framing or
  decode error the spec says ends the connection) and the broker answered our close
  without any error (no close/end/detach with an error, no drop);
- hang: no reply and no drop within the bound while the broker still serves a fresh
  connection (unless the client stream ends inside an unfinished frame: then the broker
  may rightly wait, and nothing is judged; nor after a failed login: nothing is owed);
- resource: with a memory reader and `careful=True`, the broker's memory grew past
  `Bounds.memory_growth` while the case's connection was open (readings are taken after
  `Bounds.memory_settle`, since brokers refresh them periodically; a campaign samples
  memory every second and replays the cases since the last sample carefully).
Builds bytes only through amqp10 (builder); the network client is `conformance.probe`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.builder import build_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.frames import SASL_HEADER, Frame
from amqpspec.amqp10.monitor import ConnectionMonitor
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.conformance.probe import Probe, Recording
from amqpspec.conformance.verdicts import CaseFailed, HarnessError
from amqpspec.fuzz.case import FRAME, Step, mutation_label
from amqpspec.fuzz.model import FUZZ_CONTAINER, Conversation, Handshake, ServerModel

CRASH, HANG, VIOLATION, ERROR_MISSING, RESOURCE = (
    "crash",
    "hang",
    "violation",
    "error-missing",
    "resource",
)
KINDS = (CRASH, HANG, VIOLATION, ERROR_MISSING, RESOURCE)
CLOSE_MISSING = ("connection.close-missing", "2.4.3")  # close before the socket goes
_CLOSING = build_frame(COMPOSITE_CLASSES["close"]())
_SASL_HEADER = SASL_HEADER.encode()
_liveness = itertools.count(1)  # each liveness check's container-id


@dataclass(frozen=True, slots=True)
class Bounds:
    reply: float = 2.0  # the broker answers our close (or drops us) within this
    liveness: float = 5.0  # a fresh connection opens, begins and attaches within this
    connect: float = 3.0
    sasl: float = 1.0  # per SASL round trip
    restart_wait: float = 30.0  # after a crash, how long to wait for the broker to return
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

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def liveness_steps(self) -> list[Step]:
        """A fresh connection's open, begin and attach, under a container-id of its own
        (2.6.1: never the link of a case running beside it)."""
        container_id = f"{FUZZ_CONTAINER}-liveness-{next(_liveness)}"
        conv = Conversation(self.handshake, container_id=container_id).open()
        conv.attach_sender(conv.begin())
        return conv.steps()


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str
    rule: str  # checker rule id, or the oracle's: liveness, reply-bound, decode-refusal, ...
    section: str
    summary: str
    step: int | None = None  # the step the finding is tied to (the last one sent before it)


@dataclass(slots=True)
class Outcome:
    verdict: Verdict | None
    recording: Recording | None
    sent: int  # steps sent before the broker went away
    inconclusive: str = ""


# ----------------------------------------------------------------- the client stream


def stream_status(steps: list[Step]) -> tuple[str, int | None, str]:
    """('ok' | 'malformed' | 'pending', step index, reason) of the client's byte stream
    as a spec-following peer decodes it (the core's connection monitor: SASL and
    pipelined headers followed)."""
    monitor = ConnectionMonitor(check=False)
    ends, total = [], 0
    for s in steps:
        total += len(s.data)
        ends.append(total)
    monitor.feed(CLIENT, b"".join(s.data for s in steps), 0.0)
    error = monitor.decode_error(CLIENT)
    if error is not None:
        index = next((i for i, end in enumerate(ends) if error.offset < end), len(steps) - 1)
        return "malformed", index, f"{error.condition}: {error.expected}"
    if monitor.finish(0.0).items:
        return "pending", len(steps) - 1, "the stream ends inside a frame"
    return "ok", None, ""


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


def _server_frames(recording: Recording) -> list[Frame]:
    return [t.item for t in recording.items if t.direction == SERVER and isinstance(t.item, Frame)]


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
        return True
    except CaseFailed:
        return False
    finally:
        probe.disconnect()


def wait_back(target: Target) -> bool:
    """After a crash: poll until the broker serves again or `restart_wait` passes."""
    end = time.monotonic() + target.bounds.restart_wait
    while time.monotonic() < end:
        if alive(target, min(2.0, target.bounds.liveness)):
            return True
        time.sleep(0.2)
    return False


def run_case(
    target: Target, steps: list[Step], careful: bool = False, pace: float = 0.0
) -> Outcome:
    """Send `steps` on a new connection, then close; judge the broker (see module doc).
    `careful`: also measure the broker's memory around the case (slow); `pace`: after
    each step wait up to that long for an answer (a recorded conversation's rhythm)."""
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
            return run_case(target, steps, careful, pace)
        summary = f"broker unreachable: {exc}; not back within {bounds.restart_wait}s"
        return Outcome(Verdict(CRASH, "liveness", "2.4.1", summary), None, 0)
    during = None
    try:
        sent = _send(probe, steps, bounds.sasl, pace)
        if before is not None and target.memory is not None:
            probe.idle(bounds.memory_settle)  # let the broker's reading catch up
            during = _reading(target, max, before)  # before our close
        if not probe.closed:
            probe.send_raw(_CLOSING)
        # a stream that ends inside a frame swallows our close: no answer is due, so the
        # reply bound is not waited out (a crash still shows in the liveness checks)
        status = stream_status(steps[:sent] if sent else steps)
        pending = status[0] == "pending"
        end = time.monotonic() + (min(bounds.reply, 0.05) if pending else bounds.reply)
        # event-driven: done as soon as the broker's close is in (it may have come
        # before ours), or the socket closes
        while not probe.closed and time.monotonic() < end:
            if probe.server_frames("close"):
                probe.pump(0)  # what is already there (a drop) goes in the recording
                break
            probe.pump(min(0.05, max(0.0, end - time.monotonic())))
    finally:
        peer_closed = probe.peer_closed
        probe.disconnect()
    outcome = Outcome(None, probe.recording, sent)
    growth = during - before if during is not None and before is not None else None
    if growth is not None and growth > bounds.memory_growth:
        target.quiet_until = time.monotonic() + bounds.memory_quiet
    outcome.verdict = _judge(target, steps, probe.recording, sent, peer_closed, growth, status)
    return outcome


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


def _judge(
    target: Target,
    steps: list[Step],
    recording: Recording,
    sent: int,
    peer_closed: bool,
    memory_growth: int | None,
    client_stream: tuple[str, int | None, str],
) -> Verdict | None:
    last = max(0, min(sent, len(steps)) - 1)
    frames = _server_frames(recording)
    names = [f.name for f in frames]
    judged = _judged_items(recording)
    violations = [v for v in recording.violations if v.level == "MUST" and v.frame_index < judged]
    if violations:
        v = violations[0]
        return Verdict(VIOLATION, v.rule_id, v.section, v.reason, last)
    status, where, reason = client_stream  # stream_status of what was sent
    replied = "close" in names
    if not replied and not peer_closed:
        if status == "pending" or _login_refused(frames):
            # the broker may rightly wait for the rest of a frame; after a failed login
            # nothing more is owed (RabbitMQ 3.10 drops the socket 3 s after its outcome)
            return None
        if not alive(target):
            return _crash(target, last, "no reply, and a fresh connection is refused")
        return Verdict(
            HANG,
            "reply-bound",
            "2.4.3",
            f"no close and no drop within {target.bounds.reply}s",
            last,
        )
    # a drop (in the SASL layer too, where it may be right): is the broker still there?
    if peer_closed and not replied and not alive(target):
        return _crash(target, last, "the broker dropped us and refuses fresh connections")
    if peer_closed and not replied and ("open" in names or _opened(steps[:sent], frames)):
        rule, section = CLOSE_MISSING
        return Verdict(VIOLATION, rule, section, "socket closed after open with no close", last)
    if status == "malformed" and not peer_closed and not _refused(frames):
        return Verdict(ERROR_MISSING, "decode-refusal", "2.3.1", reason, where)
    if memory_growth is not None and memory_growth > target.bounds.memory_growth:
        grown = memory_growth // (1024 * 1024)
        return Verdict(RESOURCE, "memory-growth", "-", f"memory grew {grown} MiB", last)
    return None


_ENDINGS = frozenset({"close", "end", "detach"})


def _judged_items(recording: Recording) -> int:
    """The trace index up to which (exclusive) the broker is judged: up to the client's
    first close, end or detach (after it, what the broker sends races with what it had
    not read yet: work started before, answered after), or up to where the client side
    became undecodable (raw: the checker no longer knows what the broker answers).
    Violations cite trace indices (`amqp10.monitor`); the recording holds only the
    broker's."""
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


def _crash(target: Target, step: int, summary: str) -> Verdict:
    back = wait_back(target)
    note = "" if back else f"; not back within {target.bounds.restart_wait}s"
    return Verdict(CRASH, "liveness", "2.4.1", summary + note, step)


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
