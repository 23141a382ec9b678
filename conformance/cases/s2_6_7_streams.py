"""Stream queues (RabbitMQ 4's `x-queue-type: stream`): consumers attach with the
`rabbitmq:stream-offset-spec` source filter (3.5.3) and read without removing; link flow
control is the same as for any queue (2.6.7): credit never exceeded, drain uses it up.

Owns the cases `2.6.7/stream-*` and `3.5.3/stream-*`, under the `streams` capability (the
profile's broker declares stream queues through its admin adapter). Credit and drain are
the spec's (MUST, the broker as sender); which messages an offset-spec reads is RabbitMQ
4's stream model (DIFFERS); a filter in place is reported in the broker's attach (2.6.3:
"the endpoint MUST report the actual properties of the terminus as created").

The credit and drain cases publish after the consumer attached, so that the messages are
there whichever offset the broker reads from: RabbitMQ 3.10's AMQP 1.0 plugin echoes the
offset-spec filter but reads from the next message (docs/conformance.md, What the runs
found), and a case that waited for older messages would grade nothing of its flow control.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Source
from amqpspec.amqp10.types import Described, symbol
from amqpspec.conformance.run.registry import MODEL, MUST, case
from amqpspec.conformance.steps.credit import check_advanced, drain
from amqpspec.conformance.steps.deliveries import exactly
from amqpspec.conformance.steps.queues import fill, texts
from amqpspec.conformance.steps.sentences import (
    CREDIT,
    CREDIT_LIMIT,
    DRAIN,
    DRAIN_ADVANCE,
    RABBITMQ4,
)

REPORTED = "2.6.3/establishing-or-resuming-a-link.3"  # the terminus as created is reported

STREAM = {"x-queue-type": "stream"}
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
NEEDS = {"queues", "streams"}
FILTER = (
    "The receiving endpoint sets its desired filter, the sending endpoint sets the filter "
    "actually in place (including any filters defaulted at the node)."
)


def stream_consumer(probe, ctx, queue: str, offset, *, credit: int = 0):
    """A receiver reading `queue` from `offset` (first, last, next or an offset number),
    the filter described as RabbitMQ's clients send it."""
    source = Source(address=ctx.source(queue), filter={OFFSET_SPEC: Described(OFFSET_SPEC, offset)})
    link = probe.attach_receiver(probe.open_session(), source, credit=credit)
    applied = link.remote_attach.source if link.remote_attach is not None else None
    ctx.must(  # 2.6.3 / 3.5.3: the sender reports the filter actually in place
        applied is not None and OFFSET_SPEC in (applied.filter or {}),
        "expected the offset-spec filter in the source of the broker's attach (the filter in "
        f"place); observed source {applied!r}",
        REPORTED,
    )
    return link


def stream(probe, ctx, count: int) -> str:
    """A new stream holding `count` numbered messages."""
    queue = ctx.queue("stream", STREAM)
    fill(probe, ctx, queue, count)
    return queue


def attached_then_filled(probe, ctx, count: int, *, credit: int = 0):
    """A new stream, a consumer from its first offset, then `count` numbered messages:
    (the consumer link). Offset `first` and `next` read the same messages here."""
    queue = ctx.queue("stream", STREAM)
    link = stream_consumer(probe, ctx, queue, "first", credit=credit)
    fill(probe, ctx, queue, count)
    return link


def numbered(indices) -> list[bytes]:
    return [f"amqpspec-{i}".encode() for i in indices]


@case(
    "2.6.7/stream-credit-never-exceeded",
    MUST,
    CREDIT_LIMIT,
    sentences=CREDIT,
    role="sender",
    model=RABBITMQ4,
    requires=NEEDS,
)
def stream_credit(probe, ctx):
    """A consumer from the first offset with link-credit 3, then 10 in the stream: exactly
    3 (the first three); 2 more granted: exactly the next 2."""
    link = attached_then_filled(probe, ctx, 10, credit=3)
    got = texts(exactly(probe, link, 3))
    ctx.model(got == numbered(range(3)), f"expected offsets 0..2; observed {got}")
    probe.grant(link, 2)
    got = texts(exactly(probe, link, 2))
    ctx.model(got == numbered(range(3, 5)), f"expected offsets 3..4; observed {got}")


@case(
    "2.6.7/stream-drain",
    MUST,
    DRAIN,
    sentences=(DRAIN_ADVANCE, *CREDIT),
    role="sender",
    model=RABBITMQ4,
    requires=NEEDS | {"drain-reply"},
)
def stream_drain(probe, ctx):
    """A consumer from the first offset, 3 in the stream, then link-credit 10 and drain:
    the 3, then a flow with delivery-count +10 and link-credit 0 (as for a classic queue)."""
    link = attached_then_filled(probe, ctx, 3)
    dc0 = link.delivery_count
    reply, got = drain(probe, link, 10, receive=3)
    check_advanced(ctx, reply, dc0, 10)
    ctx.check(
        reply.link_credit == 0,
        f"expected link-credit 0 in the drain reply; observed {reply.link_credit}",
    )
    ctx.model(texts(got) == numbered(range(3)), f"expected offsets 0..2; observed {texts(got)}")


@case(
    "3.5.3/stream-consumers-at-offsets",
    MODEL,
    FILTER + " A consumer reads a stream from the offset its filter names (RabbitMQ 4).",
    sentences=(REPORTED,),
    model=RABBITMQ4,
    requires=NEEDS,
)
def stream_offsets(probe, ctx):
    """6 in a stream; one consumer from the first offset, one from offset 4, one from the
    first again: 0..5, 4..5 and 0..5 (reads remove nothing; each has its own offset)."""
    queue = stream(probe, ctx, 6)
    first = stream_consumer(probe, ctx, queue, "first", credit=10)
    later = stream_consumer(probe, ctx, queue, 4, credit=10)
    got = texts(exactly(probe, first, 6))
    ctx.check(got == numbered(range(6)), f"expected offsets 0..5 from the first; observed {got}")
    got = texts(exactly(probe, later, 2))
    ctx.check(got == numbered(range(4, 6)), f"expected offsets 4..5 from 4; observed {got}")
    again = stream_consumer(probe, ctx, queue, "first", credit=10)
    got = texts(exactly(probe, again, 6))
    ctx.check(got == numbered(range(6)), f"expected offsets 0..5 again; observed {got}")
