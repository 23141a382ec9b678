"""What the fuzzer remembers to make cases cheaper must not change what it makes.

`fuzz.case.decoded` answers as `decode_frame` does (frame or error) and keeps no error's
traceback; `fuzz.model.with_container_id` leaves the open it remembers as read, so the next
case's container-id is its own; the state-abusing frames of `fuzz.mutators` are built only
when drawn, and the draw takes the same random numbers whichever frame is built."""

from __future__ import annotations

import random

import pytest
from test_fuzz_container_id import _conversation

from amqpspec.amqp10.builder import build_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import decode_frame
from amqpspec.fuzz import case as fuzz_case
from amqpspec.fuzz import mutators
from amqpspec.fuzz.case import decoded, judge_bytes, step
from amqpspec.fuzz.model import with_container_id


def test_decoded_answers_as_the_decoder_does():
    frames = [s.data for s in _conversation() if s.kind == "frame"]
    for data in frames:
        frame, error = decoded(data)
        assert error is None
        assert frame == decode_frame(data)
    bad = frames[-1][:-3]  # SIZE now says more than the bytes hold
    frame, error = decoded(bad)
    assert frame is None and isinstance(error, DecodeError)
    with pytest.raises(DecodeError) as raised:
        decode_frame(bad)
    assert (error.condition, error.expected) == (raised.value.condition, raised.value.expected)
    assert judge_bytes(bad) == ("frame", f"{error.condition}: {error.expected}")


def test_a_remembered_error_holds_no_traceback():
    bad = b"\x00\x00\x00\x20\x02\x00\x00\x00" + b"\x00\x53\x10\xc0"  # SIZE 32, 12 bytes given
    _frame, error = decoded(bad)
    assert error is not None
    assert error.__traceback__ is None  # its frames would hold the caller's (a cycle)
    assert decoded(bad)[1] is error  # remembered: the same answer, not decoded again


def test_large_steps_are_decoded_but_not_remembered():
    flow = COMPOSITE_CLASSES["flow"](
        incoming_window=1, next_outgoing_id=0, outgoing_window=1, properties={"k": "v" * 5000}
    )
    data = build_frame(flow, 0)
    assert len(data) > fuzz_case.DECODED_MAX_SIZE
    before = fuzz_case._remembered.cache_info().currsize
    frame, error = decoded(data)
    assert error is None and frame == decode_frame(data)
    assert fuzz_case._remembered.cache_info().currsize == before


def test_with_container_id_leaves_the_remembered_open_as_read():
    steps = _conversation()
    first = with_container_id(steps, "case-1")
    second = with_container_id(steps, "case-2")
    opens = [decode_frame(s.data).performative for s in (first[3], second[3])]
    assert [o.container_id for o in opens] == ["case-1", "case-2"]
    assert with_container_id(steps, "case-1") == first  # the same bytes as the first time


def _draws(seed: int, pick: int | None) -> tuple[bytes, str, float]:
    """Build crafted frame `pick` (None: the drawn one); then the rng's next number."""
    rng = random.Random(seed)
    crafted = mutators._crafted(rng)
    build, label = crafted[pick] if pick is not None else rng.choice(crafted)
    return build(), label, rng.random()


def test_crafted_frames_are_built_when_drawn_and_draw_alike():
    count = len(mutators._crafted(random.Random(0)))
    for seed in range(40):
        after = {_draws(seed, pick)[2] for pick in range(count)}
        assert len(after) == 1  # building any of them takes no random number
        data, label, _ = _draws(seed, None)
        assert step(data).label == label.split("[", 1)[0]  # the frame its label names


def test_sequences_mutations_are_a_function_of_the_rng():
    steps = _conversation()
    for seed in range(60):
        once = mutators.mutate_case(steps, "sequences", random.Random(seed))
        again = mutators.mutate_case(steps, "sequences", random.Random(seed))
        assert once == again
