"""The reference broker's dynamic nodes and their lifetime policies (3.5.3 / 3.5.4 dynamic
source and target, 3.5.9 dynamic-node-properties, 3.5.10 lifetime policies).

Owns: `DynamicNodes` (one per broker, on the BrokerContext): creating the queue a dynamic
terminus asks for, the terminus the broker reports back (its address, the lifetime-policy
it applies in dynamic-node-properties, the `temporary-queue` capability of the JMS mapping
echoed when asked), temporary topics (a dynamic target or source asked for with the JMS
mapping's `temporary-topic` capability: a fanout exchange at /exchanges/amqpspec.tmp-topic-...,
each receiver from that address, and the receiver whose dynamic source made it, a
subscriber with a queue of its own, deleted with its link),
the links that have each node as source or target, and deleting each node when its policy
says. May touch: the vhost's queues and exchanges through their APIs.

Lifetime (3.5.9 lifetime-policy: "the lifetime will never be less than the lifetime of the
link which caused its creation"; 3.5.10): delete-on-close, deleted when the link that
created the node ceases to exist; delete-on-no-links, when no link has the node as its
source or target; delete-on-no-messages, when the creating link no longer exists and no
message remains; delete-on-no-links-or-messages, when neither links nor messages remain. A
node asked for without a policy gets delete-on-close (and reports it); the attach reports
the lifetime-policy alone (the one node property the broker applies). A link detached with
closed=false is suspended, not gone (2.6): its node stays, and the same link (name and role,
same connection) attached again with a dynamic terminus resumes it: the broker reports the
node it created before, whose policy now follows the new attachment. Every dynamic node is
exclusive to its connection (JMS temporary destinations: another connection's receiver is
refused with amqp:resource-locked; senders from anywhere are welcome) and goes with it at
the latest. A lifetime-policy that is none of the four is refused (3.5.9: "The value of this
entry must be one of the defined lifetime-policies"), amqp:invalid-field, as are
supported-dist-modes that are not symbols (3.5.9: "one or more symbols which are valid
distribution-modes").

A persistent node (Qpid Broker-J's DeleteOnCloseTest.dynamicNodeIsPersisted, the
`termdur` model of conformance/profile.py): a dynamic source or target asked for with
expiry-policy never ("The Terminus never expires", 3.5.6) and durable configuration or
unsettled-state ("the existence and configuration of the Terminus is retained durably",
3.5.5) is a durable queue, not the connection's: when the connection goes without closing
the link, the link is suspended for ever and its node stays, and a restart brings the queue
back from the data dir (as an ordinary durable queue: the broker keeps no link across a
restart to close it later). The terminus is reported as asked (2.6.3).

The `keep-dynamic-nodes` fault ignores the policies: every node lives until its
connection ends. The `forget-persistent-nodes` fault makes every node a temporary one.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.composites import (
    DeleteOnClose,
    DeleteOnNoLinks,
    DeleteOnNoLinksOrMessages,
    DeleteOnNoMessages,
)
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import symbol

from ..faults.catalog import Faults
from ..queues.addressing import AddressError, exchange_address, queue_address
from ..queues.errors import NotFoundError, ResourceLockedError

LIFETIME_POLICY = symbol("lifetime-policy")
DIST_MODES = symbol("supported-dist-modes")
TEMPORARY_QUEUE = "temporary-queue"  # the JMS mapping's terminus capabilities
TEMPORARY_TOPIC = "temporary-topic"
DURABLE_CONFIGURATION = 1  # 3.5.5 terminus-durability: configuration (unsettled-state is 2)
TOPIC_PREFIX = "amqpspec.tmp-topic-"  # a temporary topic's exchange (amq.* is reserved)
ON_CLOSE = "delete-on-close"
NO_LINKS = "delete-on-no-links"
NO_MESSAGES = "delete-on-no-messages"
NO_LINKS_OR_MESSAGES = "delete-on-no-links-or-messages"
POLICIES: dict[type, str] = {
    DeleteOnClose: ON_CLOSE,
    DeleteOnNoLinks: NO_LINKS,
    DeleteOnNoMessages: NO_MESSAGES,
    DeleteOnNoLinksOrMessages: NO_LINKS_OR_MESSAGES,
}
_BY_NAME = {name: policy for policy, name in POLICIES.items()}


def lifetime_policy(properties: Any) -> str:
    """The policy a terminus's dynamic-node-properties ask for (delete-on-close without
    one); AddressError (amqp:invalid-field) for a value that is no lifetime-policy."""
    if not properties:
        return ON_CLOSE
    if not isinstance(properties, dict):
        raise AddressError(properties, "dynamic-node-properties must be a map", Cond.INVALID_FIELD)
    value = properties.get(LIFETIME_POLICY, properties.get("lifetime-policy", DeleteOnClose()))
    modes = properties.get(DIST_MODES, properties.get("supported-dist-modes"))
    if modes is not None and not all(isinstance(m, symbol) for m in _listed(modes)):
        raise AddressError(
            modes, f"supported-dist-modes {modes!r} are not symbols (3.5.9)", Cond.INVALID_FIELD
        )
    name = POLICIES.get(type(value))
    if name is None:
        raise AddressError(
            value, f"lifetime-policy {value!r} is no lifetime-policy (3.5.9)", Cond.INVALID_FIELD
        )
    return name


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


@dataclass(eq=False)
class DynamicNode:
    name: str  # the queue's, or for a temporary topic the exchange's
    policy: str
    connection: Any
    creator: Any  # the engine link that asked for it; None once it ceased to exist
    links: set[Any] = field(default_factory=set)  # links with the node as source or target
    topic: bool = False  # a temporary topic: a fanout exchange, a queue per subscriber
    subscriptions: dict[Any, str] = field(default_factory=dict)  # receiver link -> its queue
    suspended: tuple[str, bool] | None = None  # the creator detached closed=false: its key
    persistent: bool = False  # a durable queue whose terminus never expires: kept when the
    # connection goes (the link suspended for ever) and across a restart


class DynamicNodes:
    """Every dynamic node of the broker, by queue (or topic exchange) name."""

    def __init__(self, vhost: Any, faults: Faults) -> None:
        self.vhost = vhost
        self.faults = faults
        self.nodes: dict[str, DynamicNode] = {}

    def create(self, connection: Any, link: Any, terminus: Any) -> tuple[Any, Any]:
        """The queue for a dynamic source or target (None for a target's temporary topic; a
        source's: its receiver's subscription queue), and the
        terminus to report (2.6.3: as created): its address, the lifetime-policy applied,
        `temporary-queue` / `temporary-topic` echoed. A dynamic target or source asked for with
        `temporary-topic` is a topic: a fanout exchange, each receiver from its address
        a subscriber with a queue of its own."""
        policy = lifetime_policy(terminus.dynamic_node_properties)
        asked = terminus.capabilities
        asked = {str(c) for c in ([asked] if isinstance(asked, str) else list(asked or ()))}
        resumed = self._resume(connection, link)
        if resumed is not None:  # the suspended link attached again: its node, as it was
            name, policy, topic = resumed.name, resumed.policy, resumed.topic
            queue = self.vhost.queues.get(resumed.subscriptions.get(link, name))
            address = exchange_address(name) if topic else queue_address(name)
            echoed = TEMPORARY_TOPIC if topic else TEMPORARY_QUEUE
            return queue, self._reported(terminus, address, policy, echoed, asked)
        topic = TEMPORARY_TOPIC in asked
        durable = False
        if topic:
            name = self._topic_name()
            self.vhost.declare_exchange(name, "fanout", durable=False)
            queue, address, echoed = None, exchange_address(name), TEMPORARY_TOPIC
        else:
            durable = self._persistent(terminus)
            queue = self.vhost.owners.create_dynamic_queue(connection, durable=durable)
            name, address, echoed = queue.name, queue_address(queue.name), TEMPORARY_QUEUE
        self.nodes[name] = DynamicNode(name, policy, connection, link, {link}, topic)
        self.nodes[name].persistent = not topic and durable
        if topic and link.is_sender:  # a dynamic source: its receiver the first subscriber
            queue = self._subscription(self.nodes[name], connection, link)
        return queue, self._reported(terminus, address, policy, echoed, asked)

    def _persistent(self, terminus: Any) -> bool:
        """The terminus never expires and is kept durably (3.5.5, 3.5.6): its node too."""
        if self.faults.forget_persistent_nodes:
            return False
        never = str(terminus.expiry_policy or "") == "never"
        return never and int(terminus.durable or 0) >= DURABLE_CONFIGURATION

    @staticmethod
    def _reported(terminus: Any, address: str, policy: str, echoed: str, asked: set[str]) -> Any:
        return terminus.replace(
            address=address,
            dynamic_node_properties={LIFETIME_POLICY: _BY_NAME[policy]()},  # the one it applies
            capabilities=[symbol(echoed)] if echoed in asked else None,
        )

    def _resume(self, connection: Any, link: Any) -> DynamicNode | None:
        """The node a suspended link of this connection with `link`'s name and role created
        (2.6.3: a link attached again is resumed), now `link`'s."""
        key = (link.name, link.is_sender)
        for node in self.nodes.values():
            if node.connection is connection and node.suspended == key:
                node.suspended = None
                node.links.discard(node.creator)
                if node.creator in node.subscriptions:  # a dynamic source's subscription
                    node.subscriptions[link] = node.subscriptions.pop(node.creator)
                node.creator = link
                node.links.add(link)
                return node
        return None

    def _topic_name(self) -> str:
        while True:
            name = TOPIC_PREFIX + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
            if name not in self.vhost.exchanges:
                return name

    def subscribe(self, connection: Any, link: Any, address: Any) -> Any:
        """A receiver from a temporary topic's address: its own queue bound to the topic
        (None when the address is no temporary topic's; amqp:not-found when it names one
        that is gone). Only the creating connection may consume from it (JMS temporary
        topics): amqp:resource-locked for another."""
        if not isinstance(address, str) or not address.startswith("/exchanges/" + TOPIC_PREFIX):
            return None
        node = self.nodes.get(address.removeprefix("/exchanges/"))
        if node is None or not node.topic:  # gone (with its connection, by its policy)
            raise NotFoundError(f"no temporary topic '{address.removeprefix('/exchanges/')}'")
        if node.connection is not connection:
            raise ResourceLockedError(
                f"temporary topic '{node.name}' is its creating connection's only"
            )
        return self._subscription(node, connection, link)

    def _subscription(self, node: DynamicNode, connection: Any, link: Any) -> Any:
        """`link`'s own queue bound to the temporary topic `node`."""
        queue = self.vhost.owners.create_dynamic_queue(connection)
        self.vhost.bind(node.name, queue.name)
        node.subscriptions[link] = queue.name
        node.links.add(link)
        return queue

    def attached(self, link: Any, name: str) -> None:
        """A link with the node as its source or target (delete-on-no-links counts it)."""
        node = self.nodes.get(name)
        if node is not None:
            node.links.add(link)

    def detached(self, link: Any, *, suspended: bool = False, kept: bool = False) -> None:
        """`link` is gone (closed, its session or connection ended), or suspended
        (detach closed=false: it still exists); then delete what the policies say. `kept`:
        it went without a detach closed=true (its session or connection ended), so the
        link of a persistent node, whose terminus never expires, still exists."""
        if not self.nodes:
            return
        if kept and not suspended:
            suspended = any(n.creator is link and n.persistent for n in self.nodes.values())
        if suspended:  # the link still exists: its nodes wait for it to attach again
            for node in self.nodes.values():
                if node.creator is link:
                    node.suspended = (link.name, link.is_sender)
            return
        for node in self.nodes.values():
            node.links.discard(link)
            if node.creator is link:
                node.creator = None
            subscription = node.subscriptions.pop(link, None)
            if subscription is not None and subscription in self.vhost.queues:
                self.vhost.delete_queue(subscription)
        self.sweep()

    def connection_gone(self, connection: Any) -> None:
        """The connection ended: its nodes go with it (its queues already did:
        vhost.owners.release_owner)."""
        for name, node in list(self.nodes.items()):
            if node.connection is connection and node.persistent and node.creator is not None:
                del self.nodes[name]  # its link suspended for ever (expiry never): kept
            elif node.connection is connection:
                self._delete(name, node)

    def sweep(self) -> None:
        """Delete every node its policy no longer keeps (after links go, messages settle)."""
        if not self.nodes or self.faults.keep_dynamic_nodes:
            return
        for name, node in list(self.nodes.items()):
            exists = name in (self.vhost.exchanges if node.topic else self.vhost.queues)
            if not exists:
                del self.nodes[name]
            elif self._expired(node, None if node.topic else self.vhost.queues[name]):
                self._delete(name, node)

    def _delete(self, name: str, node: DynamicNode) -> None:
        del self.nodes[name]
        for queue in node.subscriptions.values():
            if queue in self.vhost.queues:
                self.vhost.delete_queue(queue)
        if node.topic:
            if name in self.vhost.exchanges:
                self.vhost.delete_exchange(name)
        elif name in self.vhost.queues:
            self.vhost.delete_queue(name)

    @staticmethod
    def _expired(node: DynamicNode, queue: Any) -> bool:
        """Whether the node's policy lets it go now (a topic holds no messages)."""
        messages = queue.messages if queue is not None else 0
        if node.creator is not None:  # never less than the creating link's lifetime
            return False
        if node.policy == ON_CLOSE:
            return True
        if node.policy == NO_LINKS:
            return not node.links
        if node.policy == NO_MESSAGES:
            return messages == 0
        return not node.links and messages == 0
