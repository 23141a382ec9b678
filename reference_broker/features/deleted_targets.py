"""Publishers of a deleted node: a sender whose target queue or exchange is deleted under it
(admin API, auto-delete, a dynamic node's lifetime policy) is detached with
amqp:resource-deleted.

2.8.15 defines the condition as "A server entity the client is working with has been
deleted"; 2.6.5: "When an error occurs at a Link Endpoint, the endpoint MUST be detached
with appropriate error information supplied in the error field of the detach frame." No
sentence says which condition nor when: RabbitMQ 4 detaches a publisher to a deleted
/queues/ address at once with amqp:resource-deleted, and one to a deleted exchange at its
next message (released, then amqp:not-found); the reference broker detaches both at once
with amqp:resource-deleted, as it does a deleted queue's consumers (protocol/context.py).

Owns: which publishers a deleted node strands (`stranded`) and the detach's error
(`deleted_error`); the connection's link handler detaches them (`target_deleted`). The
`keep-publishers-of-deleted-nodes` fault leaves them attached.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from amqpspec.amqp10.composites import Error
from amqpspec.amqp10.spec import Cond

from ..queues.addressing import AddressKind

QUEUE_DELETED = "queue.deleted"  # the vhost's listener events (queues/vhost.py)
EXCHANGE_DELETED = "exchange.deleted"
_KINDS = {QUEUE_DELETED: AddressKind.QUEUE, EXCHANGE_DELETED: AddressKind.EXCHANGE}


def stranded(publishers: Iterable[Any], event: str, name: str) -> list[Any]:
    """The publishers (protocol/links.py PublisherLink) whose fixed target is the node
    `event` deleted: a queue address, or an exchange address (a queue named by each
    message's subject, or the anonymous terminus, routes per message: not stranded)."""
    kind = _KINDS.get(event)
    return [p for p in publishers if kind is not None and _names(p.target, kind, name)]


def _names(target: Any, kind: AddressKind, name: str) -> bool:
    """Whether the Address `target` is the node `name` of `kind`, fixed at the attach."""
    if target.kind is not kind:
        return False
    if kind is AddressKind.QUEUE:
        return not target.queue_from_subject and target.queue == name
    return bool(target.exchange == name)


def deleted_error(event: str, name: str) -> Error:
    """The error the stranded publishers are detached with (2.8.15 resource-deleted)."""
    what = "queue" if event == QUEUE_DELETED else "exchange"
    return Error(condition=Cond.RESOURCE_DELETED, description=f"{what} '{name}' deleted")
