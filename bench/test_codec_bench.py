"""pytest-benchmark version of bench/codec_bench.py (not part of the test suite).

    pytest bench/test_codec_bench.py --benchmark-group-by=param:case

Each case of codec_bench (transfer frame with a 12-byte message, message only, flow and
disposition frames) is timed for amqp10 and for python-qpid-proton: encode + decode of one
message or performative per round.
"""

from __future__ import annotations

import pytest

from amqpspec.bench.codec_bench import amqp10_cases, proton_cases

CASES = {(c.name, c.impl): c for c in [*amqp10_cases(), *proton_cases()]}


@pytest.mark.parametrize("case, impl", sorted(CASES), ids=lambda x: x.replace(" ", "-"))
def test_encode_decode(benchmark, case, impl):
    subject = CASES[(case, impl)]
    decoded = benchmark(lambda: subject.decode(subject.encode()))
    assert decoded is not None
