"""The field rules of 2.7.3-2.7.5 (amqp10/checker/fields.py) on crafted frames, both
directions, with the fast lane on and off: a receiver's flow delivery-count (2.7.4: set once
it saw the sender's attach, not before, not behind what it provably knew; serial
arithmetic and transfers in flight), a sender's, link fields in a session flow, a sender's
initial-delivery-count, unsettled map keys, message-format on a first transfer, and
snd-settle-mode unsettled held on every frame of a delivery unless it is aborted.
"""

from __future__ import annotations

import pytest
from checker_support import C, S, Trace, found, publishing

from amqpspec.amqp10.checker import Checker
from amqpspec.amqp10.composites import Accepted, Attach, Begin, Source, Target

MISSING = "link.flow.receiver-delivery-count-missing"
BEFORE = "link.flow.receiver-delivery-count-before-attach"
BEHIND = "link.flow.receiver-delivery-count-behind"
AHEAD = "link.credit.receiver-delivery-count-ahead"
SENDER_MISSING = "link.flow.sender-delivery-count-missing"
LINK_FIELDS = "session.flow.link-fields"
SETTLE_MODE = "settlement.snd-settle-mode"


@pytest.fixture(params=[True, False], ids=["fast", "general"])
def fast(request) -> bool:
    return request.param


def check(trace: Trace, fast: bool) -> list:
    checker = Checker(fast=fast)
    for origin, item, time in trace.items:
        checker.feed(origin, item, time)
    checker.finish()
    return checker.violations


def answered(sender: str, initial: int = 0, **attach) -> Trace:
    """`sender` attaches a sending link first; the receiver's attach answers it."""
    return publishing(sender, initial, name="l", **attach)


def receiver_first(receiver: str, initial: int = 0) -> Trace:
    """`receiver` attaches first; the sender answers (a consumer)."""
    trace = Trace().connect().begin()
    sender = S if receiver == C else C
    trace.frame(receiver, Attach(name="l", handle=0, role=True, source=Source(address="q")))
    trace.frame(sender, Attach(name="l", handle=0, role=False, initial_delivery_count=initial))
    return trace


def other(origin: str) -> str:
    return S if origin == C else C


# --- 2.7.4 receiver delivery-count: missing ----------------------------------------------
@pytest.mark.parametrize("sender", [C, S])
def test_receiver_answering_the_senders_attach_must_set_delivery_count(sender, fast):
    trace = answered(sender, initial=5)
    index = trace.flow(other(sender), None, 10)
    violations = check(trace, fast)
    assert found(violations, MISSING) == [index]
    reported = next(v for v in violations if v.rule_id == MISSING)
    assert reported.origin == other(sender)
    assert "initial-delivery-count 0x5" in reported.reason and "answered" in reported.reason
    clean = answered(sender, initial=5)
    clean.flow(other(sender), 5, 10)
    assert check(clean, fast) == []


@pytest.mark.parametrize("receiver", [C, S])
def test_a_grant_racing_the_senders_attach_may_omit_delivery_count(receiver, fast):
    """The receiver attached first: its flow after the sender's attach in the trace may
    have been sent before it read that attach (nothing proves it had)."""
    trace = receiver_first(receiver, initial=100)
    trace.flow(receiver, None, 2)
    assert check(trace, fast) == []


@pytest.mark.parametrize("receiver", [C, S])
def test_a_disposition_of_the_latest_delivery_proves_the_attach_was_seen(receiver, fast):
    sender = other(receiver)
    trace = receiver_first(receiver)
    trace.flow(receiver, None, 5)
    trace.transfer(sender, settled=False)
    trace.disposition(receiver, 0, role=True, settled=True, state=Accepted())
    index = trace.flow(receiver, None, 5)
    assert found(check(trace, fast), MISSING) == [index]


def test_receiver_flow_without_credit_must_set_it_too(fast):
    trace = answered(C)
    index = trace.flow(S, None, None, echo=True)
    assert found(check(trace, fast), MISSING) == [index]


# --- before the sender's attach ----------------------------------------------------------
@pytest.mark.parametrize("receiver", [C, S])
def test_delivery_count_before_the_senders_attach_is_reported(receiver, fast):
    trace = Trace().connect().begin()
    trace.frame(receiver, Attach(name="l", handle=0, role=True, source=Source(address="q")))
    index = trace.flow(receiver, 0, 5)
    trace.frame(other(receiver), Attach(name="l", handle=0, role=False, initial_delivery_count=0))
    trace.flow(receiver, 0, 5)  # after the attach: no longer "before"
    violations = check(trace, fast)
    assert found(violations, BEFORE) == [index]
    assert next(v for v in violations if v.rule_id == BEFORE).origin == receiver


def _stop(trace: Trace, origin: str, stop: str) -> int:
    return trace.detach(origin) if stop == "detach" else trace.end(origin)


@pytest.mark.parametrize("stop", ["detach", "end"])
@pytest.mark.parametrize("sender", [C, S])
def test_an_answer_crossing_the_senders_detach_or_end_saw_the_attach(sender, stop, fast):
    """A publisher pipelines its attach and its detach or end; the receiver's attach
    answers the sender's (2.6.3) after that frame in the trace, and its flows set
    delivery-count: it saw the attach (2.7.4), however the sender's end crossed them."""
    receiver = other(sender)
    trace = Trace().connect().begin()
    attach = Attach(name="l", handle=0, role=False, target=Target(address="q"))
    trace.frame(sender, attach.replace(initial_delivery_count=7))
    _stop(trace, sender, stop)
    trace.frame(receiver, Attach(name="l", handle=0, role=True, target=Target(address="q")))
    trace.flow(receiver, 7, 100)
    trace.flow(receiver, 7, 100, echo=True, drain=True)  # owed nothing by a detached end
    _stop(trace, receiver, stop)
    assert check(trace, fast) == []


def test_an_answer_to_a_session_begun_attached_and_ended_saw_the_attach(fast):
    """The client begins, attaches a sender and ends before the server answers its begin:
    the server's begin, attach and grant answer them all the same (2.5.2, 2.6.3)."""
    trace = Trace().connect()
    trace.frame(C, Begin(next_outgoing_id=0, incoming_window=9, outgoing_window=9))
    trace.frame(C, Attach(name="l", handle=0, role=False, initial_delivery_count=3))
    trace.end(C)
    trace.frame(
        S, Begin(remote_channel=0, next_outgoing_id=0, incoming_window=9, outgoing_window=9)
    )
    trace.frame(S, Attach(name="l", handle=0, role=True, target=Target(address="q")))
    trace.flow(S, 3, 10)
    trace.end(S)
    assert check(trace, fast) == []


def test_a_request_crossing_the_senders_detach_is_owed_no_answer(fast):
    """A drain and an echo the receiver sent after the sender's detach (2.7.7): the
    detached sender owes no flow back (2.6.7, 2.7.4), by time or by the end of the trace."""
    trace = Trace().setup(time=0.0)
    trace.detach(S, time=1.0)
    trace.flow(C, 0, 5, drain=True, echo=True, time=1.1)
    trace.frame(S, Begin(next_outgoing_id=0, incoming_window=9, outgoing_window=9), channel=1)
    assert trace.check(liveness_bound=5.0, now=10.0) == []
    assert check(trace, fast) == []


# --- behind what the receiver provably knew -----------------------------------------------
@pytest.mark.parametrize("sender", [C, S])
def test_behind_the_initial_delivery_count_across_the_wrap(sender, fast):
    receiver = other(sender)
    start = 0xFFFFFFFE
    trace = answered(sender, initial=start)
    trace.flow(receiver, start, 4)
    for _ in range(3):
        trace.transfer(sender)
    trace.flow(receiver, 0x1, 3)  # 0xfffffffe + 3 wraps to 0x1: right
    assert check(trace, fast) == []
    index = trace.flow(receiver, 0xFFFFFFFD, 3)  # one before the attach's value
    violations = check(trace, fast)
    assert found(violations, BEHIND) == [index]
    reason = next(v.reason for v in violations if v.rule_id == BEHIND)
    assert "0xfffffffd" in reason and "behind 0x1" in reason and "own flow" in reason


def test_transfers_in_flight_never_make_a_receiver_behind(fast):
    """Five deliveries sent; the receiver's grant still says the attach's value: it may not
    have read any of them (no disposition, no other proof)."""
    trace = answered(C, initial=10)
    trace.flow(S, 10, 5)
    for _ in range(5):
        trace.transfer(C)
    trace.flow(S, 10, 5, next_incoming_id=0)
    trace.flow(S, 12, 3, next_incoming_id=2)  # read two of them
    assert check(trace, fast) == []
    index = trace.flow(S, 11, 4, next_incoming_id=2)  # back below its own 12
    violations = check(trace, fast)
    assert found(violations, BEHIND) == [index]
    assert "its own flow of frame" in next(v.reason for v in violations if v.rule_id == BEHIND)


@pytest.mark.parametrize("sender", [C, S])
def test_next_incoming_id_proves_the_transfers_read(sender, fast):
    """A flow whose next-incoming-id is 3 read transfer-ids 0..2: the third delivery began at
    delivery-count 12 (the attach said 10), so 11 is behind; 12 is not (the third may still
    be counted as it completes)."""
    receiver = other(sender)

    def run(count: int) -> tuple[list, int]:
        trace = answered(sender, initial=10)
        trace.flow(receiver, 10, 5, next_incoming_id=0)
        for _ in range(3):
            trace.transfer(sender)
        index = trace.flow(receiver, count, 5, next_incoming_id=3)
        return check(trace, fast), index

    violations, index = run(11)
    assert found(violations, BEHIND) == [index]
    reason = next(v.reason for v in violations if v.rule_id == BEHIND)
    assert "next-incoming-id past transfer-id 0x2" in reason and "0xc" in reason, reason
    violations, _ = run(12)
    assert violations == []


@pytest.mark.parametrize("sender", [C, S])
def test_a_disposed_delivery_sets_a_floor(sender, fast):
    """The receiver settled delivery 2 (the latest): it read the three transfers, so its
    delivery-count is at least 12 (10 + the two before delivery 2; delivery 2 itself may
    still be counted as it completes)."""
    receiver = other(sender)

    def run(count: int) -> tuple[list, int]:
        trace = answered(sender, initial=10)
        trace.flow(receiver, 10, 5)
        for _ in range(3):
            trace.transfer(sender, settled=False)
        trace.disposition(receiver, 0, 2, role=True, settled=True, state=Accepted())
        return check(trace, fast), trace.flow(receiver, count, 5, next_incoming_id=0)

    for count in (12, 13):
        violations, _ = run(count)
        assert [v for v in violations if v.rule_id in (BEHIND, AHEAD)] == []
    trace = answered(sender, initial=10)
    trace.flow(receiver, 10, 5)
    for _ in range(3):
        trace.transfer(sender, settled=False)
    trace.disposition(receiver, 0, 2, role=True, settled=True, state=Accepted())
    index = trace.flow(receiver, 11, 5, next_incoming_id=0)
    violations = check(trace, fast)
    assert found(violations, BEHIND) == [index]
    assert "names delivery-id 0x2" in next(v.reason for v in violations if v.rule_id == BEHIND)


def test_a_disposition_proves_only_what_it_names(fast):
    trace = answered(C, initial=0)
    trace.flow(S, 0, 5)
    for _ in range(3):
        trace.transfer(C, settled=False)
    trace.disposition(S, 0, role=True, settled=True, state=Accepted())  # read delivery 0
    trace.flow(S, 0, 5, next_incoming_id=0)  # 0: right (delivery 0 may still be arriving)
    assert found(check(trace, fast), BEHIND) == []


def test_a_sender_flow_the_receiver_provably_read_sets_a_floor(fast):
    """The sender (client) says delivery-count 20 (a drain advance), then begins a second
    session; the broker's begin answering it proves it read the flow: 19 is behind."""
    trace = answered(C, initial=10)
    trace.flow(S, 10, 10, drain=True)
    trace.flow(C, 20, 0, drain=True)
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    trace.frame(C, begin, channel=1)
    trace.frame(S, begin.replace(remote_channel=1), channel=1)
    index = trace.flow(S, 19, 5)
    violations = check(trace, fast)
    assert found(violations, BEHIND) == [index]
    assert "the sender's flow of frame" in next(v.reason for v in violations if v.rule_id == BEHIND)


def test_unproven_sender_flow_sets_no_floor(fast):
    trace = answered(C, initial=10)
    trace.flow(S, 10, 10, drain=True)
    trace.flow(C, 20, 0, drain=True)
    trace.flow(S, 10, 5)  # sent before it read the drain reply
    assert found(check(trace, fast), BEHIND) == []


def test_aborted_deliveries_leave_the_receivers_own_counts_open(fast):
    """An aborted delivery may or may not count (the spec leaves it open): a receiver that
    said 11 and then 10 after an abort is not judged behind its own statement."""
    trace = answered(C, initial=10, snd_settle_mode=2)
    trace.flow(S, 10, 5)
    trace.transfer(C, more=True)
    trace.transfer(C, continuation=True, aborted=True)
    trace.flow(S, 11, 5)
    trace.flow(S, 10, 5)
    assert found(check(trace, fast), BEHIND) == []


# --- sender delivery-count, session flows ---------------------------------------------------
@pytest.mark.parametrize("sender", [C, S])
def test_sender_flow_must_set_delivery_count(sender, fast):
    trace = receiver_first(other(sender))
    trace.flow(other(sender), 0, 5)
    index = trace.flow(sender, None, 5, available=2)
    violations = check(trace, fast)
    assert found(violations, SENDER_MISSING) == [index]
    assert next(v for v in violations if v.rule_id == SENDER_MISSING).origin == sender


@pytest.mark.parametrize("origin", [C, S])
@pytest.mark.parametrize(
    "fields",
    [{"delivery_count": 0}, {"link_credit": 1}, {"available": 0}, {"drain": True}],
    ids=["delivery-count", "link-credit", "available", "drain"],
)
def test_session_flow_with_a_link_field(origin, fields, fast):
    trace = Trace().setup()
    values = {"delivery_count": None, "link_credit": None, **fields}
    count, credit = values.pop("delivery_count"), values.pop("link_credit")
    index = trace.flow(origin, count, credit, handle=None, **values)
    violations = check(trace, fast)
    assert found(violations, LINK_FIELDS) == [index]
    assert next(iter(fields)).replace("_", "-") in violations[0].reason
    clean = Trace().setup()
    clean.flow(origin, None, None, handle=None, drain=False, echo=True)
    assert check(clean, fast) == []


# --- attach and transfer fields ---------------------------------------------------------
@pytest.mark.parametrize("sender", [C, S])
def test_attach_fields_both_directions(sender, fast):
    trace = Trace().connect().begin()
    index = trace.frame(sender, Attach(name="l", handle=0, role=False, unsettled={None: None}))
    violations = check(trace, fast)
    assert found(violations, "link.attach.initial-delivery-count") == [index]
    assert found(violations, "link.attach.unsettled-null-key") == [index]


@pytest.mark.parametrize("sender", [C, S])
def test_first_transfer_needs_message_format(sender, fast):
    trace = receiver_first(other(sender))
    trace.flow(other(sender), 0, 5)
    index = trace.transfer(sender, message_format=None)
    trace.transfer(sender)
    violations = check(trace, fast)
    assert found(violations, "link.transfer.first-frame-message-format") == [index]


# --- snd-settle-mode unsettled on every frame (2.7.5 settled) -------------------------------
def unsettled_link() -> Trace:
    trace = Trace().setup(snd_settle_mode=0)
    trace.flow(C, 0, 5)
    return trace


def test_a_settled_continuation_on_an_unsettled_link_is_reported(fast):
    trace = unsettled_link()
    trace.transfer(more=True)
    index = trace.transfer(continuation=True, settled=True, more=True)
    trace.transfer(continuation=True)
    assert found(check(trace, fast), SETTLE_MODE) == [index]


def test_settled_frames_of_an_aborted_delivery_are_allowed(fast):
    """'...MUST be false (or unset) on every transfer frame for a delivery (unless the
    delivery is aborted)'."""
    trace = unsettled_link()
    trace.transfer(more=True, settled=True)
    trace.transfer(continuation=True, aborted=True, settled=True)
    trace.transfer(settled=False)
    assert found(check(trace, fast), SETTLE_MODE) == []
    single = unsettled_link()
    index = single.transfer(settled=True)
    assert found(check(single, fast), SETTLE_MODE) == [index]
