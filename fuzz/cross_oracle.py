"""The cross-connection oracle: what several peers of one queue saw, judged together.

Owns: `Ledger` (what every party of a multi-party case did and saw, in the order the fuzzer
did or read it: publishes and the broker's outcomes for them, deliveries, the outcomes the
receivers sent, links and connections ended) and `judge_ledger(ledger)`, the invariants
across connections. Pure: no sockets, no clock; fuzz.multiparty fills the ledger.

The invariants, each conservative where frames race (the order is the fuzzer's, and the
broker can act on a frame of ours only after we sent it, so a freeing event is recorded
before any redelivery it allows; what the broker does on its own, ending a link with an
error, frees what that link held from its first delivery on):
- `multi.redelivered-after-accept` (3.5.2, MUST NOT): "A Source MUST NOT resend a Message
  which has previously been successfully transferred from the Source, i.e. reached an
  ACCEPTED delivery state at the receiver." Judged only on accepts the broker is known to
  have read (the party's later close or detach was answered); an accept followed by our
  drop may not have reached it.
- `multi.acquired-twice` (3.3.1): "Once in the ACQUIRED state, a Message is ineligible for
  acquiring transfers to any other Links." A message delivered again while its holder
  neither released nor modified it (3.4.4, 3.4.5), nor ended its link or connection (2.6.6:
  the broker then requeues it). Not a MUST keyword: level robustness. Not judged on a link
  the broker attached with distribution-mode copy (3.5.2).
- `multi.accepted-message-lost` (3.3.1): a message the broker accepted from the sender
  (3.4.2) that no receiver accepted or rejected, and that the final collector (a fresh
  receiver draining the queue after every party ended) did not get either (what it got,
  settled or not, was still there). 3.3.1: a message
  stays ACQUIRED until its transfer is settled, then follows the outcome (or the source's
  default-outcome); only accepted and rejected archive it. Level robustness (no MUST keyword);
  not judged when a broker's source named accepted or rejected as its default-outcome, or
  when the collector could not finish.
- credit (2.6.7) is per link: every party's connection is judged by the checker
  (`link.credit.*`), which fuzz.multiparty reads first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DELIVER, OUTCOME, ENDED, CONFIRMED = "deliver", "outcome", "ended", "confirmed"
FREEING = ("released", "modified")  # 3.4.4, 3.4.5: back to AVAILABLE
ARCHIVING = ("accepted", "rejected")  # 3.4.2, 3.4.3: to ARCHIVED
COLLECTOR = "collector"
END_PHASE = -2  # Event.action of what happens after the schedule (closes, the collector)

REDELIVERED = ("multi.redelivered-after-accept", "3.5.2", "MUST", "3.5.2/distribution-modes.1")
ACQUIRED_TWICE = ("multi.acquired-twice", "3.3.1", "robustness", "")
LOST = ("multi.accepted-message-lost", "3.3.1", "robustness", "")
_ACCEPT_SENTENCE = (
    "A Source MUST NOT resend a Message which has previously been successfully transferred "
    "from the Source, i.e. reached an ACCEPTED delivery state at the receiver."
)
_ACQUIRED_SENTENCE = (
    "Once in the ACQUIRED state, a Message is ineligible for acquiring transfers to any "
    "other Links."
)
_STATE_SENTENCE = (
    "A Message will remain ACQUIRED at the distribution node until the transfer is settled. "
    "The delivery state at the receiver determines how the message transitions when the "
    "transfer is settled."
)


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # DELIVER, OUTCOME, ENDED, CONFIRMED
    party: str
    message: int = -1  # the case's message number (-1: none)
    detail: str = ""  # the outcome; how a party ended ("detach", "drop", "close", "broker")
    settled: bool = False  # DELIVER: the broker sent it settled (at-most-once)
    action: int = -1  # the schedule position it happened at or after

    def line(self) -> str:
        what = {
            DELIVER: f"{self.party} got message {self.message}"
            + (" (settled)" if self.settled else ""),
            OUTCOME: f"{self.party} settled message {self.message} {self.detail}",
            ENDED: f"{self.party} ended ({self.detail})",
            CONFIRMED: f"the broker accepted message {self.message} from {self.party}",
        }[self.kind]
        if self.action == END_PHASE:
            return f"[end phase] {what}"
        return f"[after action {self.action}] {what}" if self.action >= 0 else what


@dataclass(slots=True)
class Ledger:
    events: list[Event] = field(default_factory=list)
    firm: set[str] = field(default_factory=set)  # parties whose frames the broker surely read
    copy_links: set[str] = field(default_factory=set)  # parties attached distribution copy
    archives_on_end: bool = False  # a source's default-outcome was accepted or rejected
    collected: bool = False  # the collector drained the queue (or went idle) after the end
    action: int = -1  # the current schedule position

    def add(self, kind: str, party: str, message: int = -1, detail: str = "", **kw: bool) -> None:
        self.events.append(Event(kind, party, message, detail, kw.get("settled", False),
                                 self.action))  # fmt: skip


@dataclass(frozen=True, slots=True)
class CrossVerdict:
    rule: str
    section: str
    level: str
    sentence: str
    summary: str
    expected: str
    observed: str
    message: int


def judge_ledger(ledger: Ledger) -> CrossVerdict | None:
    """The first invariant the ledger breaks (see module doc), or None."""
    broker_ended = {e.party for e in ledger.events if e.kind == ENDED and e.detail == "broker"}
    holder: dict[int, str] = {}  # message -> the party holding it acquired (unsettled)
    accepted: dict[int, str] = {}  # message -> the party whose accept the broker read
    done: set[int] = set()  # accepted or rejected (firm or not), or delivered settled
    found: set[int] = set()  # delivered to a collector: still in the queue at the end
    history: dict[int, list[Event]] = {}
    for event in ledger.events:
        number = event.message
        if number >= 0:
            history.setdefault(number, []).append(event)
        if event.kind == DELIVER:
            if event.party.startswith(COLLECTOR):
                found.add(number)
            if number in accepted:
                return _verdict(REDELIVERED, ledger, history[number], number, accepted[number])
            first = holder.get(number)
            judged = event.party not in ledger.copy_links and first not in ledger.copy_links
            if first is not None and first not in broker_ended and judged:
                return _verdict(ACQUIRED_TWICE, ledger, history[number], number, first)
            if event.settled:
                done.add(number)
                holder.pop(number, None)
            else:
                holder[number] = event.party
        elif event.kind == OUTCOME:
            if holder.get(number) == event.party:
                del holder[number]
            if event.detail in ARCHIVING:
                done.add(number)
                if event.party in ledger.firm and event.detail == "accepted":
                    accepted[number] = event.party
        elif event.kind == ENDED:
            for held in [n for n, p in holder.items() if p == event.party]:
                del holder[held]
                if ledger.archives_on_end:
                    done.add(held)
    if not ledger.collected:
        return None
    confirmed = [e.message for e in ledger.events if e.kind == CONFIRMED]
    for number in confirmed:
        if number not in done and number not in holder and number not in found:
            return _verdict(LOST, ledger, history.get(number, []), number, "")
    return None


def _verdict(
    rule: tuple[str, str, str, str], ledger: Ledger, history: list[Event], number: int, who: str
) -> CrossVerdict:
    rule_id, section, level, sentence = rule
    parties = {e.party for e in history}
    story = "; ".join(
        e.line() for e in ledger.events if e in history or (e.kind == ENDED and e.party in parties)
    )
    if rule is REDELIVERED:
        summary = f"message {number} delivered again after {who} accepted it"
        expected = f"no delivery of a message a receiver accepted ({section}: '{_ACCEPT_SENTENCE}')"
    elif rule is ACQUIRED_TWICE:
        again = history[-1].party == who
        summary = (
            f"message {number} delivered again to {who}, which still held it unsettled"
            if again
            else f"message {number} delivered to a second link while {who} held it unsettled"
        )
        expected = (
            f"no second delivery while the first holder neither released nor modified it nor "
            f"ended its link ({section}: '{_ACQUIRED_SENTENCE}')"
        )
    else:
        summary = f"message {number}, accepted from the sender, was never delivered again"
        expected = (
            "a message the broker accepted is delivered until a receiver accepts or rejects "
            f"it: after every party ended, a fresh receiver gets it ({section}: "
            f"'{_STATE_SENTENCE}')"
        )
    observed = f"message {number}: {story or 'no event'}"
    return CrossVerdict(rule_id, section, level, sentence, summary, expected, observed, number)
