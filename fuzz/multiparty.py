"""Multi-party fuzz cases: several peers at once on one broker queue.

Owns: `Action` and `MultiCase` (the parties and their schedule, and the reproducer form:
an ordinary reproducer.json with no steps and a `multi_party` record), `make_multi_case`
(case N of a campaign with seed S, from `random.Random(f"{S}:{N}:multi")` alone),
`run_multi(target, case, queues)` (one run: every party a connection of its own, the
schedule played in order from one thread, then the end phase), `triage_multi` (ddmin over
the schedule, then `confirm` replays), `keep_multi` (a finding's files) and `replay_multi`.

A case is a schedule over parties S1 (a sender) and R1..R3 (receivers) of one queue made for
the run (`amqpspec-fuzz-mp-<nonce>`: declared and deleted through `QueueAdmin` when the
profile says queues must be declared), and M1 (a management client beside: GET requests to
RabbitMQ 4's /management node on its own connection, played only where the profile has
`management-node`). The templates are the races the credit and
settlement rules are about: two receivers re-granting credit while the sender publishes
(2.6.7); a drain on one link while the other publishes and detaches (2.6.7 drain, 2.6.6);
a receiver whose connection drops while it holds deliveries as another attaches (2.6.6,
3.3.1); a free mix. Actions: attach, grant (link-credit, drain, echo), publish, settle
(accepted, released, modified, rejected: 3.4), detach, drop (TCP, no close), close, wait,
manage (M1: GET the queue or the queue list; read-only, so no message can go that way).
After the schedule the end phase: the sender waits (bounded) for the broker's outcomes,
every party closes (answer bounded), then a collector attaches, drains the queue (2.6.7)
and accepts what it gets. Judged: every party's connection by the checker (the broker's
MUST rules, cut as fuzz.oracle cuts a single connection: at our first close, end or
detach), then the invariants across them (fuzz.cross_oracle).

Messages are amqp-value strings `<nonce>:<n>`: the nonce is the run's, so a replay never
counts another run's leftovers.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from amqpspec.amqp10.checker.rules import RULES
from amqpspec.amqp10.composites import Accepted, Modified, Rejected, Released
from amqpspec.amqp10.engine import (
    DispositionReceived,
    ProtocolErrorRaised,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    TransferReceived,
    TransportClosed,
    UsageError,
)
from amqpspec.amqp10.errors import AMQPError
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.admin.management_node import ManagementNodeAdmin
from amqpspec.conformance.probe import Probe, Recording
from amqpspec.conformance.verdicts import CaseFailed, HarnessError
from amqpspec.fuzz.case import reproducer_record
from amqpspec.fuzz.cross_oracle import (
    COLLECTOR,
    CONFIRMED,
    DELIVER,
    END_PHASE,
    ENDED,
    OUTCOME,
    Ledger,
    judge_ledger,
)
from amqpspec.fuzz.findings import (
    Finding,
    FindingStore,
    atomic_write,
    finding_of,
    json_bytes,
    signature,
    write_pcap,
)
from amqpspec.fuzz.model import FUZZ_QUEUE
from amqpspec.fuzz.oracle import (
    CRASH,
    MUST,
    ROBUSTNESS,
    VIOLATION,
    Target,
    Verdict,
    alive,
    judged_items,
)
from amqpspec.fuzz.stops import TriageAbandonedError
from amqpspec.traces.minimize import ddmin
from amqpspec.traces.render import show_line

MULTI_KEY = "multi_party"  # the reproducer.json record of a multi-party case
KINDS = ("single", "multi", "both")  # amqpspec fuzz --kind
QUEUE_PREFIX = f"{FUZZ_QUEUE}-mp-"
OUTCOMES = ("accepted", "released", "modified", "rejected")
MINIMIZE_TESTS = 40  # each test is a whole multi-party run (a fraction of a second to 2 s)
CASE_BUDGET = 30.0  # every wait of one run ends by then
COLLECT_CREDIT = 1000
STATE = "OPENED/MAPPED/ATTACHED"  # where every party's link is when the schedule plays
CREDIT_RULES = ("link.credit.", "link.drain.")  # the checker's 2.6.7 rules: judged first


class QueueAdmin(Protocol):
    def declare_queue(self, queue: str) -> Any: ...

    def delete_queue(self, queue: str) -> Any: ...


class LockedAdmin:
    """A queue admin shared by the campaign's threads (one HTTP connection)."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin
        self._lock = threading.Lock()

    def declare_queue(self, queue: str) -> None:
        with self._lock:
            self.admin.declare_queue(queue)

    def delete_queue(self, queue: str) -> None:
        with self._lock:
            try:
                self.admin.delete_queue(queue)
            except Exception:  # gone already, or the broker refuses: the case is judged
                pass


# ----------------------------------------------------------------- the case


@dataclass(frozen=True, slots=True)
class Action:
    op: str  # attach, grant, publish, settle, detach, drop, close, wait, manage
    party: str  # S1, R1, R2, R3, M1 ("-" for wait)
    args: tuple[Any, ...] = ()

    @property
    def label(self) -> str:
        if self.op == "grant":
            credit, drain, echo = self.args
            flags = (" drain" if drain else "") + (" echo" if echo else "")
            return f"{self.party} grant link-credit={credit}{flags}"
        if self.op == "wait":
            return f"wait {self.args[0]} ms"
        extra = " ".join(str(a) for a in self.args)
        return f"{self.party} {self.op}" + (f" {extra}" if extra else "")

    def to_json(self) -> list[Any]:
        return [self.op, self.party, list(self.args)]

    @classmethod
    def from_json(cls, record: list[Any]) -> Action:
        op, party, args = record
        return cls(str(op), str(party), tuple(args))


@dataclass(slots=True)
class MultiCase:
    """The schedule of one multi-party case (`steps` is empty: no single connection)."""

    actions: list[Action]
    strategy: str = "multi"
    seed: str = ""
    note: str = ""
    original: list[Action] = field(default_factory=list)
    steps: list[Any] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return [a.label for a in self.actions]

    def with_actions(self, actions: list[Action]) -> MultiCase:
        return MultiCase(list(actions), self.strategy, self.seed, self.note,
                         self.original or self.actions)  # fmt: skip

    def to_json(self, **extra: Any) -> dict[str, Any]:
        record = reproducer_record(self, [])
        record[MULTI_KEY] = {
            "actions": [a.to_json() for a in self.actions],
            "original_actions": [a.to_json() for a in self.original],
        }
        record.update(extra)
        return record


def is_multi_reproducer(path: str) -> bool:
    """`path` (a finding directory or reproducer .json) holds a multi-party case."""
    record = _record(path)
    return record is not None and MULTI_KEY in record


def _record(path: str) -> dict[str, Any] | None:
    if os.path.isdir(path):
        path = os.path.join(path, "reproducer.json")
    try:
        with open(path, encoding="utf-8") as file:
            record = json.load(file)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def load_multi(path: str) -> tuple[MultiCase, dict[str, Any]]:
    record = _record(path)
    if record is None or MULTI_KEY not in record:
        raise ValueError(f"{path}: not a multi-party reproducer")
    actions = [Action.from_json(a) for a in record[MULTI_KEY]["actions"]]
    return MultiCase(actions, str(record.get("strategy", "multi")),
                     str(record.get("seed", ""))), record  # fmt: skip


def chosen(kind: str, index: int) -> bool:
    """Is case `index` of a campaign of `kind` a multi-party case? (both: every other one)"""
    return kind == "multi" or (kind == "both" and index % 2 == 1)


# ----------------------------------------------------------------- generation

TEMPLATES = ("regrant-race", "drain-detach", "drop-mid-delivery", "mix")
MANAGED = 0.3  # the share of cases with a management client beside
MANAGE_REQUESTS = ("queue", "queues")  # GET /queues/<the run's queue>, GET /queues


def make_multi_case(seed: object, index: int) -> MultiCase:
    """Case `index` of campaign `seed`: a function of (seed, index) only."""
    name = f"{seed}:{index}:multi"
    rng = random.Random(name)
    template = rng.choice(TEMPLATES)
    actions = _TEMPLATE[template](rng)
    if rng.random() < MANAGED:  # management requests beside, where the profile has them
        actions.insert(rng.randint(0, len(actions)), Action("attach", "M1"))
        for _ in range(rng.randint(1, 3)):
            what = rng.choice(MANAGE_REQUESTS)
            actions.insert(rng.randint(0, len(actions)), Action("manage", "M1", (what,)))
    return MultiCase(actions, "multi", f"{seed}:{index}", f"template {template}")


def _grant(rng: random.Random, party: str, drain: bool = False) -> Action:
    return Action("grant", party, (rng.randint(0, 5), drain, rng.random() < 0.2))


def _settle(rng: random.Random, party: str) -> Action:
    outcome = rng.choices(OUTCOMES, weights=(5, 3, 2, 1))[0]
    return Action("settle", party, (outcome, rng.randint(1, 3)))


def _regrant_race(rng: random.Random) -> list[Action]:
    actions = [Action("attach", p) for p in ("S1", "R1", "R2")]
    actions += [_grant(rng, "R1"), _grant(rng, "R2")]
    for _ in range(rng.randint(2, 5)):
        actions.append(Action("publish", "S1", (rng.randint(1, 6),)))
        for _ in range(rng.randint(1, 3)):
            party = rng.choice(("R1", "R2"))
            actions.append(_grant(rng, party) if rng.random() < 0.6 else _settle(rng, party))
    return actions


def _drain_detach(rng: random.Random) -> list[Action]:
    actions = [Action("attach", p) for p in ("S1", "R1", "R2")]
    actions += [_grant(rng, "R1"), Action("publish", "S1", (rng.randint(1, 6),))]
    actions += [_grant(rng, "R1", drain=True), _grant(rng, "R2")]
    actions.append(Action("publish", "S1", (rng.randint(1, 6),)))
    actions.append(Action(rng.choice(("detach", "drop", "close")), "S1"))
    actions += [_settle(rng, rng.choice(("R1", "R2"))) for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.5:
        actions.append(Action(rng.choice(("detach", "drop")), "R1"))
    return actions


def _drop_mid_delivery(rng: random.Random) -> list[Action]:
    actions = [Action("attach", "S1"), Action("attach", "R1"), _grant(rng, "R1")]
    actions.append(Action("publish", "S1", (rng.randint(2, 8),)))
    if rng.random() < 0.5:
        actions.append(_settle(rng, "R1"))
    actions += [Action("attach", "R2"), Action(rng.choice(("drop", "detach")), "R1")]
    actions += [_grant(rng, "R2"), Action("publish", "S1", (rng.randint(0, 4),))]
    actions += [_settle(rng, "R2") for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.4:
        actions += [Action("attach", "R3"), _grant(rng, "R3"), Action("drop", "R2")]
    return actions


def _mix(rng: random.Random) -> list[Action]:
    receivers = ("R1", "R2", "R3")
    actions = [Action("attach", "S1"), Action("attach", "R1"), Action("attach", "R2")]
    for _ in range(rng.randint(4, 14)):
        roll = rng.random()
        party = rng.choice(receivers)
        if roll < 0.25:
            actions.append(Action("publish", "S1", (rng.randint(1, 5),)))
        elif roll < 0.5:
            actions.append(_grant(rng, party, drain=rng.random() < 0.2))
        elif roll < 0.7:
            actions.append(_settle(rng, party))
        elif roll < 0.78:
            actions.append(Action("attach", party))
        elif roll < 0.88:
            actions.append(Action(rng.choice(("detach", "drop", "close")), party))
        else:
            actions.append(Action("wait", "-", (rng.choice((0, 5, 20, 50)),)))
    return actions


_TEMPLATE: dict[str, Callable[[random.Random], list[Action]]] = {
    "regrant-race": _regrant_race,
    "drain-detach": _drain_detach,
    "drop-mid-delivery": _drop_mid_delivery,
    "mix": _mix,
}


# ----------------------------------------------------------------- one run


@dataclass(slots=True)
class Party:
    name: str
    probe: Probe
    link: Any = None
    node: ManagementNodeAdmin | None = None  # M1: requests on its link pair
    held: list[tuple[int, int]] = field(default_factory=list)  # (delivery-id, message)
    sent: dict[int, int] = field(default_factory=dict)  # sender: delivery-id -> message
    ended: str = ""  # how: detach, drop, close, broker
    answered: bool = False  # the broker answered our close or detach


@dataclass(slots=True)
class MultiOutcome:
    verdict: Verdict | None
    recordings: dict[str, Recording]
    ledger: Ledger
    party: str = ""  # the party whose connection the verdict is about (checker rules)


class _Run:
    """One play of a schedule against the broker (see module doc)."""

    def __init__(self, target: Target, queue: str, nonce: str) -> None:
        self.target = target
        self.bounds = target.bounds
        self.nonce = nonce
        self.source = target.handshake.source.replace(FUZZ_QUEUE, queue)
        self.address = target.handshake.target.replace(FUZZ_QUEUE, queue)
        self.queue = queue
        profile = target.profile
        self.managed = profile is not None and profile.has("management-node")
        self.parties: dict[str, Party] = {}
        self.ledger = Ledger()
        self.next_message = 0
        self.deadline = time.monotonic() + CASE_BUDGET

    # --- connections
    def _probe(self, name: str) -> Probe:
        hs = self.target.handshake
        probe = Probe(
            self.target.host,
            self.target.port,
            username=hs.username,
            password=hs.password,
            sasl_mechanism=None if hs.sasl == "none" else hs.sasl,
            hostname=hs.hostname,
            wait=self.bounds.reply,
            deadline=self.deadline,
            connect_timeout=self.bounds.connect,
        )
        probe.open(container_id=f"{FUZZ_QUEUE}-mp-{self.nonce}-{name}")
        return probe

    def attach(self, name: str) -> None:
        if name in self.parties:
            return
        if name.startswith("M") and not self.managed:
            return  # the profile has no /management node: no management client
        probe = self._probe(name)
        party = Party(name, probe)
        self.parties[name] = party
        if name.startswith("M"):
            party.node = ManagementNodeAdmin.over(probe)
            return
        session = probe.begin()
        if name.startswith("S"):
            party.link = probe.attach_sender(session, self.address, name=f"{name}-{self.nonce}")
        else:
            party.link = probe.attach_receiver(session, self.source, name=f"{name}-{self.nonce}")
            self._note_source(party)

    def _note_source(self, party: Party) -> None:
        attach = party.link.remote_attach
        source = attach.source if attach is not None else None
        if source is None:
            return
        if str(getattr(source, "distribution_mode", "") or "") == "copy":
            self.ledger.copy_links.add(party.name)
        outcome = getattr(source, "default_outcome", None)
        if getattr(outcome, "NAME", "") in ("accepted", "rejected"):
            self.ledger.archives_on_end = True

    # --- the schedule's actions
    def play(self, action: Action) -> None:
        if action.op == "wait":
            self.pump(action.args[0] / 1000.0)
            return
        if action.op == "attach":
            self.attach(action.party)
            return
        party = self.parties.get(action.party)
        if party is None or party.ended or party.probe.closed:
            return  # not attached (minimised away) or gone: nothing to do
        getattr(self, f"_{action.op}")(party, *action.args)

    def _manage(self, party: Party, what: str) -> None:
        """One GET to the /management node (its answer bounded by the reply bound); the
        connection is judged by the checker like every party's."""
        assert party.node is not None
        path = f"/queues/{quote(self.queue, safe='')}" if what == "queue" else "/queues"
        party.node.request("GET", path)

    def _grant(self, party: Party, credit: int, drain: bool, echo: bool) -> None:
        if not _usable(party.link) or party.link.is_sender:
            return
        party.probe.grant(party.link, credit, drain=drain, echo=echo)

    def _publish(self, party: Party, count: int) -> None:
        link = party.link
        if link is None or not link.is_sender:
            return
        for _ in range(count):
            if not _usable(link):
                return
            if link.link_credit <= 0:
                end = time.monotonic() + self.bounds.reply
                while link.link_credit <= 0 and time.monotonic() < end and not party.ended:
                    self.pump(0.01)
                if link.link_credit <= 0 or party.ended:
                    return
            number = self.next_message
            self.next_message += 1
            body = Message.of(f"{self.nonce}:{number}").encode()
            delivery_id = link.send(body, f"m{number}".encode(), False)
            party.sent[delivery_id] = number
            party.probe.flush()

    def _settle(self, party: Party, outcome: str, count: int) -> None:
        if not _usable(party.link):
            return
        state = {
            "accepted": Accepted,
            "released": Released,
            "rejected": Rejected,
            "modified": lambda: Modified(delivery_failed=True),
        }[outcome]
        taken, party.held = party.held[:count], party.held[count:]
        for delivery_id, number in taken:
            party.link.disposition(delivery_id, settled=True, state=state())
            if number >= 0:
                self.ledger.add(OUTCOME, party.name, number, outcome)
        party.probe.flush()

    def _detach(self, party: Party) -> None:
        if party.link is None:
            return
        party.link.detach(closed=True)
        party.probe.flush()
        self._ended(party, "detach")

    def _drop(self, party: Party) -> None:
        party.probe.disconnect()
        self._ended(party, "drop")

    def _close(self, party: Party) -> None:
        assert party.probe.conn is not None
        party.probe.conn.close()
        party.probe.flush()
        self._ended(party, "close")

    def _ended(self, party: Party, how: str) -> None:
        if not party.ended:
            party.ended = how
            self.ledger.add(ENDED, party.name, detail=how)

    # --- reading
    def pump(self, seconds: float) -> None:
        """Read every party's connection for `seconds` (at least once each)."""
        end = time.monotonic() + seconds
        while True:
            got = False
            for party in list(self.parties.values()):
                if not party.probe.closed:
                    got |= party.probe.pump(0)
                self._take(party)
            left = end - time.monotonic()
            if left <= 0:
                return
            if not got:
                time.sleep(min(0.002, left))

    def _take(self, party: Party) -> None:
        probe = party.probe
        events, probe.inbox = probe.inbox, []
        for event in events:
            if isinstance(event, TransferReceived) and event.link is party.link:
                number = self._number(event.payload)
                if not event.settled:
                    party.held.append((event.delivery_id, number))
                if number >= 0:
                    self.ledger.add(DELIVER, party.name, number, settled=event.settled)
            elif isinstance(event, DispositionReceived) and event.role == Role.RECEIVER:
                if event.settled and getattr(event.state, "NAME", "") == "accepted":
                    for delivery_id in range(event.first, event.last + 1):
                        number = party.sent.pop(delivery_id, None)
                        if number is not None:
                            self.ledger.add(CONFIRMED, party.name, number)
            elif isinstance(event, RemoteDetach) and event.link is party.link:
                if party.ended == "detach":
                    party.answered = True
                else:
                    self._ended(party, "broker")
            elif isinstance(event, RemoteClose):
                if party.ended == "close":
                    party.answered = True
                else:
                    self._ended(party, "broker")
                probe.disconnect()
            elif isinstance(event, RemoteEnd | TransportClosed | ProtocolErrorRaised):
                self._ended(party, "broker")  # or our engine ended it on the broker's error
        if probe.closed and not party.ended:
            self._ended(party, "broker")

    def _number(self, payload: bytes) -> int:
        try:
            value = Message.decode(payload).value
        except (AMQPError, ValueError, TypeError):
            return -1
        if isinstance(value, str) and value.startswith(f"{self.nonce}:"):
            try:
                return int(value.split(":", 1)[1])
            except ValueError:
                return -1
        return -1

    # --- the end phase
    def finish(self) -> None:
        self.ledger.action = END_PHASE
        sender_waits = time.monotonic() + self.bounds.reply
        while time.monotonic() < sender_waits and any(
            p.sent and not p.ended for p in self.parties.values()
        ):
            self.pump(0.01)
        for party in self.parties.values():
            if not party.ended and not party.probe.closed:
                self._close(party)
        end = time.monotonic() + self.bounds.reply
        while time.monotonic() < end and not all(p.probe.closed for p in self.parties.values()):
            self.pump(0.01)
        for party in self.parties.values():
            if party.ended in ("close", "detach") and party.answered:
                self.ledger.firm.add(party.name)
            party.probe.disconnect()
        self.collect()

    def collect(self) -> None:
        """A fresh receiver drains the queue (2.6.7) and accepts what it gets, stopping at
        the drain's answer or after the reply bound of silence; if the broker ends it (RabbitMQ
        3.10 ends the session on a drain with amqp:internal-error), a second one grants the
        same credit without drain and stops after the silence. The loss invariant is judged
        only when one of them finished attached."""
        for name, drain in ((COLLECTOR, True), (f"{COLLECTOR}-2", False)):
            if self._collect(name, drain):
                self.ledger.collected = True
                self.ledger.firm.add(name)
                return

    def _collect(self, name: str, drain: bool) -> bool:
        try:
            probe = self._probe(name)
            link = probe.attach_receiver(probe.begin(), self.source, name=f"{name}-{self.nonce}")
        except (CaseFailed, HarnessError):
            return False
        party = Party(name, probe, link)
        self.parties[name] = party
        probe.grant(link, COLLECT_CREDIT, drain=drain)
        quiet_until = time.monotonic() + self.bounds.reply
        while time.monotonic() < quiet_until and not party.ended:
            drained = drain and link.link_credit == 0  # the answer and all before it are read
            self.pump(0.02)
            if party.held:
                self._settle(party, "accepted", len(party.held))
                quiet_until = time.monotonic() + self.bounds.reply
            if drained:
                break
        finished = not party.ended and not probe.closed and _usable(link)
        probe.close(wait=True)
        return finished


def _usable(link: Any) -> bool:
    """The link and its session are still attached and mapped (the broker ended neither)."""
    return (
        link is not None and link.state.name == "ATTACHED" and link.session.state.name == "MAPPED"
    )


def run_multi(target: Target, case: MultiCase, queues: QueueAdmin | None = None) -> MultiOutcome:
    """Play `case` against the broker on a queue of its own; judge every connection."""
    nonce = secrets.token_hex(4)
    queue = f"{QUEUE_PREFIX}{nonce}"
    if queues is not None:
        queues.declare_queue(queue)
    run = _Run(target, queue, nonce)
    failure = ""
    try:
        for position, action in enumerate(case.actions):
            run.ledger.action = position
            try:
                run.play(action)
            except UsageError:
                pass  # the broker ended the party's link or session meanwhile: nothing to do
            except (CaseFailed, HarnessError) as exc:  # a party refused: the others go on
                failure = failure or f"{action.label}: {exc}"
                party = run.parties.get(action.party)
                if party is not None:
                    run._ended(party, "broker")
                    party.probe.disconnect()
            run.pump(0)
        try:
            run.finish()
        except (CaseFailed, HarnessError, UsageError) as exc:  # no collector: loss not judged
            failure = failure or f"end phase: {exc}"
    finally:
        for party in run.parties.values():
            party.probe.disconnect()
        if queues is not None:
            queues.delete_queue(queue)
    recordings = {name: p.probe.recording for name, p in run.parties.items()}
    outcome = MultiOutcome(None, recordings, run.ledger)
    outcome.verdict, outcome.party = _judge(target, case, run, failure)
    return outcome


def _judge(target: Target, case: MultiCase, run: _Run, failure: str) -> tuple[Verdict | None, str]:
    """First the checker's credit and drain rules on any party (2.6.7: what races between
    links show), then the invariants across connections, then the checker's other MUST
    rules (which single-connection cases find as well: a broker that always breaks one,
    RabbitMQ 3.10's flows without delivery-count, must not hide the others)."""
    last = max(0, len(case.actions) - 1)
    broken: list[tuple[str, Any]] = []
    for name, party in run.parties.items():
        recording = party.probe.recording
        cut = judged_items(recording)
        must = [v for v in recording.violations if v.level == "MUST" and v.frame_index < cut]
        broken += [(name, v) for v in must]
    credit = [(n, v) for n, v in broken if v.rule_id.startswith(CREDIT_RULES)]
    if credit:
        return _checker_verdict(*credit[0], last)
    cross = judge_ledger(run.ledger)
    if cross is not None:
        level = MUST if cross.level == "MUST" else ROBUSTNESS
        return Verdict(VIOLATION, cross.rule, cross.section, cross.summary, last, cross.expected,
                       cross.observed, level, cross.sentence), ""  # fmt: skip
    if broken:
        return _checker_verdict(*broken[0], last)
    if failure and not alive(target):
        summary = f"a party's connection failed ({failure}) and a fresh one is refused"
        return Verdict(CRASH, "liveness", "2.4.1", summary, last,
                       "the broker goes on serving", summary, ROBUSTNESS), ""  # fmt: skip
    return None, ""


def _checker_verdict(name: str, v: Any, last: int) -> tuple[Verdict, str]:
    rule = RULES.get(v.rule_id)
    quote_ = getattr(rule, "sentence", "") if rule is not None else ""
    sentences = tuple(getattr(rule, "sentences", ()) or ())
    expected = f"{v.section}: '{quote_}'" if quote_ else f"rule {v.rule_id} ({v.section})"
    observed = f"on {name}'s connection, the broker's frame (trace #{v.frame_index}): {v.reason}"
    verdict = Verdict(VIOLATION, v.rule_id, v.section, v.reason, last, expected, observed, MUST,
                      sentences[0] if sentences else "")  # fmt: skip
    return verdict, name


# ----------------------------------------------------------------- triage and findings


def multi_signature(verdict: Verdict) -> str:
    """The bucket of a multi-party finding (performative: the transfer the rule is about)."""
    return signature(verdict.kind, verdict.rule, verdict.section, "transfer", STATE)


def triage_multi(
    target: Target,
    case: MultiCase,
    outcome: MultiOutcome,
    confirm: int = 3,
    queues: QueueAdmin | None = None,
    abandon: Callable[[], bool] | None = None,
    max_tests: int = MINIMIZE_TESTS,
) -> tuple[Finding, MultiCase, MultiOutcome] | None:
    """Minimise the schedule (ddmin over its actions) while the same rule breaks, then
    replay it `confirm` times (every replay must show it)."""
    wanted = outcome.verdict
    assert wanted is not None
    last: dict[int, MultiOutcome] = {}

    def attempt(actions: list[Action]) -> MultiOutcome:
        if abandon is not None and abandon():
            raise TriageAbandonedError(case.seed)
        return run_multi(target, case.with_actions(actions), queues)

    def still_fails(actions: list[Action]) -> bool:
        result = attempt(actions)
        if result.verdict is not None and result.verdict.rule == wanted.rule:
            last[len(actions)] = result
            return True
        return False

    try:
        reduced = ddmin(case.actions, still_fails, max_tests=max_tests)
    except ValueError:
        return None  # not reproduced: a race that did not come back
    small = case.with_actions(reduced.items)
    replays: list[MultiOutcome] = []
    for candidate in (small, case.with_actions(case.actions)):
        replays = []
        for _ in range(confirm):
            replays.append(attempt(candidate.actions))
            found = replays[-1].verdict
            if found is None or found.rule != wanted.rule:
                break
        if len(replays) == confirm and all(
            r.verdict is not None and r.verdict.rule == wanted.rule for r in replays
        ):
            small = candidate
            break
    else:
        return None
    final = replays[-1]
    verdict = final.verdict or wanted
    finding = _multi_finding(target, case, small, verdict, final, confirm, reduced.minimal)
    return finding, small, final


def _multi_finding(
    target: Target,
    case: MultiCase,
    small: MultiCase,
    verdict: Verdict,
    final: MultiOutcome,
    confirm: int,
    minimal: bool,
) -> Finding:
    """The finding of a confirmed multi-party schedule."""
    return finding_of(
        verdict,
        multi_signature(verdict),
        frames=small.labels,
        original_frames=[a.label for a in case.actions],
        seed=case.seed,
        strategy=case.strategy,
        replays=f"{confirm}/{confirm}",
        minimal=minimal,
        broker=target.url,
        extra={"multi_party": True, "party": final.party},
    )


def transcript(case: MultiCase, outcome: MultiOutcome, finding: Finding) -> str:
    lines = [
        f"{finding.kind}: {finding.summary}",
        f"signature: {finding.signature}",
        f"rule: {finding.rule} (section {finding.section})  level: {finding.level}",
        f"seed: {finding.seed}  replays: {finding.replays}  (multi-party: every party replays)",
        "",
        f"expected: {finding.expected}",
        f"observed: {finding.observed}",
        "",
        "schedule (minimised), one thread plays it in order:",
        *(f"  {i:3d} {a.label}" for i, a in enumerate(case.actions)),
        "",
        "what the parties did and saw (the cross-connection ledger):",
        *(f"  {e.line()}" for e in outcome.ledger.events),
    ]
    for name, recording in outcome.recordings.items():
        lines += ["", f"{name}'s connection (-> fuzzer, <- broker):"]
        lines += [f"  {show_line(item)}" for item in recording.items]
    return "\n".join(lines) + "\n"


def keep_multi(
    store: FindingStore, finding: Finding, case: MultiCase, outcome: MultiOutcome
) -> bool:
    """Write the finding's files (reproducer.json, reproducer.txt, one pcap per party) and
    add it to the store (findings.json, findings.md), at once. False if its bucket exists."""

    def write(folder: str) -> None:
        record = case.to_json(**finding.verdict_fields())
        atomic_write(os.path.join(folder, "reproducer.json"), json_bytes(record))
        text = transcript(case, outcome, finding).encode()
        atomic_write(os.path.join(folder, "reproducer.txt"), text)
        for name, recording in outcome.recordings.items():
            if recording.chunks:
                write_pcap(os.path.join(folder, f"reproducer-{name}.pcap"), recording)

    return store.add_written(finding, write)


@dataclass(slots=True)
class MultiReplay:
    reproduced: int
    times: int
    verdicts: list[Verdict | None]
    signature: str


def replay_multi(
    target: Target, path: str, times: int = 3, queues: QueueAdmin | None = None
) -> MultiReplay:
    """Play the multi-party reproducer at `path` `times` times (every party each time)."""
    case, record = load_multi(path)
    rule = record.get("rule")
    verdicts = [run_multi(target, case, queues).verdict for _ in range(times)]
    reproduced = sum(v is not None and (rule is None or v.rule == rule) for v in verdicts)
    return MultiReplay(reproduced, times, verdicts, str(record.get("signature", "")))
