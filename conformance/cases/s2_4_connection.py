"""2.4 connections: the open answered, no frame above 512 octets before the open exchange,
a second open and a begin before open refused, the broker's heartbeats (2.4.5), a close
with an error answered and nothing sent after the broker's close (2.4.6).

Owns the cases `2.4.1/*`, `2.4.6/*` and `2.4.5/broker-heartbeats` (the idle time-out
cases are in s2_4_5_idle.py, the open's limits in s2_7_1_open.py).
"""

from __future__ import annotations

import itertools

from amqpspec.amqp10.composites import Begin, Error, Open
from amqpspec.amqp10.engine import RemoteClose
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.links import consumer
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.steps.refusals import sent_frame_outcome
from amqpspec.conformance.verdicts import CaseFailed

REFUSE = {
    "close:amqp:connection:framing-error",
    "close:amqp:illegal-state",
    "close:amqp:not-allowed",
    "close:amqp:decode-error",
    "tcp-close",
}


@case(
    "2.4.1/open-answered",
    MUST,
    "Each peer sends an open to begin a connection: the broker answers ours with its open "
    "(container-id mandatory, 2.7.1).",
    pipelined=False,  # reads the broker's open or begin
)
def open_answered(probe, ctx):
    """Headers, SASL and our open: the broker's open arrives with a container-id."""
    event = probe.open()
    ctx.check(bool(event.open.container_id), "the broker's open has no container-id")


@case(
    "2.4.1/frame-over-512-before-open",
    SHOULD,
    "Prior to the open exchange the maximum frame size is 512 octets (MIN-MAX-FRAME-SIZE, "
    "2.4.1); a larger frame is a framing error.",
    outcomes={"close:amqp:connection:framing-error", "tcp-close"},
    lenient={"close:*"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def frame_over_512_before_open(probe, ctx):
    """Our open padded with a 1,000-byte property (a ~1,050-byte frame) before the
    broker's open limits are known: refused with framing-error (accepting it is lenient
    towards us, not a MUST broken)."""
    probe.raw_handshake()
    big = Open(container_id="amqpspec-big-open", properties={"pad": "x" * 1000})
    observed = sent_frame_outcome(probe, big, timeout=2.0)
    if observed == "timeout" and probe.server_frames("open"):
        observed = "opened"
    ctx.outcome(observed)


@case(
    "2.4.1/second-open",
    SHOULD,
    "open is the first frame of a connection and sent once (2.4.1, 2.4.6 states): a second "
    "open on an opened connection is illegal and ends it.",
    outcomes=REFUSE,
    lenient={"close:*"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def second_open(probe, ctx):
    """After the open exchange, a second (crafted) open: the broker closes the connection."""
    probe.open()
    ctx.outcome(sent_frame_outcome(probe, Open(container_id="amqpspec-again"), timeout=2.0))


@case(
    "2.4.1/begin-before-open",
    SHOULD,
    "After the protocol header the first frame is open (2.4.1); a begin first is illegal "
    "and the connection ends.",
    outcomes=REFUSE,
    lenient={"close:*"},
)
def begin_before_open(probe, ctx):
    """Headers (and SASL), then a begin without an open: the broker closes."""
    probe.raw_handshake()
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    ctx.outcome(sent_frame_outcome(probe, begin, timeout=2.0))


@case(
    "2.4.5/broker-heartbeats",
    MUST,
    "idle-time-out: a peer that advertised T closes the connection when nothing arrives for "
    "T; its partner MUST send frames (empty ones if it has nothing to say) within T.",
    requires={"heartbeats"},
    budget=20.0,
    pipelined=False,  # reads the broker's open or begin
)
def broker_heartbeats(probe, ctx):
    """We open with idle-time-out 2,000 ms and stay silent except for our own heartbeats:
    over 5 s the broker never lets 2 s pass without a frame."""
    probe.open(idle_timeout_ms=2000)
    opened = next(t for t in probe.recording.items if t.name == "open" and t.direction == SERVER)
    probe.idle(5.0)
    times = [opened.time] + [
        t.time for t in probe.recording.items if t.direction == SERVER and t.index > opened.index
    ]
    times.append(probe.recording.end or times[-1])
    gap = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
    ctx.check(not probe.closed, "connection closed during the idle period")
    ctx.check(gap < 2.0, f"{gap:.2f} s without a broker frame (our idle-time-out 2 s)")


@case(
    "2.4.6/close-with-error-answered",
    MUST,
    "close: an endpoint that receives a close (with or without error) answers with its own "
    "close (2.4.6, 2.7.9).",
)
def close_with_error(probe, ctx):
    """Open, begin, close with amqp:internal-error: the broker answers with a close."""
    probe.open_session()
    probe.conn.close(Error(condition="amqp:internal-error", description="amqpspec"))
    probe.flush()
    probe.expect_type(RemoteClose)


@case(
    "2.4.6/close-nothing-after",
    MUST,
    "After sending a close the endpoint MUST NOT send any more frames (2.4.6, 2.7.9).",
    requires={"queues"},
)
def nothing_after_close(probe, ctx):
    """Three times: 300 messages queued, a receiver with credit 300 on a fresh connection,
    closed as soon as the first transfer arrives: after the broker's close frame no frame
    follows (the checker flags any)."""
    queue = ctx.queue()
    for _ in range(3):
        fill(probe, ctx, queue, 300)
        other = ctx.probe()
        _, link = consumer(other, ctx, queue, credit=300)
        other.next_transfer(link)
        other.conn.close()
        other.flush()
        try:
            other.expect_type(RemoteClose)
        except CaseFailed:
            ctx.check(other.closed, "no close from the broker and the socket stays open")
        other.idle(0.3)
        items = other.recording.items
        close_at = next(
            (i for i, t in enumerate(items) if t.direction == SERVER and t.name == "close"), None
        )
        if close_at is not None:
            after = [
                t for t in items[close_at + 1 :] if t.direction == SERVER and t.item is not None
            ]
            ctx.check(not after, f"{len(after)} frames after the broker's close")
        other.disconnect()
