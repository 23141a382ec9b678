"""The transactional side of the kill -9 soak (kill_soak.py): local transactions (Part 4)
against a durable classic queue while the broker is SIGKILLed at random.

A controller connection declares a transaction, posts TXN_SIZE numbered messages in it
(transfers whose state is a transactional-state, message-id t-<txn>-<i>) and discharges it:
two transactions of every three commit (fail=false), the third rolls back (fail=true). Then
the next one, until the kill. What the final clean start must find (`verdict`):
- every message of a transaction whose commit was accepted (durable: the broker accepts a
  commit once its records are fsynced) - `committed_lost` must be 0;
- no message of a transaction rolled back, or whose rollback was in flight at the kill -
  `rolled_back_seen` must be 0;
- a transaction whose commit was in flight at the kill (no answer) all there or none of it
  (the commit's records are one store batch, reference_broker/features/transactions.py) -
  `partial` must be 0.
Owns its connection (one `Peer`) and the transaction bookkeeping (`TxnTally`).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.composites import (
    Accepted,
    Coordinator,
    Declare,
    Declared,
    Discharge,
    Header,
    Properties,
    Source,
    TransactionalState,
)
from amqpspec.amqp10.engine import DispositionReceived, Event
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol
from amqpspec.bench.overload.peer import Peer

TXN_QUEUE = "soak-txn"
TXN_SIZE = 5  # messages per transaction
LOCAL_TRANSACTIONS = symbol("amqp:local-transactions")
DURABLE = Header(durable=True)


@dataclass
class TxnTally:
    """Transactions by fate, their messages, and what the consumer received."""

    members: dict[str, list[str]] = field(default_factory=dict)  # txn name -> message ids
    committed: set[str] = field(default_factory=set)  # commit accepted
    rolled_back: set[str] = field(default_factory=set)  # fail=true (answered or not)
    in_doubt: set[str] = field(default_factory=set)  # commit sent, no answer before the kill
    refused: int = 0  # discharges or declares answered with something else
    seen: collections.Counter = field(default_factory=collections.Counter)
    next_txn: int = 0


class TxnPublisher:
    """One connection: a control link to the coordinator and a sender to TXN_QUEUE, one
    transaction at a time (declare, TXN_SIZE posts, discharge)."""

    def __init__(self, port: int, tally: TxnTally) -> None:
        self.tally = tally
        self.peer = Peer(port, "soak-txn-controller", on_event=self.on_event)
        self.peer.conn.open()
        session = self.peer.conn.begin()
        self.control = session.attach_sender(
            "txn-ctl", Source(), Coordinator(capabilities=[LOCAL_TRANSACTIONS])
        )
        self.sender = session.attach_sender("txn-pub", target=f"/queues/{TXN_QUEUE}")
        self.state = "idle"  # idle -> declaring -> declared -> discharging -> idle
        self.txn_id: bytes | None = None
        self.pending: dict[int, tuple[str, str | None]] = {}  # delivery-id -> (what, txn)

    def on_event(self, event: Event) -> None:
        if not (isinstance(event, DispositionReceived) and event.role):
            return
        for delivery_id in range(event.first, event.last + 1):
            what, name = self.pending.pop(delivery_id, ("post", None))
            if what == "declare":
                if isinstance(event.state, Declared):
                    self.txn_id = bytes(event.state.txn_id)
                    self.state = "declared"
                else:
                    self.tally.refused += 1
                    self.state = "idle"
            elif what == "discharge":
                tally = self.tally
                if name in tally.in_doubt:
                    tally.in_doubt.discard(name)
                    if isinstance(event.state, Accepted):
                        tally.committed.add(name)
                    else:
                        tally.refused += 1
                        tally.rolled_back.add(name)  # a refused commit rolls back
                self.state = "idle"

    def tick(self) -> None:
        """The next step of the current transaction, when the links allow it."""
        if self.peer.closed:
            return
        if self.state == "idle" and self.control.credit > 0:
            self._request(Declare(), "declare", None)
            self.state = "declaring"
        elif (
            self.state == "declared" and self.sender.credit >= TXN_SIZE and self.control.credit > 0
        ):
            self._one_transaction()

    def _one_transaction(self) -> None:
        tally = self.tally
        number = tally.next_txn
        tally.next_txn += 1
        name = f"t{number}"
        ids = [f"t-{number}-{index}" for index in range(TXN_SIZE)]
        tally.members[name] = ids
        state = TransactionalState(txn_id=self.txn_id)
        for msg_id in ids:
            sections = {"header": DURABLE, "properties": Properties(message_id=msg_id)}
            payload = Message.of(msg_id.encode(), **sections).encode()
            self.sender.send(payload, settled=False, state=state)
        fail = number % 3 == 2
        (tally.rolled_back if fail else tally.in_doubt).add(name)
        self._request(Discharge(txn_id=self.txn_id, fail=fail), "discharge", name)
        self.state = "discharging"

    def _request(self, body: Any, what: str, name: str | None) -> None:
        delivery_id = self.control.send(Message.of(body).encode(), settled=False)
        self.pending[delivery_id] = (what, name)


def verdict(tally: TxnTally) -> dict[str, Any]:
    seen = tally.seen
    lost = sorted(m for t in tally.committed for m in tally.members[t] if not seen[m])
    rolled_back_seen = sorted(m for t in tally.rolled_back for m in tally.members[t] if seen[m])
    partial = sorted(
        t for t in tally.in_doubt if 0 < sum(1 for m in tally.members[t] if seen[m]) < TXN_SIZE
    )
    in_doubt_applied = sum(1 for t in tally.in_doubt if seen[tally.members[t][0]])
    return {
        "transactions": tally.next_txn,
        "committed": len(tally.committed),
        "rolled_back": len(tally.rolled_back),
        "in_doubt_at_kills": len(tally.in_doubt),
        "in_doubt_applied": in_doubt_applied,
        "refused": tally.refused,
        "committed_lost": len(lost),
        "committed_lost_ids": lost[:20],
        "rolled_back_seen": len(rolled_back_seen),
        "rolled_back_seen_ids": rolled_back_seen[:20],
        "partial": len(partial),
        "partial_txns": partial[:20],
        "distinct_received": len(seen),
    }


def ok(result: dict[str, Any]) -> bool:
    return not (result["committed_lost"] or result["rolled_back_seen"] or result["partial"])
