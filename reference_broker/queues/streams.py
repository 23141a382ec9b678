"""Stream queue (`x-queue-type: stream`, as RabbitMQ 4): an append-only log read without
removing anything; every consumer has its own position.

Owns: the log of one stream (offsets, publish timestamps, retained bytes), retention by
size (`x-max-length-bytes`) and age (`x-max-age`), each consumer's next offset and the
`rabbitmq:stream-offset-spec` attach filter (first, last, next, an offset, a timestamp);
a consumer's other filters (features/filters.py) skip the entries they refuse.
May touch: the consumer and flow-control machinery it inherits from `queues.ClassicQueue`
(credit API v2: credit, drain and echo exactly as for classic queues, 2.6.7), the durable
message log given by the caller (a publish is appended; a retention truncation is an ack).
No AMQP bytes (the offset is attached as the `x-stream-offset` message annotation, which
protocol/links.py writes with amqp10.message), no I/O, no clock: `clock` is injected.

Outcomes do not remove anything (the log is the log): accepted, rejected, released and
modified only settle the delivery. A detach requeues nothing. With a log, an entry is
delivered once the store fsynced it (`commit`, from the group commit), as RabbitMQ streams
deliver committed entries only: after a kill -9 no offset a consumer read names another
message. After a restart the recovered
messages are stamped with the recovery time (the store keeps payloads, not timestamps), so
age retention restarts for them.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from amqpspec.amqp10.serial import serial_add
from amqpspec.amqp10.types import Described, long, symbol, timestamp

from ..faults.catalog import NO_FAULTS, Faults
from .classic import (
    ClassicQueue,
    Consumer,
    Delivery,
    MessageLog,
    Outcome,
    QueuedMessage,
    QueueEvent,
)

OFFSET_SPEC_FILTER = "rabbitmq:stream-offset-spec"
OFFSET_ANNOTATION = symbol("x-stream-offset")
_AGE_UNITS = {"Y": 365 * 86400, "M": 30 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1}
_AGE_RE = re.compile(r"^(\d+)([YMDhms])$")


class OffsetSpecError(ValueError):
    """An offset-spec filter value the stream cannot start from (amqp:invalid-field)."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a new consumer starts: `kind` is first, last, next, offset or timestamp;
    `value` the offset, or the timestamp in milliseconds since the epoch (1.6.16)."""

    kind: str
    value: int = 0


NEXT = OffsetSpec("next")


def offset_spec_from_filter(filter_set: Mapping[Any, Any] | None) -> OffsetSpec:
    """The `rabbitmq:stream-offset-spec` entry of a source's filter-set (3.5.3 filter), given
    described (descriptor = the key, as RabbitMQ's clients send it) or bare. No filter: next
    (RabbitMQ's default). A string names first/last/next, a timestamp a point in time, any
    other integer an offset."""
    if not filter_set:
        return NEXT
    value = None
    for key, entry in filter_set.items():
        if str(key) == OFFSET_SPEC_FILTER:
            value = entry.value if isinstance(entry, Described) else entry
            break
    else:
        return NEXT
    if isinstance(value, str):
        if value in ("first", "last", "next"):
            return OffsetSpec(value)
        raise OffsetSpecError(f"{OFFSET_SPEC_FILTER} '{value}' is not first, last or next")
    if isinstance(value, timestamp):
        return OffsetSpec("timestamp", int(value))
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return OffsetSpec("offset", int(value))
    raise OffsetSpecError(f"{OFFSET_SPEC_FILTER} {value!r} is not an offset, a timestamp or a name")


def parse_max_age(value: Any) -> float | None:
    """`x-max-age` as RabbitMQ spells it (e.g. "7D", "12h", "30s"; units Y M D h m s) in
    seconds; None when absent."""
    if value is None:
        return None
    match = _AGE_RE.match(str(value))
    if match is None:
        raise ValueError(f"x-max-age '{value}' is not <n><Y|M|D|h|m|s>")
    return int(match.group(1)) * _AGE_UNITS[match.group(2)]


@dataclass(slots=True, eq=False)
class StreamConsumer(Consumer):
    """A consumer of a stream: the classic flow-control state plus its next offset."""

    position: int = 0


class StreamQueue(ClassicQueue):
    """An append-only log with per-consumer offsets, on the classic queue's credit machinery."""

    queue_type = "stream"

    def __init__(
        self,
        name: str,
        *,
        durable: bool = True,
        arguments: dict[str, Any] | None = None,
        faults: Faults = NO_FAULTS,
        log: MessageLog | None = None,
        on_ready: Any = None,
        clock: Callable[[], float] = lambda: 0.0,
    ) -> None:
        super().__init__(
            name, durable=durable, arguments=arguments, faults=faults, log=log, on_ready=on_ready
        )
        self._clock = clock
        self._entries: list[QueuedMessage] = []  # offset = msg_id - 1
        self._stamps: list[float] = []  # publish time of each entry (seconds)
        self._head = 0  # entries before this index were truncated (compacted lazily)
        self._bytes = 0
        # Offsets below `_readable_end` are on disk (or the stream keeps no log) and may be
        # delivered; `_uncommitted` holds (store token, readable end once it is durable).
        # RabbitMQ streams deliver committed entries only: an entry read before a kill -9
        # and lost with the unsynced tail would leave its offset to another message.
        self._readable_end = 0
        self._uncommitted: collections.deque[tuple[int, int]] = collections.deque()
        max_bytes = self.arguments.get("x-max-length-bytes")
        self.max_bytes = int(max_bytes) if max_bytes is not None else None
        self.max_age = parse_max_age(self.arguments.get("x-max-age"))

    # ------------------------------------------------------------------ offsets
    @property
    def first_offset(self) -> int:
        """The oldest offset still retained (== next_offset when the stream is empty)."""
        if self._head < len(self._entries):
            return self._entries[self._head].msg_id - 1
        return self._next_id - 1

    @property
    def next_offset(self) -> int:
        """The offset the next publish gets."""
        return self._next_id - 1

    @property
    def messages_ready(self) -> int:
        return len(self._entries) - self._head

    @property
    def available(self) -> int:
        return self.messages_ready

    @property
    def messages_unacknowledged(self) -> int:
        return 0  # nothing is acquired from a log

    @property
    def messages(self) -> int:
        return self.messages_ready

    def ready_messages(self) -> list[QueuedMessage]:
        return self._entries[self._head :]

    def start_offset(self, spec: OffsetSpec) -> int:
        """The first offset a consumer attaching with `spec` receives."""
        first, nxt = self.first_offset, self.next_offset
        if spec.kind == "first":
            return first
        if spec.kind == "last":
            return max(first, nxt - 1)
        if spec.kind == "offset":
            return min(max(spec.value, first), nxt)
        if spec.kind == "timestamp":
            since = spec.value / 1000.0
            for index in range(self._head, len(self._entries)):
                if self._stamps[index] >= since:
                    return self._entries[index].msg_id - 1
        return nxt

    # ------------------------------------------------------------------ publish
    def publish(self, payload: bytes) -> tuple[QueuedMessage, int | None]:
        offset = self._next_id - 1
        msg = QueuedMessage(
            self._next_id,
            payload,
            annotations={OFFSET_ANNOTATION: long(offset)},
            durable=self._log is not None,
        )
        self._next_id += 1
        self.published_total += 1
        token = self._log.append_publish(self.name, msg.msg_id, payload) if self._log else None
        self._append(msg, self._clock())
        self.enforce_retention()
        if token is not None:
            self._uncommitted.append((token, self.next_offset))
        else:
            self._readable_end = self.next_offset
            self._consumers_ready()
        return msg, token

    def commit(self, durable_through: int) -> bool:
        """The store is durable through token `durable_through`: the entries it covers may
        be delivered now. True if any became readable."""
        uncommitted = self._uncommitted
        if not uncommitted or uncommitted[0][0] > durable_through:
            return False
        while uncommitted and uncommitted[0][0] <= durable_through:
            self._readable_end = uncommitted.popleft()[1]
        self._consumers_ready()
        return True

    def _consumers_ready(self) -> None:
        if self._on_ready is not None and any(c.credit > 0 for c in self._consumers.values()):
            self._on_ready(self)

    def _append(self, msg: QueuedMessage, stamp: float) -> None:
        self._entries.append(msg)
        self._stamps.append(stamp)
        self._bytes += len(msg.payload)

    def restore(self, messages: Iterable[tuple[int, bytes]]) -> int:
        now = self._clock()
        count = 0
        for msg_id, payload in messages:
            annotations = {OFFSET_ANNOTATION: long(msg_id - 1)}
            self._append(QueuedMessage(msg_id, payload, annotations=annotations, durable=True), now)
            self._next_id = max(self._next_id, msg_id + 1)
            count += 1
        self._readable_end = self.next_offset  # recovered entries were on disk
        return count

    # ------------------------------------------------------------------ retention
    def enforce_retention(self) -> int:
        """Drop the oldest entries beyond `x-max-length-bytes` or older than `x-max-age`
        (the newest entry always stays). Consumers behind the new first offset skip to it.
        Returns how many entries went."""
        dropped = 0
        cutoff = None if self.max_age is None else self._clock() - self.max_age
        while len(self._entries) - self._head > 1:
            over_size = self.max_bytes is not None and self._bytes > self.max_bytes
            too_old = cutoff is not None and self._stamps[self._head] < cutoff
            if not (over_size or too_old):
                break
            self._truncate_one()
            dropped += 1
        if self._head > 1024 and self._head * 2 > len(self._entries):
            del self._entries[: self._head]
            del self._stamps[: self._head]
            self._head = 0
        return dropped

    def _truncate_one(self) -> None:
        msg = self._entries[self._head]
        self._head += 1
        self._bytes -= len(msg.payload)
        if self._log is not None:
            self._log.append_ack(self.name, msg.msg_id)

    def purge(self) -> int:
        """Truncate the whole log (consumers continue at the next offset)."""
        count = self.messages_ready
        while self._head < len(self._entries):
            self._truncate_one()
        return count

    # ------------------------------------------------------------------ consumers
    def add_consumer(
        self,
        tag: str,
        owner: Any = None,
        *,
        settled: bool = False,
        initial_delivery_count: int = 0,
        offset: OffsetSpec = NEXT,
        accepts: Callable[[bytes], bool] | None = None,
    ) -> Consumer:
        if tag in self._consumers:
            return super().add_consumer(tag)  # raises QueueError
        self.enforce_retention()
        consumer = StreamConsumer(tag, owner, settled, delivery_count=initial_delivery_count)
        consumer.initial_delivery_count = initial_delivery_count
        consumer.position = self.start_offset(offset)
        consumer.accepts = accepts
        if self.faults.transfer_before_credit:
            consumer.credit = 1  # fault: an unrequested credit (rabbitmq-amqp1.0#43)
        self._consumers[tag] = consumer
        self.had_consumers = True
        if consumer.credit and self._on_ready is not None:
            self._on_ready(self)
        return consumer

    def remove_consumer(self, tag: str) -> list[QueuedMessage]:
        """Detach: the consumer's position is forgotten; nothing goes back anywhere."""
        super().consumer(tag)  # raises QueueError when unknown
        del self._consumers[tag]
        return []

    # ------------------------------------------------------------------ dispatch
    def _lag(self, consumer: Consumer) -> int:
        position = max(getattr(consumer, "position", 0), self.first_offset)
        return max(0, self._readable_end - position)

    def _available_to(self, consumer: Consumer) -> int:
        return self._lag(consumer)

    def dispatch(self, limit: int | None = None) -> list[QueueEvent]:
        """Every consumer with credit gets the entries from its position on, up to its
        credit (and `limit` per call in all); then the due credit replies (2.6.7), each
        with that consumer's own `available`."""
        events: list[QueueEvent] = []
        budget = -1 if limit is None else limit
        cut_short = False
        for consumer in self._consumers.values():
            if budget == 0:
                cut_short = True
                break
            budget = self._deliver_to(consumer, events, budget)
        for consumer in self._consumers.values():
            pending = consumer.credit > 0 and self._lag(consumer) > 0
            if consumer.reply_due and not (cut_short and pending):
                events.append(self._credit_reply(consumer))
        if cut_short and self._on_ready is not None:
            self._on_ready(self)
        return events

    def _deliver_to(self, consumer: Consumer, events: list[QueueEvent], budget: int) -> int:
        assert isinstance(consumer, StreamConsumer)
        first = self.first_offset
        consumer.position = max(consumer.position, first)
        entries = self._entries
        readable_end = self._readable_end
        while consumer.credit > 0 and consumer.position < readable_end and budget != 0:
            budget -= 1
            msg = entries[self._head + consumer.position - first]
            consumer.position += 1
            if consumer.accepts is not None and not consumer.accepts(msg.payload):
                continue  # filtered out (3.5.1): no credit spent
            consumer.credit -= 1
            consumer.delivery_count = serial_add(consumer.delivery_count, 1)
            consumer.delivered_total += 1
            self.delivered_total += 1
            if not consumer.settled:
                consumer.unacked[msg.msg_id] = msg
            events.append(Delivery(self, consumer, msg, consumer.settled, consumer.delivery_count))
        return budget

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
        """Any outcome only settles: a stream keeps every entry until retention drops it."""
        unacked = self.consumer(tag).unacked
        settled = 0
        for msg_id in msg_ids:
            if unacked.pop(msg_id, None) is not None:
                settled += 1
                if outcome is Outcome.ACCEPTED:
                    self.acked_total += 1
        return settled

    def __repr__(self) -> str:
        return (
            f"StreamQueue({self.name!r}, offsets={self.first_offset}..{self.next_offset}, "
            f"consumers={len(self._consumers)})"
        )
