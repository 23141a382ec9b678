"""fuzz.oracle: a close whose header a mutation changed into an empty frame (DOFF 3: no
body, 2.3.1) closes nothing, so the fuzzer still sends its own close and judges the answer;
the clean reference broker answers it: no `hang`. Found by a 120 s campaign against the clean
reference broker (seed 3, case 203), which reported the broker's rightful wait as a hang."""

from __future__ import annotations

from amqpspec.fuzz.case import FRAME, HEADER, Step
from amqpspec.fuzz.detection import Supervised, target_for
from amqpspec.fuzz.oracle import run_case

STEPS = [
    ("414d515003010000", "protocol-header 3.1.0.0", HEADER),
    (
        "0000002302010000005341c01602a305504c41494ea00c006775657374006775657374",
        "sasl-init",
        FRAME,
    ),
    ("414d515000010000", "protocol-header 0.1.0.0", HEADER),
    (
        "0000002302000000005310c01601a113616d7170737065632d66757a7a2d332d323033",
        "open[fields: container-id]",
        FRAME,
    ),
    ("0000000c0300000000531844", "close[2 byte(s) changed]", FRAME),  # an empty frame
]


def test_a_close_mutated_into_an_empty_frame_is_no_close() -> None:
    broker = Supervised([])
    try:
        steps = [Step(bytes.fromhex(h), label, kind) for h, label, kind in STEPS]
        for quick in (True, False):
            outcome = run_case(target_for(broker), steps, quick=quick)
            assert outcome.verdict is None, outcome.verdict
    finally:
        broker.stop()
