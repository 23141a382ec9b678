"""The kinds of queue a vhost declares (`x-queue-type`: classic, quorum, stream), built with
what each needs, and the dead-lettering of quorum queues.

Owns: turning a declaration into a `ClassicQueue`, `QuorumQueue` or `StreamQueue` (the
store as its log when durable, the vhost's dispatch hook, the clock for streams), the
properties RabbitMQ 4 refuses for quorum queues and streams (not durable, auto-delete,
exclusive; bad settings), raised as ValueError for the vhost to report as
amqp:precondition-failed, and `dead_letter`: a quorum queue's copy of a message published
through its x-dead-letter-exchange. May touch: the vhost's queue and exchange registries
(read, and publish into the dead-letter targets).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from amqpspec.amqp10.types import symbol

from ..faults.catalog import Faults
from .classic import ClassicQueue, QueuedMessage
from .exchanges import Exchange
from .quorum import QuorumQueue, quorum_settings
from .store import MessageStore
from .streams import StreamQueue, parse_max_age


class Declaration(NamedTuple):
    """A queue declaration the vhost has found new: its `x-queue-type` and properties."""

    queue_type: str
    name: str
    durable: bool
    auto_delete: bool
    exclusive_owner: Any
    arguments: dict[str, Any]


@dataclass(slots=True, eq=False)
class QueueKinds:
    """Builds the queues of one vhost."""

    vhost_name: str
    queues: dict[str, ClassicQueue]
    exchanges: dict[str, Exchange]
    faults: Faults
    store: MessageStore | None
    clock: Callable[[], float]
    on_ready: Callable[[ClassicQueue], None]

    def check(self, declared: Declaration) -> None:
        """ValueError for a declaration RabbitMQ 4 refuses: a quorum queue or stream that is
        not durable, auto-delete or exclusive, or bad settings."""
        queue_type, arguments = declared.queue_type, declared.arguments
        if queue_type not in ("stream", "quorum"):
            return
        if not declared.durable or declared.auto_delete or declared.exclusive_owner is not None:
            kind = "stream" if queue_type == "stream" else "quorum queue"
            raise ValueError(
                f"invalid property 'non-durable', 'auto-delete' or 'exclusive' for {kind} "
                f"'{declared.name}' in vhost '{self.vhost_name}'"
            )
        if queue_type == "quorum":
            quorum_settings(arguments)
            return
        try:
            parse_max_age(arguments.get("x-max-age"))
            int(arguments.get("x-max-length-bytes") or 0)
        except TypeError as exc:
            raise ValueError(str(exc)) from None

    def new(self, declared: Declaration) -> ClassicQueue:
        """A new queue of `declared.queue_type` (after `check`)."""
        queue_type, name, durable, auto_delete, exclusive_owner, arguments = declared
        if queue_type == "stream":
            return StreamQueue(
                name,
                durable=True,
                arguments=arguments,
                faults=self.faults,
                log=self.store,
                on_ready=self.on_ready,
                clock=self.clock,
            )
        if queue_type == "quorum":
            return QuorumQueue(
                name,
                arguments=arguments,
                faults=self.faults,
                log=self.store,
                on_ready=self.on_ready,
                dead_letter=self.dead_letter,
            )
        return ClassicQueue(
            name,
            durable=durable,
            auto_delete=auto_delete,
            exclusive_owner=exclusive_owner,
            arguments=arguments,
            faults=self.faults,
            log=self.store if durable else None,
            on_ready=self.on_ready,
        )

    def dead_letter(self, queue: ClassicQueue, msg: QueuedMessage, reason: str) -> bool:
        """Publish a copy of `msg` through the queue's `x-dead-letter-exchange` with
        `x-dead-letter-routing-key` (default: the queue's name, its routing key on the
        default exchange), marked with RabbitMQ's x-first-death-* message annotations.
        True when it went somewhere or has nowhere to go (no dead-letter exchange); False
        when the exchange routes it nowhere (at-least-once keeps it)."""
        dlx = queue.arguments.get("x-dead-letter-exchange")
        if dlx is None:
            return True  # dropped
        exchange = self.exchanges.get(str(dlx))
        if exchange is None:
            return False
        key = str(queue.arguments.get("x-dead-letter-routing-key", queue.name))
        targets = [self.queues[n] for n in exchange.route(key, None) if n in self.queues]
        marks = {
            symbol("x-first-death-reason"): reason,
            symbol("x-first-death-queue"): queue.name,
            symbol("x-first-death-exchange"): str(dlx),
        }
        for target in targets:
            if target is queue:
                continue  # RabbitMQ drops a dead-letter cycle
            copy, _ = target.publish(msg.payload)
            copy.annotations = {**(msg.annotations or {}), **marks}
        return bool(targets)
