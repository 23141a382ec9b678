"""Which connection (or link) owns a queue: dynamic queues (3.5.3) and exclusive queues.

Owns: the owner of each dynamic (`amq.gen-...`, a dynamic source/target's) and exclusive
(RabbitMQ's exclusive queues, declared through /management) queue of one virtual host, the
check that refuses another connection's use with `ResourceLockedError`
(amqp:resource-locked), and the deletion of an owner's queues when it closes. Declares and
deletes through its `VirtualHost`; the vhost tells it when a queue is deleted (`forget`).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import ResourceLockedError

if TYPE_CHECKING:
    from .classic import ClassicQueue
    from .vhost import VirtualHost

DYNAMIC_PREFIX = "amq.gen-"


class QueueOwners:
    def __init__(self, vhost: VirtualHost) -> None:
        self.vhost = vhost
        self._dynamic_owner: dict[str, Any] = {}  # dynamic queue name -> owner
        self._exclusive_owner: dict[str, Any] = {}  # exclusive queue name -> its connection

    def forget(self, name: str) -> None:
        """Queue `name` was deleted."""
        self._dynamic_owner.pop(name, None)
        self._exclusive_owner.pop(name, None)

    def create_dynamic_queue(self, owner: Any, *, durable: bool = False) -> ClassicQueue:
        """A temporary queue for a dynamic source/target (3.5.3, reply-to): a unique
        `amq.gen-...` name, not durable, exclusive to `owner` (its connection: another's
        consumer is resource-locked), deleted by `release_owner(owner)` at the latest
        (features/dynamic_nodes.py deletes it earlier, as its lifetime policy says).
        `durable`: a persistent dynamic node's (its terminus never expires and is kept
        durably): a durable queue, neither exclusive nor owned, kept across a restart."""
        while True:
            name = DYNAMIC_PREFIX + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
            if name not in self.vhost.queues:
                break
        if durable:
            return self.vhost.declare_queue(name, durable=True, auto_delete=False)[0]
        queue, _ = self.vhost.declare_queue(
            name, durable=False, auto_delete=False, exclusive_owner=owner
        )
        self._dynamic_owner[name] = owner
        self._exclusive_owner[name] = owner
        return queue

    def release_owner(self, owner: Any) -> list[str]:
        """The link (or connection) `owner` closed: delete its dynamic and exclusive queues."""
        names = [n for n, o in self._dynamic_owner.items() if o is owner]
        names += [n for n, o in self._exclusive_owner.items() if o is owner and n not in names]
        for name in names:
            if name in self.vhost.queues:
                self.vhost.delete_queue(name)
        return names

    def is_dynamic(self, name: str) -> bool:
        return name in self._dynamic_owner

    # -- exclusive queues
    def declare_exclusive_queue(
        self,
        name: str,
        owner: Any,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> tuple[ClassicQueue, bool]:
        """Declare a queue only `owner` (a connection) may use, deleted when it closes; an
        existing one must be `owner`'s (RabbitMQ: resource-locked otherwise)."""
        if name in self.vhost.queues:
            self.check_exclusive(name, owner, strict=True)
        queue, created = self.vhost.declare_queue(
            name,
            durable=durable,
            auto_delete=auto_delete,
            arguments=arguments,
            exclusive_owner=owner,
        )
        if created:
            self._exclusive_owner[name] = owner
        return queue, created

    def check_exclusive(self, name: str, owner: Any, *, strict: bool = False) -> None:
        """ResourceLockedError unless `owner` may use queue `name`: an exclusive queue is
        its declaring connection's only; `strict` (a redeclaration) also refuses declaring
        a shared queue exclusive (RabbitMQ's check_exclusive_access(Q, Owner, strict))."""
        locker = self._exclusive_owner.get(name)
        if locker is owner or (locker is None and not strict):
            return
        raise ResourceLockedError(
            f"cannot obtain exclusive access to locked queue '{name}' in vhost "
            f"'{self.vhost.name}'. It could be originally declared on another connection or the "
            "exclusive property value does not match that of the original declaration."
        )
