"""Link credit (2.6.7) and session windows (2.5.6) in the checker: exact horizons.

Unit tests of `Horizons`, race cases that must stay clean, over-sends that must be caught,
and a hypothesis model: a receiver and an honest sender exchanging grants, reductions,
drains and echoes over two in-flight queues, captured at either end, never trip the
checker; a sender that over-sends is always caught.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import performative_strategies as ps
import pytest
from checker_support import C, S, Trace, found
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec.amqp10 import composites
from amqpspec.amqp10.checker import Checker, check_connection
from amqpspec.amqp10.checker.horizons import _MAX_KEYS, Horizons
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, FrameType
from amqpspec.amqp10.serial import serial_add, serial_lt

BEYOND = "link.credit.transfer-beyond-credit"
CREDIT_RULES = {
    BEYOND,
    "link.credit.transfer-without-credit",
    "link.drain.transfer-after-drain",
}


def assert_next_transfer_caught(trace: Trace, rule_id: str = BEYOND) -> None:
    """The sender's next transfer breaks `rule_id`: reported at that frame and at no other."""
    index = trace.transfer()
    assert found(trace.check(), rule_id) == [index]


# --- Horizons -----------------------------------------------------------------------------
def test_horizons_keep_the_maximum_until_a_proof_supersedes_it():
    grants = Horizons()
    grants.grant(10, 5)  # credit 5 at delivery-count 0
    grants.grant(11, 1)  # reduced to 1
    assert not grants.beyond_every(4)  # within the older, larger grant
    assert grants.beyond_every(5)
    grants.prove(11)  # the sender read the reduction
    assert grants.beyond_every(1)
    assert not grants.beyond_every(0)


def test_horizons_prove_keeps_the_last_grant_read_and_everything_after():
    grants = Horizons()
    grants.grant(1, 9)
    grants.grant(2, 3)
    grants.grant(3, 7)  # absorbs grant 2 (3 <= 7)
    grants.prove(2)  # read up to grant 2: grant 1 superseded, grant 2 (and 3) remain
    assert grants.best().horizon == 7
    assert grants.earliest_with(3) == 2


def test_horizons_memory_stays_bounded_on_a_long_run():
    grants = Horizons()
    for step in range(100_000):
        grants.grant(step, serial_add(0xFFFFFF00, step // 2 + 2))
    assert len(grants) == 1
    assert len(grants._by_horizon) <= _MAX_KEYS


def test_horizons_wrap_around_2_to_the_32():
    grants = Horizons()
    grants.grant(0, serial_add(0xFFFFFFFE, 4))
    assert not grants.beyond_every(0xFFFFFFFF)
    assert not grants.beyond_every(1)
    assert grants.beyond_every(2)


# --- races that are legal, over-sends that are not -------------------------------------------
def test_reduction_race_is_clean_and_proven_reduction_is_enforced():
    trace = Trace().setup()
    trace.flow(C, 0, 5)
    trace.flow(C, 0, 1)
    trace.transfer()
    trace.flow(S, 1, 4)  # the sender still runs on the first grant: proves only that one
    for _ in range(4):
        trace.transfer()
    assert trace.check() == []
    trace.flow(C, 5, 1)
    trace.flow(S, 5, 1)  # the sender applied the last grant: horizon 6
    trace.transfer()
    assert_next_transfer_caught(trace)


def test_sender_proof_of_a_reduction_makes_the_next_transfer_a_violation():
    trace = Trace().setup()
    trace.flow(C, 0, 5)
    trace.flow(C, 0, 1)
    trace.flow(S, 0, 1)  # the sender read the reduction before sending anything
    trace.transfer()
    assert_next_transfer_caught(trace)


def test_continuation_frames_do_not_use_credit():
    trace = Trace().setup()
    trace.flow(C, 0, 1)
    trace.transfer(more=True)
    for _ in range(3):
        trace.transfer(continuation=True, more=True)
    trace.transfer(continuation=True)
    assert trace.check() == []
    assert_next_transfer_caught(trace)


def test_flow_without_delivery_count_uses_initial_delivery_count():
    trace = Trace().setup(initial_delivery_count=100)
    trace.flow(C, None, 2)
    trace.transfer()
    trace.transfer()
    assert_next_transfer_caught(trace)


def test_grant_before_the_senders_attach_waits_for_its_initial_delivery_count():
    trace = Trace().connect().begin()
    trace.frame(C, composites.Attach(name="q", handle=0, role=True))
    trace.flow(C, None, 2)
    trace.frame(S, composites.Attach(name="q", handle=0, role=False, initial_delivery_count=7))
    trace.transfer(delivery_id=0)
    trace.transfer()
    assert_next_transfer_caught(trace)


def test_delivery_count_wraps():
    trace = Trace().setup(initial_delivery_count=0xFFFFFFFE)
    trace.flow(C, 0xFFFFFFFE, 4)
    for _ in range(4):
        trace.transfer()
    assert trace.check() == []
    assert_next_transfer_caught(trace)


def test_sender_zeroing_its_credit_is_no_violation_but_stalling_is():
    """fe2o3-amqp#264: only the receiver sets link-credit; the sender's zero proves nothing."""
    trace = Trace().setup(time=0.0)
    trace.flow(C, 0, 5, time=1.0)
    trace.flow(S, 0, 0, available=10, time=1.5)  # the sender zeroes credit it still has
    assert trace.check() == []
    stalled = trace.check(liveness_bound=5.0, now=10.0)
    assert [v.rule_id for v in stalled] == ["link.liveness.stall"]
    for second in range(5):  # a sender that goes on within the receiver's grant is fine
        trace.transfer(time=2.0 + second)
    assert trace.check(liveness_bound=5.0, now=10.0) == []
    index = trace.transfer(time=8.0)
    assert found(trace.check(), BEYOND) == [index]


def test_drain_reply_missing_is_reported_once_the_sender_provably_read_it():
    trace = Trace().setup()
    drain = trace.flow(C, 0, 5, drain=True)
    begin = composites.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    trace.frame(C, begin, channel=1)
    trace.frame(S, begin.replace(remote_channel=1), channel=1)  # proves S read frame `drain`
    violations = trace.check()
    assert [(v.rule_id, v.frame_index, v.origin) for v in violations] == [
        ("link.drain.no-reply", drain, S)
    ]


@pytest.mark.parametrize("ending", ["sender-close", "receiver-close", "sender-end", "receiver-end"])
def test_a_close_or_end_after_a_drain_request_owes_no_reply(ending):
    """The sender read the drain request, then the connection or session ended: a close
    ends every link (2.7.9), an end detaches them (2.7.8); no flow is owed after it."""
    trace = Trace().setup(time=0.0)
    trace.flow(C, 0, 5, drain=True, time=1.0)
    begin = composites.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    trace.frame(C, begin, channel=1)
    trace.frame(S, begin.replace(remote_channel=1), channel=1)  # proves S read the drain
    who, what = ending.split("-")
    origin = S if who == "sender" else C
    if what == "close":
        trace.close(origin, time=2.0)
        trace.close(C if origin == S else S, time=2.1)
    else:
        trace.end(origin, time=2.0)
    assert trace.check() == []
    assert trace.check(liveness_bound=5.0, now=30.0) == []


def test_drain_used_up_by_deliveries_needs_no_flow():
    trace = Trace().setup(time=0.0)
    trace.flow(C, 0, 2, drain=True, time=1.0)
    trace.transfer(time=1.1)
    trace.transfer(time=1.2)
    assert trace.check(liveness_bound=5.0, now=10.0) == []


def test_session_window_reduction_race_is_clean():
    trace = Trace().connect().begin(window=5).link()
    trace.flow(C, 0, 100, incoming_window=5)
    trace.flow(C, 0, 100, incoming_window=1)  # window shrinks, five transfers in flight
    for _ in range(5):
        trace.transfer()
    assert trace.check() == []
    assert_next_transfer_caught(trace, "session.window-violation")


@pytest.mark.parametrize("huge", [2**31, 2**31 + 1, 2**32 - 1])
def test_a_window_or_credit_past_serial_reach_covers_every_transfer(huge):
    # the fuzzer's clean-broker campaign: begin incoming-window 0x80000001, transfer 0 was
    # called beyond it (the horizon 0x80000001 compared as "before" 0 in serial arithmetic)
    trace = Trace().connect().begin(window=huge).link()
    trace.flow(C, 0, huge, incoming_window=huge)
    for _ in range(3):
        trace.transfer()
    assert trace.check() == []


def test_api_feed_returns_only_new_violations_and_check_connection_takes_times():
    trace = Trace().setup()
    index = trace.transfer()
    checker = Checker()
    new = [checker.feed(origin, item, time) for origin, item, time in trace.items]
    assert [v.rule_id for v in new[index]] == ["link.credit.transfer-without-credit"]
    assert all(not batch for i, batch in enumerate(new) if i != index)
    assert checker.finish() == []
    assert checker.violations == new[index]
    timed = [(origin, item, float(i)) for i, (origin, item, _) in enumerate(trace.items)]
    assert check_connection(timed, liveness_bound=100.0) == checker.violations
    try:
        checker.feed("broker", trace.items[0][1])
    except ValueError:
        pass
    else:
        raise AssertionError("unknown origin accepted")


def test_caller_known_availability_feeds_the_stall_rule():
    trace = Trace().setup(time=0.0)
    trace.flow(C, 0, 5, time=1.0)
    checker = Checker(liveness_bound=5.0)
    for origin, item, time in trace.items:
        checker.feed(origin, item, time)
    assert checker.finish(now=20.0) == []  # nobody said messages were available
    checker = Checker(liveness_bound=5.0)
    for origin, item, time in trace.items:
        checker.feed(origin, item, time)
    checker.note_available(S, 0, 0)
    assert [v.rule_id for v in checker.finish(now=20.0)] == ["link.liveness.stall"]


# --- the hypothesis model ----------------------------------------------------------------------
@dataclass
class Model:
    """Receiver R (client) and sender S (server) on one link, two in-flight queues."""

    capture_at_sender: bool
    wrap_negative_credit: bool
    available: int
    items: list = field(default_factory=list)
    to_sender: deque = field(default_factory=deque)
    to_receiver: deque = field(default_factory=deque)
    r_count: int = 0  # receiver's delivery-count
    r_incoming: int = 0  # transfers the receiver got
    s_count: int = 0  # sender's delivery-count
    s_credit: int = 0
    s_drain: bool = False
    s_out: int = 0  # transfer frames sent
    max_horizon: int = 0
    illegal: set = field(default_factory=set)  # deliveries sent with no credit applied

    def record(self, origin: str, performative) -> None:
        self.items.append((origin, Frame(FrameType.AMQP, 0, performative)))

    def opening(self) -> None:
        self.items.append((C, AMQP_HEADER))
        self.items.append((S, AMQP_HEADER))
        self.record(C, composites.Open(container_id="r"))
        self.record(S, composites.Open(container_id="s"))
        self.record(
            C, composites.Begin(next_outgoing_id=0, incoming_window=1 << 20, outgoing_window=9)
        )
        self.record(
            S,
            composites.Begin(
                remote_channel=0, next_outgoing_id=0, incoming_window=9, outgoing_window=9
            ),
        )
        self.record(C, composites.Attach(name="q", handle=0, role=True))
        self.record(S, composites.Attach(name="q", handle=0, role=False, initial_delivery_count=0))

    # R's side
    def r_send(self, performative) -> None:
        if not self.capture_at_sender:
            self.record(C, performative)
        self.to_sender.append(performative)

    def grant(self, credit: int, drain: bool, echo: bool) -> None:
        self.max_horizon = max(self.max_horizon, self.r_count + credit)
        self.r_send(
            composites.Flow(
                next_incoming_id=self.r_incoming,
                incoming_window=1 << 20,
                next_outgoing_id=0,
                outgoing_window=9,
                handle=0,
                delivery_count=self.r_count,
                link_credit=credit,
                drain=drain,
                echo=echo,
            )
        )

    def r_receive(self) -> None:
        performative = self.to_receiver.popleft()
        if self.capture_at_sender is False:
            self.record(S, performative)
        if performative.NAME == "transfer":
            self.r_count += 1
            self.r_incoming += 1
        else:
            self.r_count = performative.delivery_count

    # S's side
    def s_send(self, performative) -> None:
        if self.capture_at_sender:
            self.record(S, performative)
        self.to_receiver.append(performative)

    def s_flow(self) -> None:
        credit = self.s_credit
        if credit < 0:
            credit = credit & 0xFFFFFFFF if self.wrap_negative_credit else 0
        self.s_send(
            composites.Flow(
                next_incoming_id=0,
                incoming_window=9,
                next_outgoing_id=self.s_out,
                outgoing_window=9,
                handle=0,
                delivery_count=self.s_count,
                link_credit=credit,
                available=self.available,
                drain=self.s_drain,
            )
        )

    def transfer(self) -> None:
        if self.s_credit <= 0:
            self.illegal.add(self.s_count)
        self.s_send(
            composites.Transfer(
                handle=0, delivery_id=self.s_count, delivery_tag=b"t", message_format=0
            )
        )
        self.s_count += 1
        self.s_out += 1
        self.s_credit -= 1
        self.available = max(0, self.available - 1)

    def s_receive(self) -> None:
        flow = self.to_sender.popleft()
        if self.capture_at_sender:
            self.record(C, flow)
        self.s_credit = flow.delivery_count + flow.link_credit - self.s_count
        self.s_drain = flow.drain
        if flow.drain:
            while self.s_credit > 0 and self.available > 0:
                self.transfer()
            if self.s_credit > 0:
                self.s_count += self.s_credit
                self.s_credit = 0
            self.s_flow()
        elif flow.echo:
            self.s_flow()

    def deliver(self) -> None:
        if self.s_credit > 0 and self.available > 0:
            self.transfer()

    def run(self, steps) -> None:
        self.opening()
        for action, amount, drain, echo in steps:
            if action == "grant":
                self.grant(amount, drain, echo)
            elif action == "to_sender" and self.to_sender:
                self.s_receive()
            elif action == "to_receiver" and self.to_receiver:
                self.r_receive()
            elif action == "deliver":
                self.deliver()
            elif action == "sender_flow":
                self.s_flow()
        while self.to_sender or self.to_receiver:
            if self.to_sender:
                self.s_receive()
            if self.to_receiver:
                self.r_receive()


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["grant", "to_sender", "to_receiver", "deliver", "deliver", "sender_flow"]),
        st.integers(0, 5),
        st.booleans(),
        st.booleans(),
    ),
    max_size=80,
)
MODEL_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@MODEL_SETTINGS
@given(STEPS, st.booleans(), st.booleans(), st.integers(0, 30))
def test_legal_credit_schedules_are_clean(steps, at_sender, wrap, available):
    model = Model(at_sender, wrap, available)
    model.run(steps)
    violations = check_connection(model.items)
    assert violations == [], [str(v) for v in violations]


@MODEL_SETTINGS
@given(STEPS, st.booleans(), st.booleans(), st.integers(1, 5))
def test_over_sending_sender_is_caught(steps, at_sender, wrap, extra):
    model = Model(at_sender, wrap, available=100)
    model.run(steps)
    while serial_lt(model.s_count, model.max_horizon + extra):  # past every grant ever made
        model.transfer()
    while model.to_receiver:
        model.r_receive()
    violations = check_connection(model.items)
    numbers = {
        index: item.performative.delivery_id
        for index, (origin, item) in enumerate(model.items)
        if isinstance(item, Frame) and item.name == "transfer"
    }
    flagged = {numbers[v.frame_index] for v in violations if v.rule_id in CREDIT_RULES}
    beyond_every_grant = set(range(model.max_horizon, model.max_horizon + extra))
    # Caught whenever beyond every grant; flagged only when really sent without credit.
    assert beyond_every_grant <= flagged <= model.illegal, [str(v) for v in violations]
    assert {v.rule_id for v in violations} <= CREDIT_RULES


def test_session_echo_is_answered_by_any_flow_of_the_peer():
    def asked() -> tuple[Trace, int]:
        trace = Trace().setup(time=0.0)
        echo = trace.frame(
            C,
            composites.Flow(incoming_window=9, next_outgoing_id=0, outgoing_window=9, echo=True),
            time=1.0,
        )
        return trace, echo

    bad, echo = asked()
    violations = bad.check(liveness_bound=5.0, now=10.0)
    assert [(v.rule_id, v.frame_index, v.origin) for v in violations] == [
        ("link.echo.unanswered", echo, S)
    ]
    good, _ = asked()
    good.frame(
        S,
        composites.Flow(
            next_incoming_id=0, incoming_window=9, next_outgoing_id=0, outgoing_window=9
        ),
        time=1.5,
    )
    assert good.check(liveness_bound=5.0, now=10.0) == []


def _one_prefetched_delivery(delivered: int, count: int) -> list[tuple[str, Any]]:
    """A grant of 1 from the receiver, the one transfer it allows, settled by the receiver."""
    flow = composites.Flow(
        next_incoming_id=delivered,
        incoming_window=100,
        next_outgoing_id=0,
        outgoing_window=9,
        handle=0,
        delivery_count=count,
        link_credit=1,
    )
    transfer = composites.Transfer(
        handle=0, delivery_id=delivered, delivery_tag=b"t", message_format=0
    )
    settled = composites.Disposition(role=True, first=delivered, settled=True)
    return [(C, flow), (S, transfer), (C, settled)]


def test_state_stays_bounded_on_a_long_connection():
    """Per-frame work is O(1) amortized and what the checker keeps does not grow."""

    def frame(performative) -> Frame:
        return Frame(FrameType.AMQP, 0, performative)

    checker = Checker()
    feed = checker.feed
    feed(C, AMQP_HEADER)
    feed(S, AMQP_HEADER)
    feed(C, frame(composites.Open(container_id="c")))
    feed(S, frame(composites.Open(container_id="s")))
    feed(C, frame(composites.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=9)))
    feed(
        S,
        frame(
            composites.Begin(
                remote_channel=0, next_outgoing_id=0, incoming_window=9, outgoing_window=9
            )
        ),
    )
    delivered = 0
    for link_number in range(20):  # short-lived links come and go
        name = f"q{link_number}"
        feed(C, frame(composites.Attach(name=name, handle=0, role=True)))
        feed(S, frame(composites.Attach(name=name, handle=0, role=False, initial_delivery_count=0)))
        for count in range(1000):  # prefetch 1: a grant after every delivery, no sender flow
            for origin, performative in _one_prefetched_delivery(delivered, count):
                feed(origin, frame(performative))
            delivered += 1
        link = checker.peers[S].sessions[0].handles[0]
        assert len(link.grants) <= 2
        assert len(link.grants._by_horizon) <= 256
        feed(C, frame(composites.Detach(handle=0, closed=True)))
        feed(S, frame(composites.Detach(handle=0, closed=True)))
    assert checker.violations == []
    assert len(checker._links) == 0
    server_end = checker.peers[S].sessions[0]
    assert len(server_end.deliveries.settled_by) <= 8192
    assert len(checker.peers[C].sessions[0].incoming) <= 2
    assert len(checker.peers[S].sessions[0].session.links) == 0


_SMALL = st.integers(0, 4)
_PERFORMATIVES = st.one_of(
    ps.begins(_SMALL, _SMALL),
    ps.attaches(
        _SMALL, _SMALL, snd_settle_mode=st.integers(0, 2), rcv_settle_mode=st.integers(0, 1)
    ),
    ps.flows(_SMALL, _SMALL, available=ps.maybe(_SMALL)),
    ps.transfers(_SMALL, handle=ps.maybe(_SMALL), rcv_settle_mode=ps.maybe(_SMALL)),
    ps.dispositions(_SMALL),
    ps.detaches(_SMALL),
    st.builds(
        composites.Open,
        container_id=ps.maybe(st.just("x")),
        channel_max=ps.maybe(_SMALL),
        idle_time_out=ps.maybe(st.integers(0, 2000)),
    ),
)
_ITEMS = st.lists(
    st.tuples(
        st.sampled_from([C, S]),
        st.one_of(
            st.just(AMQP_HEADER),
            st.builds(lambda p, ch: Frame(FrameType.AMQP, ch, p), _PERFORMATIVES, _SMALL),
        ),
        st.none() | st.floats(0, 100),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_ITEMS, st.none() | st.floats(0.5, 10))
def test_any_frame_sequence_is_judged_without_crashing(items, bound):
    checker = Checker(liveness_bound=bound)
    for origin, item, time in items:
        checker.feed(origin, item, time)
    checker.finish()
    for found_violation in checker.violations:
        assert 0 <= found_violation.frame_index < max(1, len(items))
        assert found_violation.origin in (C, S)


def test_a_name_attached_twice_pairs_the_partners_attaches_in_order():
    """A client attaches one sender name on handle 0, then again on handle 1 (initial
    delivery-count 2^32-2) before the broker answers: the broker's attaches answer them in
    order, so its flow on handle 0 is judged against handle 0's delivery-count (found by
    the fuzzer's clean campaign: the second attach had taken the first's place)."""
    trace = Trace().connect().begin()
    for handle, initial in ((0, 0), (1, 0xFFFFFFFE)):
        trace.frame(
            C,
            composites.Attach(
                name="q",
                handle=handle,
                role=False,
                target=composites.Target(address="q"),
                initial_delivery_count=initial,
            ),
        )
    for handle, count in ((0, 0), (1, 0xFFFFFFFE)):
        trace.frame(
            S,
            composites.Attach(
                name="q", handle=handle, role=True, source=composites.Source(address="q")
            ),
        )
        trace.flow(S, count, 170, handle=handle)
    trace.transfer(C, handle=0)
    trace.transfer(C, handle=1)
    violations = trace.check()
    assert not found(violations, "link.credit.receiver-delivery-count-ahead"), violations
    # the same flow on the wrong handle is still caught
    wrong = Trace().connect().begin()
    wrong.frame(
        C,
        composites.Attach(
            name="q",
            handle=0,
            role=False,
            target=composites.Target(address="q"),
            initial_delivery_count=0xFFFFFFFE,
        ),
    )
    wrong.frame(
        S, composites.Attach(name="q", handle=0, role=True, source=composites.Source(address="q"))
    )
    wrong.flow(S, 0, 170)
    assert found(wrong.check(), "link.credit.receiver-delivery-count-ahead")


def test_a_sender_flow_that_regresses_its_count_leaves_the_receiver_judged_by_what_was_sent():
    """A sender (the client) attaches at delivery-count 0, then its flow claims 2^32-1 (a
    regression: its own violation); the broker's grant at delivery-count 0 crossed it and
    is not a receiver ahead of the sender (found by the fuzzer's clean campaign)."""
    trace = Trace().connect().begin()
    trace.frame(
        C, composites.Attach(name="q", handle=0, role=False, target=composites.Target(address="q"))
    )
    regress = trace.flow(C, 0xFFFFFFFF, 1)
    trace.frame(
        S, composites.Attach(name="q", handle=0, role=True, source=composites.Source(address="q"))
    )
    trace.flow(S, 0, 170)
    violations = trace.check()
    assert found(violations, "link.credit.sender-delivery-count-regressed") == [regress]
    assert not found(violations, "link.credit.receiver-delivery-count-ahead"), violations
