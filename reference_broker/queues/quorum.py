"""Quorum-queue semantics on one node (`x-queue-type: quorum`, as RabbitMQ 4 shows them on
the wire): a delivery limit and dead-lettering. No replication: the reference broker models
what a client sees, not a Raft cluster.

Owns: the delivery limit (`x-delivery-limit`, RabbitMQ 4's default 20) counted by the
message's header delivery-count (3.2.1: raised by `modified` with delivery-failed, 3.4.5),
the choice to dead-letter instead of requeueing once a message went past it, rejected
messages dead-lettered too (3.4.3), and the dead-letter strategy (`x-dead-letter-strategy`:
at-most-once, the default, or at-least-once). May touch: what it inherits from
`queues.ClassicQueue` (order, consumers, credit), the durable log given by the caller (an
ack ends the message's life here), and the `dead_letter` callback the vhost gives it (which
routes a copy through `x-dead-letter-exchange`). No AMQP bytes, no clock, no I/O.

Durability: a quorum queue is always durable; a publish is confirmed once the store fsynced
it (the classic durable path). At-most-once writes the source's ack before the copy's
publish (a crash in between loses the message); at-least-once writes the copy's publish
first and the ack after (a crash in between leaves it in both: never lost, maybe twice). An
at-least-once message that routes nowhere stays here, held (counted in `messages`, never
delivered), as RabbitMQ keeps it until a route exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..faults.catalog import NO_FAULTS, Faults
from .classic import ClassicQueue, MessageLog, QueuedMessage

DEFAULT_DELIVERY_LIMIT = 20  # RabbitMQ 4.0's default for quorum queues
AT_MOST_ONCE = "at-most-once"
AT_LEAST_ONCE = "at-least-once"
STRATEGIES = (AT_MOST_ONCE, AT_LEAST_ONCE)
REASON_DELIVERY_LIMIT = "delivery_limit"  # RabbitMQ's x-first-death-reason values
REASON_REJECTED = "rejected"

# dead_letter(queue, message, reason) -> True once the copy is published (or nowhere to go)
DeadLetter = Callable[[ClassicQueue, QueuedMessage, str], bool]


def quorum_settings(arguments: dict[str, Any]) -> tuple[int, str]:
    """(delivery limit, dead-letter strategy) from the declare arguments; ValueError when
    either is not one RabbitMQ accepts."""
    limit = arguments.get("x-delivery-limit", DEFAULT_DELIVERY_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"x-delivery-limit {limit!r} is not a non-negative integer")
    strategy = arguments.get("x-dead-letter-strategy", AT_MOST_ONCE)
    if strategy not in STRATEGIES:
        raise ValueError(f"x-dead-letter-strategy '{strategy}' is not one of {STRATEGIES}")
    return limit, strategy


class QuorumQueue(ClassicQueue):
    """A classic queue that dead-letters past its delivery limit and on rejected."""

    queue_type = "quorum"

    def __init__(
        self,
        name: str,
        *,
        arguments: dict[str, Any] | None = None,
        faults: Faults = NO_FAULTS,
        log: MessageLog | None = None,
        on_ready: Any = None,
        dead_letter: DeadLetter | None = None,
    ) -> None:
        super().__init__(
            name, durable=True, arguments=arguments, faults=faults, log=log, on_ready=on_ready
        )
        self.delivery_limit, self.strategy = quorum_settings(self.arguments)
        self._dead_letter = dead_letter
        self.held: list[QueuedMessage] = []  # at-least-once copies with no route yet
        self.dead_lettered_total = 0

    @property
    def messages(self) -> int:
        return super().messages + len(self.held)

    def _rejected(self, msg: QueuedMessage) -> None:
        """3.4.3 rejected: dead-lettered (settle() otherwise as a classic queue's; a requeue
        past the delivery limit dead-letters too, see `_requeue`)."""
        self._dead_letter_one(msg, REASON_REJECTED)

    def _requeue(self, msg: QueuedMessage) -> None:
        """3.2.1 delivery-count counts the failed deliveries: past the limit, the message is
        dead-lettered (or dropped) instead of going back to the queue."""
        if msg.delivery_count > self.delivery_limit:
            self._dead_letter_one(msg, REASON_DELIVERY_LIMIT)
            return
        super()._requeue(msg)

    def _dead_letter_one(self, msg: QueuedMessage, reason: str) -> None:
        self.dead_lettered_total += 1
        deliver = self._dead_letter
        if self.strategy == AT_MOST_ONCE or deliver is None:
            self._discard(msg)  # the ack first: a crash now loses it (at most once)
            if deliver is not None:
                deliver(self, msg, reason)
            return
        if deliver(self, msg, reason):  # the copy's publish is in the log before our ack
            self._discard(msg)
        else:
            self.held.append(msg)

    def purge(self) -> int:
        count = super().purge()
        held, self.held = self.held, []
        for msg in held:
            self._discard(msg)
        return count + len(held)

    def __repr__(self) -> str:
        return (
            f"QuorumQueue({self.name!r}, ready={self.messages_ready}, "
            f"unacked={self.messages_unacknowledged}, limit={self.delivery_limit}, "
            f"strategy={self.strategy})"
        )
