"""2.2 protocol header negotiation: a header the broker does not speak is answered with one
it does, then the socket is closed. Owns the cases `2.2/*`.
"""

from __future__ import annotations

from amqp10.frames import ProtocolHeader
from conformance.cases.refusals import header_refused, refused_header_case
from conformance.cases.sentences import NEGOTIATION
from conformance.cases.sentences import SUPPORTED_HEADERS as SUPPORTED
from conformance.registry import MUST, case

refused_header_case(
    "2.2/header-unsupported-version",
    ProtocolHeader(0, 2, 0, 0),
    "unsupported_version",
    "We send AMQP 0 2.0.0: the broker answers AMQP 0 1.0.0 (or SASL 1.0.0) and closes.",
    __name__,
)
refused_header_case(
    "2.2/header-unknown-protocol-id",
    ProtocolHeader(9, 1, 0, 0),
    "unknown_protocol_id",
    "We send protocol id 9: the broker answers with a header it speaks and closes.",
    __name__,
)


@case(
    "2.2/header-not-amqp",
    MUST,
    NEGOTIATION + " Bytes that are not an AMQP header at all end the connection.",
    outcomes=SUPPORTED | {"tcp-close"},
    lenient={"header:*"},
)
def not_amqp(probe, ctx):
    """We send an HTTP request line: the broker answers with its header or just closes."""
    header_refused(
        probe,
        ctx,
        b"GET / HTTP/1.1\r\n\r\n",
        "the broker kept the socket open after non-AMQP bytes",
    )


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
