"""What a case works with and what it gives back: the target, the context, the result.

Owns: `BrokerTarget` (the --broker URL: amqp:// or ws[s]://, and the loopback bridge a
WebSocket run goes through), `CaseContext` (what a case's run() gets besides its first probe:
fresh queues, address templates, more connections, capability checks, outcome checks, SHOULD
notes, the run's facts), `CheckerFinding` and `CaseResult` (one case's graded verdict, its
trace and findings), and `outcome_matches` (an observed outcome against a case's patterns).
`runner.run_case` creates the context and grades what the case did. Touches nothing on disk.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.admin import Admin
from amqpspec.conformance.probe import Probe, Recording
from amqpspec.conformance.profile import Profile
from amqpspec.conformance.run.facts import RunFacts
from amqpspec.conformance.run.registry import (
    MAY,
    MODEL,
    MUST,
    Case,
)
from amqpspec.conformance.run.relay import Relay
from amqpspec.conformance.steps.sentences import CLOSE_FIRST
from amqpspec.conformance.verdicts import (
    CaseFailed,
    HarnessError,
    Unsupported,
    Verdict,
)

_queue_counter = itertools.count(1)


@dataclass(frozen=True, slots=True)
class BrokerTarget:
    host: str
    port: int
    username: str | None = None
    password: str | None = None
    # the broker's ws:// or wss:// URL when the run goes over WebSocket (OASIS WebSocket
    # binding): host and port are then the loopback bridge's (ws_bridge.py), once started
    websocket: str | None = None

    @classmethod
    def parse(cls, url: str) -> BrokerTarget:
        """amqp://[user:pass@]HOST[:PORT] (port 5672 by default), or
        ws[s]://[user:pass@]HOST[:PORT][/PATH] (AMQP over WebSocket, port 80 / 443 by
        default), whose host and port stand until `bridged` names the bridge's."""
        parts = urlsplit(url if "://" in url else f"amqp://{url}")
        if parts.scheme not in ("amqp", "", "ws", "wss"):
            raise ValueError(
                f"unsupported broker URL scheme {parts.scheme!r} (amqp://, ws:// or wss://)"
            )
        websocket = url if parts.scheme in ("ws", "wss") else None
        default_port = {"ws": 80, "wss": 443}.get(parts.scheme, 5672)
        return cls(
            parts.hostname or "127.0.0.1",
            parts.port or default_port,
            unquote(parts.username) if parts.username else None,
            unquote(parts.password) if parts.password else None,
            websocket,
        )

    @property
    def open_hostname(self) -> str | None:
        """The hostname an open names (2.7.1 hostname) when the profile sets none: over
        WebSocket the broker's own host, not the bridge's 127.0.0.1; None: the probe's host."""
        return urlsplit(self.websocket).hostname if self.websocket else None

    @property
    def transport(self) -> str:
        """How the run reaches the broker: "tcp", or "websocket" (index.json, run header)."""
        return "websocket" if self.websocket else "tcp"

    def bridged(self, port: int) -> BrokerTarget:
        """This target reached through the loopback bridge listening on `port`."""
        return dataclasses.replace(self, host="127.0.0.1", port=port)

    def __str__(self) -> str:
        if self.websocket:
            from amqpspec.conformance.run.ws_bridge import websocket_url  # aiohttp: only here

            return websocket_url(self.websocket)
        return f"amqp://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class CheckerFinding:
    """One checker finding against the broker in a case: the rule, the violation as text,
    the offending frame as a trace line, and whether it graded the case (the rule enforces
    one of the case's own sentences) or only its rule's row (`checker_rows`)."""

    rule_id: str
    section: str
    level: str
    text: str
    frame: str
    graded: bool


@dataclass(slots=True)
class CaseResult:
    case_id: str
    level: str
    verdict: Verdict
    duration: float
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    trace_text: str = ""
    recordings: list[Recording] = field(default_factory=list)
    findings: list[CheckerFinding] = field(default_factory=list)


class CaseContext:
    """Everything a case may use besides its first probe."""

    def __init__(
        self,
        case: Case,
        target: BrokerTarget,
        profile: Profile,
        admin: Admin,
        deadline: float,
        *,
        pipelined: bool = False,
        facts: RunFacts | None = None,
    ) -> None:
        self.case = case
        self.pipelined = pipelined  # every probe holds its frames until the first wait
        self.facts = RunFacts() if facts is None else facts  # what earlier cases learned
        self.target = target
        self.profile = profile
        self.admin = admin
        self.deadline = deadline
        self.probes: list[Probe] = []
        self.queues: list[str] = []
        # the arguments `queue()` declares a queue with when the case names none (a queue
        # type variant of a classic-queue case: conformance/cases/s3_4_quorum_variants.py)
        self.queue_arguments: dict[str, Any] | None = None
        self.notes: list[str] = []
        self.should_failures: list[str] = []
        self._stoppers: list[Callable[[], object]] = []
        self._closers: list[Callable[[], object]] = []  # on_close: after the probes close
        # the sentences a FAILED or NON-STRICT of the case's own checks rests on, and the
        # level its failure was graded at (a MUST case's SHORTFALL is recorded as MAY)
        self.resting_on: tuple[str, ...] = case.sentences
        self.failed_level: str = case.level

    # --- connections --------------------------------------------------------------------
    def probe(self, *, sasl_mechanism: str | None = None, **kw: object) -> Probe:
        """A new connection to the broker (recorded in this case's trace)."""
        mechanism = self.profile.sasl if sasl_mechanism is None else sasl_mechanism
        probe = Probe(
            self.target.host,
            self.target.port,
            username=self.target.username or self.profile.username,
            password=self.target.password or self.profile.password,
            sasl_mechanism=None if mechanism == "none" else mechanism,
            hostname=self.profile.hostname or self.target.open_hostname,
            wait=self.profile.wait,
            deadline=self.deadline,
            pipelined=self.pipelined,
            **kw,  # type: ignore[arg-type]
        )
        self.probes.append(probe)
        return probe

    def broker_side_port(self, probe: Probe) -> int:
        """The port the broker sees `probe` connect from (an admin API lists connections by
        it): the probe's own, or over WebSocket the bridge's connection's (ws_bridge.py)."""
        port = int(probe.sock.getsockname()[1])
        if not self.target.websocket:
            return port
        from amqpspec.conformance.run.ws_bridge import broker_side_port

        return broker_side_port(port)

    def relay(self) -> Relay:
        """A recording relay to the broker for a real client library (its traffic is judged
        and traced like a probe's); connect the client to 127.0.0.1:<relay.port>."""
        relay = Relay(self.target.host, self.target.port, self.deadline)
        self.probes.append(relay)  # type: ignore[arg-type]
        return relay

    # --- queues and addresses -----------------------------------------------------------
    def queue(
        self, tag: str = "q", arguments: dict[str, Any] | None = None, *, declare: bool = True
    ) -> str:
        """A fresh, empty queue for this case (declared through the admin adapter when the
        profile says queues must be declared, or when it needs `arguments`: a stream or
        quorum queue's x-queue-type...; `declare=False`: only the name, the case declares
        it its own way)."""
        self.require("queues")
        slug = "".join(ch if ch.isalnum() else "-" for ch in self.case.case_id)
        name = f"amqpspec-{slug}-{tag}-{next(_queue_counter)}-{int(time.time() * 1000) % 100000}"
        if arguments is None:
            arguments = self.queue_arguments
        if not declare:
            pass
        elif arguments is not None:
            self.admin.declare_queue(name, arguments)
        elif self.profile.declare_queues:
            self.admin.declare_queue(name)
        self.queues.append(name)
        return name

    def source(self, queue: str) -> str:
        return self.profile.source(queue)

    def target_address(self, queue: str) -> str:
        return self.profile.target(queue)

    def depth(self, queue: str) -> int:
        self.require("queue-depth")
        return self.admin.queue_depth(queue)

    # --- judgement ----------------------------------------------------------------------
    def require(self, *capabilities: str) -> None:
        missing = [c for c in capabilities if not self.profile.has(c)]
        if missing:
            raise Unsupported(f"profile {self.profile.name!r} lacks {', '.join(missing)}")

    def outcome(self, observed: str, outcomes: set[str] | frozenset[str] | None = None) -> str:
        """Grade an observed outcome: in the acceptable set (the case's by default) -> OK; in
        the case's lenient set (it meets the MUST, not the SHOULD the case names) ->
        NON-STRICT; otherwise CaseFailed, whose reason says what the broker did (the frame).
        A MAY case records the outcome and goes on (the spec leaves it open)."""
        acceptable = self.case.outcomes if outcomes is None else frozenset(outcomes)
        self.note(f"outcome {observed}")
        detail = self.last_observed() or f"observed {observed}"
        if observed == "tcp-close" and self._dropped_after_open():
            raise CaseFailed(
                f"expected a close frame before the connection closed; {detail}",
                level=MUST,
                sentences=(CLOSE_FIRST,),
            )
        if self.case.level == MAY:
            if not outcome_matches(observed, acceptable):
                self.note(f"{detail} (the spec leaves the answer open)")
            return observed
        if outcome_matches(observed, acceptable):
            return observed
        expected = f"expected {_either(acceptable)}; {detail}"
        if outcome_matches(observed, self.case.lenient):
            self.should_failures.append(expected)
            return observed
        raise CaseFailed(expected)

    def _graded_probe(self) -> Probe | None:
        """The probe whose outcome was graded last."""
        seen = [p for p in self.probes if getattr(p, "last_observed", None)]
        return max(seen, key=lambda p: p.last_observed) if seen else None

    def last_observed(self) -> str | None:
        """What the broker did, as the newest outcome of the case's probes saw it."""
        probe = self._graded_probe()
        return probe.last_observed[1] if probe is not None else None

    def _dropped_after_open(self) -> bool:
        """The broker closed the TCP connection of the graded probe after its open without
        a close frame (2.4.3: each peer MUST write a close frame before closing)."""
        probe = self._graded_probe()
        if probe is None or not probe.peer_closed or not probe.server_frames("open"):
            return False
        undecoded = any(t.direction == SERVER and t.item is None for t in probe.recording.items)
        return not undecoded and not probe.server_frames("close")  # raw bytes may be a close

    def check(self, condition: bool, message: str) -> None:
        """A requirement of the case's level (MUST -> FAILED, SHOULD -> NON-STRICT, MODEL ->
        DIFFERS, MAY -> recorded)."""
        if not condition:
            raise CaseFailed(message)

    def must(self, condition: bool, message: str, *sentences: str) -> None:
        """A MUST the case meets on its way whatever its own level (a MODEL case that
        sees an accepted message resent, 3.5.2): not met -> FAILED, quoting `sentences`."""
        if not condition:
            raise CaseFailed(message, level=MUST, sentences=sentences)

    def model(self, condition: bool, message: str) -> None:
        """An expectation of the case's model (`case(model=...)`) inside a case of another
        level (an echo answered, which no sentence requires, before the MUST its reply is
        checked against): not met -> DIFFERS."""
        if self.case.model is None:
            raise HarnessError(f"{self.case.case_id} checks a model but names none")
        if not condition:
            raise CaseFailed(message, level=MODEL)

    def on_abort(self, stop: Callable[[], object]) -> None:
        """Call `stop()` (from another thread) when the case overruns its budget: e.g. a
        client library's event loop that the runner cannot reach through a probe."""
        self._stoppers.append(stop)

    def on_close(self, stop: Callable[[], object]) -> None:
        """Call `stop()` when the case ends, after its connections are closed (and when it
        overruns its budget): e.g. a WebSocket bridge of its own (steps/websocket.py)."""
        self._closers.append(stop)
        self._stoppers.append(stop)

    def abort(self) -> None:
        """The case overran its budget: stop what it registered, drop its connections."""
        for stop in self._stoppers:
            with contextlib.suppress(Exception):
                stop()
        for probe in list(self.probes):
            with contextlib.suppress(Exception):
                probe.disconnect()

    def should(self, condition: bool, message: str) -> None:
        """A SHOULD inside the case: not met -> NON-STRICT (the case goes on)."""
        if not condition:
            self.should_failures.append(message)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def close(self) -> None:
        # newest connection first: a consumer opened to check redelivery goes away before
        # the connection holding unsettled deliveries, so teardown cannot race a requeue
        # into a closing connection (keeps verdicts deterministic)
        for probe in reversed(self.probes):
            try:
                if not probe.closed:
                    if probe.conn is not None:
                        probe.close(wait=True)
                    else:
                        probe.disconnect()
            except Exception:
                probe.disconnect()
        for stop in self._closers:
            with contextlib.suppress(Exception):
                stop()
        for queue in self.queues:
            if self.profile.declare_queues:
                try:
                    self.admin.delete_queue(queue)
                except Exception:
                    pass


def outcome_matches(observed: str, patterns: frozenset[str]) -> bool:
    return any(observed.startswith(p[:-1]) if p.endswith("*") else observed == p for p in patterns)


def _either(outcomes: frozenset[str]) -> str:
    """The acceptable outcomes in words: `close:amqp:decode-error or tcp-close`."""
    ordered = sorted(outcomes)
    return ordered[0] if len(ordered) == 1 else ", ".join(ordered[:-1]) + " or " + ordered[-1]
