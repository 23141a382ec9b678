"""The reference broker's dynamic nodes and their lifetime policies (3.5.3 / 3.5.4 dynamic
source and target, 3.5.9 dynamic-node-properties, 3.5.10 lifetime policies).

Owns: `DynamicNodes` (one per broker, on the BrokerContext): creating the queue a dynamic
terminus asks for, the terminus the broker reports back (its address, the lifetime-policy
it applies in dynamic-node-properties, the `temporary-queue` capability of the JMS mapping
echoed when asked), the links that have each node as source or target, and deleting each
node when its policy says. May touch: the vhost's queues through their APIs.

Lifetime (3.5.9 lifetime-policy: "the lifetime will never be less than the lifetime of the
link which caused its creation"; 3.5.10): delete-on-close, deleted when the link that
created the node ceases to exist; delete-on-no-links, when no link has the node as its
source or target; delete-on-no-messages, when the creating link no longer exists and no
message remains; delete-on-no-links-or-messages, when neither links nor messages remain.
A node asked for without a policy gets delete-on-close (and reports it); the attach reports
the lifetime-policy alone (the one node property the broker applies). A link detached
with closed=false is suspended, not gone (2.6.11): its node stays. Every dynamic node is
exclusive to its connection (JMS temporary destinations: another connection's receiver is
refused with amqp:resource-locked; senders from anywhere are welcome) and goes with it at
the latest. A lifetime-policy that is none of the four is refused (3.5.9: "The value of
this entry must be one of the defined lifetime-policies"), amqp:invalid-field, as are
supported-dist-modes that are not symbols (3.5.9: "one or more symbols which are valid
distribution-modes").

The `keep-dynamic-nodes` fault ignores the policies: every node lives until its
connection ends.
"""

from __future__ import annotations

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

from .addressing import AddressError, queue_address
from .faults import Faults

LIFETIME_POLICY = symbol("lifetime-policy")
DIST_MODES = symbol("supported-dist-modes")
TEMPORARY_QUEUE = "temporary-queue"  # the JMS mapping's terminus capability
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
    name: str
    policy: str
    connection: Any
    creator: Any  # the engine link that asked for it; None once it ceased to exist
    links: set[Any] = field(default_factory=set)  # links with the node as source or target


class DynamicNodes:
    """Every dynamic node of the broker, by queue name."""

    def __init__(self, vhost: Any, faults: Faults) -> None:
        self.vhost = vhost
        self.faults = faults
        self.nodes: dict[str, DynamicNode] = {}

    def create(self, connection: Any, link: Any, terminus: Any) -> tuple[Any, Any]:
        """The queue for a dynamic source or target, and the terminus to report (2.6.3: as
        created): its address, the lifetime-policy applied, `temporary-queue` echoed."""
        policy = lifetime_policy(terminus.dynamic_node_properties)
        queue = self.vhost.create_dynamic_queue(connection)
        node = DynamicNode(queue.name, policy, connection, link, {link})
        self.nodes[queue.name] = node
        properties = {LIFETIME_POLICY: _BY_NAME[policy]()}  # the one property it applies
        asked = terminus.capabilities
        asked = [asked] if isinstance(asked, str) else list(asked or ())
        capabilities = [c for c in asked if str(c) == TEMPORARY_QUEUE] or None
        reported = terminus.replace(
            address=queue_address(queue.name),
            dynamic_node_properties=properties,
            capabilities=capabilities,
        )
        return queue, reported

    def attached(self, link: Any, queue_name: str) -> None:
        """A link with the queue as its source or target (delete-on-no-links counts it)."""
        node = self.nodes.get(queue_name)
        if node is not None:
            node.links.add(link)

    def detached(self, link: Any, *, suspended: bool = False) -> None:
        """`link` is gone (closed, its session or connection ended), or suspended
        (detach closed=false: it still exists); then delete what the policies say."""
        if not self.nodes:
            return
        for node in self.nodes.values():
            if suspended:
                continue
            node.links.discard(link)
            if node.creator is link:
                node.creator = None
        self.sweep()

    def connection_gone(self, connection: Any) -> None:
        """The connection ended: its nodes went with it (vhost.release_owner)."""
        for name in [n for n, node in self.nodes.items() if node.connection is connection]:
            del self.nodes[name]

    def sweep(self) -> None:
        """Delete every node its policy no longer keeps (after links go, messages settle)."""
        if not self.nodes or self.faults.keep_dynamic_nodes:
            return
        queues = self.vhost.queues
        for name, node in list(self.nodes.items()):
            queue = queues.get(name)
            if queue is None:
                del self.nodes[name]
            elif self._expired(node, queue):
                del self.nodes[name]
                self.vhost.delete_queue(name)

    @staticmethod
    def _expired(node: DynamicNode, queue: Any) -> bool:
        if node.creator is not None:  # never less than the creating link's lifetime
            return False
        if node.policy == ON_CLOSE:
            return True
        if node.policy == NO_LINKS:
            return not node.links
        if node.policy == NO_MESSAGES:
            return queue.messages == 0
        return not node.links and queue.messages == 0
