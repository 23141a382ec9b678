"""The broker state the admin API and the protocol layer share: one virtual host "/".

Owns: the registry of queues, exchanges, bindings, dynamic (temporary) queues, the
connection summaries shown by the admin API, saving durable definitions and recovery from
the data dir (their shape and order: definitions.py; each queue kind built by kinds.py).
May touch: queues, exchanges, store (through their APIs). No AMQP bytes, no I/O other than
the store's files, no clock.

Protocol-layer entry points:
- `resolve_target(address)` / `resolve_source(address)` -> the queue or exchange, raising
  `NotFoundError` (amqp:not-found) or `AddressError` (amqp:invalid-field / not-allowed).
- `publish(target, payload, to=..., subject=..., headers=...)` -> `PublishResult` with the
  queues it reached, the store tokens to wait for, and `released` when unroutable.
- `dispatch_pending()` -> Delivery / CreditReply events of every queue that may have work.
- `owners` (owners.py): `create_dynamic_queue(owner)` / `release_owner(owner)` for reply-to
  queues (3.5.3 dynamic); `declare_exclusive_queue(name, owner)` / `check_exclusive(name,
  owner)`: queues only their declaring connection may use (RabbitMQ's exclusive queues,
  declared through /management), refused to others with `ResourceLockedError`
  (amqp:resource-locked), deleted with it.
- `cancel_consumer(queue, tag)` on detach / end / close / connection loss (requeues).
- `listeners`: callbacks told when a queue or an exchange is deleted ("queue.deleted",
  "exchange.deleted": its consumers and publishers must be detached).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..faults.catalog import NO_FAULTS, Faults
from .addressing import Address, AddressError, AddressKind, parse_source, parse_target, parse_to
from .classic import ClassicQueue, QueuedMessage, QueueEvent
from .definitions import definitions_of, restore_definitions
from .errors import NotAllowedError, NotFoundError, PreconditionFailedError
from .exchanges import (
    DEFAULT_EXCHANGE,
    STANDARD_EXCHANGES,
    Binding,
    DefaultExchange,
    Exchange,
    ExchangeError,
    freeze_arguments,
)
from .kinds import Declaration, QueueKinds
from .owners import QueueOwners
from .store import DefinitionsFile, MessageStore
from .streams import StreamQueue

QUEUE_TYPES = ("classic", "stream", "quorum")  # x-queue-type values this broker declares


@dataclass(slots=True)
class ConnectionSummary:
    """What the admin API shows about one AMQP connection (kept up to date by its owner)."""

    name: str
    peer_host: str
    peer_port: int
    host: str
    port: int
    user: str = "anonymous"
    container_id: str | None = None
    protocol: str = "AMQP 1-0"
    channels: int = 0
    connected_at: float = 0.0
    frames_in: int = 0  # AMQP/SASL frames, heartbeats included (the engine's counters)
    frames_out: int = 0
    bytes_in: int = 0  # every byte read / written, protocol headers included
    bytes_out: int = 0
    client_properties: dict[str, Any] = field(default_factory=dict)
    # closes the connection with amqp:connection:forced (the admin API's DELETE)
    close_forced: Callable[[str], None] | None = field(default=None, repr=False)
    # sets the connection's transaction timeout in seconds (the admin API's PUT
    # /api/connections/{name}/transaction-timeout; features/transactions.py)
    set_transaction_timeout: Callable[[float], None] | None = field(default=None, repr=False)


_QUEUE = AddressKind.QUEUE  # publish()'s test as a plain global (an Enum lookup costs more)


@dataclass(slots=True)
class PublishResult:
    """Where one message went. `released`: unroutable (answer with released, 3.4.4)."""

    queues: list[ClassicQueue]
    tokens: list[int]
    released: bool


class VirtualHost:
    def __init__(
        self,
        name: str = "/",
        *,
        faults: Faults = NO_FAULTS,
        data_dir: str | os.PathLike[str] | None = None,
        fsync: bool = True,
        clock: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.name = name
        self.clock = clock  # injected (the broker's scheduler): stream timestamps and age
        self.faults = faults
        self.queues: dict[str, ClassicQueue] = {}
        self.exchanges: dict[str, Exchange] = {DEFAULT_EXCHANGE: DefaultExchange(self.has_queue)}
        for ex_name, ex_type in STANDARD_EXCHANGES.items():
            self.exchanges[ex_name] = Exchange(ex_name, ex_type, durable=True)
        self.connections: dict[str, ConnectionSummary] = {}
        self._dirty: dict[str, ClassicQueue] = {}
        self.owners = QueueOwners(self)  # dynamic and exclusive queues' owners (owners.py)
        self.listeners: list[Callable[[str, Any], None]] = []  # (event, queue or exchange)
        self.store: MessageStore | None = None
        self.definitions: DefinitionsFile | None = None
        if data_dir is not None:
            self.store = MessageStore.open(data_dir, fsync=fsync)
        # the queue kinds' construction, dead-lettering included (kinds.py)
        self.kinds = QueueKinds(
            name, self.queues, self.exchanges, faults, self.store, clock, self._mark_dirty
        )
        if data_dir is not None:
            self.definitions = DefinitionsFile(data_dir)
            self._load_definitions()

    # ------------------------------------------------------------------ queues
    def has_queue(self, name: str) -> bool:
        return name in self.queues

    def get_queue(self, name: str) -> ClassicQueue:
        queue = self.queues.get(name)
        if queue is None:
            raise NotFoundError(f"no queue '{name}' in vhost '{self.name}'")
        return queue

    def declare_queue(
        self,
        name: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        arguments: Mapping[str, Any] | None = None,
        exclusive_owner: Any = None,
    ) -> tuple[ClassicQueue, bool]:
        """Create a queue or check an existing one's properties. Returns (queue, created)."""
        arguments = dict(arguments or {})
        queue_type = arguments.get("x-queue-type", "classic")
        if queue_type not in QUEUE_TYPES:
            raise PreconditionFailedError(
                f"queue type '{queue_type}' is not supported (classic or stream)"
            )
        if not name or len(name.encode("utf-8")) > 255:
            raise PreconditionFailedError("queue names are 1 to 255 bytes")
        existing = self.queues.get(name)
        if existing is not None:
            if existing.durable != durable or existing.auto_delete != auto_delete:
                raise PreconditionFailedError(
                    f"inequivalent arg 'durable' or 'auto_delete' for queue '{name}' in vhost "
                    f"'{self.name}': received durable={durable} auto_delete={auto_delete} but "
                    f"current is durable={existing.durable} auto_delete={existing.auto_delete}"
                )
            if existing.queue_type != queue_type:
                raise PreconditionFailedError(
                    f"inequivalent arg 'x-queue-type' for queue '{name}' in vhost "
                    f"'{self.name}': received '{queue_type}' but current is "
                    f"'{existing.queue_type}'"
                )
            return existing, False
        declared = Declaration(queue_type, name, durable, auto_delete, exclusive_owner, arguments)
        try:
            self.kinds.check(declared)
        except ValueError as exc:
            raise PreconditionFailedError(str(exc)) from None
        queue = self.kinds.new(declared)
        self.queues[name] = queue
        if durable:
            self._save_definitions()
        return queue, True

    def delete_queue(self, name: str, *, if_unused: bool = False, if_empty: bool = False) -> int:
        """Delete a queue and its bindings; returns how many messages it held."""
        queue = self.get_queue(name)
        if if_unused and queue.consumers:
            raise PreconditionFailedError(f"queue '{name}' in vhost '{self.name}' in use")
        if if_empty and queue.messages:
            raise PreconditionFailedError(f"queue '{name}' in vhost '{self.name}' not empty")
        count = queue.messages
        del self.queues[name]
        self._dirty.pop(name, None)
        self.owners.forget(name)
        for exchange in self.exchanges.values():
            if exchange.name != DEFAULT_EXCHANGE:
                exchange.remove_bindings_to(name)
        if queue.durable and self.store is not None:
            self.store.append_purge(name)
            self._save_definitions()
        for listener in list(self.listeners):
            listener("queue.deleted", queue)
        return count

    def purge_queue(self, name: str) -> int:
        return self.get_queue(name).purge()

    def cancel_consumer(self, queue: ClassicQueue, tag: str) -> list[QueuedMessage]:
        """A consumer link detached or its session/connection ended: requeue its unsettled
        deliveries (2.6.6; RabbitMQ 4 treats every detach as closed), auto-delete the queue
        if that was its last consumer. Returns the requeued messages. Call
        `dispatch_pending()` afterwards: other consumers may now get them."""
        requeued = queue.remove_consumer(tag)
        self.consumer_removed(queue)
        return requeued

    def consumer_removed(self, queue: ClassicQueue) -> None:
        """Call after queue.remove_consumer: auto-delete queues go with their last consumer."""
        if (
            queue.auto_delete
            and queue.had_consumers
            and not queue.consumers
            and self.queues.get(queue.name) is queue
        ):
            self.delete_queue(queue.name)

    # ------------------------------------------------------------------ exchanges
    def get_exchange(self, name: str) -> Exchange:
        exchange = self.exchanges.get(name)
        if exchange is None:
            raise NotFoundError(f"no exchange '{name}' in vhost '{self.name}'")
        return exchange

    def declare_exchange(
        self,
        name: str,
        type: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> tuple[Exchange, bool]:
        if name == DEFAULT_EXCHANGE or name.startswith("amq."):
            existing = self.exchanges.get(name)
            if existing is not None and existing.type == type:
                return existing, False
            raise NotAllowedError(f"exchange name '{name}' contains reserved prefix 'amq.'")
        existing = self.exchanges.get(name)
        if existing is not None:
            if existing.type != type or existing.durable != durable:
                raise PreconditionFailedError(
                    f"inequivalent arg 'type' or 'durable' for exchange '{name}' in vhost "
                    f"'{self.name}': received '{type}' but current is '{existing.type}'"
                )
            return existing, False
        try:
            exchange = Exchange(name, type, durable, auto_delete, internal, dict(arguments or {}))
        except ExchangeError as exc:
            raise PreconditionFailedError(str(exc)) from None
        self.exchanges[name] = exchange
        if durable:
            self._save_definitions()
        return exchange, True

    def delete_exchange(self, name: str, *, if_unused: bool = False) -> None:
        if name == DEFAULT_EXCHANGE or name.startswith("amq."):
            raise NotAllowedError(f"cannot delete exchange '{name}'")
        exchange = self.get_exchange(name)
        if if_unused and exchange.bindings:
            raise PreconditionFailedError(f"exchange '{name}' in vhost '{self.name}' in use")
        del self.exchanges[name]
        if exchange.durable:
            self._save_definitions()
        for listener in list(self.listeners):
            listener("exchange.deleted", exchange)

    # ------------------------------------------------------------------ bindings
    def bind(
        self,
        exchange: str,
        queue: str,
        routing_key: str = "",
        arguments: Mapping[str, Any] | None = None,
    ) -> Binding:
        ex = self.get_exchange(exchange)
        if ex.name == DEFAULT_EXCHANGE:
            raise NotAllowedError("operation not permitted on the default exchange")
        q = self.get_queue(queue)
        binding = Binding(exchange, queue, routing_key, freeze_arguments(arguments))
        try:
            ex.add_binding(binding)
        except ExchangeError as exc:
            raise PreconditionFailedError(str(exc)) from None
        if ex.durable and q.durable:
            self._save_definitions()
        return binding

    def unbind(self, exchange: str, queue: str, properties_key: str) -> Binding:
        ex = self.get_exchange(exchange)
        for binding in ex.bindings:
            if binding.destination == queue and binding.properties_key == properties_key:
                ex.remove_binding(binding)
                self._save_definitions()
                return binding
        raise NotFoundError(f"no binding {exchange} -> {queue} with props '{properties_key}'")

    def bindings(self) -> list[Binding]:
        """Every binding including the default exchange's implicit ones (as RabbitMQ lists)."""
        implicit = [Binding(DEFAULT_EXCHANGE, name, name) for name in self.queues]
        explicit = [b for ex in self.exchanges.values() for b in ex.bindings]
        return implicit + explicit

    # ------------------------------------------------------------------ addresses
    def resolve_target(self, address: str | None) -> Address:
        """Parse and check a target address; the anonymous terminus is always fine."""
        parsed = parse_target(address)
        self._check_exists(parsed)
        return parsed

    def resolve_source(self, address: str | None) -> ClassicQueue:
        """Parse a source address and return the queue to consume from (v1 `/queue/:q`
        declares it; v1 exchange sources are not supported by this broker)."""
        parsed = parse_source(address)
        if parsed.kind is not AddressKind.QUEUE or parsed.queue is None:
            raise AddressError(address, "exchange sources (v1) are not supported; use /queues/")
        if parsed.declare and parsed.queue not in self.queues:
            self.declare_queue(parsed.queue, durable=True)
        return self.get_queue(parsed.queue)

    def _check_exists(self, parsed: Address) -> None:
        if parsed.kind is AddressKind.QUEUE and parsed.queue is not None:
            if parsed.declare and parsed.queue not in self.queues:
                self.declare_queue(parsed.queue, durable=True)
            self.get_queue(parsed.queue)
        elif parsed.kind is AddressKind.EXCHANGE and parsed.exchange is not None:
            self.get_exchange(parsed.exchange)

    # ------------------------------------------------------------------ publish
    def route(
        self,
        target: Address,
        *,
        to: str | None = None,
        subject: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> list[ClassicQueue]:
        """The queues a message reaches. Raises AddressError / NotFoundError for a bad `to`."""
        if target.kind is AddressKind.ANONYMOUS:
            target = parse_to(to)
            self._check_exists(target)
        if target.kind is AddressKind.QUEUE:
            name = subject if target.queue_from_subject else target.queue
            queue = self.queues.get(name or "")
            return [queue] if queue is not None else []
        exchange = self.get_exchange(target.exchange or "")
        key = target.routing_key if target.routing_key is not None else (subject or "")
        queues = self.queues
        return [queues[n] for n in exchange.route(key, headers) if n in queues]

    def publish(
        self,
        target: Address,
        payload: bytes,
        *,
        to: str | None = None,
        subject: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> PublishResult:
        """Route and enqueue. Durable queues give store tokens: confirm (accepted) only
        when the store says they are durable; unroutable gives released=True."""
        if target.kind is _QUEUE and not target.queue_from_subject:
            queue = self.queues.get(target.queue or "")  # route(), for the common target
            if queue is None:
                return PublishResult([], [], True)
            token = queue.publish(payload)[1]
            return PublishResult([queue], [] if token is None else [token], False)
        queues = self.route(target, to=to, subject=subject, headers=headers)
        tokens: list[int] = []
        for queue in queues:
            _, token = queue.publish(payload)
            if token is not None:
                tokens.append(token)
        return PublishResult(queues, tokens, not queues)

    # ------------------------------------------------------------------ dispatch
    def commit_streams(self, durable_through: int) -> bool:
        """The store is durable through `durable_through`: streams deliver what it covers
        (StreamQueue.commit). True if any stream has entries newly readable."""
        return any(
            [q.commit(durable_through) for q in self.queues.values() if isinstance(q, StreamQueue)]
        )

    def _mark_dirty(self, queue: ClassicQueue) -> None:
        self._dirty[queue.name] = queue

    def dispatch_pending(self, limit: int | None = None) -> list[QueueEvent]:
        """Run dispatch on every queue that may have deliveries or credit replies due.
        With `limit` (deliveries per queue), one pass only: queues with work left stay
        pending (`dispatch_due`) for the next call, so the caller can write in between."""
        events: list[QueueEvent] = []
        while self._dirty:
            dirty = list(self._dirty.values())
            self._dirty.clear()
            for queue in dirty:
                if self.queues.get(queue.name) is queue:
                    events.extend(queue.dispatch(limit))
            if limit is not None:
                break
        return events

    @property
    def dispatch_due(self) -> bool:
        """Some queue may have deliveries or credit replies to hand out."""
        return bool(self._dirty)

    # ------------------------------------------------------------------ connections
    def register_connection(self, summary: ConnectionSummary) -> None:
        self.connections[summary.name] = summary

    def unregister_connection(self, name: str) -> None:
        self.connections.pop(name, None)

    # ------------------------------------------------------------------ durability
    def _save_definitions(self) -> None:
        if self.definitions is not None:
            self.definitions.save(definitions_of(self.queues.values(), self.exchanges.values()))

    def _load_definitions(self) -> None:
        """Recovery from the data dir: the saved definitions, each durable queue's messages."""
        assert self.definitions is not None and self.store is not None
        loading = self.definitions
        self.definitions = None  # no re-saving while loading
        try:
            restore_definitions(self, loading.load(), self.store.recovered)
        finally:
            self.definitions = loading

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
