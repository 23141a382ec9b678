"""SCRAM-SHA-256 (amqp10/engine/scram.py): RFC 7677's test vector on the client's side, the
server's judgement of right and wrong proofs, and the server engine's challenge/response
(5.3.2: init, challenge, response, outcome with the server's signature) fed frame by frame.
"""

from __future__ import annotations

from amqpspec.amqp10.builder import sasl_frame
from amqpspec.amqp10.composites import SaslInit, SaslResponse
from amqpspec.amqp10.engine import ServerSasl
from amqpspec.amqp10.engine.connection import Connection
from amqpspec.amqp10.engine.scram import SCRAM_SHA_256, ScramClient, ScramServer
from amqpspec.amqp10.frames import SASL_HEADER, Frame, decode_stream
from amqpspec.amqp10.spec import SaslCode
from amqpspec.amqp10.types import symbol

# RFC 7677 section 3: user "user", password "pencil"
CLIENT_NONCE = b"rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _password(name: str) -> str | None:
    return {"user": "pencil"}.get(name)


def test_client_matches_rfc_7677_test_vector() -> None:
    client = ScramClient("user", "pencil", nonce=CLIENT_NONCE)
    assert client.first() == b"n,,n=user,r=" + CLIENT_NONCE
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    assert client.verify(SERVER_FINAL)
    assert not client.verify(b"v=AAAA") and not client.verify(None)


def test_server_accepts_the_right_proof_and_signs() -> None:
    server, client = ScramServer(_password), ScramClient("user", "pencil")
    challenge = server.first(client.first())
    assert challenge is not None and challenge.startswith(b"r=" + client.nonce)
    accepted, server_final = server.final(client.final(challenge))
    assert accepted and client.verify(server_final) and server.username == "user"


def test_server_refuses_a_wrong_proof_an_unknown_user_and_a_bad_first() -> None:
    server, client = ScramServer(_password), ScramClient("user", "pencil")
    wrong = client.final(server.first(client.first()), proof_password="nope")
    assert server.final(wrong) == (False, None)
    server, client = ScramServer(_password), ScramClient("nobody", "pencil")
    assert server.final(client.final(server.first(client.first()))) == (False, None)
    assert ScramServer(_password).first(b"p=tls-unique,,n=user,r=x") is None
    assert ScramServer(_password).first(b"n,,garbage") is None


def _frames(data: bytes, header: bool = False) -> list[Frame]:
    return [item for item in decode_stream(data, header) if isinstance(item, Frame)]


def _server_exchange(password: str) -> tuple[Connection, list[Frame], ScramClient]:
    """The server engine through SASL header, init, challenge, response: its frames."""
    server = Connection(
        "server", "s", sasl=ServerSasl(("PLAIN", SCRAM_SHA_256), scram_password=_password)
    )
    client = ScramClient("user", "pencil")
    init = SaslInit(mechanism=symbol(SCRAM_SHA_256), initial_response=client.first())
    server.receive_data(SASL_HEADER.encode() + sasl_frame(init), 0.0)
    out = server.data_to_send(0.0)
    challenge = _frames(out, header=True)[-1]
    assert challenge.name == "sasl-challenge"
    final = client.final(bytes(challenge.performative.challenge), proof_password=password)
    server.receive_data(sasl_frame(SaslResponse(response=final)), 0.0)
    return server, _frames(server.data_to_send(0.0)), client


def test_server_engine_challenges_then_outcome_ok_with_signature() -> None:
    assert SCRAM_SHA_256 in ServerSasl(("PLAIN", SCRAM_SHA_256), scram_password=_password).offered()
    assert SCRAM_SHA_256 not in ServerSasl(("PLAIN", SCRAM_SHA_256)).offered()
    server, frames, client = _server_exchange("pencil")
    outcome = frames[-1].performative
    assert frames[-1].name == "sasl-outcome" and outcome.code == SaslCode.OK
    assert client.verify(bytes(outcome.additional_data))
    assert server.sasl_outcome == SaslCode.OK and server.sasl_username == "user"


def test_server_engine_refuses_a_wrong_proof_without_additional_data() -> None:
    server, frames, _ = _server_exchange("wrong")
    outcome = frames[-1].performative
    assert outcome.code == SaslCode.AUTH and outcome.additional_data is None
    assert server.finished
