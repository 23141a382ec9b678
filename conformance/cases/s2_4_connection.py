"""2.4 connections: the broker's first frame is its open (2.7.1 MUST), a frame above 512
octets before the open exchange closes the connection with framing-error (2.7.1 MUST: the
maximum before negotiation is 512, 2.4.1), a close with an error answered with a close
(2.4.3 MUST: a close frame before closing) and nothing sent after the broker's close
(2.4.3, 2.7.9 MUST), the broker's heartbeats and an idle-time-out of ours it keeps or
refuses with a close carrying an error (2.4.5 SHOULD); how it answers a second open,
a begin before open and an open on channel 1 (the probe breaks the spec there; no sentence
binds the answer: MAY; an open the broker answers with is on channel 0, 2.4.1 "can only").

Owns the cases `2.4.1/*`, `2.4.6/*`, `2.4.5/broker-heartbeats` and
`2.4.5/broker-short-idle-time-out` (the idle time-out
cases are in s2_4_5_idle.py, the open's limits in s2_7_1_open.py).
"""

from __future__ import annotations

import itertools

from amqpspec.amqp10.composites import Begin, Error, Open
from amqpspec.amqp10.engine import RemoteClose
from amqpspec.amqp10.origins import SERVER
from amqpspec.conformance.probe.observed import brief
from amqpspec.conformance.run.registry import MAY, MUST, SHOULD, case
from amqpspec.conformance.steps.declaring import opening_case
from amqpspec.conformance.steps.links import consumer
from amqpspec.conformance.steps.queues import fill
from amqpspec.conformance.steps.refusals import close_answered_case, sent_frame_outcome
from amqpspec.conformance.verdicts import CaseFailed

OPEN_FIRST = "2.7.1/open.1"  # the first frame in either direction MUST be an open
OPEN_BEFORE_OTHERS = "2.4.1/opening-a-connection.1"  # each peer must send open first
OPEN_ON_ZERO = "2.4.1/opening-a-connection.2"  # the open frame can only be sent on channel 0
OVERSIZED = "2.7.1/open.max-frame-size.2"  # an oversized frame: close with framing-error
CLOSE_LAST = "2.4.3/closing-a-connection.2"  # the close is the last thing ever written
NOTHING_AFTER_CLOSE = "2.7.9/close.2"  # illegal to send anything after a close
IDLE_EXCEEDED = "2.4.5/idle-time-out-of-a-connection.8"  # exceeding it: SHOULD close with an error
IDLE_UNSUPPORTED = "2.4.5/idle-time-out-of-a-connection.3"  # can't support it: SHOULD close

REFUSE = {
    "close:amqp:connection:framing-error",
    "close:amqp:illegal-state",
    "close:amqp:not-allowed",
    "close:amqp:decode-error",
    "tcp-close",
}


@opening_case(
    "2.4.1/open-answered",
    MUST,
    "The first frame sent on a connection in either direction MUST contain an Open body: the "
    "broker's first frame after the headers (and SASL) is its open.",
    sentences=(OPEN_FIRST, OPEN_BEFORE_OTHERS),
)
def open_answered(probe, ctx):
    """Headers, SASL and our open: the broker's first frame is its open (an empty
    container-id is a string, not null: fine; a null one is for the checker)."""
    since = probe.mark()
    probe.open(wait_open=False)
    frame = probe.first_frame(since)
    if frame is None:  # no sentence makes the broker answer at all: recorded
        ctx.note(f"no frame from the broker after our open; {probe.observed(since)}")
        return
    ctx.check(
        frame.name == "open", f"expected an open as the broker's first frame; observed {frame.name}"
    )
    ctx.note(f"the broker's container-id: {frame.performative.container_id!r}")


@case(
    "2.4.1/frame-over-512-before-open",
    MUST,
    "A peer that receives an oversized frame MUST close the Connection with the "
    "framing-error error-code: prior to any explicit negotiation, the maximum frame size is "
    "512 (2.4.1), and our open is larger.",
    sentences=(OVERSIZED,),
    outcomes={"close:amqp:connection:framing-error"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def frame_over_512_before_open(probe, ctx):
    """Our open padded with a 1,000-byte property (a ~1,050-byte frame) before the
    broker's open limits are known: the broker closes with framing-error (answering with
    its open, taking the frame, is FAILED: the links in conformance/manifest say so)."""
    probe.raw_handshake()
    big = Open(container_id="amqpspec-big-open", properties={"pad": "x" * 1000})
    observed = sent_frame_outcome(probe, big, timeout=2.0)
    if observed == "timeout" and probe.server_frames("open"):
        observed = "opened"
    ctx.outcome(observed)


@case(
    "2.4.1/second-open",
    MAY,
    "open is the first frame of a connection and sent once (2.4.1, 2.4.6 states); no "
    "sentence says how the receiver answers a second open (typically a close).",
    outcomes=REFUSE,
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def second_open(probe, ctx):
    """After the open exchange, a second (crafted) open: the broker closes the connection."""
    probe.open()
    ctx.outcome(sent_frame_outcome(probe, Open(container_id="amqpspec-again"), timeout=2.0))


@case(
    "2.4.1/open-on-channel-1",
    MUST,
    "The open frame can only be sent on channel 0 (2.4.1; binds the probe's open here, and "
    "the broker's: an open it answers with is on channel 0); no sentence says how the "
    "receiver answers an open on another channel (recorded).",
    sentences=(OPEN_ON_ZERO,),
    outcomes=REFUSE | {"opened", "timeout"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def open_on_channel_1(probe, ctx):
    """Headers (and SASL), then our open on channel 1: the broker's answer is recorded (a
    close, the TCP close, its own open); an open it sends is on channel 0."""
    probe.raw_handshake()
    since = probe.mark()
    opening = Open(container_id="amqpspec-channel-1")
    observed = sent_frame_outcome(probe, opening, channel=1, timeout=0.5)
    opens = [t.item for t in probe.frames_since(since, "open")]
    if observed == "timeout" and opens:
        observed = "opened"
    ctx.check(
        all(frame.channel == 0 for frame in opens),
        f"expected the broker's open on channel 0; observed it on channel {opens[0].channel}"
        if opens
        else "",
    )
    ctx.outcome(observed)


@case(
    "2.4.1/begin-before-open",
    MAY,
    "The first frame sent on a connection in either direction MUST contain an Open body "
    "(binds the probe here); no sentence says how the receiver answers a begin first.",
    sentences=(OPEN_FIRST,),
    outcomes=REFUSE,
)
def begin_before_open(probe, ctx):
    """Headers (and SASL), then a begin without an open: the broker closes."""
    probe.raw_handshake()
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    ctx.outcome(sent_frame_outcome(probe, begin, timeout=2.0))


@opening_case(
    "2.4.5/broker-heartbeats",
    SHOULD,
    "If during operation a peer exceeds the remote peer's idle time-out's threshold, it "
    "SHOULD gracefully close the connection with a close frame with an error explaining why: "
    "a broker sends frames (empty ones when it has nothing to say) within our idle-time-out.",
    sentences=(IDLE_EXCEEDED,),
    requires={"heartbeats"},
    budget=20.0,
)
def broker_heartbeats(probe, ctx):
    """We open with idle-time-out 2,000 ms and stay silent except for our own heartbeats:
    over 5 s the broker never lets 2 s pass without a frame."""
    probe.open(idle_timeout_ms=2000)
    gap = _longest_silence(probe, 5.0)
    ctx.check(not probe.closed, f"expected the connection open while idle; {probe.observed(0)}")
    ctx.check(
        gap < 2.0,
        f"expected a broker frame at least every 2 s (our idle-time-out); observed {gap:.2f} s "
        "without one and no close",
    )


def _longest_silence(probe, seconds: float) -> float:
    """Stay idle for `seconds` (our heartbeats only) after the broker's open: the longest
    time the broker let pass without a frame (to the end of the recording)."""
    opened = next(t for t in probe.recording.items if t.name == "open" and t.direction == SERVER)
    probe.idle(seconds)
    times = [opened.time] + [
        t.time for t in probe.recording.items if t.direction == SERVER and t.index > opened.index
    ]
    times.append(probe.recording.end or times[-1])
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


SHORT_IDLE_MS = 500  # below RabbitMQ 4's minimum (1 s: its idle_time_out_too_short test)


@opening_case(
    "2.4.5/broker-short-idle-time-out",
    SHOULD,
    "If a peer can not, for any reason support a proposed idle time-out, then it should "
    "close the connection using a close frame with an error explaining why: our open's "
    f"idle-time-out of {SHORT_IDLE_MS} ms is kept (a broker frame at least every "
    f"{2 * SHORT_IDLE_MS} ms, twice it for a loaded machine) or refused with a close frame "
    "carrying an error.",
    sentences=(IDLE_UNSUPPORTED,),
    outcomes={"close:*", "kept"},
    budget=20.0,
)
def idle_time_out_short(probe, ctx):
    """We open with idle-time-out 500 ms and stay silent but for our heartbeats for 2 s:
    the broker keeps it (a frame at least every 1 s) or closes with an error."""
    probe.open(idle_timeout_ms=SHORT_IDLE_MS, wait_open=True)
    gap = _longest_silence(probe, 2.0)
    ended = [t for t in probe.recording.items if t.name == "close"]
    ctx.check(
        not ended or ended[0].direction == SERVER,
        f"expected a broker frame within our idle-time-out of {SHORT_IDLE_MS} ms or a close "
        f"with an error; observed neither, and our engine closed the connection when the "
        f"time-out expired ({probe.observed(0)})",
    )
    if ended:
        error = ended[0].item.performative.error
        ctx.check(error is not None, f"expected the close to carry an error; {probe.observed(0)}")
        ctx.outcome(f"close:{error.condition}")
        return
    ctx.check(
        not probe.closed,
        f"expected a close frame with an error when refusing idle-time-out {SHORT_IDLE_MS} "
        f"ms; observed a TCP close without one ({probe.observed(0)})",
    )
    ctx.check(
        gap < 2 * SHORT_IDLE_MS / 1000,
        f"expected a broker frame at least every {2 * SHORT_IDLE_MS} ms (our idle-time-out "
        f"{SHORT_IDLE_MS} ms) or a close with an error; observed {gap:.2f} s without a frame "
        "and no close",
    )
    ctx.outcome("kept")


close_answered_case(
    "2.4.6/close-with-error-answered",
    "a broker that receives a close (with or without error) answers with its own close.",
    "close_with_error",
    """Open, begin, close with amqp:internal-error: the broker answers with a close (a TCP
    close without it, or no answer, is FAILED).""",
    __name__,
    Error(condition="amqp:internal-error", description="amqpspec"),
)


@case(
    "2.4.6/close-nothing-after",
    MUST,
    "It is illegal to send any more frames (or bytes of any other kind) after sending a close "
    "frame; the close MUST be the last thing ever written onto a connection.",
    sentences=(NOTHING_AFTER_CLOSE, CLOSE_LAST),
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
            ctx.check(
                other.closed, f"expected the broker's close or its TCP close; {other.observed(0)}"
            )
        other.idle(0.3)
        items = other.recording.items
        close_at = next(
            (i for i, t in enumerate(items) if t.direction == SERVER and t.name == "close"), None
        )
        if close_at is not None:
            after = [
                t for t in items[close_at + 1 :] if t.direction == SERVER and t.item is not None
            ]
            if after:
                ctx.check(
                    False,
                    f"expected nothing after the broker's close (frame #{items[close_at].index}); "
                    f"observed {len(after)} frames after it, the first {brief(after[0])}",
                )
        other.disconnect()
