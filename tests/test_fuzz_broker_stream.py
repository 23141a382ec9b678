"""The broker's side of a case as the oracle reads it (fuzz.evidence.BrokerStream): taken
from the probe's connection monitor (`monitored=True`, what run_case does) it is the same,
item for item, as the chunks decoded leniently again, on a campaign's cases against the
reference broker over real sockets; and where the monitor stops (an undecodable frame of
the broker's) the lenient reading takes over from the start (test_fuzz_oracle_evidence's
`bad_open` peer: the close after the bad open is still seen)."""

from __future__ import annotations

import tempfile

from amqpspec.fuzz.campaign import CampaignConfig
from amqpspec.fuzz.evidence import BrokerStream, Received
from amqpspec.fuzz.making import make_case
from amqpspec.fuzz.model import QUEUE_HANDSHAKE
from amqpspec.fuzz.oracle import Target, run_case
from amqpspec.reference_broker.runtime.process import BrokerProcess


def _row(received: Received) -> tuple:
    return (
        received.time,
        received.kind,
        received.name,
        received.size,
        received.channel,
        received.error,
        received.describe(),
    )


def test_the_monitors_reading_is_the_lenient_reading_on_a_campaigns_cases() -> None:
    with BrokerProcess() as broker:
        target = Target("127.0.0.1", broker.port, QUEUE_HANDSHAKE)
        config = CampaignConfig(target, tempfile.mkdtemp(), seed=3)
        frames = 0
        for index in range(120):
            outcome = run_case(target, make_case(config, index).steps, quick=True)
            recording = outcome.recording
            assert recording is not None
            monitored = BrokerStream(monitored=True).update(recording)
            lenient = BrokerStream().update(recording)
            assert [_row(r) for r in monitored.items] == [_row(r) for r in lenient.items]
            frames += len(lenient.frames())
        assert frames > 120  # the broker answered: there was something to compare
