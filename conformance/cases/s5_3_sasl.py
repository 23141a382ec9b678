"""5.3 SASL: the mechanisms offered, ANONYMOUS (also with trace information) and PLAIN
accepted; a bad password, a wrong user name and a mechanism the server did not offer
refused with no open after; a sasl-init pipelined before sasl-mechanisms arrived; an AMQP
open before the SASL exchange finished. What binds the broker: it answers the SASL header
with its own (5.3: each peer MUST start by sending a protocol header; 2.2's rules), it
announces a non-empty list of mechanisms (5.3.2 "must", 5.3.3.1), it closes the connection
when the selected mechanism is not supported (5.3.3.2 MUST) and sends its AMQP header after
a successful outcome (5.3.3.5 "must"); which credentials succeed and what an open too early
gets have no normative sentence and are recorded. Frames the suite must not send: an empty
frame during the exchange (5.3.1 calls its receipt an irrecoverable error but no MUST says
what the receiver does: the answer is recorded) and the server-only frames sasl-mechanisms,
sasl-challenge and sasl-outcome from the client (5.3.2 MUST: the SASL client and server are
the TCP client and server, so the broker never answers as a SASL client; how it refuses
is recorded). A sasl-init of exactly 512 octets (the SASL frame maximum, 5.3.1) is answered
with an outcome (2.7.1 MUST: frames up to 512 octets are accepted); one of 2,048 octets, as
long OAuth2 tokens make, is the client's break of 5.3.1 and its answer is recorded.

Owns the cases `5.3.*/*`.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.builder import build_frame, sasl_frame
from amqpspec.amqp10.composites import (
    Open,
    SaslChallenge,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
)
from amqpspec.amqp10.engine import ClientSasl
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.run.registry import MAY, MUST, case, case_function
from amqpspec.conformance.steps.refusals import (
    check_no_open_after,
    offered_mechanisms,
    refused_sasl_init,
    sasl_outcome,
)
from amqpspec.conformance.verdicts import Unsupported

SASL_HEADER_FIRST = "5.3/sasl.1"  # each peer MUST start by sending a protocol header
SUPPORTED_VERSION = "2.2/version-negotiation.6"  # answered with the requested version
MECHANISM_UNSUPPORTED = "5.3.3.2/sasl-init.mechanism.1"  # close with authentication-failure
ANNOUNCE = "5.3.2/sasl-negotiation.1"  # the SASL server must announce its mechanisms
MECHANISMS_NOT_EMPTY = "5.3.3.1/sasl-mechanisms.sasl-server-mechanisms.1"  # invalid if empty
HEADERS_AFTER_OK = "5.3.3.5/sasl-outcome.1"  # after success the peers exchange headers
EMPTY_FRAME = "5.3.1/sasl-frames.4"  # receipt of an empty frame is an irrecoverable error
ROLES = "5.3.2/sasl-negotiation.3"  # SASL client/server MUST be the TCP client/server
FRAME_FLOOR = "2.7.1/open.max-frame-size.3"  # frames up to 512 octets MUST be accepted
SASL_FRAME_MAX = 512  # 5.3.1: the maximum size of a SASL frame is MIN-MAX-FRAME-SIZE
EXCHANGE_HEADERS = "upon successful completion the peers must exchange protocol headers."


@case(
    "5.3.3.1/sasl-mechanisms-offered",
    MUST,
    "The peer acting as the SASL Server must announce supported authentication mechanisms "
    "using the sasl-mechanisms frame, after its SASL header (5.3; 2.2's rules); it is invalid "
    "for the list to be null or empty.",
    sentences=(ANNOUNCE, MECHANISMS_NOT_EMPTY, SASL_HEADER_FIRST, SUPPORTED_VERSION),
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def mechanisms_offered(probe, ctx):
    """SASL header: the broker answers the SASL header, then sasl-mechanisms listing the
    profile's mechanism."""
    mechanism = ctx.profile.sasl
    if mechanism == "none":
        ctx.require("sasl-plain")
    probe.send_header(SASL_HEADER)
    ctx.outcome(probe.header_answer(), {"header:3.1.0.0"})
    offered = offered_mechanisms(probe)
    ctx.check(
        bool([m for m in offered if m and m != "None"]),
        f"expected a non-empty list of mechanisms; observed {offered}",
    )
    if mechanism not in offered:
        ctx.note(f"{mechanism} not among the offered {offered}")


def _opens_with(probe, ctx, mechanism: str) -> None:
    """SASL `mechanism` through the engine: an ok outcome is followed by the broker's AMQP
    header (5.3.3.5); another outcome is recorded (which credentials succeed is the
    broker's; RFC 4422)."""
    probe.sasl_mechanism = mechanism
    probe.open(wait_open=False)
    outcome = sasl_outcome(probe)
    if outcome != "sasl-outcome:0":
        ctx.note(f"{mechanism}: {outcome}")
        return
    _header_after_ok(probe, ctx)


def _header_after_ok(probe, ctx) -> None:
    """5.3.3.5: after a successful outcome the broker sends its AMQP header."""
    outcome = probe.server_frames("sasl-outcome")[-1]
    since = probe.item_index(outcome) + 1
    answer = probe.header_answer(since=since)
    ctx.check(
        answer.startswith("header:"),
        f"expected the broker's AMQP header after sasl-outcome ok; {probe.observed(since)}",
    )


def _opens_with_case(mechanism: str, sentence: str, doc: str) -> None:
    """Declare `5.3.3.2/sasl-<mechanism>` (`_opens_with`), on a broker that has it."""
    slug = mechanism.lower()

    def run(probe, ctx):
        _opens_with(probe, ctx, mechanism)

    declare = case(
        f"5.3.3.2/sasl-{slug}",
        MUST,
        f"{sentence} {EXCHANGE_HEADERS}",
        sentences=(HEADERS_AFTER_OK,),
        requires={f"sasl-{slug}"},
    )
    declare(case_function(run, f"sasl_{slug}", doc, __name__))


_opens_with_case(
    "ANONYMOUS",
    "ANONYMOUS (RFC 4505): a server that offers it completes the exchange (its outcome recorded);",
    "SASL ANONYMOUS: outcome ok, then the broker's open.",
)
_opens_with_case(
    "PLAIN",
    "PLAIN (RFC 4616) with valid credentials: outcome ok (recorded);",
    "SASL PLAIN with the profile's credentials: outcome ok, then the broker's open.",
)


@case(
    "5.3.3.6/sasl-plain-bad-password",
    MAY,
    "sasl-outcome code auth (1): connection authentication failed due to an unspecified "
    "problem with the supplied credentials; no AMQP traffic follows.",
    requires={"sasl-plain"},
    outcomes={"sasl-outcome:1"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def sasl_bad_password(probe, ctx):
    """SASL PLAIN with a wrong password: outcome auth, and the broker opens nothing."""
    init = ClientSasl("PLAIN", probe.username or "guest", "amqpspec-wrong-password")
    refused_sasl_init(probe, ctx, init.init_for(("PLAIN",)))


REFUSED = {"sasl-outcome:1", "sasl-outcome:2", "sasl-outcome:3", "sasl-outcome:4", "tcp-close"}


@case(
    "5.3.3.2/sasl-unknown-mechanism",
    MUST,
    "If the selected mechanism is not supported by the receiving peer, it MUST close the "
    "Connection with the authentication-failure close-code (a failing sasl-outcome).",
    sentences=(MECHANISM_UNSUPPORTED,),
    requires={"sasl-plain"},
    outcomes=REFUSED,
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def unknown_mechanism(probe, ctx):
    """sasl-init with mechanism AMQPSPEC-NONSUCH: a failing outcome (or close), no open."""
    init = SaslInit(mechanism=symbol("AMQPSPEC-NONSUCH"), initial_response=b"\x00x\x00y")
    refused_sasl_init(probe, ctx, init)


@case(
    "5.3.3.6/sasl-wrong-user",
    MAY,
    "sasl-outcome code auth (1): authentication failed due to a problem with the supplied "
    "credentials; no AMQP traffic follows.",
    requires={"sasl-plain"},
    outcomes={"sasl-outcome:1", "tcp-close"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def wrong_user(probe, ctx):
    """PLAIN with an unknown user name: outcome auth, no open."""
    init = ClientSasl("PLAIN", "amqpspec-no-such-user", "x").init_for(("PLAIN",))
    refused_sasl_init(probe, ctx, init)


@case(
    "5.3.2/sasl-pipelined-init",
    MUST,
    "The peer acting as the SASL Server must announce supported authentication mechanisms "
    "using the sasl-mechanisms frame: also to a client that pipelined its header and init "
    "(as many do); the outcome is recorded.",
    sentences=(ANNOUNCE,),
    requires={"sasl-plain"},
    outcomes={"sasl-outcome:0"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def pipelined_init(probe, ctx):
    """SASL header and sasl-init PLAIN in one write, before sasl-mechanisms: outcome ok."""
    init = ClientSasl("PLAIN", probe.username or "guest", probe.password or "guest").init_for(
        ("PLAIN",)
    )
    probe.send_raw(SASL_HEADER.encode() + sasl_frame(init))
    outcome = sasl_outcome(probe)
    ctx.check(
        bool(probe.server_frames("sasl-mechanisms")),
        f"expected sasl-mechanisms from the broker; {probe.observed(0)}",
    )
    if outcome != "sasl-outcome:0":
        ctx.note(f"outcome {outcome} for a pipelined init")


@case(
    "5.3.1/sasl-open-before-outcome",
    MAY,
    "A server that requires SASL does not accept AMQP frames before a successful SASL "
    "outcome (5.3.1): an open sent without authentication opens nothing.",
    requires={"sasl-plain"},
    outcomes={"tcp-close", "close:*", "ignored"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def open_before_outcome(probe, ctx):
    """SASL header, then (no sasl-init) the AMQP header and an open: the broker does not
    answer with an open."""
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    since = probe.mark()
    probe.send_raw(AMQP_HEADER.encode() + build_frame(Open(container_id="amqpspec-early")))
    probe.idle(1.5)
    ctx.check(
        not probe.server_frames("open"), "expected no open without a SASL outcome; observed one"
    )
    observed = "tcp-close" if probe.closed else probe.error_outcome(timeout=0.5, since=since)
    if observed == "timeout":
        observed = "ignored"
    ctx.outcome(observed)


@case(
    "5.3.3.2/sasl-anonymous-trace",
    MUST,
    "ANONYMOUS (RFC 4505): the initial response is optional trace information (the outcome "
    "recorded); " + EXCHANGE_HEADERS,
    sentences=(HEADERS_AFTER_OK,),
    requires={"sasl-anonymous"},
    outcomes={"sasl-outcome:0"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def anonymous_trace(probe, ctx):
    """sasl-init ANONYMOUS with trace 'amqpspec@example.org': outcome ok."""
    probe.send_header(SASL_HEADER)
    offered = offered_mechanisms(probe)
    if "ANONYMOUS" not in offered:
        raise Unsupported(f"ANONYMOUS not offered ({offered})")
    init = SaslInit(mechanism=symbol("ANONYMOUS"), initial_response=b"amqpspec@example.org")
    probe.send_frame(init)
    outcome = sasl_outcome(probe)
    if outcome != "sasl-outcome:0":
        ctx.note(f"ANONYMOUS with trace: {outcome}")
        return
    probe.send_header(AMQP_HEADER)
    _header_after_ok(probe, ctx)


@case(
    "5.3.1/sasl-empty-frame",
    MAY,
    "Receipt of an empty frame is an irrecoverable error (5.3.1; no MUST says what the "
    "receiver does): after an empty SASL frame and a valid sasl-init, how the broker "
    "answers is recorded (Qpid Broker-J refuses; a broker that completes the exchange is "
    "noted).",
    sentences=(EMPTY_FRAME,),  # the probe's side: the empty frame it sends
    outcomes=REFUSED | {"timeout"},  # silence completes nothing either
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def empty_frame(probe, ctx):
    """SASL header; after sasl-mechanisms an empty SASL frame (8 octets, type 1), then a
    valid sasl-init with the profile's mechanism (PLAIN or ANONYMOUS): no sasl-outcome ok,
    and no open after it."""
    mechanism = ctx.profile.sasl
    if mechanism == "none":
        ctx.require("sasl-plain")
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    probe.send_raw(sasl_frame(None))
    init = ClientSasl(mechanism, probe.username or "guest", probe.password or "guest")
    if not probe.closed:
        probe.send_frame(init.init_for((mechanism,)))
    ctx.outcome(sasl_outcome(probe, timeout=1.0))
    check_no_open_after(probe, ctx)


def _server_frame_from_client(probe, ctx, frame) -> None:
    """SASL header; after sasl-mechanisms, the server-only `frame` from us: the broker
    stays the SASL server (5.3.2: no sasl-init or sasl-response from it); how it refuses
    (the TCP close, a failing outcome) or that it ignores the frame is recorded, and so is
    an open it answers our AMQP header and open with afterwards."""
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    since = probe.mark()
    probe.send_frame(frame)
    probe.idle(1.0)  # returns at the TCP close
    as_client = [
        t for t in probe.frames_since(since) if t.item.name in ("sasl-init", "sasl-response")
    ]
    ctx.check(
        not as_client,
        f"expected the broker to stay the SASL server after our {frame.NAME} (5.3.2); "
        f"observed its {as_client[0].item.name if as_client else ''} ({probe.observed(since)})",
    )
    outcomes = [t.item for t in probe.frames_since(since, "sasl-outcome")]
    if outcomes:
        observed = f"sasl-outcome:{outcomes[0].performative.code}"
    else:
        observed = "tcp-close" if probe.closed else "ignored"
    ctx.outcome(observed)
    if not probe.closed:
        opened = probe.mark()
        probe.send_raw(AMQP_HEADER.encode() + build_frame(Open(container_id="amqpspec-sasl")))
        probe.idle(0.5)
        if any(t.item.name == "open" for t in probe.frames_since(opened)):
            ctx.note(f"the broker opened after our {frame.NAME} without a sasl-outcome ok")


SERVER_ONLY_ANSWERS = {"tcp-close", "sasl-outcome:*", "ignored"}


def _client_sends_case(frame: Any, answer: str, doc: str, *, named: str = "") -> None:
    """Declare `5.3.2/sasl-client-sends-<frame>` (`_server_frame_from_client`): `answer`
    says what the broker does not do in return (`named`: the frame in words, its name by
    default)."""
    slug = frame.NAME.removeprefix("sasl-")

    def run(probe, ctx):
        _server_frame_from_client(probe, ctx, frame)

    declare = case(
        f"5.3.2/sasl-client-sends-{slug}",
        MUST,
        "The peer playing the role of the SASL Client and the peer playing the role of the "
        f"SASL server MUST correspond to the TCP client and server respectively: a "
        f"{named or frame.NAME} from the client does not make the broker {answer}.",
        sentences=(ROLES,),
        outcomes=SERVER_ONLY_ANSWERS,
        pipelined=False,  # nothing to pipeline: headers, SASL or open alone
    )
    declare(case_function(run, f"client_sends_{slug}", doc, __name__))


_client_sends_case(
    SaslMechanisms(sasl_server_mechanisms=[symbol("PLAIN")]),
    "answer with a sasl-init (its refusal recorded)",
    """After the broker's sasl-mechanisms, our own sasl-mechanisms [PLAIN]: no sasl-init
    from the broker.""",
)
_client_sends_case(
    SaslChallenge(challenge=b"amqpspec"),
    "answer with a sasl-response (its refusal recorded)",
    "After the broker's sasl-mechanisms, a sasl-challenge from us: no sasl-response.",
)
_client_sends_case(
    SaslOutcome(code=0),
    "act as the SASL client (its refusal, and an open it answers our header and open with, "
    "recorded)",
    """After the broker's sasl-mechanisms, a sasl-outcome ok from us, then the AMQP header
    and an open: no sasl-init or sasl-response from the broker.""",
    named="sasl-outcome ok",
)


def _long_init(ctx, probe, frame_size: int) -> SaslInit:
    """A sasl-init whose SASL frame is `frame_size` octets: ANONYMOUS with long trace
    information when the profile has it (an instant outcome; RabbitMQ delays a failed one
    by seconds), else PLAIN with a long wrong password."""
    mechanism = "ANONYMOUS" if ctx.profile.has("sasl-anonymous") else ctx.profile.sasl
    if mechanism == "none":
        ctx.require("sasl-plain")
    user = probe.username or "guest"

    def init(pad: int) -> SaslInit:
        if mechanism == "PLAIN":
            return SaslInit(
                mechanism=symbol("PLAIN"),
                initial_response=b"\0%s\0%s" % (user.encode(), b"x" * pad),
            )
        return SaslInit(mechanism=symbol(mechanism), initial_response=b"x" * pad)

    pad = frame_size
    while pad > 0 and len(sasl_frame(init(pad))) > frame_size:
        pad -= 1
    made = init(pad)
    if len(sasl_frame(made)) != frame_size:
        raise Unsupported(f"no {mechanism} sasl-init of exactly {frame_size} octets")
    return made


@case(
    "5.3.1/sasl-init-512-octets",
    MUST,
    "Both peers MUST accept frames of up to MIN-MAX-FRAME-SIZE (512) octets large, the "
    "maximum size of a SASL frame (5.3.1): a 512-octet sasl-init is answered with a "
    "sasl-outcome (its code recorded: the trace is long or the password wrong).",
    sentences=(FRAME_FLOOR,),
    outcomes={"sasl-outcome:*"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def init_512_octets(probe, ctx):
    """SASL header; after sasl-mechanisms a sasl-init of exactly 512 octets (ANONYMOUS with
    long trace information, or PLAIN with a long wrong password): a sasl-outcome."""
    init = _long_init(ctx, probe, SASL_FRAME_MAX)
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    probe.send_frame(init)
    ctx.outcome(sasl_outcome(probe))


@case(
    "5.3.1/sasl-init-over-512",
    MAY,
    "The maximum size of a SASL frame is MIN-MAX-FRAME-SIZE (5.3.1; no normative word): a "
    "2,048-octet sasl-init (a long OAuth2 token) breaks it; the broker's answer is recorded "
    "(Qpid Broker-J accepts ~100 kB tokens).",
    outcomes={"sasl-outcome:*"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def init_over_512(probe, ctx):
    """SASL header; after sasl-mechanisms a 2,048-octet sasl-init: recorded."""
    init = _long_init(ctx, probe, 2048)
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    probe.send_frame(init)
    ctx.outcome(sasl_outcome(probe, timeout=1.0))
