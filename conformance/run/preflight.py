"""Is there an AMQP 1.0 broker at the target at all? One short, bounded handshake: TCP connect,
protocol header, SASL when the profile uses it, open. The run checks it once before any case (a dead
port, a garbage, slowloris or HTTP server stops the run within seconds instead of one time-out per
case) and again before each case (a broker that died or hung mid-run turns the following cases into
ERROR at once).

Owns `check_broker(target, profile, timeout) -> str | None`: None when the broker answered
our open, else one line saying what went wrong (connection refused, no protocol header
within N s, header mismatch, SASL refused, no open within N s), and `BrokerHealth`, the
probe between cases, safe to share by the threads of `amqpspec run --jobs N`. Uses a
`Probe` (frames only through the engine and the monitor); touches nothing else.
"""

from __future__ import annotations

import threading
import time

from amqpspec.amqp10.frames import Frame, ProtocolHeader
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.profile import Profile
from amqpspec.conformance.run.context import BrokerTarget
from amqpspec.conformance.verdicts import CaseFailed, HarnessError, Verdict

PREFLIGHT_TIMEOUT_S = 5.0  # before the run
HEALTH_TIMEOUT_S = 2.0  # before each case


def check_broker(
    target: BrokerTarget, profile: Profile, timeout: float = PREFLIGHT_TIMEOUT_S
) -> str | None:
    """None if an AMQP 1.0 broker at `target` answers our open within `timeout` seconds
    (headers, SASL as the profile says), else the reason in one line."""
    mechanism = None if profile.sasl == "none" else profile.sasl
    try:
        probe = Probe(
            target.host,
            target.port,
            username=target.username or profile.username,
            password=target.password or profile.password,
            sasl_mechanism=mechanism,
            hostname=profile.hostname or target.open_hostname,
            wait=timeout,
            deadline=time.monotonic() + timeout,
            connect_timeout=timeout,
        )
    except HarnessError as exc:
        return _refused(target, exc)
    try:
        probe.open()
        return None
    except (CaseFailed, HarnessError):
        return f"{target}: {_what_went_wrong(probe, mechanism is not None, timeout)}"
    finally:
        probe.disconnect()


def _refused(target: BrokerTarget, exc: HarnessError) -> str:
    cause = exc.__cause__
    if isinstance(cause, ConnectionRefusedError):
        return f"{target}: connection refused"
    if isinstance(cause, TimeoutError):
        return f"{target}: no TCP connection within the bound (nothing answers at that address)"
    return f"{target}: cannot connect: {cause or exc}"


def _what_went_wrong(probe: Probe, sasl: bool, timeout: float) -> str:
    """Which step of the handshake the server did not do, from what it sent."""
    received = b"".join(c.data for c in probe.recording.chunks if c.direction == SERVER)
    items = [t.item for t in probe.recording.items if t.direction == SERVER]
    headers = [item for item in items if isinstance(item, ProtocolHeader)]
    frames = {item.name: item for item in items if isinstance(item, Frame)}
    gone = "the server closed the connection" if probe.peer_closed else ""
    if not headers:
        if received and not received.startswith(b"AMQP"[: len(received)]):
            return f"header mismatch: not AMQP, the server sent {received[:24]!r}"
        if gone:
            return f"{gone} before sending a protocol header"
        return f"no protocol header within {timeout:g} s ({len(received)} bytes received)"
    sent = b"AMQP\x03\x01\x00\x00" if sasl else b"AMQP\x00\x01\x00\x00"
    first = headers[0]
    if first.encode() != sent:
        return f"header mismatch: sent {sent!r}, the server answered {first.encode()!r}"
    if sasl:
        outcome = frames.get("sasl-outcome")
        if outcome is None:
            return gone or f"no SASL outcome within {timeout:g} s"
        if outcome.performative.code != 0:
            return f"SASL refused (sasl-outcome code {outcome.performative.code})"
    if "open" not in frames:
        close = frames.get("close")
        if close is not None and close.performative.error is not None:
            return f"no open: the server closed with {close.performative.error.condition}"
        return f"no open: {gone}" if gone else f"no open within {timeout:g} s"
    return "the server's open did not arrive"


class BrokerHealth:
    """The health probe between cases: after a case that did not end well (FAILED, ERROR: the
    broker may have died or hung in it), the next case to start first asks `check_broker`
    (within HEALTH_TIMEOUT_S). With several cases running at once, "the last case" is the
    one that finished last, one probe runs at a time, and cases that waited for it share
    its answer. `dead`: when (wall clock), before which case and why it first failed."""

    def __init__(self, target: BrokerTarget, profile: Profile, timeout: float) -> None:
        self.target, self.profile, self.timeout = target, profile, timeout
        self.dead: tuple[float, str, str] | None = None
        self._lock = threading.Lock()
        self._suspect = False  # the case that finished last was FAILED or ERROR
        self._answer: tuple[float, str | None] = (float("-inf"), None)  # (when, reason)

    def finished(self, verdict: Verdict) -> None:
        """A case finished with `verdict`."""
        self._suspect = verdict in (Verdict.FAILED, Verdict.ERROR)

    def check(self, case_id: str) -> str | None:
        """None when the case `case_id` may run; else why the broker is not answering."""
        if not self._suspect:
            return None
        asked = time.monotonic()
        with self._lock:
            when, reason = self._answer
            if when < asked:  # no probe finished since we asked: ours
                reason = check_broker(self.target, self.profile, self.timeout)
                self._answer = (time.monotonic(), reason)
            if reason is not None and self.dead is None:
                self.dead = (time.time(), case_id, reason)
            return reason
