"""The steps of conformance/steps/ that need no broker: crafted frames decode with the
core decoder, serial distances wrap, and no steps module registers a case."""

from __future__ import annotations

import importlib
import pkgutil

import conformance.steps
from amqp10.composites import Begin
from amqp10.frames import decode_frame
from amqp10.types import Described, symbol, uint
from conformance.registry import load_cases
from conformance.steps.credit import advance
from conformance.steps.frames import raw_frame, raw_value_frame


def test_raw_frame_decodes_with_extended_header() -> None:
    begin = Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)
    frame = decode_frame(raw_frame(begin.encode(), channel=3, doff=3, extended=bytes(4)))
    assert frame.channel == 3
    assert frame.performative == begin


def test_symbolic_descriptor_frame_decodes_as_begin() -> None:
    value = Described(symbol("amqp:begin:list"), [None, uint(0), uint(10), uint(10)])
    frame = decode_frame(raw_value_frame(value))
    assert frame.name == "begin"
    assert frame.performative.incoming_window == 10


def test_serial_advance_wraps() -> None:
    assert advance(2, 2**32 - 3) == 5
    assert advance(7, 7) == 0


def test_steps_register_no_case() -> None:
    modules = {
        f"{conformance.steps.__name__}.{info.name}"
        for info in pkgutil.iter_modules(conformance.steps.__path__)
    }
    for module in modules:
        importlib.import_module(module)
        assert importlib.import_module(module).__doc__, f"{module} has no header"
    assert not {case.module for case in load_cases()} & modules
