"""Exchanges and bindings: direct, fanout, topic, headers and the default exchange.

Owns: routing a (routing key, headers) pair to a set of queue names, and the binding table
of each exchange. Plain Python; knows queues only by name (the vhost resolves them). The
caller answers an unroutable message (empty result) with `released`, as RabbitMQ 4 does.

Semantics follow AMQP 0-9-1 / RabbitMQ:
- direct: binding key == routing key.
- fanout: every bound queue.
- topic: keys are words separated by "."; in a binding key "*" matches exactly one word
  and "#" zero or more words. The empty key is zero words (so "#" matches it, "*" not).
- headers: `x-match` = all (default) | any | all-with-x | any-with-x over the binding
  arguments; the message headers are its application-properties. Arguments starting
  with "x-" take part only in the -with-x variants.
- default exchange "": routes to the queue whose name is the routing key (implicit
  bindings; explicit binding to or from it is not allowed).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")
DEFAULT_EXCHANGE = ""
# pre-declared like RabbitMQ's: name -> type
STANDARD_EXCHANGES: Mapping[str, str] = {
    "amq.direct": "direct",
    "amq.fanout": "fanout",
    "amq.topic": "topic",
    "amq.headers": "headers",
    "amq.match": "headers",
}


class ExchangeError(ValueError):
    """A bad exchange type, binding or declaration."""


@dataclass(frozen=True, slots=True)
class Binding:
    source: str
    destination: str
    routing_key: str = ""
    arguments: tuple[tuple[str, Any], ...] = ()
    destination_type: str = "queue"

    @property
    def arguments_dict(self) -> dict[str, Any]:
        return dict(self.arguments)

    @property
    def properties_key(self) -> str:
        """RabbitMQ management's binding "props" id: `~` for empty key and no arguments,
        the (quoted) key alone without arguments, else key~hash(arguments)."""
        if not self.arguments:
            return "~" if self.routing_key == "" else quote_binding_key(self.routing_key)
        return f"{quote_binding_key(self.routing_key)}~{arguments_hash(self.arguments)}"


def quote_binding_key(key: str) -> str:
    """RabbitMQ management's quoting of a key inside a props id: ASCII alphanumerics and
    -_. stay, a space becomes +, every other byte of the UTF-8 form is %XX."""
    out = []
    for byte in key.encode("utf-8"):
        ch = chr(byte)
        if byte < 128 and (ch.isalnum() or ch in "-_."):
            out.append(ch)
        elif ch == " ":
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def arguments_hash(arguments: Iterable[tuple[str, Any]]) -> str:
    canonical = json.dumps(sorted(arguments), sort_keys=True, default=str).encode()
    return base64.urlsafe_b64encode(hashlib.sha1(canonical).digest()[:9]).decode()


def freeze_arguments(arguments: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    if not arguments:
        return ()
    return tuple(sorted((str(k), _freeze(v)) for k, v in arguments.items()))


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


# --------------------------------------------------------------------- topic matching
def topic_words(key: str) -> list[str]:
    """Split a topic routing/binding key into words; "" is zero words (as RabbitMQ)."""
    return key.split(".") if key else []


def topic_matches(binding_key: str, routing_key: str) -> bool:
    """AMQP 0-9-1 topic match: '*' = exactly one word, '#' = zero or more words."""
    return _match_words(topic_words(binding_key), topic_words(routing_key))


def _match_words(pattern: list[str], words: list[str]) -> bool:
    # iterative DP over (pattern index, word index) - linear in len(pattern) * len(words)
    n_words = len(words)
    reachable = {0}
    for token in pattern:
        nxt: set[int] = set()
        if token == "#":
            low = min(reachable)
            nxt.update(range(low, n_words + 1))
        else:
            for i in reachable:
                if i < n_words and (token == "*" or token == words[i]):
                    nxt.add(i + 1)
        if not nxt:
            return False
        reachable = nxt
    return n_words in reachable


# --------------------------------------------------------------------- headers matching
def headers_match(arguments: Mapping[str, Any], headers: Mapping[str, Any] | None) -> bool:
    headers = headers or {}
    mode = str(arguments.get("x-match", "all"))
    with_x = mode.endswith("-with-x")
    mode = mode.removesuffix("-with-x")
    if mode not in ("all", "any"):
        raise ExchangeError(f"invalid x-match {arguments.get('x-match')!r}")
    pairs = [
        (k, v)
        for k, v in arguments.items()
        if k != "x-match" and (with_x or not k.startswith("x-"))
    ]
    if mode == "all":
        return all(k in headers and headers[k] == v for k, v in pairs)
    return any(k in headers and headers[k] == v for k, v in pairs)


# --------------------------------------------------------------------- exchanges
@dataclass(slots=True)
class Exchange:
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    bindings: list[Binding] = field(default_factory=list)
    routed_total: int = 0
    unroutable_total: int = 0
    _direct: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in EXCHANGE_TYPES:
            raise ExchangeError(f"invalid exchange type {self.type!r}")

    def add_binding(self, binding: Binding) -> bool:
        """Add; returns False if an identical binding exists (binding is idempotent)."""
        if binding in self.bindings:
            return False
        if self.type == "headers":
            headers_match(binding.arguments_dict, {})  # validates x-match
        self.bindings.append(binding)
        if self.type == "direct":
            self._direct.setdefault(binding.routing_key, []).append(binding.destination)
        return True

    def remove_binding(self, binding: Binding) -> bool:
        if binding not in self.bindings:
            return False
        self.bindings.remove(binding)
        if self.type == "direct":
            dests = self._direct[binding.routing_key]
            dests.remove(binding.destination)
            if not dests:
                del self._direct[binding.routing_key]
        return True

    def remove_bindings_to(self, queue: str) -> list[Binding]:
        gone = [b for b in self.bindings if b.destination == queue]
        for binding in gone:
            self.remove_binding(binding)
        return gone

    def route(self, routing_key: str, headers: Mapping[str, Any] | None = None) -> list[str]:
        """Queue names this message goes to, each once, in binding order."""
        kind = self.type
        if kind == "direct":
            found = self._direct.get(routing_key, ())
        elif kind == "fanout":
            found = [b.destination for b in self.bindings]
        elif kind == "topic":
            words = topic_words(routing_key)
            found = [
                b.destination
                for b in self.bindings
                if _match_words(topic_words(b.routing_key), words)
            ]
        else:
            found = [
                b.destination for b in self.bindings if headers_match(b.arguments_dict, headers)
            ]
        result = list(dict.fromkeys(found))
        if result:
            self.routed_total += 1
        else:
            self.unroutable_total += 1
        return result


class DefaultExchange(Exchange):
    """The nameless direct exchange with an implicit binding to every queue (by name)."""

    __slots__ = ("_queue_exists",)

    def __init__(self, queue_exists: Callable[[str], bool]) -> None:
        super().__init__(DEFAULT_EXCHANGE, "direct", durable=True)
        self._queue_exists = queue_exists

    def add_binding(self, binding: Binding) -> bool:
        raise ExchangeError("operation not permitted on the default exchange")

    def remove_binding(self, binding: Binding) -> bool:
        raise ExchangeError("operation not permitted on the default exchange")

    def route(self, routing_key: str, headers: Mapping[str, Any] | None = None) -> list[str]:
        if self._queue_exists(routing_key):
            self.routed_total += 1
            return [routing_key]
        self.unroutable_total += 1
        return []
