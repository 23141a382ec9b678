"""A vhost's durable definitions: what of its queues, exchanges and bindings the data dir
keeps (store.DefinitionsFile writes it atomically), and their recovery at start.

Owns: the JSON shape of the definitions (durable queues with their arguments, durable
exchanges other than the default and `amq.*` ones, the bindings between durable ones) and
the order of recovery (exchanges, queues with their recovered messages, bindings). May
touch: the vhost through its declare and bind methods only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .classic import ClassicQueue
from .exchanges import DEFAULT_EXCHANGE, Binding, Exchange
from .store import Recovered


class Declaring(Protocol):
    """What recovery needs of a vhost (vhost.VirtualHost)."""

    queues: dict[str, ClassicQueue]
    exchanges: dict[str, Exchange]

    def declare_exchange(
        self, name: str, ex_type: str, **options: Any
    ) -> tuple[Exchange, bool]: ...

    def declare_queue(self, name: str, **options: Any) -> tuple[ClassicQueue, bool]: ...

    def bind(
        self,
        exchange: str,
        queue: str,
        routing_key: str,
        arguments: Mapping[str, Any] | None = None,
    ) -> Binding: ...


def definitions_of(queues: Iterable[ClassicQueue], exchanges: Iterable[Exchange]) -> dict[str, Any]:
    """The definitions to save: durable queues, exchanges and the bindings between them."""
    durable_queues = {q.name: q for q in queues if q.durable}
    exchanges = list(exchanges)
    return {
        "queues": [
            {
                "name": q.name,
                "durable": True,
                "auto_delete": q.auto_delete,
                "arguments": q.arguments,
            }
            for q in durable_queues.values()
        ],
        "exchanges": [
            {
                "name": e.name,
                "type": e.type,
                "durable": True,
                "auto_delete": e.auto_delete,
                "internal": e.internal,
                "arguments": e.arguments,
            }
            for e in exchanges
            if e.durable and e.name != DEFAULT_EXCHANGE and not e.name.startswith("amq.")
        ],
        "bindings": [
            {
                "source": b.source,
                "destination": b.destination,
                "routing_key": b.routing_key,
                "arguments": dict(b.arguments),
            }
            for e in exchanges
            if e.durable
            for b in e.bindings
            if b.destination in durable_queues
        ],
    }


def restore_definitions(vhost: Declaring, saved: Mapping[str, Any], recovered: Recovered) -> None:
    """Declare what `saved` holds, in order: exchanges, queues (with the messages the store
    recovered for each, and their ids reserved), bindings whose both ends exist."""
    for ex in saved.get("exchanges", []):
        vhost.declare_exchange(
            ex["name"],
            ex["type"],
            durable=True,
            auto_delete=ex.get("auto_delete", False),
            internal=ex.get("internal", False),
            arguments=ex.get("arguments"),
        )
    for q in saved.get("queues", []):
        queue, _ = vhost.declare_queue(
            q["name"],
            durable=True,
            auto_delete=q.get("auto_delete", False),
            arguments=q.get("arguments"),
        )
        queue.restore(recovered.messages.get(queue.name, ()))
        queue.reserve_ids_after(recovered.highest_ids.get(queue.name, 0))
    for b in saved.get("bindings", []):
        if b["source"] in vhost.exchanges and b["destination"] in vhost.queues:
            vhost.bind(b["source"], b["destination"], b["routing_key"], b.get("arguments"))
