"""Which of the broker's rule breaks answer a break of the fuzzer's own: not its fault.

Owns: `CONSEQUENCES` (a broker's rule -> the fuzzer's rules, broken earlier in the same
connection, whose answer it is) and `attributable` (the broker's violations left once those
are set apart). Read by fuzz.oracle before it judges a case.

A case breaks rules on purpose. Where the text tells the broker how to read such a frame,
the broker following it can look, to the checker's bookkeeping of the fuzzer's side, like a
break of its own. Each pair below was read against a real broker's trace (Proton C and
Proton Python example brokers, reports/fuzz-brokers.md, 2026-11-27) and the text:

- session.remote-channel after session.channel-in-use: the fuzzer's second begin on a
  channel in use is a begin all the same; 2.7.2 "the remote-channel MUST be set to the
  channel on which the remote session sent the begin" is what the broker did.
- link.flow.receiver-delivery-count-before-attach after link.attach.handle-in-use: the
  broker took the fuzzer's attach on a handle in use as the sender's attach; its flow then
  carries that sender's initial-delivery-count (2.7.4).
- settlement.unknown-delivery after link.transfer.first-frame-fields: a first transfer
  without delivery-id, taken by the broker as the next incoming id and settled as such.
- link.flow.receiver-delivery-count-behind after link.credit.sender-delivery-count-regressed
  or session.next-outgoing-id: the fuzzer, as sender, rewound its own delivery-count or
  next-outgoing-id; the broker's count follows "the last known value of the corresponding
  Sending Endpoint" (2.7.4), which the fuzzer had just said.
"""

from __future__ import annotations

from collections.abc import Iterable

from amqpspec.amqp10.checker.rules import Violation

CONSEQUENCES: dict[str, frozenset[str]] = {
    "session.remote-channel": frozenset({"session.channel-in-use"}),
    "link.flow.receiver-delivery-count-before-attach": frozenset({"link.attach.handle-in-use"}),
    "settlement.unknown-delivery": frozenset({"link.transfer.first-frame-fields"}),
    "link.flow.receiver-delivery-count-behind": frozenset(
        {"link.credit.sender-delivery-count-regressed", "session.next-outgoing-id"}
    ),
}


def attributable(broker: Iterable[Violation], fuzzer: Iterable[Violation]) -> list[Violation]:
    """The broker's violations, less those that answer a break of the fuzzer's own (a rule
    of CONSEQUENCES[rule] broken at an earlier frame of the connection)."""
    own = [(v.rule_id, v.frame_index) for v in fuzzer]
    kept = []
    for violation in broker:
        causes = CONSEQUENCES.get(violation.rule_id)
        if causes and any(rule in causes and index < violation.frame_index for rule, index in own):
            continue
        kept.append(violation)
    return kept
