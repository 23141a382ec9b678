"""2.2 protocol header negotiation (with 5.2 / 5.3 headers): a header the broker does not
speak (an unsupported version, protocol id, minor, revision or major number, a wrong SASL
version, the TLS header on a port without TLS, bytes that are not AMQP) is answered with
one it does speak and the socket is closed; the AMQP and SASL headers are answered, also
when they arrive one byte at a time.

Owns the cases `2.2/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER, TLS_HEADER, ProtocolHeader
from amqpspec.conformance.registry import MUST, case
from amqpspec.conformance.steps.refusals import header_refused, refused_header_case
from amqpspec.conformance.steps.sentences import NEGOTIATION
from amqpspec.conformance.steps.sentences import SUPPORTED_HEADERS as SUPPORTED

REFUSED_HEADERS = (  # (case slug, header sent, run function name, description)
    (
        "unsupported-version",
        (0, 2, 0, 0),
        "unsupported_version",
        "We send AMQP 0 2.0.0: the broker answers AMQP 0 1.0.0 (or SASL 1.0.0) and closes.",
    ),
    (
        "unknown-protocol-id",
        (9, 1, 0, 0),
        "unknown_protocol_id",
        "We send protocol id 9: the broker answers with a header it speaks and closes.",
    ),
    (
        "wrong-minor",
        (0, 1, 1, 0),
        "wrong_minor",
        "AMQP 0 1.1.0: answered with a supported header, then closed.",
    ),
    (
        "wrong-revision",
        (0, 1, 0, 9),
        "wrong_revision",
        "AMQP 0 1.0.9: answered with a supported header, then closed.",
    ),
    (
        "wrong-major",
        (0, 9, 0, 0),
        "wrong_major",
        "AMQP 0 9.0.0 (a major version that does "
        "not exist): answered with a supported header, then closed. (Not 0 0.9.1: that is "
        "AMQP 0-9-1's own header.)",
    ),
    (
        "sasl-wrong-version",
        (3, 2, 0, 0),
        "sasl_wrong_version",
        "SASL 3 2.0.0: answered with a supported header (SASL 1.0.0 or AMQP), then closed.",
    ),
)
for _slug, _version, _name, _doc in REFUSED_HEADERS:
    refused_header_case(f"2.2/header-{_slug}", ProtocolHeader(*_version), _name, _doc, __name__)


@case(
    "2.2/header-not-amqp",
    MUST,
    NEGOTIATION + " Bytes that are not an AMQP header at all end the connection.",
    outcomes=SUPPORTED | {"tcp-close"},
    lenient={"header:*"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
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
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def amqp_answered(probe, ctx):
    """We send AMQP 0 1.0.0 (no SASL): the broker answers AMQP 0 1.0.0 or SASL 3 1.0.0."""
    probe.send_raw(ProtocolHeader(0, 1, 0, 0).encode())
    ctx.outcome(probe.header_answer())


@case(
    "2.2/header-tls-not-offered",
    MUST,
    NEGOTIATION + " The TLS header (id 2, 5.2.1) on a port without TLS is such a request.",
    outcomes=SUPPORTED | {"tcp-close"},
    lenient={"header:*"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def tls_not_offered(probe, ctx):
    """AMQP 2 1.0.0 on the plain port: the broker answers a header it speaks (AMQP or
    SASL) and closes, or just closes."""
    header_refused(probe, ctx, TLS_HEADER, "the broker kept the socket open after the TLS header")


@case(
    "2.2/header-sasl-answered",
    MUST,
    "A server that supports SASL answers the SASL header (AMQP 3 1.0.0) with the same "
    "header and then sasl-mechanisms (5.3.1, 5.3.2).",
    requires={"sasl-plain"},
    outcomes={"header:3.1.0.0"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def sasl_answered(probe, ctx):
    """SASL header: the broker answers with the SASL header."""
    probe.send_raw(SASL_HEADER.encode())
    ctx.outcome(probe.header_answer())


@case(
    "2.2/header-byte-by-byte",
    MUST,
    "The protocol header is 8 octets on a byte stream; TCP may deliver it in pieces, and the "
    "server answers it as a whole (2.2).",
    outcomes=SUPPORTED,
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def header_byte_by_byte(probe, ctx):
    """The header (SASL if the profile uses SASL, else AMQP) sent one byte at a time with
    pauses: the broker answers with a supported header."""
    header = SASL_HEADER if probe.sasl_mechanism else AMQP_HEADER
    for byte in header.encode():
        probe.send_raw(bytes([byte]))
        probe.idle(0.05)
    ctx.outcome(probe.header_answer())
