"""2.2 protocol header negotiation (with 5.2 / 5.3 headers): a header the broker does not
speak (an unsupported version, protocol id, minor, revision or major number, a wrong SASL
version, the TLS header on a port without TLS, bytes that are not AMQP) is answered with
one it does speak and the socket is closed; the AMQP and SASL headers are answered, also
when they arrive one byte at a time. Every case binds the broker as the TCP server
(2.2: version-negotiation.6, .7, .10, .11 MUST; the choice of version .8, .9 SHOULD).

Owns the cases `2.2/*`.
"""

from __future__ import annotations

from collections.abc import Callable

from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER, TLS_HEADER, ProtocolHeader
from amqpspec.conformance.run.registry import MUST, RunFunction, case
from amqpspec.conformance.steps.refusals import (
    header_refused,
    mechanisms_after_header,
    refused_header_case,
)
from amqpspec.conformance.steps.sentences import (
    PROTOCOL_ID_UNACCEPTABLE,
    VERSION_SUPPORTED,
    VERSION_UNPARSED,
)
from amqpspec.conformance.steps.sentences import SUPPORTED_HEADERS as SUPPORTED

REFUSED_HEADERS = (  # (case slug, header sent, description); the run function: the slug
    (
        "unsupported-version",
        (0, 2, 0, 0),
        "We send AMQP 0 2.0.0: the broker answers AMQP 0 1.0.0 (or SASL 1.0.0) and closes.",
    ),
    (
        "unknown-protocol-id",
        (9, 1, 0, 0),
        "We send protocol id 9: the broker answers with a header of a protocol id it accepts "
        "(any, 2.2) and closes.",
    ),
    (
        "wrong-minor",
        (0, 1, 1, 0),
        "AMQP 0 1.1.0: answered with a supported header, then closed.",
    ),
    (
        "wrong-revision",
        (0, 1, 0, 9),
        "AMQP 0 1.0.9: answered with a supported header, then closed.",
    ),
    (
        "wrong-major",
        (0, 9, 0, 0),
        "AMQP 0 9.0.0 (a major version that does "
        "not exist): answered with a supported header, then closed. (Not 0 0.9.1: that is "
        "AMQP 0-9-1's own header.)",
    ),
    (
        "sasl-wrong-version",
        (3, 2, 0, 0),
        "SASL 3 2.0.0: answered with a supported header (SASL 1.0.0 or AMQP), then closed.",
    ),
)
for _slug, _version, _doc in REFUSED_HEADERS:
    _name = _slug.replace("-", "_")
    if _slug == "unknown-protocol-id":  # .11: an acceptable protocol id, any (no SHOULD)
        refused_header_case(
            f"2.2/header-{_slug}",
            ProtocolHeader(*_version),
            _name,
            _doc,
            __name__,
            sentences=(PROTOCOL_ID_UNACCEPTABLE,),
            outcomes={"header:*"},
            lenient=set(),
        )
    else:
        refused_header_case(f"2.2/header-{_slug}", ProtocolHeader(*_version), _name, _doc, __name__)


@case(
    "2.2/header-not-amqp",
    MUST,
    "If the server can't parse the protocol header, the server MUST send a valid protocol "
    "header with a supported protocol version and then close the socket.",
    sentences=(VERSION_UNPARSED,),
    # any header the broker sends is one of its supported versions (2.2 asks no more of an
    # unparsable header: the SHOULDs on the version chosen are about a requested version)
    outcomes=SUPPORTED | {"header:*"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def not_amqp(probe, ctx):
    """We send an HTTP request line: the broker answers with a header it speaks and closes
    (a bare TCP close sends no header: FAILED; AMQP 0-9-1's header is a valid protocol
    header of a version the broker supports: OK)."""
    header_refused(probe, ctx, b"GET / HTTP/1.1\r\n\r\n")


def _answered_case(case_id: str, sentence: str) -> Callable[[RunFunction], RunFunction]:
    """`case` for a protocol header the broker supports, answered with its own (2.2: the
    requested version, or the SASL header, a protocol id it accepts): nothing to pipeline,
    a header alone."""
    return case(
        case_id,
        MUST,
        sentence,
        sentences=(VERSION_SUPPORTED, PROTOCOL_ID_UNACCEPTABLE),
        outcomes=SUPPORTED,
        pipelined=False,
    )


@_answered_case(
    "2.2/header-amqp-answered",
    "If the requested protocol version is supported, the server MUST send its own protocol "
    "header with the requested version; a server that requires SASL sends the SASL header "
    "(an acceptable protocol id) and closes.",
)
def amqp_answered(probe, ctx):
    """We send AMQP 0 1.0.0 (no SASL): the broker answers AMQP 0 1.0.0 or SASL 3 1.0.0."""
    probe.send_raw(ProtocolHeader(0, 1, 0, 0).encode())
    ctx.outcome(probe.header_answer())


@case(
    "2.2/header-tls-not-offered",
    MUST,
    "A protocol id the server does not accept (TLS, id 2, on a port without TLS): the server "
    "MUST send a protocol header with an acceptable protocol id (and version) and then close "
    "the socket; it MAY choose any protocol id.",
    sentences=(PROTOCOL_ID_UNACCEPTABLE,),
    outcomes={"header:*"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def tls_not_offered(probe, ctx):
    """AMQP 2 1.0.0 on the plain port: the broker answers a header it speaks (AMQP or
    SASL) and closes; a bare TCP close sends no header: FAILED."""
    header_refused(probe, ctx, TLS_HEADER)


@case(
    "2.2/header-sasl-answered",
    MUST,
    "If the requested protocol version is supported, the server MUST send its own protocol "
    "header with the requested version: a server offering SASL answers SASL 1.0.0 with it, "
    "then announces its mechanisms (5.3.2, must).",
    sentences=(VERSION_SUPPORTED, "5.3.2/sasl-negotiation.1"),
    requires={"sasl-plain"},
    outcomes={"header:3.1.0.0"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def sasl_answered(probe, ctx):
    """SASL header: the broker answers with the SASL header."""
    probe.send_raw(SASL_HEADER.encode())
    ctx.outcome(probe.header_answer())
    mechanisms_after_header(probe)


@_answered_case(
    "2.2/header-byte-by-byte",
    "The protocol header is 8 octets on a byte stream; TCP may deliver it in pieces, and the "
    "server MUST answer it as a whole with its own header (2.2).",
)
def header_byte_by_byte(probe, ctx):
    """The header (SASL if the profile uses SASL, else AMQP) sent one byte at a time with
    pauses: the broker answers with a supported header."""
    header = SASL_HEADER if probe.sasl_mechanism else AMQP_HEADER
    for byte in header.encode():
        probe.send_raw(bytes([byte]))
        probe.idle(0.05)
    ctx.outcome(probe.header_answer())
