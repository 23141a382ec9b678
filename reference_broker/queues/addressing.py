"""Link addresses, RabbitMQ 4 style: v2 (`/queues/..`, `/exchanges/..`, null) and v1 aliases.

Owns: turning a source/target address string (or a message `to`) into an `Address`, and
building v2 address strings. Syntax only: whether the queue/exchange exists is the vhost's
business (the protocol layer answers a missing one with amqp:not-found). A malformed
address raises `AddressError` whose `condition` is the AMQP error to send (2.8.15).

v2 (RabbitMQ 4.0 "Address v2"): every name segment is percent-encoded (RFC 3986 2.1).
- target: `/exchanges/:exchange/:routing-key`, `/exchanges/:exchange` (key ""),
  `/queues/:queue`, or null (then each message's `to`, in one of these three forms).
  The default exchange ("" or amq.default) may not be named in /exchanges/ forms.
- source: `/queues/:queue` only.
v1 (RabbitMQ 3.x, deprecated; no percent-decoding): targets `/exchange/:x/:key`,
`/exchange/:x` (key from the message subject), `/topic/:key` (amq.topic), `/amq/queue/:q`,
`/queue/:q` (declares the queue), `:q` (bare, declares), `/queue` (queue from the subject);
sources `/exchange/:x/:binding-key` and `/topic/:key` (a private bound queue), `/amq/queue/:q`,
`/queue/:q` and `:q` (declare).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from urllib.parse import quote

INVALID_FIELD = "amqp:invalid-field"
PRECONDITION_FAILED = "amqp:precondition-failed"
NOT_ALLOWED = "amqp:not-allowed"

# RFC 3986 unreserved characters are left as they are; everything else is %XX (UTF-8)
_UNRESERVED = "-._~"


class AddressError(ValueError):
    """An address that cannot be used; `condition` is the AMQP error condition to send."""

    def __init__(self, address: object, reason: str, condition: str = INVALID_FIELD) -> None:
        super().__init__(f"address {address!r}: {reason}")
        self.address = address
        self.reason = reason
        self.condition = condition


class AddressKind(Enum):
    QUEUE = "queue"
    EXCHANGE = "exchange"
    ANONYMOUS = "anonymous"  # null target: each message's `to` routes it


@dataclass(frozen=True, slots=True)
class Address:
    kind: AddressKind
    version: int  # 2 or 1
    queue: str | None = None
    exchange: str | None = None
    routing_key: str | None = None  # None: take it from the message subject (v1 only)
    declare: bool = False  # v1 `/queue/:q` and `:q`: declare the queue if missing
    queue_from_subject: bool = False  # v1 `/queue`: the queue name is the subject
    raw: str | None = None

    @property
    def is_v1(self) -> bool:
        return self.version == 1


ANONYMOUS_TARGET = Address(AddressKind.ANONYMOUS, 2)


def encode_segment(name: str) -> str:
    """Percent-encode one name for a v2 address (RFC 3986 unreserved stay as they are)."""
    return quote(name, safe=_UNRESERVED)


def queue_address(queue: str) -> str:
    return "/queues/" + encode_segment(queue)


def exchange_address(exchange: str, routing_key: str | None = None) -> str:
    base = "/exchanges/" + encode_segment(exchange)
    return base if routing_key is None else base + "/" + encode_segment(routing_key)


def decode_segment(segment: str, address: str) -> str:
    """Strict RFC 3986 percent-decoding of one segment into UTF-8 text."""
    if "%" not in segment:
        return segment
    out = bytearray()
    i = 0
    n = len(segment)
    while i < n:
        ch = segment[i]
        if ch == "%":
            hex_digits = segment[i + 1 : i + 3]
            if len(hex_digits) != 2 or not all(c in "0123456789abcdefABCDEF" for c in hex_digits):
                raise AddressError(address, f"bad percent-encoding at offset {i}")
            out.append(int(hex_digits, 16))
            i += 3
        else:
            out.extend(ch.encode("utf-8"))
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise AddressError(address, "percent-encoded bytes are not UTF-8") from None


def _v2_exchange(address: str, rest: list[str]) -> Address:
    if len(rest) not in (1, 2):
        raise AddressError(address, "expected /exchanges/:exchange[/:routing-key]")
    exchange = decode_segment(rest[0], address)
    if exchange in ("", "amq.default"):
        raise AddressError(
            address, "the default exchange cannot be named; use /queues/:queue", NOT_ALLOWED
        )
    key = decode_segment(rest[1], address) if len(rest) == 2 else ""
    return Address(AddressKind.EXCHANGE, 2, exchange=exchange, routing_key=key, raw=address)


def _v2_queue(address: str, rest: list[str]) -> Address:
    if len(rest) != 1 or rest[0] == "":
        raise AddressError(address, "expected /queues/:queue with a non-empty queue name")
    return Address(AddressKind.QUEUE, 2, queue=decode_segment(rest[0], address), raw=address)


def _non_empty(address: str, name: str, what: str) -> str:
    if not name:
        raise AddressError(address, f"empty {what}")
    return name


def parse_target(address: str | None, *, allow_v1: bool = True) -> Address:
    """Parse a target address (3.5.4 target.address); None is the anonymous terminus."""
    if address is None:
        return ANONYMOUS_TARGET
    if not isinstance(address, str):
        raise AddressError(address, "address must be a string")
    parts = address.split("/")
    if address.startswith("/exchanges/"):
        return _v2_exchange(address, parts[2:])
    if address.startswith("/queues/"):
        return _v2_queue(address, parts[2:])
    if not allow_v1:
        raise AddressError(address, "not a v2 address (/queues/:q or /exchanges/:x[/:key])")
    return _parse_v1(address, parts, source=False)


def parse_source(address: str | None, *, allow_v1: bool = True) -> Address:
    """Parse a source address (3.5.3 source.address). v2 allows `/queues/:queue` only."""
    if address is None:
        raise AddressError(address, "a source needs an address (or dynamic=true)")
    if not isinstance(address, str):
        raise AddressError(address, "address must be a string")
    parts = address.split("/")
    if address.startswith("/queues/"):
        return _v2_queue(address, parts[2:])
    if address.startswith("/exchanges/"):
        raise AddressError(address, "v2 sources are /queues/:queue only")
    if not allow_v1:
        raise AddressError(address, "not a v2 source address (/queues/:queue)")
    return _parse_v1(address, parts, source=True)


def parse_to(to: str | None) -> Address:
    """The `to` of a message sent on an anonymous (null) target: a v2 target string. None or
    a bad string is amqp:precondition-failed (RabbitMQ 4, after the anonymous terminus
    spec's routing errors: the delivery is rejected with it)."""
    if to is None:
        raise AddressError(
            to, "anonymous terminus requires 'to' address to be set", PRECONDITION_FAILED
        )
    try:
        address = parse_target(to, allow_v1=False)
    except AddressError as exc:
        raise AddressError(
            to, f"bad 'to' address string: {exc.reason}", PRECONDITION_FAILED
        ) from None
    if address.kind is AddressKind.ANONYMOUS:  # pragma: no cover - parse_target(str) never is
        raise AddressError(to, "to cannot be null")
    return address


def _parse_v1(address: str, parts: list[str], *, source: bool) -> Address:
    if not address.startswith("/"):
        if not address or "/" in address:
            raise AddressError(address, "unknown address format")
        return Address(AddressKind.QUEUE, 1, queue=address, declare=True, raw=address)
    head = parts[1]
    rest = parts[2:]
    if head == "amq" and len(rest) == 2 and rest[0] == "queue":
        name = _non_empty(address, rest[1], "queue name")
        return Address(AddressKind.QUEUE, 1, queue=name, raw=address)
    if head == "queue":
        if not rest and not source:
            return Address(AddressKind.QUEUE, 1, queue_from_subject=True, raw=address)
        if len(rest) == 1:
            name = _non_empty(address, rest[0], "queue name")
            return Address(AddressKind.QUEUE, 1, queue=name, declare=True, raw=address)
    if head == "exchange" and len(rest) in (1, 2):
        exchange = _non_empty(address, rest[0], "exchange name")
        if len(rest) == 1 and source:
            raise AddressError(address, "a v1 exchange source needs a binding key")
        key = rest[1] if len(rest) == 2 else None
        return Address(AddressKind.EXCHANGE, 1, exchange=exchange, routing_key=key, raw=address)
    if head == "topic" and len(rest) == 1:
        return Address(
            AddressKind.EXCHANGE, 1, exchange="amq.topic", routing_key=rest[0], raw=address
        )
    raise AddressError(address, "unknown address format")
