"""The reference broker's JMS topic subscriptions, as the AMQP JMS mapping (OASIS "AMQP JMS
Mapping", bindmap-jms, working draft; Qpid JMS and Qpid Broker-J implement it) names them.

Owns: `TopicSubscriptions` (one per broker, on the BrokerContext): a receiver whose source
carries the `topic` capability and names an exchange (`/exchanges/:x`) is a subscriber of
that topic with a queue of its own bound to it (binding key `#`, everything the exchange
routes); the subscription's identity, its lifetime, and the terminus reported back (2.6.3:
the source as created, `topic`/`shared`/`global` echoed). `SHARED-SUBS` offered in the
connection's open (what Qpid JMS looks for before it creates a shared subscription). May
touch: the vhost's queues and bindings through their APIs.

The mapping's conventions (Qpid Broker-J's TopicDestinationTest follows them):
- Identity: a shared subscription (source capability `shared`) is named by the link name up
  to its first `|` (`sub|global`, `sub|global2`, `sub|global-volatile` ... all attach to
  `sub`); a non-shared one by the whole link name. A `global` subscription is the broker's
  (one name for every container); any other is its client container-id's.
- Durable: a source with expiry-policy never and durable configuration or unsettled-state
  (3.5.5, 3.5.6) is a durable subscription: a durable queue kept when its links detach with
  closed=false or their connection goes, deleted when a link detaches with closed=true and
  no other link is attached. Closing it while another link is still attached is refused:
  the link is detached (closed=true) with amqp:resource-locked and the subscription stays.
  Any other source is volatile: its queue goes with its last link.
- Re-attach: a receiver attached with a null source whose link name names an existing
  subscription gets that subscription and its source as created (3.5.3, 2.6.3: the sender
  holds the authoritative source), as the JMS client does to find a durable subscription.

The `close-shared-subscription-with-links` fault deletes a durable subscription on a detach
with closed=true even while other links are attached to it, and answers without an error.
The `forget-durable-subscriptions` fault makes every subscription volatile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.types import symbol

from ..faults.catalog import Faults
from ..queues.addressing import exchange_address

TOPIC = "topic"  # the JMS mapping's source capabilities
SHARED = "shared"
GLOBAL = "global"
SHARED_SUBS = symbol("SHARED-SUBS")  # offered on the connection (Qpid JMS checks it)
EXCHANGES = "/exchanges/"
DURABLE_CONFIGURATION = 1  # 3.5.5 terminus-durability: configuration (unsettled-state is 2)
QUEUE_PREFIX = "amqpspec.sub-"


def capabilities(terminus: Any) -> set[str]:
    asked = terminus.capabilities if terminus is not None else None
    return {str(c) for c in ([asked] if isinstance(asked, str) else list(asked or ()))}


@dataclass(eq=False)
class Subscription:
    key: tuple[str | None, str]  # (client container-id, None when global; its name)
    queue: str
    source: Any  # the source as created (reported to every link attached to it)
    durable: bool
    links: set[Any] = field(default_factory=set)


class TopicSubscriptions:
    """Every topic subscription of the broker, by its key."""

    def __init__(self, vhost: Any, faults: Faults) -> None:
        self.vhost = vhost
        self.faults = faults
        self.subscriptions: dict[tuple[str | None, str], Subscription] = {}
        self.by_link: dict[Any, Subscription] = {}

    @staticmethod
    def offered_capabilities() -> list[Any]:
        return [SHARED_SUBS]

    @staticmethod
    def _key(container_id: str, link_name: str, asked: set[str]) -> tuple[str | None, str]:
        name = link_name.split("|", 1)[0] if SHARED in asked else link_name
        return (None if GLOBAL in asked else container_id, name)

    def _existing(self, container_id: str, link_name: str) -> Subscription | None:
        """The subscription a null-source attach names: its link name's, the client's or a
        global one (shared: the name up to its first `|`)."""
        for asked in ({SHARED}, {SHARED, GLOBAL}, set()):
            found = self.subscriptions.get(self._key(container_id, link_name, asked))
            if found is not None:
                return found
        return None

    def attach(self, container_id: str, link: Any, source: Any) -> tuple[Any, Any] | None:
        """The queue and the source to report for a receiver that subscribes to a topic;
        None when the attach is no topic subscription (no `topic` capability on an
        exchange address, nor a null source naming an existing subscription)."""
        if source is None:
            found = self._existing(container_id, link.name)
            if found is None:
                return None
            return self._join(found, link)
        asked = capabilities(source)
        address = source.address
        if TOPIC not in asked or not isinstance(address, str) or not address.startswith(EXCHANGES):
            return None
        exchange = address.removeprefix(EXCHANGES)
        self.vhost.get_exchange(exchange)  # not_found for an unknown exchange
        key = self._key(container_id, link.name, asked)
        found = self.subscriptions.get(key)
        if found is None:
            found = self._create(key, exchange, source, asked)
        return self._join(found, link)

    def _create(
        self, key: tuple[str | None, str], exchange: str, source: Any, asked: set[str]
    ) -> Subscription:
        never = str(source.expiry_policy or "") == "never"
        durable = never and int(source.durable or 0) >= DURABLE_CONFIGURATION
        durable = durable and not self.faults.forget_durable_subscriptions
        scope = "global" if key[0] is None else key[0]
        name = f"{QUEUE_PREFIX}{scope}-{key[1]}"
        self.vhost.declare_queue(name, durable=durable, auto_delete=False)
        self.vhost.bind(exchange, name, "#")
        echoed = [symbol(c) for c in (TOPIC, SHARED, GLOBAL) if c in asked]
        reported = source.replace(address=exchange_address(exchange), capabilities=echoed)
        subscription = Subscription(key, name, reported, durable)
        self.subscriptions[key] = subscription
        return subscription

    def _join(self, subscription: Subscription, link: Any) -> tuple[Any, Any]:
        subscription.links.add(link)
        self.by_link[link] = subscription
        return self.vhost.queues[subscription.queue], subscription.source

    def refuse_close(self, link: Any) -> str | None:
        """The reason a detach closed=true of `link` cannot remove its durable subscription
        (other links still use it): the link leaves it, the subscription stays, the broker
        answers amqp:resource-locked. None when the close may go ahead."""
        subscription = self.by_link.get(link)
        if subscription is None or not subscription.durable or len(subscription.links) < 2:
            return None
        if self.faults.close_shared_subscription_with_links:
            return None
        del self.by_link[link]
        subscription.links.discard(link)
        others = len(subscription.links)
        return f"subscription '{subscription.key[1]}' has {others} other link(s): not removed"

    def detached(self, link: Any, *, closed: bool) -> None:
        """`link` detached (closed or not) or went with its session or connection (closed
        False: a durable subscription outlives it); its subscription goes when the policy
        above says."""
        subscription = self.by_link.pop(link, None)
        if subscription is None:
            return
        subscription.links.discard(link)
        if subscription.durable and not closed:
            return
        if not subscription.durable and subscription.links:
            return
        for other in list(subscription.links):  # the fault's: closed under their feet
            self.by_link.pop(other, None)
        self._delete(subscription)

    def _delete(self, subscription: Subscription) -> None:
        self.subscriptions.pop(subscription.key, None)
        if subscription.queue in self.vhost.queues:
            self.vhost.delete_queue(subscription.queue)
