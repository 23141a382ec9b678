"""Stream queues (RabbitMQ 4's `x-queue-type: stream`): consumers attach with the
`rabbitmq:stream-offset-spec` source filter (3.5.3) and read without removing; link flow
control is the same as for any queue (2.6.7): credit never exceeded, drain uses it up.

Owns the cases `2.6.7/stream-*` and `3.5.3/stream-*`, under the `streams` capability (the
profile's broker declares stream queues through its admin adapter).
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Source
from amqpspec.amqp10.types import Described, symbol
from amqpspec.conformance.registry import MUST, case
from amqpspec.conformance.steps.credit import check_advanced, drain
from amqpspec.conformance.steps.deliveries import exactly
from amqpspec.conformance.steps.queues import fill, texts
from amqpspec.conformance.steps.sentences import CREDIT_LIMIT, DRAIN

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
    source = Source(
        address=ctx.source(queue), filter={OFFSET_SPEC: Described(OFFSET_SPEC, offset)}
    )
    link = probe.attach_receiver(probe.open_session(), source, credit=credit)
    applied = link.remote_attach.source if link.remote_attach is not None else None
    ctx.check(  # 3.5.3: the sender sets the filter actually in place
        applied is not None and OFFSET_SPEC in (applied.filter or {}),
        "the attach reply's source does not carry the offset-spec filter in place",
    )
    return link


def stream(probe, ctx, count: int) -> str:
    """A new stream holding `count` numbered messages."""
    queue = ctx.queue("stream", STREAM)
    fill(probe, ctx, queue, count)
    return queue


def numbered(indices) -> list[bytes]:
    return [f"amqpspec-{i}".encode() for i in indices]


@case("2.6.7/stream-credit-never-exceeded", MUST, CREDIT_LIMIT, requires=NEEDS)
def stream_credit(probe, ctx):
    """10 in a stream, read from the first offset with link-credit 3: exactly 3 (the first
    three); 2 more granted: exactly the next 2."""
    queue = stream(probe, ctx, 10)
    link = stream_consumer(probe, ctx, queue, "first", credit=3)
    ctx.check(texts(exactly(probe, link, 3)) == numbered(range(3)), "not offsets 0..2")
    probe.grant(link, 2)
    ctx.check(texts(exactly(probe, link, 2)) == numbered(range(3, 5)), "not offsets 3..4")


@case("2.6.7/stream-drain", MUST, DRAIN, requires=NEEDS | {"drain-reply"})
def stream_drain(probe, ctx):
    """3 in a stream, read from the first offset with link-credit 10 and drain: the 3, then
    a flow with delivery-count +10 and link-credit 0 (as for a classic queue)."""
    queue = stream(probe, ctx, 3)
    link = stream_consumer(probe, ctx, queue, "first")
    dc0 = link.delivery_count
    reply, got = drain(probe, link, 10, receive=3)
    check_advanced(ctx, reply, dc0, 10)
    ctx.check(reply.link_credit == 0, f"drain reply link-credit {reply.link_credit}, not 0")
    ctx.check(texts(got) == numbered(range(3)), "not offsets 0..2")


@case("3.5.3/stream-consumers-at-offsets", MUST, FILTER, requires=NEEDS)
def stream_offsets(probe, ctx):
    """6 in a stream; one consumer from the first offset, one from offset 4, one from the
    first again: 0..5, 4..5 and 0..5 (reads remove nothing; each has its own offset)."""
    queue = stream(probe, ctx, 6)
    first = stream_consumer(probe, ctx, queue, "first", credit=10)
    later = stream_consumer(probe, ctx, queue, 4, credit=10)
    ctx.check(texts(exactly(probe, first, 6)) == numbered(range(6)), "first: not 0..5")
    ctx.check(texts(exactly(probe, later, 2)) == numbered(range(4, 6)), "offset 4: not 4..5")
    again = stream_consumer(probe, ctx, queue, "first", credit=10)
    ctx.check(texts(exactly(probe, again, 6)) == numbered(range(6)), "re-read: not 0..5")
