"""The reference broker's link recovery, mainly for consumer links (the broker as sender):
source termini that outlive their link, the deliveries they keep unsettled while the link is
suspended, and how attaching the same link again resumes them (2.6.13 Resuming Deliveries,
3.4.x the table of "Resuming Deliveries Using Delivery States").

Owns: which expiry-policy the broker applies to a source and reports in its attach (3.5.3
expiry-policy and timeout; 2.6.3 "the endpoint MUST report the actual properties of the
terminus as created"), the kept termini by link key (client container-id, link name, the
broker's role: 2.6.1), their expiry, the broker's unsettled map for a resuming attach and
the plan that compares it with the receiver's (2.6.13). May touch: the queue of a kept
terminus (its consumer record stays there, parked without credit, holding the unsettled
messages; settle / cancel it) and the ConsumerLink that resumes it (its resumes and
resume-only flag, protocol/links.py). The link handler (protocol/link_handler.py) calls
`reported_source` and
`take` when a consumer link attaches, `release` when one goes, `connection_gone` when the
connection ends; the broker's housekeeping calls `expire`.

The policies applied (3.5.3, terminus-expiry-policy: "The expiry timer starts when ..."):
- `never`: the terminus is kept after a detach with closed=false, the end of its session and
  the loss of its connection, until the link is closed (detach closed=true);
- `connection-close`: kept until the connection it was last attached on ends, then `timeout`
  seconds more;
- `link-detach`: kept `timeout` seconds after the link is detached (none with timeout 0);
- `session-end` (the default) is applied, and reported, as `link-detach`: a suspended link's
  deliveries return to the queue at once, RabbitMQ 4's model that the reference profile
  claims (2.6.3 lets the broker adjust the terminus if it reports it as created).
A detach with closed=true ends the terminus ("The partner will destroy the corresponding
Link endpoint", 2.6.6): its unsettled deliveries go back to the queue (2.6.6 requeue).

Resuming (2.6.13, the broker's map `ours`, the receiver's `theirs`):
- in both: "Deliveries in this category MUST be resumed by the Sender": with a terminal
  outcome in `theirs` the broker applies it at the queue and sends a resuming transfer
  carrying it, settled, without the message (the table's delivery-tags 3 and 8: "the sender
  MUST send a resuming transfer to associate delivery-tag 3 with a delivery-id", "the Sender
  MAY omit message data"); otherwise the whole message again, resume=true, same tag (tag 4);
- only in `ours` (the broker's state is always null: it keeps no terminal outcome unsettled):
  released to the queue and sent again as a new delivery (tag 1: "the sender MUST resend the
  message, however [...] transfers MUST NOT have the resume flag set to true"), unless
  `theirs` is incomplete (then absence is no evidence: kept unsettled, not resent);
- only in `theirs`: "MUST be ignored by the Sender".
An incomplete `theirs` (2.7.3 incomplete-unsettled: "a sending endpoint MUST NOT send any
new deliveries") makes the link resume-only: its resumes go out, nothing new is dispatched.
So does an incomplete `ours`: a map too large for the peer's max-frame-size is cut to the
oldest deliveries that fit and marked incomplete (2.7.3 SHOULD), and "Only when both sides
have complete unsettled maps may new unsettled state be created" (2.6.13): the receiver
suspends and attaches again to see the rest. Deliveries the broker listed that a complete
map of the receiver's lacks go back to the queue meanwhile (less unsettled state).
Resumed transfers are deliveries: each waits for link-credit (2.6.7).

Publisher links (the broker as receiver): their target is kept as its expiry-policy says,
every policy applied as the text says, with what the link held (features/publisher_recovery.py:
the publishes of a link in rcv-settle-mode second the sender had not settled, and the
delivery it was in the middle of); attached again, the link gets the kept target back ("the
Receiver is considered to hold the authoritative version of the Target properties", 2.6.3)
and an attach with the broker's unsettled map of them (empty when it held nothing: rcv-settle-
mode first settles each publish on arrival). Its transfers are then judged there: resumed
ones completed, restated or ignored (2.6.13, 2.7.5), new ones refused after an incomplete
map (2.7.3).

The `forget-unsettled-on-reattach` fault resumes the terminus but answers with a null
unsettled map and never resumes its deliveries (they stay acquired until the link closes);
a resumed publisher link's attach carries a null unsettled map too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import Accepted, Attach, Modified, Rejected, Released, Source
from amqpspec.amqp10.frames import encode_frame
from amqpspec.amqp10.spec import Role

from ..faults.catalog import Faults
from ..queues.classic import RELEASED, ClassicQueue, outcome_of
from ..queues.streams import StreamQueue
from .publisher_recovery import Held
from .publisher_recovery import unsettled_map as publisher_unsettled_map

if TYPE_CHECKING:
    from ..protocol.links import ConsumerLink
    from ..queues.vhost import VirtualHost

NEVER = "never"
CONNECTION_CLOSE = "connection-close"
SESSION_END = "session-end"
LINK_DETACH = "link-detach"
HONOURED = frozenset({NEVER, CONNECTION_CLOSE, LINK_DETACH})

# why a consumer link goes (protocol/link_handler.py passes one to `release`)
SUSPENDED = "suspended"  # detach closed=false (2.6.4)
SESSION_ENDED = "session-end"
CONNECTION_ENDED = "connection"  # close, loss of the transport, broker shutdown
CLOSED = "closed"  # detach closed=true or an error: the terminus is destroyed

TERMINAL = (Accepted, Rejected, Released, Modified)
# one entry of the broker's unsettled map, encoded: an 8-octet delivery-tag (vbin8: 10
# octets) and a null state (1 octet)
ENTRY_OCTETS = 11
MAP_HEADROOM = 16  # a map32 header instead of the map8 measured, with some to spare
_TAG = struct.Struct(">Q")
LinkKey = tuple[Any, str, bool]


def applied_policy(source: Source | None) -> str:
    """The expiry-policy the broker applies to `source` (see the module doc)."""
    policy = getattr(source, "expiry_policy", None)
    policy = SESSION_END if policy is None else str(policy)
    return policy if policy in HONOURED else LINK_DETACH


def timeout_of(source: Source | None) -> int:
    return int(getattr(source, "timeout", None) or 0)


def reported_source(source: Source | None) -> Source | None:
    """The source as the broker applies it (2.6.3: reported as created): the expiry-policy
    it applies in place of one it does not (session-end, the default)."""
    if source is None:
        return None
    policy = applied_policy(source)
    if source.expiry_policy is not None and str(source.expiry_policy) == policy:
        return source
    return source.replace(expiry_policy=policy)


def recoverable(source: Source | None) -> bool:
    """Whether a consumer link from `source` can leave a terminus behind."""
    return source is not None and (applied_policy(source) != LINK_DETACH or timeout_of(source) > 0)


def map_room(attach: Attach, max_frame_size: int) -> int:
    """Octets left for unsettled-map entries in `attach` (carrying an empty map) under the
    peer's max-frame-size (2.7.1: no frame above it)."""
    return max_frame_size - len(encode_frame(attach, 0xFFFF)) - MAP_HEADROOM


def target_map_room(link: Any, fields: dict[str, Any], max_frame_size: int) -> int:
    """Octets left for unsettled-map entries in the broker's attach answering the publisher
    `link` with `fields` (its target, settle mode, max-message-size; the source echoed)."""
    answer = Attach(
        name=link.name,
        handle=0xFFFFFFFF,
        role=Role.RECEIVER,
        snd_settle_mode=link.snd_settle_mode,
        source=link.remote_attach.source,
        unsettled={},
        incomplete_unsettled=True,
        **fields,
    )
    return map_room(answer, max_frame_size)


def delivery_tag(msg_id: int) -> bytes:
    """The delivery-tag of a message on a recoverable link: unique among the deliveries the
    terminus can hold unsettled (2.8.7), whatever session or connection resumes it."""
    return _TAG.pack(msg_id)


@dataclass(slots=True, eq=False)
class KeptTerminus:
    """A source whose link went away while the terminus did not: its queue consumer record
    (`tag`) stays on `queue`, without credit, holding the unsettled messages."""

    key: LinkKey
    queue: ClassicQueue
    tag: str
    source: Source
    policy: str
    timeout: int
    connection: Any  # the connection it was last attached on
    expires_at: float | None = None


@dataclass(slots=True, eq=False)
class KeptTarget:
    """A target whose publisher link went away while the terminus did not, with what the
    link held unsettled (features/publisher_recovery.py; nothing in rcv-settle-mode first
    but a delivery cut off in its middle)."""

    key: LinkKey
    target: Any
    policy: str
    timeout: int
    connection: Any
    session: Any
    held: Held
    expires_at: float | None = None


def _target_expiry_started(policy: str, why: str) -> bool:
    """3.5.3 terminus-expiry-policy, every policy as the text says (a target holds nothing
    the broker must give back, so none is adjusted)."""
    if policy == LINK_DETACH:
        return True
    if policy == SESSION_END:
        return why in (SESSION_ENDED, CONNECTION_ENDED)
    if policy == CONNECTION_CLOSE:
        return why == CONNECTION_ENDED
    return False


@dataclass(slots=True, frozen=True)
class Resume:
    """One delivery to resume on the new link: the message again (`state` None) or the
    receiver's terminal outcome, applied, restated settled (`state` the outcome)."""

    tag: bytes
    msg_id: int
    state: Any = None


class Recovery:
    """The kept termini of one broker (shared by its connections)."""

    def __init__(self, vhost: VirtualHost, faults: Faults, clock: Callable[[], float]) -> None:
        self.vhost = vhost
        self.faults = faults
        self.clock = clock
        self.termini: dict[LinkKey, KeptTerminus] = {}
        self.targets: dict[LinkKey, KeptTarget] = {}  # publisher links (the broker receives)

    # ------------------------------------------------------------------ a link goes
    def release(self, key: LinkKey, consumer: ConsumerLink, why: str) -> bool:
        """`consumer`'s link goes (`why`): True when its terminus is kept (its queue
        consumer record stays, parked); False when the caller cancels it (requeue)."""
        source = consumer.source
        if why == CLOSED or not consumer.recoverable or source is None:
            return False
        if isinstance(consumer.queue, StreamQueue):
            return False  # a stream consumer re-attaches by its offset, not its deliveries
        if source.dynamic:
            return False  # a dynamic node's own rule (dynamic_nodes.py) resumes its links
        queue, record = consumer.queue, consumer.queue.find_consumer(consumer.tag)
        if record is None or self.vhost.queues.get(queue.name) is not queue:
            return False
        policy, timeout = applied_policy(source), timeout_of(source)
        started = policy == LINK_DETACH or (policy == CONNECTION_CLOSE and why == CONNECTION_ENDED)
        if started and not timeout:
            return False
        self._park(record)
        older = self.termini.pop(key, None)
        if older is not None:
            self._drop(older)
        kept = KeptTerminus(key, queue, consumer.tag, source, policy, timeout, consumer.connection)
        if started:
            kept.expires_at = self.clock() + timeout
        self.termini[key] = kept
        return True

    @staticmethod
    def _park(record: Any) -> None:
        """No link: no credit, no drain or echo owed (the queue dispatches nothing to it)."""
        record.owner = None
        record.credit = 0
        record.drain = False
        record.reply_due = record.reply_for_drain = record.reply_for_echo = False

    def connection_gone(self, connection: Any) -> None:
        """3.5.3 connection-close: the expiry of the termini last attached on `connection`
        starts now."""
        now = self.clock()
        self._targets_expiring(lambda t: t.connection is connection, CONNECTION_ENDED, now)
        for key, kept in list(self.termini.items()):
            if kept.connection is not connection or kept.policy != CONNECTION_CLOSE:
                continue
            if kept.expires_at is not None:
                continue
            if kept.timeout:
                kept.expires_at = now + kept.timeout
            else:
                del self.termini[key]
                self._drop(kept)

    def expire(self, now: float) -> None:
        """Housekeeping: termini past their timeout go, their deliveries back to the queue."""
        for key, target in list(self.targets.items()):
            if target.expires_at is not None and target.expires_at <= now:
                del self.targets[key]
        for key, kept in list(self.termini.items()):
            if kept.expires_at is not None and kept.expires_at <= now:
                del self.termini[key]
                self._drop(kept)

    # ------------------------------------------------------------------ publisher links
    def release_target(
        self, key: LinkKey, target: Any, why: str, connection: Any, session: Any, held: Held
    ) -> None:
        """A publisher link goes (`why`) holding `held`: its target is kept with it unless
        its expiry-policy (3.5.3) ends it now with timeout 0; a closed link ends it (2.6.6)."""
        self.targets.pop(key, None)
        if why == CLOSED or target is None or getattr(target, "dynamic", False):
            return
        policy = getattr(target, "expiry_policy", None)
        policy = SESSION_END if policy is None else str(policy)
        timeout = timeout_of(target)
        started = _target_expiry_started(policy, why)
        if started and not timeout:
            return
        kept = KeptTarget(key, target, policy, timeout, connection, session, held)
        if started:
            kept.expires_at = self.clock() + timeout
        self.targets[key] = kept

    def session_gone(self, session: Any) -> None:
        """3.5.3 session-end: the expiry of the targets last attached on `session` starts."""
        self._targets_expiring(lambda t: t.session is session, SESSION_ENDED, self.clock())

    def _targets_expiring(self, owned: Callable[[KeptTarget], bool], why: str, now: float) -> None:
        for key, target in list(self.targets.items()):
            if not owned(target) or target.expires_at is not None:
                continue
            if not _target_expiry_started(target.policy, why):
                continue
            if target.timeout:
                target.expires_at = now + target.timeout
            else:
                del self.targets[key]

    def take_target(self, key: LinkKey) -> KeptTarget | None:
        """The kept target of a publisher link attached again, if it still lives."""
        kept = self.targets.pop(key, None)
        if kept is None or (kept.expires_at is not None and kept.expires_at <= self.clock()):
            return None
        return kept

    def target_unsettled_map(
        self, kept: KeptTarget, room: int
    ) -> tuple[dict[bytes, Any] | None, bool]:
        """The broker's unsettled map resuming a publisher link and whether it is incomplete
        (features/publisher_recovery.py); null with the forget-unsettled-on-reattach fault."""
        if self.faults.forget_unsettled_on_reattach:
            return None, False
        return publisher_unsettled_map(kept.held, room)

    def _drop(self, kept: KeptTerminus) -> None:
        queue = kept.queue
        if queue.has_consumer(kept.tag):
            self.vhost.cancel_consumer(queue, kept.tag)

    # ------------------------------------------------------------------ the link again
    def take(self, key: LinkKey) -> KeptTerminus | None:
        """The kept terminus of the link attached again (2.6.3 "The application attempts to
        locate the Terminus previously associated with the Link"), if it still lives."""
        kept = self.termini.pop(key, None)
        if kept is None:
            return None
        expired = kept.expires_at is not None and kept.expires_at <= self.clock()
        alive = self.vhost.queues.get(kept.queue.name) is kept.queue
        if expired or not alive or not kept.queue.has_consumer(kept.tag):
            self._drop(kept)
            return None
        return kept

    def unsettled_map(self, kept: KeptTerminus, room: int) -> tuple[dict[bytes, Any] | None, bool]:
        """The broker's unsettled map for its resuming attach (2.7.3 unsettled: delivery-tag
        -> delivery state; null for every one: it keeps no outcome unsettled) and whether it
        is incomplete: as many of the oldest deliveries as `room` octets of the attach
        frame hold (2.7.3: "The endpoint SHOULD make use of the ability to send an
        incomplete unsettled map [...] to avoid sending an error")."""
        if self.faults.forget_unsettled_on_reattach:
            return None, False  # fault: the terminus is resumed, its unsettled state forgotten
        record = kept.queue.find_consumer(kept.tag)
        held = sorted(record.unacked) if record is not None else []
        fits = max(0, room // ENTRY_OCTETS)
        return {delivery_tag(msg_id): None for msg_id in held[:fits]}, len(held) > fits

    def plan(
        self, kept: KeptTerminus, theirs: Any, incomplete: bool, ours: dict[bytes, Any] | None
    ) -> list[Resume]:
        """Compare the receiver's unsettled map (`incomplete` as it says) with the broker's
        (`ours`, as sent) (2.6.13, module doc): apply what is settled, release what only the
        broker holds (a delivery the broker listed and a complete map of the receiver's
        lacks: less unsettled state, 2.6.13), and return the deliveries to resume, in their
        original order."""
        if self.faults.forget_unsettled_on_reattach:
            return []
        record = kept.queue.find_consumer(kept.tag)
        if record is None:
            return []
        theirs = theirs if isinstance(theirs, dict) else {}
        by_tag = {bytes(tag): state for tag, state in theirs.items() if tag is not None}
        resumes: list[Resume] = []
        released: list[int] = []
        for msg_id in sorted(record.unacked):
            tag = delivery_tag(msg_id)
            if tag not in by_tag:
                if not incomplete and ours is not None and tag in ours:
                    released.append(msg_id)  # tag 1: sent again as a new delivery
                continue
            state = by_tag[tag]
            if isinstance(state, TERMINAL):  # tags 3 and 8: the receiver's outcome applies
                outcome, kwargs = outcome_of(state)
                kept.queue.settle(kept.tag, [msg_id], outcome, **kwargs)
                resumes.append(Resume(tag, msg_id, state))
            else:  # tags 2 and 4: the message again, from its start
                resumes.append(Resume(tag, msg_id))
        if released:
            kept.queue.settle(kept.tag, released, RELEASED)
        return resumes
