"""One violating trace and one close, clean variant for every rule in the catalog.

`CASES[rule_id]` builds (bad trace, expected frame index, good trace, run options);
`test_every_rule_has_cases` fails for a catalog rule without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from checker_support import C, S, Trace, found, publishing

from amqpspec.amqp10.checker import RULES
from amqpspec.amqp10.composites import Accepted, Attach, Begin, End, Open, Source
from amqpspec.amqp10.frames import EMPTY_FRAME, SASL_HEADER, Frame, FrameType, decode_frame
from amqpspec.amqp10.types import symbol


def test_support_builds_a_clean_trace():
    trace = Trace().setup()
    trace.flow(C, 0, 2)
    trace.transfer(S)
    trace.transfer(S)
    trace.disposition(C, 0, 1, settled=True)
    assert trace.check() == []


Case = tuple[Trace, int, Trace, dict[str, Any]]
CASES: dict[str, Callable[[], Case]] = {}


def case(rule_id: str):
    def register(build: Callable[[], Case]) -> Callable[[], Case]:
        assert rule_id in RULES, rule_id
        CASES[rule_id] = build
        return build

    return register


def credit(trace: Trace, link_credit: int = 10, receiver: str = C) -> Trace:
    trace.flow(receiver, 0, link_credit)
    return trace


def sasl_opening(trace: Trace) -> Trace:
    from amqpspec.amqp10.composites import SaslInit, SaslMechanisms

    trace.header(C, SASL_HEADER)
    trace.header(S, SASL_HEADER)
    mechanisms = [symbol("ANONYMOUS")]
    trace.frame(S, SaslMechanisms(sasl_server_mechanisms=mechanisms), frame_type=FrameType.SASL)
    trace.frame(C, SaslInit(mechanism=symbol("ANONYMOUS")), frame_type=FrameType.SASL)
    return trace


# --- framing ------------------------------------------------------------------------------
@case("framing.header-first")
def _header_first() -> Case:
    bad = Trace()
    bad.header(S)
    index = bad.frame(C, Open(container_id="c"))
    good = Trace().connect()
    return bad, index, good, {}


@case("framing.unexpected-header")
def _unexpected_header() -> Case:
    bad = Trace().connect()
    index = bad.header(C)
    from amqpspec.amqp10.composites import SaslOutcome

    good = sasl_opening(Trace())
    good.frame(S, SaslOutcome(code=0), frame_type=FrameType.SASL)
    good.connect()
    return bad, index, good, {}


@case("framing.doff")
def _doff() -> Case:
    bad = Trace().connect()
    raw = b"\x00\x00\x00\x08\x01\x00\x00\x00"
    index = bad.add(C, Frame(FrameType.AMQP, 0, None, size=8, raw=raw))
    good = Trace().connect()
    good.add(C, decode_frame(EMPTY_FRAME))
    return bad, index, good, {}


@case("framing.wrong-frame-type")
def _wrong_frame_type() -> Case:
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    bad = Trace().connect()
    index = bad.add(C, Frame(FrameType.SASL, 0, begin))
    good = Trace().connect()
    good.frame(C, begin)
    return bad, index, good, {}


@case("framing.pre-open-frame-size")
def _pre_open_frame_size() -> Case:
    bad = Trace().headers()
    index = bad.frame(C, Open(container_id="c" * 600))
    good = Trace().headers()
    good.frame(S, Open(container_id="s"))
    good.frame(C, Open(container_id="c" * 600))  # the partner's open allows it
    return bad, index, good, {}


@case("framing.max-frame-size")
def _max_frame_size() -> Case:
    small = Open(container_id="s", max_frame_size=512)
    bad = credit(Trace().connect(server_open=small).begin().link(sender=C), receiver=S)
    index = bad.transfer(C, payload=b"\x00Sw\xa0" + b"x" * 600)
    good = credit(Trace().connect(server_open=small).begin().link(sender=C), receiver=S)
    good.transfer(C, payload=b"\x00Sw\xa0" + b"x" * 400)
    return bad, index, good, {}


@case("security.sasl-order")
def _sasl_order() -> Case:
    from amqpspec.amqp10.composites import SaslOutcome

    bad = sasl_opening(Trace())
    index = bad.frame(C, Open(container_id="c"))
    good = sasl_opening(Trace())
    good.frame(S, SaslOutcome(code=0), frame_type=FrameType.SASL)
    good.connect()
    return bad, index, good, {}


# --- connection ---------------------------------------------------------------------------
@case("connection.open-first")
def _open_first() -> Case:
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    bad = Trace().headers()
    index = bad.frame(C, begin)
    good = Trace().connect()
    good.frame(C, begin)
    return bad, index, good, {}


@case("connection.open-channel")
def _open_channel() -> Case:
    bad = Trace().headers()
    index = bad.frame(C, Open(container_id="c"), channel=1)
    good = Trace().connect()
    return bad, index, good, {}


@case("connection.container-id")
def _container_id() -> Case:
    bad = Trace().headers()
    index = bad.add(C, Frame(FrameType.AMQP, 0, Open()))  # cannot be encoded: no wire form
    good = Trace().headers()
    good.add(C, Frame(FrameType.AMQP, 0, Open(container_id="")))
    return bad, index, good, {}


@case("connection.channel-max")
def _channel_max() -> Case:
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    one_channel = Open(container_id="s", channel_max=0)
    bad = Trace().connect(server_open=one_channel)
    index = bad.frame(C, begin, channel=1)
    good = Trace().connect(server_open=one_channel)
    good.frame(C, begin, channel=0)
    return bad, index, good, {}


@case("connection.idle-timeout")
def _idle_timeout() -> Case:
    one_second = Open(container_id="s", idle_time_out=1000)
    bad = Trace().connect(time=0.0, server_open=one_second)
    index = bad.add(C, decode_frame(EMPTY_FRAME), 2.5)
    good = Trace().connect(time=0.0, server_open=one_second)
    for tick in range(1, 6):
        good.add(C, decode_frame(EMPTY_FRAME), tick * 0.5)
    return bad, index, good, {}


@case("connection.frame-after-close")
def _frame_after_close() -> Case:
    bad = Trace().connect()
    bad.close(C)
    index = bad.frame(C, Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10))
    good = Trace().connect()
    good.close(C)
    good.close(S)
    return bad, index, good, {}


@case("connection.close-unanswered")
def _close_unanswered() -> Case:
    bad = Trace().connect(time=0.0)
    index = bad.close(C, time=1.0)
    good = Trace().connect(time=0.0)
    good.close(C, time=1.0)
    good.close(S, time=1.5)
    return bad, index, good, {"liveness_bound": 5.0, "now": 10.0}


# --- session ------------------------------------------------------------------------------
@case("session.no-session")
def _no_session() -> Case:
    attach = Attach(name="q", handle=0, role=True)
    bad = Trace().connect()
    index = bad.frame(C, attach)
    good = Trace().connect().begin()
    good.frame(C, attach)
    return bad, index, good, {}


@case("session.channel-in-use")
def _channel_in_use() -> Case:
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    bad = Trace().connect().begin()
    index = bad.frame(C, begin, channel=0)
    good = Trace().connect().begin()
    good.frame(C, begin, channel=1)
    return bad, index, good, {}


@case("session.remote-channel")
def _remote_channel() -> Case:
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    bad = Trace().connect()
    bad.frame(C, begin)
    index = bad.frame(S, begin.replace(remote_channel=5))
    good = Trace().connect()
    good.frame(C, begin)
    good.frame(S, begin.replace(remote_channel=0))
    return bad, index, good, {}


@case("session.window-violation")
def _window_violation() -> Case:
    bad = Trace().connect().begin(window=2).link()
    bad.flow(C, 0, 10, incoming_window=2)
    bad.transfer()
    bad.transfer()
    index = bad.transfer()
    good = Trace().connect().begin(window=2).link()
    good.flow(C, 0, 10, incoming_window=2)
    good.transfer()
    good.transfer()
    good.flow(C, 2, 8, incoming_window=2)  # next-incoming-id 2: the window moves on
    good.transfer()
    return bad, index, good, {}


@case("session.next-outgoing-id")
def _next_outgoing_id() -> Case:
    bad = credit(Trace().setup())
    bad.transfer()
    index = bad.flow(S, 1, 9, next_outgoing_id=0)
    good = credit(Trace().setup())
    good.transfer()
    good.flow(S, 1, 9)
    return bad, index, good, {}


@case("session.frame-after-end")
def _frame_after_end() -> Case:
    bad = Trace().connect().begin()
    bad.end(C)
    index = bad.frame(C, Attach(name="q", handle=0, role=True))
    good = Trace().connect().begin()
    good.end(C)
    good.end(S)
    return bad, index, good, {}


def consuming(answer: Attach) -> tuple[Trace, int]:
    """The client attaches a receiving link q and the server answers with `answer`: the
    trace and the answer's frame index."""
    trace = Trace().connect().begin()
    trace.frame(C, Attach(name="q", handle=0, role=True))
    return trace, trace.frame(S, answer)


# --- link lifecycle -----------------------------------------------------------------------
@case("link.attach.handle-in-use")
def _handle_in_use() -> Case:
    bad = Trace().setup()
    index = bad.frame(C, Attach(name="other", handle=0, role=True))
    good = Trace().setup()
    good.frame(C, Attach(name="other", handle=1, role=True))
    return bad, index, good, {}


@case("link.attach.handle-max")
def _handle_max() -> Case:
    bad = Trace().connect().begin(handle_max=0)
    index = bad.frame(C, Attach(name="q", handle=1, role=True))
    good = Trace().connect().begin(handle_max=0)
    good.frame(C, Attach(name="q", handle=0, role=True))
    return bad, index, good, {}


@case("link.attach.role")
def _attach_role() -> Case:
    bad, index = consuming(Attach(name="q", handle=0, role=True))
    good, _ = consuming(Attach(name="q", handle=0, role=False, initial_delivery_count=0))
    return bad, index, good, {}


@case("link.unattached-handle")
def _unattached_handle() -> Case:
    bad = Trace().setup()
    index = bad.flow(C, 0, 10, handle=5)
    good = Trace().setup()
    good.flow(C, 0, 10, handle=0)
    return bad, index, good, {}


@case("link.frame-after-detach")
def _frame_after_detach() -> Case:
    bad = Trace().setup()
    bad.detach(C)
    index = bad.flow(C, 0, 10)
    good = Trace().setup()
    good.detach(C)
    good.detach(S)
    return bad, index, good, {}


@case("link.transfer.wrong-role")
def _wrong_role() -> Case:
    bad = credit(Trace().setup())
    index = bad.transfer(C)
    good = credit(Trace().setup())
    good.transfer(S)
    return bad, index, good, {}


@case("link.transfer.first-frame-fields")
def _first_frame_fields() -> Case:
    bad = credit(Trace().setup())
    index = bad.transfer(delivery_id=None)
    good = credit(Trace().setup())
    good.transfer(more=True)
    good.transfer(delivery_id=None, continuation=True)  # continuation may omit it
    return bad, index, good, {}


# --- link credit --------------------------------------------------------------------------
@case("link.credit.transfer-without-credit")
def _without_credit() -> Case:
    bad = Trace().setup()
    index = bad.transfer()
    good = credit(Trace().setup(), 1)
    good.transfer()
    return bad, index, good, {}


@case("link.credit.transfer-beyond-credit")
def _beyond_credit() -> Case:
    # RabbitMQ 3.10 (docs/real-brokers.md): the third transfer is beyond every grant.
    bad = Trace().setup(initial_delivery_count=0x178)
    bad.flow(C, 0x178, 1)
    bad.flow(S, 0x178, 1, available=0xC1D8)
    bad.flow(C, 0x178, 2)
    bad.transfer(delivery_id=0x178)
    bad.transfer()
    index = bad.transfer()
    # Credit 5 reduced to 1 while five transfers were in flight: legal (2.6.7).
    good = Trace().setup()
    good.flow(C, 0, 5)
    good.flow(C, 0, 1)
    for _ in range(5):
        good.transfer()
    return bad, index, good, {}


@case("link.credit.receiver-delivery-count-ahead")
def _receiver_count_ahead() -> Case:
    bad = Trace().setup()
    index = bad.flow(C, 3, 1)
    good = Trace().setup()
    good.flow(C, 0, 1)
    good.transfer()
    good.flow(C, 1, 1)
    return bad, index, good, {}


@case("link.credit.sender-delivery-count-regressed")
def _sender_count_regressed() -> Case:
    bad = credit(Trace().setup(), 5)
    bad.transfer()
    bad.transfer()
    index = bad.flow(S, 1, 3)
    good = credit(Trace().setup(), 5)
    good.transfer()
    good.transfer()
    good.flow(S, 2, 3)
    return bad, index, good, {}


@case("link.drain.transfer-after-drain")
def _transfer_after_drain() -> Case:
    def drained() -> Trace:
        trace = Trace().setup()
        trace.flow(C, 0, 5, drain=True)
        trace.transfer()
        trace.transfer()
        trace.flow(S, 5, 0, drain=True)  # reply: delivery-count advanced, credit 0
        return trace

    bad = drained()
    index = bad.transfer()
    good = drained()
    good.flow(C, 5, 1)
    good.transfer()
    return bad, index, good, {}


@case("link.drain.no-reply")
def _drain_no_reply() -> Case:
    bad = Trace().setup(time=0.0)
    index = bad.flow(C, 0, 5, drain=True, time=1.0)
    good = Trace().setup(time=0.0)
    good.flow(C, 0, 5, drain=True, time=1.0)
    good.flow(S, 5, 0, drain=True, time=1.1)
    return bad, index, good, {"liveness_bound": 5.0, "now": 10.0}


@case("link.echo.unanswered")
def _echo_unanswered() -> Case:
    bad = Trace().setup(time=0.0)
    index = bad.flow(C, 0, 5, echo=True, time=1.0)
    good = Trace().setup(time=0.0)
    good.flow(C, 0, 5, echo=True, time=1.0)
    good.flow(S, 0, 5, time=1.2)
    return bad, index, good, {"liveness_bound": 5.0, "now": 10.0}


@case("link.liveness.stall")
def _stall() -> Case:
    def granted() -> tuple[Trace, int]:
        trace = Trace().setup(time=0.0)
        trace.flow(S, 0, 0, available=3, time=0.5)
        return trace, trace.flow(C, 0, 5, time=1.0)

    bad, index = granted()
    good, _ = granted()
    for tick in range(3):
        good.transfer(time=2.0 + tick)
    return bad, index, good, {"liveness_bound": 5.0, "now": 10.0}


# --- performative fields (2.7.3-2.7.5) ----------------------------------------------------
@case("link.attach.initial-delivery-count")
def _initial_delivery_count() -> Case:
    bad, index = consuming(Attach(name="q", handle=0, role=False))
    good, _ = consuming(Attach(name="q", handle=0, role=False, initial_delivery_count=0))
    return bad, index, good, {}


@case("link.attach.unsettled-null-key")
def _unsettled_null_key() -> Case:
    bad = Trace().connect().begin()
    index = bad.frame(C, Attach(name="q", handle=0, role=True, unsettled={None: Accepted()}))
    good = Trace().connect().begin()
    good.frame(C, Attach(name="q", handle=0, role=True, unsettled={b"t": Accepted()}))
    return bad, index, good, {}


@case("link.transfer.first-frame-message-format")
def _first_frame_message_format() -> Case:
    bad = credit(Trace().setup())
    index = bad.transfer(message_format=None, more=True)
    bad.transfer(continuation=True)
    good = credit(Trace().setup())
    good.transfer(more=True)
    good.transfer(continuation=True)  # a continuation may omit it
    return bad, index, good, {}


@case("session.flow.link-fields")
def _session_flow_link_fields() -> Case:
    bad = Trace().setup()
    index = bad.flow(C, None, 10, handle=None)
    good = Trace().setup()
    good.flow(C, None, None, handle=None)
    return bad, index, good, {}


@case("link.flow.sender-delivery-count-missing")
def _sender_delivery_count_missing() -> Case:
    bad = credit(Trace().setup())
    index = bad.flow(S, None, 10, available=3)
    good = credit(Trace().setup())
    good.flow(S, 0, 10, available=3)
    return bad, index, good, {}


@case("link.flow.receiver-delivery-count-missing")
def _receiver_delivery_count_missing() -> Case:
    bad = publishing(initial_delivery_count=7)
    index = bad.flow(S, None, 100)  # RabbitMQ 3.10 as a receiver
    good = publishing(initial_delivery_count=7)
    good.flow(S, 7, 100)
    return bad, index, good, {}


@case("link.flow.receiver-delivery-count-before-attach")
def _receiver_delivery_count_before_attach() -> Case:
    def receiving(count: int | None) -> tuple[Trace, int]:
        trace = Trace().connect().begin()
        trace.frame(C, Attach(name="q", handle=0, role=True, source=Source(address="q")))
        index = trace.flow(C, count, 5)  # Proton's first grant, before the sender's attach
        trace.frame(S, Attach(name="q", handle=0, role=False, initial_delivery_count=3))
        return trace, index

    bad, index = receiving(0)
    good, _ = receiving(None)
    return bad, index, good, {}


@case("link.flow.receiver-delivery-count-behind")
def _receiver_delivery_count_behind() -> Case:
    bad = publishing(initial_delivery_count=7)
    index = bad.flow(S, 6, 100)  # the attach said 7
    good = publishing(initial_delivery_count=7)
    good.flow(S, 7, 100)
    return bad, index, good, {}


# --- settlement ---------------------------------------------------------------------------
@case("settlement.disposition-range")
def _disposition_range() -> Case:
    bad = credit(Trace().setup())
    bad.transfer()
    bad.transfer()
    index = bad.disposition(C, 1, 0, settled=True)
    good = credit(Trace().setup())
    good.transfer()
    good.transfer()
    good.disposition(C, 0, 1, settled=True)
    return bad, index, good, {}


@case("settlement.unknown-delivery")
def _unknown_delivery() -> Case:
    bad = credit(Trace().setup())
    bad.transfer()
    index = bad.disposition(C, 0, 3, settled=True)
    good = credit(Trace().setup())
    good.transfer()
    good.disposition(C, 0, 0, settled=True)
    return bad, index, good, {}


@case("settlement.settled-again-unsettled")
def _settled_again_unsettled() -> Case:
    bad = credit(Trace().setup())
    bad.transfer(settled=True)
    index = bad.disposition(C, 0, state=Accepted())
    good = credit(Trace().setup())
    good.transfer(settled=False)
    good.disposition(C, 0, state=Accepted())
    good.disposition(C, 0, state=Accepted(), settled=True)
    return bad, index, good, {}


@case("settlement.snd-settle-mode")
def _snd_settle_mode() -> Case:
    bad = credit(Trace().setup(snd_settle_mode=1))
    index = bad.transfer(settled=False)
    good = credit(Trace().setup(snd_settle_mode=1))
    good.transfer(settled=True)
    return bad, index, good, {}


@case("settlement.rcv-settle-mode")
def _rcv_settle_mode() -> Case:
    bad = credit(Trace().setup(rcv_settle_mode=0))
    index = bad.transfer(rcv_settle_mode=1)
    good = credit(Trace().setup(rcv_settle_mode=1))
    good.transfer(rcv_settle_mode=1)
    return bad, index, good, {}


# --- the tests ----------------------------------------------------------------------------
def test_every_rule_has_cases():
    missing = sorted(set(RULES) - set(CASES))
    assert not missing, f"rules without a violating and a clean case: {missing}"
    assert len(RULES) >= 30


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_is_reported_on_its_violation(rule_id):
    bad, index, _, options = CASES[rule_id]()
    violations = bad.check(**options)
    assert index in found(violations, rule_id), [str(v) for v in violations]
    rule = RULES[rule_id]
    reported = next(v for v in violations if v.rule_id == rule_id)
    assert (reported.section, reported.level) == (rule.section, rule.level)
    assert reported.reason and "\n" not in reported.reason


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_close_variant_is_clean(rule_id):
    _, _, good, options = CASES[rule_id]()
    violations = good.check(**options)
    assert not found(violations, rule_id), [str(v) for v in violations]
    assert violations == [], [str(v) for v in violations]


def test_docs_rule_catalog_is_generated_from_the_code():
    from pathlib import Path

    from amqpspec.amqp10.checker.rules import catalog_markdown

    docs = Path(__file__).resolve().parents[1] / "docs" / "rules.md"
    assert docs.read_text() == catalog_markdown(), "run: python -m amqpspec.amqp10.checker.rules"


def test_rule_ids_are_hierarchical_and_sections_numbered():
    import re

    for rule_id, rule in RULES.items():
        assert re.fullmatch(r"[a-z]+(\.[a-z0-9-]+)+", rule_id), rule_id
        assert re.fullmatch(r"\d+(\.\d+)+", rule.section), rule
        assert rule.level in ("MUST", "SHOULD")
        assert rule.rule_id == rule_id and rule.sentence.endswith(".")


def test_a_run_of_frames_before_open_is_reported_once():
    trace = Trace().headers()
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    first = trace.frame(C, begin)
    trace.frame(C, Attach(name="q", handle=0, role=True))
    assert found(trace.check(), "connection.open-first") == [first]


def test_begin_answering_a_begin_the_peer_already_ended_is_clean():
    """2.5.2 race: the client pipelines begin and end; the server, which read the begin
    first, answers it (remote-channel 0), then the end. Its begin is a legal answer (found
    by the fuzzer: the checker had forgotten the unanswered begin at the client's end)."""
    trace = Trace().connect()
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    trace.frame(C, begin)
    trace.frame(C, End())
    trace.frame(
        S, Begin(remote_channel=0, next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    )
    trace.frame(S, End())
    assert trace.check() == []


def test_frames_up_to_512_bytes_are_within_any_advertised_max_frame_size():
    """2.7.1: MIN-MAX-FRAME-SIZE is 512. A client advertising max-frame-size 1 is still
    sent the server's open and a close of up to 512 bytes (found by the fuzzer)."""
    trace = Trace().headers()
    trace.frame(C, Open(container_id="client", max_frame_size=1))
    trace.frame(S, Open(container_id="server", properties={symbol("x"): "y" * 300}))
    assert found(trace.check(), "framing.max-frame-size") == []


def test_a_link_pair_shares_a_name_one_link_per_direction():
    """2.6.1: a name identifies a link in one direction, so a sender and a receiver of the
    same name (RabbitMQ 4's management-link-pair), attached before either answer, are two
    links; the answers in the other order are clean, credit checked per link."""
    trace = Trace().connect().begin()
    trace.frame(C, Attach(name="pair", handle=0, role=False, initial_delivery_count=0))
    trace.frame(C, Attach(name="pair", handle=1, role=True))
    trace.frame(S, Attach(name="pair", handle=0, role=False, initial_delivery_count=0))
    trace.frame(S, Attach(name="pair", handle=1, role=True))
    assert trace.check() == []
