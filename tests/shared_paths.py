"""Where the project's shared test data lives: ../shared beside the checkout (as on CI and
the developers' machines), or AMQPSPEC_SHARED. The real captures there are required test
data: a missing file fails its test instead of skipping it."""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("AMQPSPEC_SHARED") or Path(__file__).resolve().parents[2] / "shared")
CAPTURES = SHARED / "captures"
RABBITMQ_PCAP = CAPTURES / "rabbitmq-3.10.8-prefetch2-overdelivery.pcap"
RABBITMQ_CLIENT_LOG = CAPTURES / "rabbitmq-3.10.8-prefetch2-overdelivery.client-trace.txt.gz"
PROTON_C_PCAP = CAPTURES / "proton-c-example-broker-basic-and-multiframe.pcap"
