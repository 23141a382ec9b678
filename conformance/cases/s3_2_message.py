"""3.2 message format: the bare message goes through the broker unchanged, compared section
by section and byte for byte (steps/messages.py): every body kind, properties and
application-properties present or omitted, annotations and a footer around the bare
message, an empty properties section, a properties section in an encoding other than the
smallest; the header fields the broker should carry (durable, priority, ttl) and
message annotations; and messages whose sections break 3.2's order (a properties section
after the body, two headers) or that cannot be decoded (a data section cut short),
refused with amqp:decode-error in RabbitMQ 4's model (no sentence says what a receiver
does with them).

Owns the cases `3.2/message-*` and `3.2.x/message-*`.
"""

from __future__ import annotations

import uuid

from amqpspec.amqp10.builder import mutate
from amqpspec.amqp10.composites import (
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    Header,
    Properties,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol, timestamp, ubyte, uint, ulong
from amqpspec.conformance.run.registry import MAY, MODEL, MUST, SHOULD, case, case_function
from amqpspec.conformance.steps.deliveries import roundtrip
from amqpspec.conformance.steps.links import publisher
from amqpspec.conformance.steps.messages import INSERTED, MODIFIED, Encoded, check_bare_unchanged
from amqpspec.conformance.steps.refusals import published_answer
from amqpspec.conformance.steps.sentences import RABBITMQ4

# 3.2 message-format.1 and .2, as the XML has them (one paragraph)
IMMUTABLE = f"{INSERTED} {MODIFIED}"


def _unchanged(sent: Message):
    def run(probe, ctx):
        _, payload = roundtrip(probe, ctx, sent)
        check_bare_unchanged(ctx, sent, payload)

    return run


def _properties_list32() -> Encoded:
    """A properties section encoded as a list32 (amqp10.builder), the rest as the encoder
    does: a broker that decodes and re-encodes the bare message gives a list8 back."""
    properties = Properties(message_id="wide", subject="list32")
    sections = mutate(properties, wide=True).encode()
    sections += ApplicationProperties({"k": "v"}).encode()
    sections += Data(b"wide properties").encode()
    return Encoded(payload=sections)


# around the bare message (delivery-annotations are left out: RabbitMQ 3.10 drops the
# connection on a message that has them, which is not what these cases look at)
ANNOTATIONS = {
    "header": Header(durable=True, priority=ubyte(6)),
    "message_annotations": {symbol("x-opt-amqpspec-ma"): 1},
    "footer": {symbol("x-opt-amqpspec-footer"): b"\x00\x01"},
}

# slug -> (message, what it is); each goes through a queue and comes out with the same
# bare message, byte for byte
MESSAGES = {
    "body-amqp-value-string": (Message(body=[AmqpValue("héllo wörld")]), "an amqp-value string"),
    "body-amqp-value-map": (
        Message(body=[AmqpValue({"k": 1, "nested": {"list": [1, "two", 3.0, None, True]}})]),
        "an amqp-value map with nested list and mixed types",
    ),
    "body-amqp-value-null": (Message(body=[AmqpValue(None)]), "an amqp-value null"),
    "body-amqp-sequence": (
        Message(body=[AmqpSequence([1, "a"]), AmqpSequence([b"\x00\x01", 2.5])]),
        "two amqp-sequence sections",
    ),
    "body-data-multiple": (
        Message(body=[Data(b"one"), Data(b""), Data(bytes(range(256)))]),
        "three data sections (one empty)",
    ),
    "body-data-large": (
        Message(body=[Data(bytes(range(256)) * 800)]),
        "one 204,800-byte data section (multi-frame on most brokers)",
    ),
    "bare-body-only": (Message(body=[Data(b"only a body")]), "one data section and nothing else"),
    "bare-no-properties": (
        Message(application_properties={"k": "v", "n": 7}, body=[Data(b"no properties")]),
        "application-properties and a data body, no properties",
    ),
    "bare-no-application-properties": (
        Message(properties=Properties(message_id="np", subject="s"), body=[AmqpValue("v")]),
        "properties and an amqp-value body, no application-properties",
    ),
    "bare-properties-empty": (
        Message(properties=Properties(), body=[Data(b"empty properties")]),
        "a properties section with no field set (an empty list) and a data body",
    ),
    "bare-annotated-no-properties": (
        Message(
            application_properties={"color": "blue"},
            body=[AmqpSequence([1, 2]), AmqpSequence(["three"])],
            **ANNOTATIONS,
        ),
        "a header, message-annotations and a footer around application-properties and two "
        "amqp-sequence sections (no properties)",
    ),
    "bare-annotated-all-sections": (
        Message(
            properties=Properties(message_id=ulong(9), to="amqpspec", content_type=symbol("x/y")),
            application_properties={"s": "text", "n": -5},
            body=[Data(b"first"), Data(b"second")],
            **ANNOTATIONS,
        ),
        "every section but delivery-annotations: header, message-annotations, properties, "
        "application-properties, two data sections, footer",
    ),
    "bare-properties-list32": (
        _properties_list32(),
        "a properties section encoded as a list32 (valid, not the smallest encoding), "
        "application-properties and a data body",
    ),
}

for _slug, (_message, _what) in MESSAGES.items():
    _run = case_function(
        _unchanged(_message),
        "message_" + _slug.replace("-", "_"),
        f"A message of {_what} goes through a queue: its bare message comes out the same, "
        f"section by section and byte for byte.",
        __name__,
    )
    case(f"3.2/message-{_slug}", MUST, IMMUTABLE, requires={"queues"})(_run)


@case("3.2/message-properties-all-fields", MUST, IMMUTABLE, requires={"queues"})
def properties_all_fields(probe, ctx):
    """Every properties field set (ulong message-id, uuid correlation-id, binary user-id
    left out since brokers may check it): the bare message comes out byte for byte."""
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
    _, payload = roundtrip(probe, ctx, sent)
    check_bare_unchanged(ctx, sent, payload)


@case("3.2/message-application-properties-typed", MUST, IMMUTABLE, requires={"queues"})
def application_properties_typed(probe, ctx):
    """application-properties with string, long, negative, bool, double, timestamp, ubyte
    and null values: the bare message comes out byte for byte."""
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
    _, payload = roundtrip(probe, ctx, sent)
    check_bare_unchanged(ctx, sent, payload)


@case(
    "3.2.1/message-header-durable-kept",
    MAY,  # 3.2.1 describes durable without a sentence obliging an intermediary to pass it on
    "durable: specify durability requirements; a broker forwarding the message keeps the "
    "header's durable flag (the header is the transport's, but its meaning persists).",
    requires={"queues"},
)
def header_durable(probe, ctx):
    """A durable message: the delivered header says durable."""
    got, _ = roundtrip(probe, ctx, Message(header=Header(durable=True), body=[Data(b"d")]))
    ctx.check(got.header is not None and got.header.durable, f"header {got.header!r}")


def _header_field_back(probe, ctx, field: str, value: object) -> object:
    """A message whose header sets `field` to `value` (its body the field's initial), round
    trip through a queue: the delivered header's `field` (None without a header)."""
    sent = Message(header=Header(**{field: value}), body=[Data(field[0].encode())])
    got, _ = roundtrip(probe, ctx, sent)
    return getattr(got.header, field) if got.header is not None else None


@case(
    "3.2.1/message-header-priority-kept",
    MAY,  # 3.2.1 priority: its MUSTs say how priorities are treated, not that they are kept
    "priority: relative message priority; an intermediary that does not change priority "
    "passes it on.",
    requires={"queues"},
)
def header_priority(probe, ctx):
    """A message with priority 7: the delivered header has priority 7."""
    priority = _header_field_back(probe, ctx, "priority", ubyte(7))
    ctx.check(priority == 7, f"priority {priority}")


@case(
    "3.2.1/message-header-ttl-kept",
    SHOULD,  # 3.2.1/header.ttl.2
    "ttl: time to live in ms; an intermediary passes it on (reduced by the time it held "
    "the message at most).",
    requires={"queues"},
)
def header_ttl(probe, ctx):
    """A message with ttl 600,000 ms: the delivered header has a ttl in (0, 600000]."""
    ttl = _header_field_back(probe, ctx, "ttl", uint(600000))
    ctx.check(ttl is not None and 0 < ttl <= 600000, f"ttl {ttl}")


@case(
    "3.2.3/message-annotations-kept",
    MUST,
    "Intermediaries MUST propagate the annotations unless the annotations are explicitly "
    "augmented or modified (e.g. by the use of the modified outcome).",
    requires={"queues"},
    sentences=("3.2.3/message-annotations.2", "3.2.3/message-annotations.1"),
)
def annotations_kept(probe, ctx):
    """A message annotation x-opt-amqpspec = 'kept': present on delivery."""
    sent = Message(
        message_annotations={symbol("x-opt-amqpspec"): "kept"}, body=[Data(b"annotated")]
    )
    got, _ = roundtrip(probe, ctx, sent)
    annotations = got.message_annotations or {}
    ctx.check(annotations.get("x-opt-amqpspec") == "kept", f"annotations {annotations!r}")


@case("3.2/message-bare-with-odd-header", MUST, IMMUTABLE, requires={"queues"})
def header_odd_values(probe, ctx):
    """A message sent with header delivery-count 3 and first-acquirer false (as if
    redelivered upstream): its bare message arrives byte for byte, whatever the broker does
    with the header."""
    sent = Message(
        header=Header(delivery_count=uint(3), first_acquirer=False),
        properties=Properties(message_id="odd-header"),
        body=[Data(b"odd")],
    )
    _, payload = roundtrip(probe, ctx, sent)
    check_bare_unchanged(ctx, sent, payload)


# what RabbitMQ 4 answers an illegal message with (its sections_out_of_order test: the link
# detached with decode-error); a rejected outcome with the condition refuses it as plainly
DECODE_ERROR = frozenset(
    f"{ending}:amqp:decode-error" for ending in ("detach", "end", "close", "rejected")
)
ILLEGAL = {
    # slug -> (the payload sent, what is wrong with it)
    "out-of-order": (
        Data(b"body first").encode() + Properties(subject="after the body").encode(),
        "a properties section after the body",
    ),
    "section-repeated": (
        Header(durable=False).encode() + Header(durable=False).encode() + Data(b"2").encode(),
        "two header sections",
    ),
    "malformed": (  # Qpid Broker-J's MalformedMessageTest: a body that cannot be decoded
        Header(durable=False).encode() + Data(b"cut short" * 2).encode()[:-8],
        "a data section whose binary runs 8 octets past the payload's end",
    ),
}


def _illegal(payload: bytes):
    def run(probe, ctx):
        queue = ctx.queue()
        _, sender = publisher(probe, ctx, queue)
        ctx.outcome(published_answer(probe, sender, Encoded(payload=payload)))

    return run


for _slug, (_payload, _what) in ILLEGAL.items():
    _run = case_function(
        _illegal(_payload),
        "message_sections_" + _slug.replace("-", "_"),
        f"A message of {_what} published unsettled to a queue: refused with "
        "amqp:decode-error (rejected, or its link ended).",
        __name__,
    )
    case(
        f"3.2/message-sections-{_slug}",
        MODEL,
        "A message consists of zero or one header, delivery-annotations, "
        "message-annotations, properties and application-properties sections, the body and "
        "zero or one footer, in that order (3.2; no sentence says what a receiver does with "
        f"other bytes): a message of {_what} is refused with amqp:decode-error.",
        model=RABBITMQ4,
        requires={"queues"},
        outcomes=DECODE_ERROR,
    )(_run)
