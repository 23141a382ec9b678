"""3.2 message format: the bare message goes through the broker unchanged (every body
kind, typed properties and application-properties, byte for byte), and the header
fields the broker should carry (durable, priority, ttl) and message annotations.

Owns the cases `3.2/message-*`.
"""

from __future__ import annotations

import uuid

from amqpspec.amqp10.composites import AmqpSequence, AmqpValue, Data, Header, Properties
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol, timestamp, ubyte, uint, ulong
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.deliveries import roundtrip

IMMUTABLE = (
    "The bare message (properties, application-properties, body) is immutable: an "
    "intermediary MUST NOT change it; only header, annotations and footer may be altered "
    "(3.2)."
)


def _bare(message: Message) -> bytes:
    """The encoded bare message: properties, application-properties and body sections."""
    return Message(
        properties=message.properties,
        application_properties=message.application_properties,
        body=message.body,
    ).encode()


def _same_body(sent: Message):
    def run(probe, ctx):
        got, payload = roundtrip(probe, ctx, sent)
        ctx.check(got.body == sent.body, f"body {got.body!r:.200} != sent {sent.body!r:.200}")
        ctx.check(_bare(sent) in payload, "the bare message bytes changed on the way")

    return run


BODIES = {
    "amqp-value-string": (Message(body=[AmqpValue("héllo wörld")]), "an amqp-value string"),
    "amqp-value-map": (
        Message(body=[AmqpValue({"k": 1, "nested": {"list": [1, "two", 3.0, None, True]}})]),
        "an amqp-value map with nested list and mixed types",
    ),
    "amqp-value-null": (Message(body=[AmqpValue(None)]), "an amqp-value null"),
    "amqp-sequence": (
        Message(body=[AmqpSequence([1, "a"]), AmqpSequence([b"\x00\x01", 2.5])]),
        "two amqp-sequence sections",
    ),
    "data-multiple": (
        Message(body=[Data(b"one"), Data(b""), Data(bytes(range(256)))]),
        "three data sections (one empty)",
    ),
    "data-large": (
        Message(body=[Data(bytes(range(256)) * 800)]),
        "one 204,800-byte data section (multi-frame on most brokers)",
    ),
}

for _slug, (_message, _what) in BODIES.items():
    _run = _same_body(_message)
    _run.__doc__ = f"A message whose body is {_what} goes through a queue: same body, same bytes."
    _run.__name__ = _run.__qualname__ = "message_" + _slug.replace("-", "_")
    case(f"3.2/message-body-{_slug}", MUST, IMMUTABLE, requires={"queues"})(_run)


@case("3.2/message-properties-all-fields", MUST, IMMUTABLE, requires={"queues"})
def properties_all_fields(probe, ctx):
    """Every properties field set (ulong message-id, uuid correlation-id, binary user-id
    left out since brokers may check it): all come out equal."""
    sent = Message(
        properties=Properties(
            message_id=ulong(2**40 + 7),
            to="amqpspec-to",
            subject="subject",
            reply_to="amqpspec-reply",
            correlation_id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
            content_type=symbol("application/octet-stream"),
            content_encoding=symbol("identity"),
            absolute_expiry_time=timestamp(4102444800000),
            creation_time=timestamp(1700000000000),
            group_id="group",
            group_sequence=uint(42),
            reply_to_group_id="reply-group",
        ),
        body=[Data(b"props")],
    )
    got, payload = roundtrip(probe, ctx, sent)
    ctx.check(got.properties == sent.properties, f"properties {got.properties!r}")
    ctx.check(_bare(sent) in payload, "the bare message bytes changed on the way")


@case("3.2/message-application-properties-typed", MUST, IMMUTABLE, requires={"queues"})
def application_properties_typed(probe, ctx):
    """application-properties with string, long, negative, bool, double, timestamp, ubyte
    and null values: identical after the queue."""
    sent = Message(
        application_properties={
            "s": "text",
            "n": 2**40,
            "neg": -5,
            "b": False,
            "d": 1.5,
            "t": timestamp(1700000000123),
            "u": ubyte(7),
            "none": None,
        },
        body=[Data(b"app-props")],
    )
    got, payload = roundtrip(probe, ctx, sent)
    ctx.check(
        got.application_properties == sent.application_properties,
        f"application-properties {got.application_properties!r}",
    )
    ctx.check(_bare(sent) in payload, "the bare message bytes changed on the way")


@case(
    "3.2.1/message-header-durable-kept",
    SHOULD,
    "durable: specify durability requirements; a broker forwarding the message keeps the "
    "header's durable flag (the header is the transport's, but its meaning persists).",
    requires={"queues"},
)
def header_durable(probe, ctx):
    """A durable message: the delivered header says durable."""
    got, _ = roundtrip(probe, ctx, Message(header=Header(durable=True), body=[Data(b"d")]))
    ctx.check(got.header is not None and got.header.durable, f"header {got.header!r}")


@case(
    "3.2.1/message-header-priority-kept",
    SHOULD,
    "priority: relative message priority; an intermediary that does not change priority "
    "passes it on.",
    requires={"queues"},
)
def header_priority(probe, ctx):
    """A message with priority 7: the delivered header has priority 7."""
    got, _ = roundtrip(probe, ctx, Message(header=Header(priority=ubyte(7)), body=[Data(b"p")]))
    priority = got.header.priority if got.header is not None else None
    ctx.check(priority == 7, f"priority {priority}")


@case(
    "3.2.1/message-header-ttl-kept",
    SHOULD,
    "ttl: time to live in ms; an intermediary passes it on (reduced by the time it held "
    "the message at most).",
    requires={"queues"},
)
def header_ttl(probe, ctx):
    """A message with ttl 600,000 ms: the delivered header has a ttl in (0, 600000]."""
    got, _ = roundtrip(probe, ctx, Message(header=Header(ttl=uint(600000)), body=[Data(b"t")]))
    ttl = got.header.ttl if got.header is not None else None
    ctx.check(ttl is not None and 0 < ttl <= 600000, f"ttl {ttl}")


@case(
    "3.2.3/message-annotations-kept",
    SHOULD,
    "message-annotations: properties of the message aimed at the infrastructure; they are "
    "propagated across every delivery step (an intermediary may add its own).",
    requires={"queues"},
)
def annotations_kept(probe, ctx):
    """A message annotation x-opt-amqpspec = 'kept': present on delivery."""
    sent = Message(
        message_annotations={symbol("x-opt-amqpspec"): "kept"}, body=[Data(b"annotated")]
    )
    got, _ = roundtrip(probe, ctx, sent)
    annotations = got.message_annotations or {}
    ctx.check(annotations.get("x-opt-amqpspec") == "kept", f"annotations {annotations!r}")


@case(
    "3.2/message-bare-with-odd-header",
    MUST,
    "first-acquirer describes this delivery; delivery-count counts failed attempts. A "
    "message's bare part is unchanged whatever its header says (3.2).",
    requires={"queues"},
)
def header_odd_values(probe, ctx):
    """A message sent with header delivery-count 3 and first-acquirer false (as if
    redelivered upstream): its bare message arrives unchanged."""
    sent = Message(
        header=Header(delivery_count=uint(3), first_acquirer=False),
        properties=Properties(message_id="odd-header"),
        body=[Data(b"odd")],
    )
    got, payload = roundtrip(probe, ctx, sent)
    ctx.check(_bare(sent) in payload, "the bare message bytes changed on the way")
    ctx.check(got.properties == sent.properties, f"properties {got.properties!r}")
