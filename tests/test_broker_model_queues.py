"""Classic queue model: FIFO, round-robin, credit API v2 (2.6.7), drain, settlement, requeue,
and the queue-layer faults (each shown to change behaviour)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpspec.amqp10.composites import Accepted, Modified, Released
from amqpspec.reference_broker.faults.catalog import Faults
from amqpspec.reference_broker.queues.classic import (
    ACCEPTED,
    MODIFIED,
    REJECTED,
    RELEASED,
    ClassicQueue,
    CreditReply,
    Delivery,
    Outcome,
    QueueError,
    outcome_of,
)


def fill(queue: ClassicQueue, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        queue.publish(b"m%d" % i)


def first_dispatch(messages: int, **flow: Any) -> tuple[ClassicQueue, list]:
    """Queue q holding `messages`, consumer c granted by one flow from delivery-count 0
    (`flow`: its other fields): the queue and what its dispatch then gives."""
    q = ClassicQueue("q")
    q.add_consumer("c")
    fill(q, messages)
    q.flow("c", delivery_count=0, **flow)
    return q, q.dispatch()


def deliveries(events) -> list[Delivery]:
    return [e for e in events if isinstance(e, Delivery)]


def replies(events) -> list[CreditReply]:
    return [e for e in events if isinstance(e, CreditReply)]


def bodies(events) -> list[bytes]:
    return [e.message.payload for e in deliveries(events)]


# ---------------------------------------------------------------------- FIFO / round robin
def test_fifo_and_no_delivery_without_credit():
    q = ClassicQueue("q")
    fill(q, 3)
    q.add_consumer("c")
    assert q.dispatch() == []  # 2.6.7: no credit, no transfer
    q.flow("c", delivery_count=None, link_credit=10)
    assert bodies(q.dispatch()) == [b"m0", b"m1", b"m2"]
    assert q.messages_ready == 0 and q.messages_unacknowledged == 3


def test_round_robin_across_consumers():
    q = ClassicQueue("q")
    for tag in ("a", "b", "c"):
        q.add_consumer(tag)
        q.flow(tag, delivery_count=None, link_credit=100)
    fill(q, 9)
    events = deliveries(q.dispatch())
    assert [e.consumer.tag for e in events] == ["a", "b", "c"] * 3
    assert [e.message.payload for e in events] == [b"m%d" % i for i in range(9)]


def test_round_robin_continues_across_dispatches():
    q = ClassicQueue("q")
    for tag in ("a", "b"):
        q.add_consumer(tag)
        q.flow(tag, delivery_count=None, link_credit=100)
    tags = []
    for i in range(4):
        q.publish(b"x%d" % i)
        tags += [e.consumer.tag for e in deliveries(q.dispatch())]
    assert tags == ["a", "b", "a", "b"]


# ---------------------------------------------------------------------- credit accuracy
def test_credit_is_never_exceeded():
    q = ClassicQueue("q")
    q.add_consumer("c")
    fill(q, 10)
    q.flow("c", delivery_count=None, link_credit=3)
    events = deliveries(q.dispatch())
    assert len(events) == 3
    assert [e.delivery_count_after for e in events] == [1, 2, 3]
    assert q.consumer("c").credit == 0
    assert q.dispatch() == []
    assert q.available == 7


def test_regrant_replaces_credit_counting_in_flight_deliveries():
    """2.6.7: link-credit(snd) = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd).
    The receiver re-grants 2 having seen only 1 of 2 in-flight deliveries: the horizon is
    1 + 2 = 3, so only 1 more may go (RabbitMQ #2597 over-delivered here)."""
    q = ClassicQueue("q")
    q.add_consumer("c")
    fill(q, 10)
    q.flow("c", delivery_count=0, link_credit=2)
    assert len(deliveries(q.dispatch())) == 2  # delivery-count(snd) = 2
    q.flow("c", delivery_count=1, link_credit=2)  # receiver saw one transfer
    assert q.consumer("c").credit == 1
    assert len(deliveries(q.dispatch())) == 1
    assert q.consumer("c").delivery_count == 3


def prefetch_two_receiver(q: ClassicQueue, total: int) -> tuple[int, int]:
    """A receiver that re-grants credit 2 after every delivery it sees (proton prefetch=2),
    with one delivery in flight between the queue and the receiver at each re-grant.
    Returns (max outstanding beyond the receiver's latest horizon, deliveries seen)."""
    q.add_consumer("c")
    fill(q, total)
    rcv_count = 0
    q.flow("c", delivery_count=0, link_credit=2)
    horizon = 2
    in_flight: list[Delivery] = []
    worst = 0
    seen = 0
    while seen < total:
        in_flight += deliveries(q.dispatch())
        if not in_flight:
            break
        in_flight.pop(0)  # the receiver sees one transfer
        seen += 1
        rcv_count += 1
        worst = max(worst, q.consumer("c").delivery_count - horizon)
        q.flow("c", delivery_count=rcv_count, link_credit=2)
        horizon = rcv_count + 2
    return worst, seen


def test_prefetch_regrant_pattern_never_overdelivers():
    q = ClassicQueue("q")
    worst, seen = prefetch_two_receiver(q, 200)
    assert seen == 200
    assert worst <= 0


def test_fault_overdeliver_on_regrant_overdelivers():
    q = ClassicQueue("q", faults=Faults(["overdeliver-on-regrant"]))
    worst, _ = prefetch_two_receiver(q, 200)
    assert worst > 0  # transfers beyond every grant: the bug of RabbitMQ #2597


def test_flow_without_delivery_count_uses_initial_delivery_count():
    q = ClassicQueue("q")
    q.add_consumer("c", initial_delivery_count=2**32 - 1)
    fill(q, 3)
    q.flow("c", delivery_count=None, link_credit=2)
    events = deliveries(q.dispatch())
    assert len(events) == 2
    assert [e.delivery_count_after for e in events] == [0, 1]  # serial wrap (RFC 1982)


def test_lower_credit_than_in_flight_gives_zero_not_negative():
    q = ClassicQueue("q")
    q.add_consumer("c")
    fill(q, 5)
    q.flow("c", delivery_count=0, link_credit=5)
    q.dispatch()
    q.flow("c", delivery_count=0, link_credit=1)  # receiver shrinks credit; 5 in flight
    assert q.consumer("c").credit == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 6), st.booleans(), st.integers(0, 4)),
        min_size=1,
        max_size=30,
    )
)
def test_property_deliveries_never_pass_the_latest_horizon(steps):
    """Whatever the sequence of publishes and flows, the queue's delivery-count never passes
    max(its value when the flow arrived, delivery-count(rcv) + link-credit(rcv)) - deliveries
    already in flight stay legal (2.6.7) - and a drain ends exactly there with credit 0."""
    q = ClassicQueue("q")
    q.add_consumer("c")
    rcv_seen = 0
    for publish, credit, drain, seen in steps:
        fill(q, publish)
        dc_before = q.consumer("c").delivery_count
        rcv_seen = min(dc_before, rcv_seen + seen)
        q.flow("c", delivery_count=rcv_seen, link_credit=credit, drain=drain)
        limit = max(dc_before, rcv_seen + credit)
        events = q.dispatch()
        assert q.consumer("c").delivery_count <= limit
        assert len(deliveries(events)) <= limit - dc_before
        if drain:
            (reply,) = replies(events)
            assert reply.drain and reply.link_credit == 0
            assert reply.delivery_count == limit == q.consumer("c").delivery_count
        else:
            assert replies(events) == []


# ---------------------------------------------------------------------- drain / echo
def test_drain_on_empty_queue_replies_promptly_and_advances_delivery_count():
    q, events = first_dispatch(0, link_credit=5, drain=True)
    assert deliveries(events) == []
    (reply,) = replies(events)
    assert reply.drain is True
    assert reply.delivery_count == 5 and reply.link_credit == 0
    assert q.consumer("c").credit == 0


def test_drain_sends_available_then_reply_after_the_deliveries():
    q, events = first_dispatch(2, link_credit=5, drain=True)
    assert [type(e).__name__ for e in events] == ["Delivery", "Delivery", "CreditReply"]
    reply = events[-1]
    assert reply.delivery_count == 5 and reply.link_credit == 0 and reply.available == 0
    q.publish(b"late")
    assert q.dispatch() == []  # drained link has no credit


def test_drain_with_more_messages_than_credit_still_replies():
    _q, events = first_dispatch(5, link_credit=2, drain=True)
    assert len(deliveries(events)) == 2
    (reply,) = replies(events)
    assert (reply.delivery_count, reply.link_credit, reply.available) == (2, 0, 3)


def test_echo_reply_reports_state_without_draining():
    q, events = first_dispatch(4, link_credit=3, echo=True)
    (reply,) = replies(events)
    assert reply.echo and not reply.drain
    assert (reply.delivery_count, reply.link_credit, reply.available) == (3, 0, 1)
    assert q.dispatch() == []  # the reply is sent once


def test_fault_ignore_drain_keeps_credit_and_sends_no_reply():
    q = ClassicQueue("q", faults=Faults(["ignore-drain"]))
    q.add_consumer("c")
    q.flow("c", delivery_count=0, link_credit=5, drain=True)
    assert q.dispatch() == []  # no drain reply (go-amqp#255)
    q.publish(b"late")
    assert len(deliveries(q.dispatch())) == 1  # credit was never drained


def test_fault_excess_credit_after_drain_keeps_delivering():
    q = ClassicQueue("q", faults=Faults(["excess-credit-after-drain"]))
    q.add_consumer("c")
    q.flow("c", delivery_count=0, link_credit=3, drain=True)
    (reply,) = replies(q.dispatch())
    assert reply.link_credit == 0  # says 0 ...
    fill(q, 3)
    assert len(deliveries(q.dispatch())) == 3  # ... but delivers beyond it (DISPATCH-1090)


def test_fault_transfer_before_credit():
    normal = ClassicQueue("q")
    fill(normal, 1)
    normal.add_consumer("c")
    assert normal.dispatch() == []
    faulty = ClassicQueue("q", faults=Faults(["transfer-before-credit"]))
    fill(faulty, 1)
    faulty.add_consumer("c")
    assert len(deliveries(faulty.dispatch())) == 1  # rabbitmq-amqp1.0#43


# ---------------------------------------------------------------------- settlement
def granted(q: ClassicQueue, tag: str, credit: int = 100, **kw) -> None:
    q.add_consumer(tag, **kw)
    q.flow(tag, delivery_count=None, link_credit=credit)


def test_accept_removes_and_release_requeues_at_head_in_order():
    q = ClassicQueue("q")
    fill(q, 5)
    granted(q, "c", credit=3)
    got = deliveries(q.dispatch())
    ids = [e.message.msg_id for e in got]
    assert q.settle("c", [ids[0]], ACCEPTED) == 1
    q.settle("c", [ids[2], ids[1]], RELEASED)
    assert [m.payload for m in q.ready_messages()] == [b"m1", b"m2", b"m3", b"m4"]
    assert q.messages == 4
    redelivered = q.ready_messages()[0]
    assert redelivered.first_acquirer is False and redelivered.delivery_count == 0


def test_settle_ignores_already_settled_ids():
    q = ClassicQueue("q")
    fill(q, 1)
    granted(q, "c")
    (d,) = deliveries(q.dispatch())
    assert q.settle("c", [d.message.msg_id], ACCEPTED) == 1
    assert q.settle("c", [d.message.msg_id], ACCEPTED) == 0
    assert q.acked_total == 1


def test_rejected_removes():
    q = ClassicQueue("q")
    fill(q, 1)
    granted(q, "c")
    (d,) = deliveries(q.dispatch())
    q.settle("c", [d.message.msg_id], REJECTED)
    assert q.messages == 0


def test_modified_delivery_failed_increments_header_delivery_count():
    q = ClassicQueue("q")
    fill(q, 1)
    granted(q, "c")
    for expected in (1, 2):
        (d,) = deliveries(q.dispatch())
        q.settle("c", [d.message.msg_id], MODIFIED, delivery_failed=True)
        assert d.message.delivery_count == expected  # 3.2.1 / 3.4.5
    (d,) = deliveries(q.dispatch())
    assert d.message.redelivered and not d.message.first_acquirer


def test_modified_annotations_are_merged():
    q = ClassicQueue("q")
    fill(q, 1)
    granted(q, "c")
    (d,) = deliveries(q.dispatch())
    q.settle("c", [d.message.msg_id], MODIFIED, annotations={"x-a": 1})
    (d,) = deliveries(q.dispatch())
    q.settle("c", [d.message.msg_id], MODIFIED, annotations={"x-b": 2})
    assert q.ready_messages()[0].annotations == {"x-a": 1, "x-b": 2}


def test_undeliverable_here_goes_to_another_consumer_only():
    q = ClassicQueue("q")
    fill(q, 1)
    granted(q, "a")
    (d,) = deliveries(q.dispatch())
    q.settle("a", [d.message.msg_id], MODIFIED, undeliverable_here=True)
    assert q.dispatch() == []  # never again to "a" (3.4.5)
    q.publish(b"next")
    assert bodies(q.dispatch()) == [b"next"]  # "a" skips the undeliverable head
    granted(q, "b")
    events = deliveries(q.dispatch())
    assert [(e.consumer.tag, e.message.payload) for e in events] == [("b", b"m0")]


def test_fault_redeliver_undeliverable_here():
    q = ClassicQueue("q", faults=Faults(["redeliver-undeliverable-here"]))
    fill(q, 1)
    granted(q, "a")
    (d,) = deliveries(q.dispatch())
    q.settle("a", [d.message.msg_id], MODIFIED, undeliverable_here=True)
    assert [e.consumer.tag for e in deliveries(q.dispatch())] == ["a"]  # ARTEMIS-794


def test_presettled_consumer_does_not_track_deliveries():
    q = ClassicQueue("q")
    fill(q, 3)
    granted(q, "c", settled=True)
    events = deliveries(q.dispatch())
    assert all(e.settled for e in events)
    assert q.messages == 0 and q.acked_total == 3


# ---------------------------------------------------------------------- detach
def test_remove_consumer_requeues_unsettled_in_original_order():
    q = ClassicQueue("q")
    fill(q, 6)
    granted(q, "a", credit=2)
    granted(q, "b", credit=2)
    got = deliveries(q.dispatch())  # a: m0 m2, b: m1 m3
    assert [(e.consumer.tag, e.message.payload) for e in got] == [
        ("a", b"m0"),
        ("b", b"m1"),
        ("a", b"m2"),
        ("b", b"m3"),
    ]
    q.remove_consumer("b")
    q.remove_consumer("a")
    assert [m.payload for m in q.ready_messages()] == [b"m%d" % i for i in range(6)]
    assert all(not m.first_acquirer for m in q.ready_messages()[:4])
    assert all(m.first_acquirer for m in q.ready_messages()[4:])
    granted(q, "c")
    assert bodies(q.dispatch()) == [b"m%d" % i for i in range(6)]


def test_fault_no_requeue_on_detach_loses_messages():
    q = ClassicQueue("q", faults=Faults(["no-requeue-on-detach"]))
    fill(q, 3)
    granted(q, "a", credit=2)
    q.dispatch()
    assert q.remove_consumer("a") == []
    assert q.messages == 1


def test_unknown_consumer_and_duplicate_tag_are_errors():
    q = ClassicQueue("q")
    q.add_consumer("a")
    with pytest.raises(QueueError):
        q.add_consumer("a")
    for call in (
        lambda: q.flow("x", delivery_count=None, link_credit=1),
        lambda: q.settle("x", [1], ACCEPTED),
        lambda: q.remove_consumer("x"),
    ):
        with pytest.raises(QueueError):
            call()


def test_purge_drops_ready_keeps_acquired():
    q = ClassicQueue("q")
    fill(q, 5)
    granted(q, "c", credit=2)
    q.dispatch()
    assert q.purge() == 3
    assert q.messages == 2 and q.messages_unacknowledged == 2


def test_outcome_of_maps_amqp_delivery_states():
    assert outcome_of(Accepted())[0] is Outcome.ACCEPTED
    assert outcome_of(None)[0] is Outcome.ACCEPTED
    assert outcome_of(Released())[0] is Outcome.RELEASED
    outcome, kw = outcome_of(Modified(delivery_failed=True, undeliverable_here=True))
    assert outcome is Outcome.MODIFIED
    assert kw["delivery_failed"] and kw["undeliverable_here"]


def test_on_ready_callback_marks_work():
    marked: list[str] = []
    q = ClassicQueue("q", on_ready=lambda queue: marked.append(queue.name))
    q.publish(b"a")
    assert marked == []  # no consumer: nothing to do
    q.add_consumer("c")
    q.flow("c", delivery_count=None, link_credit=1)
    assert marked == ["q"]


# ---------------------------------------------------------------------- publisher credit
def test_publisher_regrant_rule():
    from amqpspec.reference_broker.protocol.credit import (
        initial_publisher_credit,
        publisher_regrant,
    )

    assert initial_publisher_credit() == 170
    assert publisher_regrant(85, 0) is None  # not below half yet
    assert publisher_regrant(84, 0) == 170
    assert publisher_regrant(0, 999) == 170
    assert publisher_regrant(0, 1000) is None  # too many unconfirmed: wait for confirms
    assert publisher_regrant(3, 0, max_link_credit=10) == 10


def test_vhost_cancel_consumer_requeues_and_redispatches_with_drain_reply():
    from amqpspec.reference_broker.queues.vhost import VirtualHost

    v = VirtualHost()
    q, _ = v.declare_queue("q", durable=False)
    fill(q, 3)
    q.add_consumer("a", owner="A")
    q.add_consumer("b", owner="B")
    q.flow("a", delivery_count=None, link_credit=3)
    assert len(deliveries(v.dispatch_pending())) == 3
    q.flow("b", delivery_count=None, link_credit=5, drain=True)
    requeued = v.cancel_consumer(q, "a")
    assert [m.payload for m in requeued] == [b"m0", b"m1", b"m2"]
    events = v.dispatch_pending()
    assert [(type(e).__name__, e.consumer.owner) for e in events] == [
        ("Delivery", "B"),
        ("Delivery", "B"),
        ("Delivery", "B"),
        ("CreditReply", "B"),
    ]
    assert all(not e.message.first_acquirer for e in deliveries(events))
    assert events[-1].delivery_count == 5 and events[-1].link_credit == 0


# ---------------------------------------------------------------------- random operations
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.integers(1, 4)),
        st.tuples(st.just("attach"), st.integers(0, 2)),
        st.tuples(st.just("detach"), st.integers(0, 2)),
        st.tuples(st.just("flow"), st.integers(0, 2), st.integers(0, 5), st.booleans()),
        st.tuples(
            st.just("settle"),
            st.integers(0, 2),
            st.sampled_from(["accepted", "rejected", "released", "failed", "elsewhere"]),
        ),
    ),
    max_size=60,
)


@settings(max_examples=80, deadline=None)
@given(OPS)
def test_property_messages_are_conserved_and_never_misdelivered(ops):
    """Every message is in exactly one place (ready, or acquired by one consumer, or gone
    after accepted/rejected); a consumer never holds more than its grants allow; a message
    modified undeliverable-here never returns to that consumer."""
    q = ClassicQueue("q")
    published = gone = 0
    attached: set[str] = set()
    refused: dict[int, set[str]] = {}
    for op in ops:
        kind = op[0]
        if kind == "publish":
            fill(q, op[1], published)
            published += op[1]
        elif kind == "attach" and f"c{op[1]}" not in attached:
            q.add_consumer(f"c{op[1]}")
            attached.add(f"c{op[1]}")
        elif kind == "detach" and f"c{op[1]}" in attached:
            q.remove_consumer(f"c{op[1]}")
            attached.discard(f"c{op[1]}")
        elif kind == "flow" and f"c{op[1]}" in attached:
            tag = f"c{op[1]}"
            consumer = q.consumer(tag)
            q.flow(tag, delivery_count=consumer.delivery_count, link_credit=op[2], drain=op[3])
        elif kind == "settle" and f"c{op[1]}" in attached:
            tag = f"c{op[1]}"
            held = list(q.consumer(tag).unacked)[:1]
            outcome = op[2]
            if outcome in ("accepted", "rejected"):
                gone += q.settle(tag, held, ACCEPTED if outcome == "accepted" else REJECTED)
            elif outcome == "released":
                q.settle(tag, held, RELEASED)
            else:
                here = outcome == "elsewhere"
                q.settle(tag, held, MODIFIED, delivery_failed=True, undeliverable_here=here)
                if here:
                    for msg_id in held:
                        refused.setdefault(msg_id, set()).add(tag)
        before = {tag: q.consumer(tag).credit for tag in attached}
        events = q.dispatch()
        for delivery in deliveries(events):
            tag = delivery.consumer.tag
            assert tag not in refused.get(delivery.message.msg_id, set())
            before[tag] -= 1
            assert before[tag] >= 0  # never beyond the consumer's credit
        ready_ids = [m.msg_id for m in q.ready_messages()]
        held_ids = [i for tag in attached for i in q.consumer(tag).unacked]
        assert len(ready_ids) + len(held_ids) + gone == published
        assert len(set(ready_ids) | set(held_ids)) == len(ready_ids) + len(held_ids)
        assert ready_ids == sorted(ready_ids)  # requeued messages keep the original order


def test_a_grant_that_supersedes_an_unanswered_drain_keeps_its_credit():
    """A drain, then before the queue answers it a plain grant: the grant is the receiver's
    latest word (2.6.7), so no drain reply zeroes its credit and the next message goes out
    (seen in 2.6.7/credit-random-schedules under --jobs 8: the reply said credit 0 while the
    queue still counted 2, and the delivery found the link without credit)."""
    q = ClassicQueue("q")
    q.add_consumer("c")
    q.flow("c", delivery_count=0, link_credit=6, drain=True)
    q.flow("c", delivery_count=0, link_credit=2)
    assert replies(q.dispatch()) == []
    fill(q, 1)
    events = q.dispatch()
    assert len(deliveries(events)) == 1 and replies(events) == []
    assert q.consumer("c").credit == 1


def test_an_echo_is_still_answered_after_a_later_grant():
    q = ClassicQueue("q")
    q.add_consumer("c")
    q.flow("c", delivery_count=0, link_credit=3, echo=True)
    q.flow("c", delivery_count=0, link_credit=2)
    (reply,) = replies(q.dispatch())
    assert reply.echo and not reply.drain and reply.link_credit == 2
