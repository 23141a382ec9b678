"""The added conformance case modules: registered with unique, well-formed ids, spec
sentences, known capabilities and acceptable outcome sets; the helpers of
conformance/steps_more.py build frames the core decodes. No broker needed."""

from __future__ import annotations

from amqp10.codec import encode
from amqp10.composites import Begin
from amqp10.frames import decode_frame
from amqp10.types import Described, symbol, uint
from conformance.profile import CAPABILITIES
from conformance.registry import MUST, SHOULD, load_cases
from conformance.steps_more import advance, raw_frame, raw_value_frame

ADDED = {
    "s2_6_7_credit_more",
    "s2_6_7_drain_more",
    "s2_7_4_echo_more",
    "s2_6_6_requeue",
    "s2_5_6_session_more",
    "s2_2_header_more",
    "s5_3_sasl_more",
    "s2_4_5_idle",
    "s2_7_1_open",
    "s2_7_2_begin",
    "s2_7_3_attach",
    "s3_5_terminus",
    "s2_3_framing_more",
    "s2_6_12_settlement",
    "s3_4_outcomes_more",
    "s3_2_message",
    "alarms",
    "s2_6_7_credit_hypothesis",
}


def _added():
    return [c for c in load_cases() if c.module.rsplit(".", 1)[-1] in ADDED]


def test_added_cases_registered():
    cases = _added()
    assert len(cases) >= 80
    ids = [c.case_id for c in load_cases()]
    assert len(ids) == len(set(ids))


def test_added_cases_well_formed():
    for case in _added():
        section, slug = case.case_id.split("/", 1)
        assert section[0].isdigit() and all(p.isdigit() for p in section.split(".")), case
        assert slug and slug == slug.lower() and " " not in slug, case
        assert case.level in (MUST, SHOULD)
        assert len(case.sentence) > 30, case.case_id
        assert case.description, f"{case.case_id} has no docstring"
        assert case.requires <= set(CAPABILITIES), (case.case_id, case.requires)


def test_added_negative_cases_name_the_spec_outcome():
    for case in _added():
        if case.lenient:
            assert case.outcomes, f"{case.case_id}: lenient outcomes without acceptable ones"


def test_raw_frame_decodes_with_extended_header():
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    frame = decode_frame(raw_frame(begin.encode(), channel=3, doff=3, extended=bytes(4)))
    assert frame.channel == 3
    assert frame.performative == begin


def test_symbolic_descriptor_frame_decodes_as_begin():
    value = Described(symbol("amqp:begin:list"), [None, uint(0), uint(10), uint(10)])
    frame = decode_frame(raw_value_frame(value))
    assert frame.name == "begin"
    assert frame.performative.incoming_window == 10


def test_serial_advance_wraps():
    assert advance(2, 2**32 - 3) == 5
    assert advance(7, 7) == 0
    assert encode(uint(1))  # the codec is importable alongside
