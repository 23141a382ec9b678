"""2.5.6 session flow control, more scenarios: a session begun with incoming-window 0 and
opened later, a one-frame window over many deliveries, a publisher session whose
next-outgoing-id starts just below 2^32 (rhea#426), and the broker's session numbers
following ours.

Owns the cases `2.5.6/session-more-*`.
"""

from __future__ import annotations

from amqp10.engine import RemoteBegin
from amqp10.engine.session import Session
from conformance.cases.checks import check_split, publisher, small_frame_probe
from conformance.registry import MUST, case
from conformance.steps import body, collect, consumer, fill
from conformance.steps_more import exactly, server_flows, wait_credit

WINDOW = (
    "A sender MUST NOT send a transfer frame when the remote-incoming-window is zero "
    "(2.5.6); the receiver's incoming-window bounds the transfer frames in flight."
)
IDS = (
    "Transfer-ids are serial numbers (RFC 1982): next-incoming-id and next-outgoing-id "
    "wrap at 2^32, and the partner's session flows track them across the wrap (2.5.6)."
)


def _session_near_wrap(probe, start: int) -> Session:
    """A session whose first transfer-id (our begin's next-outgoing-id) is `start`."""
    if probe.conn is None:
        probe.open()
    session = Session(probe.conn, incoming_window=2048, outgoing_window=2048)
    session.initial_outgoing_id = session.next_outgoing_id = start
    session._send_begin()
    probe.flush()
    probe.expect(lambda e: isinstance(e, RemoteBegin) and e.session is session, what="begin")
    return session


@case("2.5.6/session-more-window-zero-then-open", MUST, WINDOW, requires={"queues"})
def window_zero_then_open(probe, ctx):
    """Begin with incoming-window 0, a receiver with credit 3, 3 queued: no transfer for
    0.6 s; then a session flow with incoming-window 10: exactly 3."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 3)
    session = probe.open_session(incoming_window=0, auto_window=False)
    _, link = consumer(probe, ctx, queue, credit=3, session=session)
    early = collect(probe, link, 0.6)
    ctx.check(not early, f"{len(early)} transfers into an incoming-window of 0")
    session.flow(incoming_window=10)
    probe.flush()
    exactly(probe, link, 3)


@case("2.5.6/session-more-window-one", MUST, WINDOW, requires={"queues"})
def window_one(probe, ctx):
    """incoming-window 1, re-opened by one frame at a time (our engine's auto window), 30
    deliveries with credit 30: all arrive, never beyond the window (checker)."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 30)
    session = probe.open_session(incoming_window=1)
    _, link = consumer(probe, ctx, queue, credit=30, session=session)
    got = probe.receive(link, 30, timeout=10.0)
    ctx.check(len(got) == 30, f"{len(got)} of 30")


@case(
    "2.5.6/session-more-window-small-multi-frame", MUST, WINDOW, requires={"queues", "multi-frame"}
)
def window_small_multi_frame(probe, ctx):
    """max-frame-size 512, incoming-window 2, three 3,000-byte messages (7 frames each):
    the broker waits for our window between frames; all 3 arrive whole."""
    queue = ctx.queue()
    fill(probe, ctx, queue, 3, size=3000)
    receiver = small_frame_probe(ctx)
    session = receiver.open_session(incoming_window=2)
    _, link = consumer(receiver, ctx, queue, credit=3, session=session)
    check_split(ctx, receiver.receive(link, 3, timeout=10.0))


@case("2.5.6/session-more-outgoing-id-wrap", MUST, IDS, requires={"queues"})
def outgoing_id_wrap(probe, ctx):
    """A publisher session begun with next-outgoing-id 2^32 - 4 sends 12 messages across
    the wrap (rhea#426): all accepted; the broker's flows name next-incoming-id in serial
    terms (the checker follows every id)."""
    queue = ctx.queue()
    session, sender = publisher(probe, ctx, queue, session=_session_near_wrap(probe, 2**32 - 4))
    since = probe.mark()
    probe.publish(sender, 12, lambda i: body(i), timeout=10.0)
    ctx.check(session.next_outgoing_id == 8, f"our next-outgoing-id {session.next_outgoing_id}")
    for flow in server_flows(probe, since):
        nid = flow.next_incoming_id
        ctx.check(
            nid is not None and ((nid - (2**32 - 4)) % 2**32) <= 12,
            f"broker flow next-incoming-id {nid} outside the ids we sent",
        )
    _, link = consumer(probe, ctx, queue, credit=12)
    exactly(probe, link, 12)


@case(
    "2.5.6/session-more-outgoing-id-wrap-multi-frame", MUST, IDS, requires={"queues", "multi-frame"}
)
def outgoing_id_wrap_multi_frame(probe, ctx):
    """max-frame-size 512 both ways, next-outgoing-id 2^32 - 2, one 4,000-byte message
    (about 9 frames across the wrap): accepted and delivered whole."""
    queue = ctx.queue()
    small = small_frame_probe(ctx)
    _, sender = publisher(small, ctx, queue, session=_session_near_wrap(small, 2**32 - 2))
    small.publish(sender, 1, body(0, 4000), timeout=10.0)
    _, link = consumer(probe, ctx, queue, credit=1)
    delivery = probe.next_transfer(link)
    ctx.check(len(delivery.payload) >= 4000, f"{len(delivery.payload)} bytes delivered")


@case(
    "2.5.6/session-more-begin-next-incoming-id",
    MUST,
    "next-incoming-id: the sender's flows carry the next transfer-id they expect, which "
    "starts at the partner's begin next-outgoing-id (2.5.6, 2.7.2).",
    requires={"queues"},
)
def begin_next_incoming_id(probe, ctx):
    """A session begun with next-outgoing-id 1,000,000 attaches a publisher: the broker's
    first flow says next-incoming-id 1,000,000."""
    queue = ctx.queue()
    session = _session_near_wrap(probe, 1_000_000)
    since = probe.mark()
    sender = probe.attach_sender(session, ctx.target_address(queue))
    wait_credit(probe, sender)
    flows = server_flows(probe, since)
    ctx.check(bool(flows), "no flow from the broker")
    ctx.check(
        flows[0].next_incoming_id == 1_000_000,
        f"first flow next-incoming-id {flows[0].next_incoming_id}, our begin said 1000000",
    )
