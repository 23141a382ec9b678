"""Capture variants for the triage tests: the same packets as classic pcap in the other byte
order, or gzip'd; written with struct from a classic pcap (an independent writer from the
reader under test). tshark's editcap makes the pcapng <-> pcap and nanosecond variants.
`rabbit_overrun` cuts the RabbitMQ capture the triage tests share. Also what the run_job tests
share: a local Spark session, a progress display showing nothing."""

from __future__ import annotations

import gzip
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

EDITCAP = shutil.which("editcap")


def editcap(source: Path, target: Path, *options: str) -> Path:
    subprocess.run([EDITCAP or "editcap", *options, str(source), str(target)], check=True)
    return target


def rabbit_overrun(target: Path) -> Path:
    """The RabbitMQ capture's first 14,000 packets, just past its credit overrun (frame
    13655), written as pcapng to `target`."""
    from capture_files import RABBITMQ_PCAP  # unpacks the captures: only when a test needs one

    subprocess.run(["editcap", "-r", str(RABBITMQ_PCAP), str(target), "1-14000"], check=True)
    return target


def big_endian(source: Path, target: Path) -> Path:
    """A little-endian classic pcap rewritten with big-endian headers (same packets)."""
    data = source.read_bytes()
    header = struct.unpack_from("<IHHiIII", data, 0)
    out = bytearray(struct.pack(">IHHiIII", *header))
    offset = 24
    while offset + 16 <= len(data):
        seconds, fraction, caplen, wirelen = struct.unpack_from("<IIII", data, offset)
        out += struct.pack(">IIII", seconds, fraction, caplen, wirelen)
        out += data[offset + 16 : offset + 16 + caplen]
        offset += 16 + caplen
    target.write_bytes(bytes(out))
    return target


def gzipped(source: Path, target: Path) -> Path:
    with source.open("rb") as src, gzip.open(target, "wb") as out:
        shutil.copyfileobj(src, out)
    return target


class QuietProgress:
    """run_job's progress display, showing nothing."""

    def add_task(self, *args, **kwargs):
        return 0

    def update(self, *args, **kwargs):
        pass

    def advance(self, *args, **kwargs):
        pass


@contextmanager
def local_spark(conf: dict[str, str] | None = None) -> Iterator[Any]:
    """A local[2] Spark session whose executors run this interpreter, stopped on exit."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from amqpspec.spark_triage.session import spark_session

    session = spark_session("local[2]", 2, conf)
    try:
        yield session
    finally:
        session.stop()
