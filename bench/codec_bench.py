"""Codec benchmark: amqp10 against python-qpid-proton, in the same run.

    amqpspec bench codec [--seconds 1.0] [--rounds 3]
    python -m amqpspec.bench.codec_bench [--seconds 1.0] [--rounds 3]

Owns: the benchmark cases and the table. Each case times encode and decode separately
(best of `rounds` runs of about `seconds` each, amqp10 and proton runs alternating so
machine load hits both alike; fresh objects are built inside the timed loop as an
application would) and prints operations per second and amqp10/proton ratios:
- transfer frame: a Transfer performative plus a 12-byte message (one data section),
  framed; decoded back to the Transfer and the Message. Proton's row is
  `proton.Message.encode/decode` for the same message (proton's Python API has no framing,
  so its row does less work than ours).
- message only: the 12-byte message alone, amqp10 `Message` against `proton.Message`.
- flow / disposition frame: amqp10 frames against proton.Data encoding/decoding the same
  described performative (`put_object(Described(ulong(code), [typed fields]))`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from amqpspec.amqp10.composites import Disposition, Flow, Transfer
from amqpspec.amqp10.frames import decode_frame, encode_frame
from amqpspec.amqp10.message import Message
from amqpspec.bench.script import script_main
from amqpspec.bench.table import print_table

BODY = b"hello world!"  # 12 bytes
assert len(BODY) == 12


@dataclass
class Case:
    name: str
    impl: str
    encode: Callable[[], bytes]
    decode: Callable[[bytes], object]


def amqp10_cases() -> list[Case]:
    def enc_transfer() -> bytes:
        transfer = Transfer(
            handle=0,
            delivery_id=42,
            delivery_tag=b"\x00\x00\x00\x2a",
            message_format=0,
            settled=False,
        )
        return encode_frame(transfer, 1, Message.of(BODY).encode())

    def dec_transfer(raw: bytes) -> object:
        frame = decode_frame(raw)
        return frame.performative, Message.decode(frame.payload)

    def enc_message() -> bytes:
        return Message.of(BODY).encode()

    def enc_flow() -> bytes:
        flow = Flow(
            next_incoming_id=100,
            incoming_window=2048,
            next_outgoing_id=7,
            outgoing_window=2048,
            handle=0,
            delivery_count=42,
            link_credit=100,
        )
        return encode_frame(flow, 1)

    def enc_disposition() -> bytes:
        return encode_frame(Disposition(role=True, first=42, last=42, settled=True), 1)

    return [
        Case("transfer frame (12 B message)", "amqp10", enc_transfer, dec_transfer),
        Case("message only (12 B)", "amqp10", enc_message, Message.decode),
        Case("flow frame", "amqp10", enc_flow, decode_frame),
        Case("disposition frame", "amqp10", enc_disposition, decode_frame),
    ]


def proton_cases() -> list[Case]:
    try:
        import proton
    except ImportError:
        return []

    def enc_message() -> bytes:
        message = proton.Message(body=BODY, inferred=True)
        return message.encode()

    def dec_message(raw: bytes) -> object:
        message = proton.Message()
        message.decode(raw)
        return message

    def data_encode(value: object) -> bytes:
        data = proton.Data()
        data.put_object(value)
        return data.encode()

    def data_decode(raw: bytes) -> object:
        data = proton.Data()
        data.decode(raw)
        data.rewind()
        data.next()
        return data.get_object()

    u = proton.uint

    def enc_flow() -> bytes:
        fields = [u(100), u(2048), u(7), u(2048), u(0), u(42), u(100)]
        return data_encode(proton.Described(proton.ulong(0x13), fields))

    def enc_disposition() -> bytes:
        fields = [True, u(42), u(42), True]
        return data_encode(proton.Described(proton.ulong(0x15), fields))

    return [
        Case("transfer frame (12 B message)", "proton", enc_message, dec_message),
        Case("message only (12 B)", "proton", enc_message, dec_message),
        Case("flow frame", "proton", enc_flow, data_decode),
        Case("disposition frame", "proton", enc_disposition, data_decode),
    ]


def calibrate(fn: Callable[[], object], seconds: float) -> int:
    """A batch size that takes about 1/20 of a timed run."""
    batch = 1
    while True:
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        if time.perf_counter() - start > seconds / 20:
            return batch
        batch *= 2


def timed_run(fn: Callable[[], object], batch: int, seconds: float) -> float:
    """Operations/s of one run of about `seconds`."""
    count = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            fn()
        count += batch
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


@dataclass
class Result:
    case: str
    impl: str
    encode: float
    decode: float
    roundtrip: float


def _operations(case: Case) -> dict[str, Callable[[], object]]:
    raw = case.encode()
    case.decode(raw)
    return {
        "encode": case.encode,
        "decode": lambda: case.decode(raw),
        "roundtrip": lambda: case.decode(case.encode()),
    }


def measure_interleaved(cases: list[Case], seconds: float, rounds: int) -> list[Result]:
    """Time every case's encode, decode and round trip, alternating between the cases
    (amqp10, proton, amqp10, ...) for `rounds` rounds and keeping each one's best, so
    that load from elsewhere on the machine hits both sides alike."""
    ops = [_operations(case) for case in cases]
    best = [dict.fromkeys(("encode", "decode", "roundtrip"), 0.0) for _ in cases]
    for kind in ("encode", "decode", "roundtrip"):
        batches = [calibrate(op[kind], seconds) for op in ops]
        for _ in range(rounds):
            for index, op in enumerate(ops):
                speed = timed_run(op[kind], batches[index], seconds)
                best[index][kind] = max(best[index][kind], speed)
    return [Result(c.name, c.impl, **b) for c, b in zip(cases, best)]


def run_all(seconds: float, rounds: int) -> list[Result]:
    results = []
    theirs = {c.name: c for c in proton_cases()}
    for ours in amqp10_cases():
        pair = [ours, theirs[ours.name]] if ours.name in theirs else [ours]
        results += measure_interleaved(pair, seconds, rounds)
    return results


def table_rows(results: list[Result]) -> list[list[str]]:
    by_key = {(r.case, r.impl): r for r in results}
    rows = []
    for r in results:
        proton_result = by_key.get((r.case, "proton"))
        if r.impl == "amqp10" and proton_result:
            ratio = f"{r.roundtrip / proton_result.roundtrip:.2f}x"
        else:
            ratio = ""
        rows.append(
            [r.case, r.impl, f"{r.encode:,.0f}", f"{r.decode:,.0f}", f"{r.roundtrip:,.0f}", ratio]
        )
    return rows


HEADERS = ["case", "impl", "encode/s", "decode/s", "encode+decode/s", "amqp10/proton"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one timed run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per measurement (best)")


def run(args: argparse.Namespace) -> int:
    try:
        import proton

        version = ".".join(map(str, proton.VERSION))
    except ImportError:
        version = "not installed"
    print(f"python {sys.version.split()[0]}, python-qpid-proton {version}")
    print_table(
        HEADERS,
        table_rows(run_all(args.seconds, args.rounds)),
        "amqp10 codec vs python-qpid-proton (ops/s, higher is better)",
        left_columns=("case", "impl"),
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return script_main(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
