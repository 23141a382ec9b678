"""Classic queue: FIFO messages, round-robin consumers, per-consumer link credit.

Owns: the message order of one queue, its consumers and their link flow-control state,
acquired (unsettled) deliveries, outcomes and requeue; the 2.6.7 sender-side credit
arithmetic on that state is `credit.py`'s. Plain Python: no AMQP bytes (messages are the
opaque encoded payload the broker received), no engine objects, no clock, no I/O; durable
persistence is delegated to a `MessageLog`-like object (see `store.py`) given by the caller.

Credit API v2 (RabbitMQ PR #9022): the queue, acting as the AMQP *sender* of every
consumer link, holds the link's delivery-count and link-credit (2.6.7). The protocol layer
forwards the receiver's flow with `flow()`, calls `dispatch()` and turns the returned events
into transfers (`Delivery`) and flows (`CreditReply`). In-flight deliveries are counted the
moment they are handed out, so a re-grant can never produce more deliveries than granted.

Typical protocol-layer loop::

    consumer = queue.add_consumer("link-7", owner=link, settled=False)
    queue.flow("link-7", delivery_count=None, link_credit=10, drain=False, echo=False)
    for event in queue.dispatch():      # or vhost.dispatch_pending()
        if isinstance(event, Delivery): event.consumer.owner.send_transfer(event)
        else: event.consumer.owner.send_flow(event)   # CreditReply
    queue.settle("link-7", [msg_id], ACCEPTED)          # disposition from the receiver
    queue.remove_consumer("link-7")                     # detach: requeue unsettled
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from amqpspec.amqp10.serial import MASK as SERIAL_MASK

from ..faults.catalog import NO_FAULTS, Faults
from . import credit
from .requeued import take_requeued
from .selection import count_accepted, take_accepted


class QueueError(Exception):
    """A queue operation the caller got wrong (unknown consumer, unknown message)."""


class MessageLog(Protocol):
    """What a durable queue needs from the store (see store.MessageStore)."""

    def append_publish(self, queue: str, msg_id: int, payload: bytes) -> int: ...

    def append_ack(self, queue: str, msg_id: int) -> int: ...

    def append_purge(self, queue: str) -> int: ...


class Outcome(Enum):
    """Terminal delivery states of 3.4 as seen by the queue."""

    ACCEPTED = "accepted"  # 3.4.2: done, remove
    REJECTED = "rejected"  # 3.4.3: invalid, remove (no dead-lettering here)
    RELEASED = "released"  # 3.4.4: requeue, delivery-count unchanged
    MODIFIED = "modified"  # 3.4.5: requeue with the given modifications


ACCEPTED = Outcome.ACCEPTED
REJECTED = Outcome.REJECTED
RELEASED = Outcome.RELEASED
MODIFIED = Outcome.MODIFIED


@dataclass(slots=True, eq=False)
class QueuedMessage:
    """One message in a queue. `payload` is the encoded AMQP message, never parsed here.

    `delivery_count` and `first_acquirer` are the header fields of 3.2.1 as this queue
    knows them; when either differs from the payload's own header (i.e. `redelivered`),
    the protocol layer rewrites the header section before sending.
    """

    msg_id: int
    payload: bytes
    delivery_count: int = 0
    first_acquirer: bool = True
    annotations: dict[Any, Any] | None = None  # message-annotations merged by modified
    undeliverable_to: set[str] | None = None  # consumer tags (3.4.5 undeliverable-here)
    durable: bool = False

    @property
    def redelivered(self) -> bool:
        return not self.first_acquirer or self.delivery_count > 0

    def __lt__(self, other: QueuedMessage) -> bool:  # heap order = original order
        return self.msg_id < other.msg_id

    def modify(
        self,
        tag: str,
        delivery_failed: bool,
        undeliverable_here: bool,
        annotations: dict[Any, Any] | None,
    ) -> None:
        """The modified outcome (3.4.5) from consumer `tag`: delivery-failed counts a
        failed delivery (3.2.1), undeliverable-here keeps it from that consumer, and the
        message-annotations are merged."""
        if delivery_failed:
            self.delivery_count += 1
        if undeliverable_here:
            if self.undeliverable_to is None:
                self.undeliverable_to = set()
            self.undeliverable_to.add(tag)
        if annotations:
            self.annotations = {**(self.annotations or {}), **annotations}


@dataclass(slots=True, eq=False)
class Consumer:
    """Link flow-control state the queue keeps for one consumer link (2.6.7, sender side)."""

    tag: str
    owner: Any
    settled: bool  # snd-settle-mode settled: deliveries are settled when handed out
    delivery_count: int = 0
    credit: int = 0
    drain: bool = False
    reply_due: bool = False  # a CreditReply must follow the next dispatch (echo / drain)
    reply_for_drain: bool = False
    reply_for_echo: bool = False
    initial_delivery_count: int = 0
    unacked: dict[int, QueuedMessage] = field(default_factory=dict)
    delivered_total: int = 0
    flows_seen: int = 0
    accepts: Callable[[bytes], bool] | None = None  # its source's filters (features/filters.py)


@dataclass(slots=True)
class Delivery:
    """Hand `message` to `consumer` now. `delivery_count_after` is the link's delivery-count
    after this delivery (i.e. this delivery is number delivery_count_after - 1)."""

    queue: ClassicQueue
    consumer: Consumer
    message: QueuedMessage
    settled: bool
    delivery_count_after: int


@dataclass(slots=True, frozen=True)
class CreditReply:
    """The sender's link state to put in a flow (2.6.7): due after a drain or an echo.

    `drain` is True when this reply completes a drain (the flow then carries drain=true and
    link-credit 0); `echo` is True when the receiver's flow asked for it with echo=true.
    """

    queue: ClassicQueue
    consumer: Consumer
    delivery_count: int
    link_credit: int
    available: int
    drain: bool
    echo: bool


QueueEvent = Delivery | CreditReply


class ClassicQueue:
    """An in-memory FIFO queue, optionally backed by a durable message log."""

    queue_type = "classic"

    def __init__(
        self,
        name: str,
        *,
        durable: bool = False,
        auto_delete: bool = False,
        exclusive_owner: Any = None,
        arguments: dict[str, Any] | None = None,
        faults: Faults = NO_FAULTS,
        log: MessageLog | None = None,
        on_ready: Any = None,
    ) -> None:
        self.name = name
        self.durable = durable
        self.auto_delete = auto_delete
        self.exclusive_owner = exclusive_owner
        self.arguments = dict(arguments or {})
        self.faults = faults
        self._log = log if durable else None
        self._on_ready = on_ready  # called with self when dispatch may have work
        self._ready: deque[QueuedMessage] = deque()  # never acquired, ascending msg_id
        self._returned: list[QueuedMessage] = []  # heap of requeued messages
        self._consumers: OrderedDict[str, Consumer] = OrderedDict()  # round-robin order
        self._detached: list[QueuedMessage] = []  # fault lose-requeue-on-concurrent-detach
        self._next_id = 1
        self.published_total = 0
        self.delivered_total = 0
        self.acked_total = 0
        self.had_consumers = False

    # ------------------------------------------------------------------ counts
    @property
    def messages_ready(self) -> int:
        return len(self._ready) + len(self._returned)

    @property
    def available(self) -> int:
        """2.6.7 `available`: messages the queue could hand out now."""
        return len(self._ready) + len(self._returned)

    @property
    def messages_unacknowledged(self) -> int:
        return sum(len(c.unacked) for c in self._consumers.values())

    @property
    def messages(self) -> int:
        return self.messages_ready + self.messages_unacknowledged

    @property
    def consumers(self) -> list[Consumer]:
        return list(self._consumers.values())

    def has_consumer(self, tag: str) -> bool:
        return tag in self._consumers

    def find_consumer(self, tag: str) -> Consumer | None:
        """The consumer `tag`, or None once it was removed (detach raced a flow)."""
        return self._consumers.get(tag)

    def consumer(self, tag: str) -> Consumer:
        try:
            return self._consumers[tag]
        except KeyError:
            raise QueueError(f"queue {self.name!r} has no consumer {tag!r}") from None

    def ready_messages(self) -> list[QueuedMessage]:
        """A snapshot of the ready messages in delivery order (for tests and admin)."""
        return sorted(self._returned) + list(self._ready)

    # ------------------------------------------------------------------ publish
    def publish(self, payload: bytes) -> tuple[QueuedMessage, int | None]:
        """Enqueue `payload`. Returns the message and the store token (durable) or None.

        The caller confirms the publish once the store reports the token durable.
        """
        msg = QueuedMessage(self._next_id, payload, durable=self._log is not None)
        self._next_id += 1
        self.published_total += 1
        token = self._log.append_publish(self.name, msg.msg_id, payload) if self._log else None
        if token is not None and self.faults.durable_messages_in_memory:
            self._log.append_ack(self.name, msg.msg_id)  # fault: not kept (3.2.1)
            token = None
        self._ready.append(msg)
        if self._consumers and self._on_ready is not None:
            self._on_ready(self)
        return msg, token

    def restore(self, messages: Iterable[tuple[int, bytes]]) -> int:
        """Load recovered (msg_id, payload) pairs in order; used at startup only.

        3.2.1: first-acquirer true says no other link acquired the message. The log keeps
        no deliveries, so any recovered message may have gone to a consumer whose accept
        did not reach the disk before the crash: each comes back with first-acquirer false
        (found by bench/overload/kill_soak.py: such redeliveries carried no mark)."""
        count = 0
        for msg_id, payload in messages:
            self._ready.append(QueuedMessage(msg_id, payload, first_acquirer=False, durable=True))
            self._next_id = max(self._next_id, msg_id + 1)
            count += 1
        return count

    def reserve_ids_after(self, highest_id: int) -> None:
        self._next_id = max(self._next_id, highest_id + 1)

    def purge(self) -> int:
        """Drop every ready message (acquired ones stay with their consumers)."""
        count = self.messages_ready
        self._ready.clear()
        self._returned.clear()
        if self._log is not None and count:
            self._log.append_purge(self.name)
            # acquired messages survive the purge record: log them again
            for consumer in self._consumers.values():
                for msg in consumer.unacked.values():
                    self._log.append_publish(self.name, msg.msg_id, msg.payload)
        return count

    # ------------------------------------------------------------------ consumers
    def add_consumer(
        self,
        tag: str,
        owner: Any = None,
        *,
        settled: bool = False,
        initial_delivery_count: int = 0,
        accepts: Callable[[bytes], bool] | None = None,
    ) -> Consumer:
        """Attach a consumer link. It gets no credit until the receiver's first flow; with
        `accepts`, it is handed only the messages that pass (the others stay queued)."""
        if tag in self._consumers:
            raise QueueError(f"queue {self.name!r} already has consumer {tag!r}")
        consumer = Consumer(tag, owner, settled, delivery_count=initial_delivery_count)
        consumer.initial_delivery_count = initial_delivery_count
        consumer.accepts = accepts
        if self.faults.transfer_before_credit:
            consumer.credit = 1  # fault: an unrequested credit (rabbitmq-amqp1.0#43)
        if self.faults.deliver_to_two_consumers:
            held = [m for c in self._consumers.values() for m in c.unacked.values()]
            if held:  # fault: the oldest acquired message offered again, still acquired
                heapq.heappush(self._returned, min(held))
        self._consumers[tag] = consumer
        self.had_consumers = True
        if consumer.credit and self._on_ready is not None:
            self._on_ready(self)
        return consumer

    def remove_consumer(self, tag: str) -> list[QueuedMessage]:
        """Detach (2.6.6): every unsettled delivery goes back to the queue, in original order,
        with first-acquirer false (RabbitMQ 4 treats every detach as closed). Returns them."""
        consumer = self._consumers.pop(tag, None)
        if consumer is None:
            raise QueueError(f"queue {self.name!r} has no consumer {tag!r}")
        returned = list(consumer.unacked.values())
        consumer.unacked.clear()
        if self.faults.no_requeue_on_detach:
            if self._log is not None:
                for msg in returned:
                    self._log.append_ack(self.name, msg.msg_id)
            return []
        if self.faults.lose_requeue_on_concurrent_detach:
            # fault: one requeue buffer, replaced (not merged) by the next detach before a
            # consumer with credit took it (dispatch)
            self._detached = returned
            if self._consumers and self._on_ready is not None:
                self._on_ready(self)
            return returned
        for msg in returned:
            self._requeue(msg)
        if returned and self._consumers and self._on_ready is not None:
            self._on_ready(self)
        return returned

    # ------------------------------------------------------------------ credit
    def flow(
        self,
        tag: str,
        *,
        delivery_count: int | None,
        link_credit: int,
        drain: bool = False,
        echo: bool = False,
    ) -> Consumer:
        """Apply a receiver flow for this consumer link (2.6.7).

        link-credit(snd) := delivery-count(rcv) + link-credit(rcv) - delivery-count(snd);
        a flow without delivery-count uses the initial delivery-count, which the queue holds
        as the consumer's starting delivery_count. Deliveries already handed out but not yet
        seen by the receiver are thereby subtracted. The result is never below 0.
        Call `dispatch()` afterwards; it returns the reply if drain or echo asks for one.
        """
        consumer = self._consumers.get(tag)
        if consumer is None:
            raise QueueError(f"queue {self.name!r} has no consumer {tag!r}")
        credit.apply_flow(
            consumer,
            self.faults,
            delivery_count=delivery_count,
            link_credit=link_credit,
            drain=drain,
            echo=echo,
        )
        if self._on_ready is not None and (consumer.credit or consumer.reply_due):
            self._on_ready(self)
        return consumer

    # ------------------------------------------------------------------ dispatch
    def dispatch(self, limit: int | None = None) -> list[QueueEvent]:
        """Hand ready messages to consumers with credit, round-robin, then settle drains.

        Returns Delivery events in send order, followed by the CreditReply events that are
        due (a drain reply always comes after the deliveries of its consumer). With
        `limit`, at most that many deliveries are handed out; if work is left the queue
        marks itself ready again and replies of consumers that could still receive wait
        for a later dispatch (so a drain reply still follows every delivery).
        """
        events: list[QueueEvent] = []
        consumers = self._consumers
        if self._detached and any(c.credit > 0 for c in consumers.values()):
            for msg in self._detached:  # fault lose-requeue-on-concurrent-detach
                self._requeue(msg)
            self._detached = []
        if consumers and (self._ready or self._returned):
            if self.faults.shared_credit_across_links and len(consumers) > 1:
                self._deliver_shared_credit(events, limit)
            else:
                self._deliver_round_robin(events, limit)
        cut_short = (
            limit is not None and len(events) >= limit and bool(self._ready or self._returned)
        )
        for consumer in consumers.values():
            if consumer.reply_due and not (cut_short and consumer.credit > 0):
                events.append(self._credit_reply(consumer))
        if cut_short and self._on_ready is not None:
            self._on_ready(self)
        return events

    def _deliver_round_robin(self, events: list[QueueEvent], limit: int | None = None) -> None:
        consumers = self._consumers
        active = deque(c for c in consumers.values() if c.credit > 0)
        ready = self._ready
        returned = self._returned
        single = len(consumers) == 1
        append = events.append
        budget = -1 if limit is None else limit
        while active and (ready or returned) and budget != 0:
            budget -= 1
            consumer = active.popleft()
            if returned or consumer.accepts is not None:
                msg = self._take_for(consumer)
                if msg is None:
                    continue  # nothing left that this consumer may take
            else:
                msg = ready.popleft()
            consumer.credit -= 1
            consumer.delivery_count = (consumer.delivery_count + 1) & SERIAL_MASK  # serial_add
            consumer.delivered_total += 1
            self.delivered_total += 1
            if consumer.settled:
                self._discard(msg)
            else:
                consumer.unacked[msg.msg_id] = msg
                if self._log is not None and self.faults.consume_on_delivery:
                    self._log.append_ack(self.name, msg.msg_id)  # fault: before its outcome
            append(Delivery(self, consumer, msg, consumer.settled, consumer.delivery_count))
            if not single:
                consumers.move_to_end(consumer.tag)  # the next dispatch starts with the others
            if consumer.credit > 0:
                active.append(consumer)

    def _deliver_shared_credit(self, events: list[QueueEvent], limit: int | None) -> None:
        """Fault shared-credit-across-links: each delivery goes to the next consumer in
        turn, credit or not, and is charged to the first link that has credit (2.6.7 keeps
        credit per link)."""
        consumers = self._consumers
        budget = -1 if limit is None else limit
        while (self._ready or self._returned) and budget != 0:
            payer = next((c for c in consumers.values() if c.credit > 0), None)
            if payer is None:
                return
            budget -= 1
            consumer = next(iter(consumers.values()))
            msg = self._take_for(consumer)
            if msg is None:
                return
            payer.credit -= 1
            consumer.delivery_count = (consumer.delivery_count + 1) & SERIAL_MASK
            consumer.delivered_total += 1
            self.delivered_total += 1
            if consumer.settled:
                self._discard(msg)
            else:
                consumer.unacked[msg.msg_id] = msg
            events.append(Delivery(self, consumer, msg, consumer.settled, consumer.delivery_count))
            consumers.move_to_end(consumer.tag)

    def _take_for(self, consumer: Consumer) -> QueuedMessage | None:
        if consumer.accepts is not None:  # a selector: the oldest message it accepts
            return take_accepted(self._ready, self._returned, consumer.tag, consumer.accepts)
        if self._returned and (msg := take_requeued(self._returned, consumer.tag)) is not None:
            return msg
        if self._ready:
            return self._ready.popleft()
        return None

    def _credit_reply(self, consumer: Consumer) -> CreditReply:
        drain, echo = credit.take_reply(consumer, self.faults)
        return CreditReply(
            self,
            consumer,
            consumer.delivery_count,
            0 if drain else consumer.credit,
            self._available_to(consumer),
            drain,
            echo,
        )

    def _available_to(self, consumer: Consumer) -> int:
        """2.6.7 `available` as this consumer's flow reports it: the whole queue, or what
        its selector accepts (the rest awaits no credit of this link)."""
        if consumer.accepts is None:
            return self.available
        return count_accepted(self._ready, self._returned, consumer.tag, consumer.accepts)

    # ------------------------------------------------------------------ settlement
    def settle(
        self,
        tag: str,
        msg_ids: Iterable[int],
        outcome: Outcome,
        *,
        delivery_failed: bool = False,
        undeliverable_here: bool = False,
        annotations: dict[Any, Any] | None = None,
    ) -> int:
        """Apply a receiver's outcome (3.4) to acquired messages of consumer `tag`.

        accepted/rejected remove the message; released requeues it unchanged;
        modified requeues it with delivery-count + 1 if delivery-failed (3.2.1), never again
        to this consumer if undeliverable-here, and merges `annotations`.
        Unknown ids (already settled) are ignored, as a settled delivery is forgotten.
        Returns how many messages were settled.
        """
        consumer = self._consumers.get(tag)
        if consumer is None:
            raise QueueError(f"queue {self.name!r} has no consumer {tag!r}")
        unacked = consumer.unacked
        settled = 0
        requeued = False
        for msg_id in msg_ids:
            msg = unacked.pop(msg_id, None)
            if msg is None:
                continue
            settled += 1
            if outcome is Outcome.ACCEPTED:
                self._discard(msg)
                continue
            if outcome is Outcome.REJECTED:
                self._rejected(msg)
                continue
            if outcome is Outcome.MODIFIED:
                here = undeliverable_here and not self.faults.redeliver_undeliverable_here
                msg.modify(tag, delivery_failed, here, annotations)
            self._requeue(msg)
            requeued = True
        if requeued and self._on_ready is not None:
            self._on_ready(self)
        return settled

    def _discard(self, msg: QueuedMessage) -> None:
        self.acked_total += 1
        if self._log is not None:
            self._log.append_ack(self.name, msg.msg_id)

    # 3.4.3 rejected: gone like accepted (a quorum queue dead-letters it instead)
    _rejected = _discard

    def _requeue(self, msg: QueuedMessage) -> None:
        """Back to the head, in original (msg_id) order; first-acquirer false (3.2.1)."""
        msg.first_acquirer = False
        heapq.heappush(self._returned, msg)

    # ------------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator[QueuedMessage]:
        return iter(self.ready_messages())

    def __repr__(self) -> str:
        return (
            f"ClassicQueue({self.name!r}, ready={self.messages_ready}, "
            f"unacked={self.messages_unacknowledged}, consumers={len(self._consumers)})"
        )


def outcome_of(state: Any) -> tuple[Outcome, dict[str, Any]]:
    """Map an amqp10 delivery-state composite (Accepted, Rejected, Released, Modified) to
    (Outcome, settle keyword arguments). A missing state (settled with no outcome) counts as
    accepted, as the spec's default-outcome for RabbitMQ is; unknown states are released."""
    name = getattr(state, "NAME", None)
    if name is None or name == "accepted":
        return Outcome.ACCEPTED, {}
    if name == "rejected":
        return Outcome.REJECTED, {}
    if name == "released":
        return Outcome.RELEASED, {}
    if name == "modified":
        return Outcome.MODIFIED, {
            "delivery_failed": bool(getattr(state, "delivery_failed", False)),
            "undeliverable_here": bool(getattr(state, "undeliverable_here", False)),
            "annotations": getattr(state, "message_annotations", None) or None,
        }
    return Outcome.RELEASED, {}
