"""2.2 protocol header negotiation: a header the broker does not speak is answered with one
it does, then the socket is closed. Owns the cases `2.2/*`.
"""

from __future__ import annotations

from amqp10.frames import ProtocolHeader
from conformance.registry import MUST, case

NEGOTIATION = (
    "If the requested protocol version is not supported, the server MUST send a protocol "
    "header with a supported protocol version and then close the socket."
)
# AMQP 1.0 or SASL 1.0; another protocol's header (RabbitMQ answers AMQP 0-9-1) is lenient
SUPPORTED = {"header:0.1.0.0", "header:3.1.0.0"}


def _refused(probe, ctx, header_bytes: bytes) -> None:
    probe.send_raw(header_bytes)
    ctx.outcome(probe.header_answer())
    ctx.check(probe.wait_closed(), "the broker did not close the socket after its header")


@case(
    "2.2/header-unsupported-version",
    MUST,
    NEGOTIATION,
    outcomes=SUPPORTED,
    lenient={"header:*"},
)
def unsupported_version(probe, ctx):
    """We send AMQP 0 2.0.0: the broker answers AMQP 0 1.0.0 (or SASL 1.0.0) and closes."""
    _refused(probe, ctx, ProtocolHeader(0, 2, 0, 0).encode())


@case(
    "2.2/header-unknown-protocol-id",
    MUST,
    NEGOTIATION,
    outcomes=SUPPORTED,
    lenient={"header:*"},
)
def unknown_protocol_id(probe, ctx):
    """We send protocol id 9: the broker answers with a header it speaks and closes."""
    _refused(probe, ctx, ProtocolHeader(9, 1, 0, 0).encode())


@case(
    "2.2/header-not-amqp",
    MUST,
    NEGOTIATION + " Bytes that are not an AMQP header at all end the connection.",
    outcomes=SUPPORTED | {"tcp-close"},
    lenient={"header:*"},
)
def not_amqp(probe, ctx):
    """We send an HTTP request line: the broker answers with its header or just closes."""
    probe.send_raw(b"GET / HTTP/1.1\r\n\r\n")
    ctx.outcome(probe.header_answer())
    ctx.check(probe.wait_closed(), "the broker kept the socket open after non-AMQP bytes")


@case(
    "2.2/header-amqp-answered",
    MUST,
    "Prior to sending any frames on a connection, each peer MUST start by sending a protocol "
    "header; a server that accepts ours answers with the same header, or with the SASL "
    "header (5.3.1) when it requires SASL.",
    outcomes=SUPPORTED,
)
def amqp_answered(probe, ctx):
    """We send AMQP 0 1.0.0 (no SASL): the broker answers AMQP 0 1.0.0 or SASL 3 1.0.0."""
    probe.send_raw(ProtocolHeader(0, 1, 0, 0).encode())
    ctx.outcome(probe.header_answer())
