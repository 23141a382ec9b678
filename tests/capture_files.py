"""The real captures the tests read: `tests/data/captures/*.gz`, in the repository (their
README says what each holds). Each .pcap is unpacked once per machine into the temporary
folder (checked by size, written atomically) so that tests, tshark and the readers get a plain
file; the client's frame log stays gzip'd as the tests read it."""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "captures"
UNPACKED = Path(tempfile.gettempdir()) / "amqpspec-test-captures"


def _unpacked(name: str) -> Path:
    packed = DATA / (name + ".gz")
    target = UNPACKED / name
    with gzip.open(packed, "rb") as source:
        source.seek(0, os.SEEK_END)
        size = source.tell()
    if target.exists() and target.stat().st_size == size:
        return target
    UNPACKED.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=UNPACKED, prefix=name + ".")
    with os.fdopen(fd, "wb") as out, gzip.open(packed, "rb") as source:
        shutil.copyfileobj(source, out)
    os.replace(partial, target)
    return target


RABBITMQ_PCAP = _unpacked("rabbitmq-3.10.8-prefetch2-overdelivery.pcap")
RABBITMQ_PCAP_GZ = DATA / "rabbitmq-3.10.8-prefetch2-overdelivery.pcap.gz"
RABBITMQ_CLIENT_LOG = DATA / "rabbitmq-3.10.8-prefetch2-overdelivery.client-trace.txt.gz"
PROTON_C_PCAP = _unpacked("proton-c-example-broker-basic-and-multiframe.pcap")
CAPTURES = UNPACKED
