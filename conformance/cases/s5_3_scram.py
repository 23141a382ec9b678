"""5.3 SASL with a challenge/response mechanism: SCRAM-SHA-256 (RFC 7677 over RFC 5802),
the mechanism Qpid Broker-J's SaslTest.saslSuccessfulAuthenticationWithChallengeResponse
and RabbitMQ 4 use, run when the broker offers it (UNSUPPORTED otherwise) with the
profile's credentials. What binds the broker: after a successful outcome it sends its
AMQP header (5.3.3.5 "must"). What SCRAM itself asks (the challenge extends the client's
nonce, the outcome's additional-data carries the server's signature, a wrong proof is
refused) is RFC 5802's, quoted second-hand: the scram model (DIFFERS, never FAILED).

Owns the cases `5.3.3.3/sasl-scram-*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import SaslInit, SaslResponse
from amqpspec.amqp10.engine.scram import SCRAM_SHA_256, ScramClient
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.probe.wire import WaitTimeout
from amqpspec.conformance.run.registry import MODEL, MUST, case
from amqpspec.conformance.steps.refusals import (
    check_no_open_after,
    offered_mechanisms,
    sasl_outcome,
)
from amqpspec.conformance.verdicts import Unsupported

HEADERS_AFTER_OK = "5.3.3.5/sasl-outcome.1"  # after success the peers exchange headers
SCRAM = "scram"  # the model (profile.MODELS): RFC 5802 / 7677, quoted second-hand


def _challenged(probe, ctx) -> tuple[ScramClient, bytes]:
    """SASL header, sasl-mechanisms (UNSUPPORTED without SCRAM-SHA-256), our sasl-init
    SCRAM-SHA-256 with client-first, and the broker's sasl-challenge (server-first):
    the client and the challenge it answers next."""
    probe.send_header(SASL_HEADER)
    offered = offered_mechanisms(probe)
    if SCRAM_SHA_256 not in offered:
        raise Unsupported(f"{SCRAM_SHA_256} not offered ({offered})")
    if not probe.username or not probe.password:
        raise Unsupported("the profile names no user name and password for SCRAM")
    client = ScramClient(probe.username, probe.password)
    since = probe.mark()
    probe.send_frame(SaslInit(mechanism=symbol(SCRAM_SHA_256), initial_response=client.first()))
    try:
        challenge = probe.wait_for_frame("sasl-challenge")
    except WaitTimeout:
        challenge = None
    ctx.model(
        challenge is not None,
        "expected a sasl-challenge (server-first-message, RFC 5802 5.1) after our "
        f"SCRAM-SHA-256 sasl-init; {probe.observed(since)}",
    )
    return client, bytes(challenge.performative.challenge or b"")


def _response(ctx, client: ScramClient, challenge: bytes, password: str | None = None):
    """client-final for the broker's `challenge` (proving `password` when given)."""
    try:
        final = client.final(challenge, proof_password=password)
    except (ValueError, KeyError) as exc:
        final = b""
        ctx.model(False, f"expected a server-first-message extending our nonce: {exc}")
    return SaslResponse(response=final)


@case(
    "5.3.3.3/sasl-scram-sha-256",
    MUST,
    "SCRAM-SHA-256 with the profile's credentials: a sasl-challenge, our sasl-response, "
    "sasl-outcome ok carrying the server's signature (RFC 5802, the scram model); upon "
    "successful completion the peers must exchange protocol headers.",
    sentences=(HEADERS_AFTER_OK,),
    model=SCRAM,
    pipelined=False,  # nothing to pipeline: headers and SASL alone
)
def scram_sha_256(probe, ctx):
    """SASL SCRAM-SHA-256 frame by frame: init (client-first), challenge (server-first),
    response (client-final), outcome ok whose additional-data is the server's signature,
    then the broker's AMQP header."""
    client, challenge = _challenged(probe, ctx)
    since = probe.mark()
    probe.send_frame(_response(ctx, client, challenge))
    outcome = sasl_outcome(probe)
    ctx.model(
        outcome == "sasl-outcome:0",
        f"expected sasl-outcome ok for the profile's user; observed {outcome} "
        f"({probe.observed(since)})",
    )
    data = probe.server_frames("sasl-outcome")[-1].performative.additional_data
    ctx.model(
        client.verify(bytes(data) if data is not None else None),
        "expected the outcome's additional-data to be the server-final-message with the "
        f"server's signature (RFC 5802 3, 5.3.3.6); observed {data!r}",
    )
    after = probe.item_index(probe.server_frames("sasl-outcome")[-1]) + 1
    probe.send_header(AMQP_HEADER)
    answer = probe.header_answer(since=after)
    ctx.check(
        answer.startswith("header:"),
        f"expected the broker's AMQP header after sasl-outcome ok; {probe.observed(since)}",
    )


@case(
    "5.3.3.3/sasl-scram-wrong-proof",
    MODEL,
    "SCRAM-SHA-256 with a proof made from a wrong password: the server verifies the "
    "ClientProof (RFC 5802 3) and refuses, a failing sasl-outcome (or a close); no open "
    "follows.",
    model=SCRAM,
    outcomes={"sasl-outcome:1", "sasl-outcome:2", "sasl-outcome:3", "sasl-outcome:4", "tcp-close"},
    pipelined=False,  # nothing to pipeline: headers and SASL alone
)
def scram_wrong_proof(probe, ctx):
    """SASL SCRAM-SHA-256 with the profile's user name and the proof of a wrong password:
    no sasl-outcome ok, and no open after our AMQP header."""
    client, challenge = _challenged(probe, ctx)
    probe.send_frame(_response(ctx, client, challenge, password="amqpspec-wrong-password"))
    ctx.outcome(sasl_outcome(probe))
    check_no_open_after(probe, ctx)
