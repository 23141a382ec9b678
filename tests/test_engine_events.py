"""The engine's events keep their dataclass contract with the faster __init__
(amqp10.engine.events._set_slots_init): every field set, defaults applied, keywords
accepted, frozen, equal and hashed by value."""

from __future__ import annotations

import dataclasses

import pytest

from amqpspec.amqp10.engine import events as ev

EVENT_CLASSES = [
    c
    for c in vars(ev).values()
    if isinstance(c, type) and issubclass(c, ev.Event) and dataclasses.is_dataclass(c)
]


def test_every_event_class_is_covered():
    assert ev.TransferReceived in EVENT_CLASSES and len(EVENT_CLASSES) > 15


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
def test_fields_defaults_frozen_and_equality(cls):
    fields = dataclasses.fields(cls)
    values = {f.name: (f.name, index) for index, f in enumerate(fields)}  # distinct values
    positional = cls(*values.values())
    keywords = cls(**values)
    for f in fields:
        assert getattr(positional, f.name) == values[f.name]
    assert positional == keywords and hash(positional) == hash(keywords)
    if fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(positional, fields[0].name, None)
        other = dict(values, **{fields[0].name: "different"})
        assert cls(**other) != positional
    required = {f.name: 1 for f in fields if f.default is dataclasses.MISSING}
    made = cls(**required)
    for f in fields:
        expected = 1 if f.name in required else f.default
        assert getattr(made, f.name) == expected
    if required:
        with pytest.raises(TypeError):
            cls()
