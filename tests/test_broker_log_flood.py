"""The broker's per-connection log lines under a flood (reference_broker/runtime/log_flood.py):
at most so many info lines a second pass, the first line of a later second says how many
were left out, warnings always pass; and the real broker process, flooded with refused
connections, logs at most that many and counts the rest, the last ones at shutdown."""

from __future__ import annotations

import logging
import math
import re
import socket
import time

from amqpspec.reference_broker.runtime.log_flood import FloodLimit
from amqpspec.reference_broker.runtime.process import BrokerProcess


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _record(level: int = logging.INFO, msg: str = "%s: connection refused") -> logging.LogRecord:
    return logging.LogRecord("reference_broker.connection", level, __file__, 1, msg, ("c1",), None)


def test_the_first_lines_of_a_second_pass_and_the_next_second_counts_the_rest() -> None:
    clock = Clock()
    limit = FloodLimit(per_second=3, clock=clock)
    passed = [limit.filter(_record()) for _ in range(10)]
    assert passed == [True] * 3 + [False] * 7
    assert limit.filter(_record(logging.WARNING))  # never held back
    clock.now += 1.0
    first = _record()
    assert limit.filter(first)
    note = "[7 more such lines left out before this one]"
    assert first.getMessage() == f"c1: connection refused {note}"
    second = _record()
    assert limit.filter(second) and "left out" not in second.getMessage()


def test_the_broker_flooded_with_refused_connections_logs_a_bounded_number(tmp_path) -> None:
    log = tmp_path / "broker.log"
    with BrokerProcess(log=log) as broker:
        started = time.monotonic()
        for _ in range(200):  # a protocol header no broker speaks: refused, one line each
            with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as sock:
                sock.sendall(b"AMQP\x09\x01\x00\x00")
                while sock.recv(4096):  # its own header, then it drops us: handled
                    pass
        took = time.monotonic() - started
    text = log.read_text()
    refused = [line for line in text.splitlines() if "unsupported header: protocol id 9" in line]
    counts = [int(n) for n in re.findall(r"(\d+) more such lines left out", text)]
    assert len(refused) + sum(counts) == 200  # every line passed or was counted
    # at most LINES_PER_SECOND (50) a window; the flood spans floor(took) + 1 windows
    assert len(refused) <= 50 * (math.floor(took) + 1)
