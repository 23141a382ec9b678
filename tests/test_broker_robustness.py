"""The reference broker stays up under malformed input: mutated frame streams over real
connections end with a close (or a dropped socket), never with an internal error, and a
normal client is served afterwards. Seeded, so a failure reproduces.
"""

from __future__ import annotations

import logging
import random
import socket

from broker_support import WAIT, management, proton_receive, proton_send, running_broker, url

from amqpspec.amqp10.composites import Attach, Begin, Flow, Open, Source, Target, Transfer
from amqpspec.amqp10.frames import AMQP_HEADER, encode_frame
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role

CONNECTIONS = 1500  # thousands of mutated frames (7 per stream)


def valid_stream() -> bytes:
    """header, open, begin, a sender and a receiver, a flow and two transfers."""
    frames = [
        encode_frame(Open(container_id="fuzz", max_frame_size=4096)),
        encode_frame(Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)),
        encode_frame(
            Attach(
                name="s",
                handle=0,
                role=Role.SENDER,
                source=Source(),
                target=Target(address="/queues/fq"),
                initial_delivery_count=0,
            )
        ),
        encode_frame(
            Attach(name="r", handle=1, role=Role.RECEIVER, source=Source(address="/queues/fq"))
        ),
        encode_frame(
            Flow(
                next_incoming_id=0,
                incoming_window=100,
                next_outgoing_id=0,
                outgoing_window=100,
                handle=1,
                delivery_count=0,
                link_credit=5,
            )
        ),
    ]
    for i in range(2):
        transfer = Transfer(handle=0, delivery_id=i, delivery_tag=bytes([i]), settled=False)
        frames.append(encode_frame(transfer, payload=Message.of(b"fuzz").encode()))
    return AMQP_HEADER.encode() + b"".join(frames)


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        kind = rng.random()
        pos = rng.randrange(8, len(buf))  # keep the protocol header: reach the frame parser
        if kind < 0.5:
            buf[pos] = rng.randrange(256)
        elif kind < 0.7:
            del buf[pos : pos + rng.randint(1, 16)]
        elif kind < 0.9:
            buf[pos:pos] = rng.randbytes(rng.randint(1, 16))
        else:
            buf[pos:pos] = buf[rng.randrange(8, len(buf)) :][: rng.randint(1, 64)]
    return bytes(buf)


def send_and_read(port: int, data: bytes, *, end_stream: bool = True) -> None:
    """Send `data`; then either end our side of the stream and read until the broker
    closes, or (end_stream=False) read what comes within 0.1 s and drop the socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        try:
            sock.sendall(data)
            if end_stream:
                sock.shutdown(socket.SHUT_WR)
            else:
                sock.settimeout(0.1)
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass


def test_mutated_frame_streams_leave_the_broker_serving(caplog):
    rng = random.Random(20261121)
    base = valid_stream()
    with caplog.at_level(logging.ERROR, logger="reference_broker"), running_broker() as broker:
        management(broker).declare_queue("fq", durable=False)
        send_and_read(broker.port, base)  # the unmutated stream is fine
        for i in range(CONNECTIONS):
            send_and_read(broker.port, mutate(base, rng), end_stream=i % 10 != 0)
        internal = [r for r in caplog.records if "internal error" in r.getMessage()]
        assert not internal, internal[0].getMessage()
        management(broker).purge_queue("fq")
        assert proton_send(url(broker), "/queues/fq", ["after"]).accepted == 1
        assert proton_receive(url(broker), "/queues/fq", 1).bodies == ["after"]
        assert broker.call(lambda: len(broker.server.context.connections)) <= 1
