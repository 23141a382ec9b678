"""SASL for the broker's connections (5.3): which mechanisms a client is offered and how a
PLAIN, SCRAM-SHA-256 or EXTERNAL identity is judged, RabbitMQ-style.

Owns: the loopback rule (`is_loopback`: ANONYMOUS only where `sasl_anonymous` allows it,
`loopback_users` only from a loopback address), the `ServerSasl` endpoint of one connection
(PLAIN and SCRAM-SHA-256 (RFC 7677, the challenge/response of 5.3.2, as Qpid Broker-J and
RabbitMQ 4 offer it) against the configured users, EXTERNAL for a verified client
certificate, as RabbitMQ's rabbitmq_auth_mechanism_ssl), the fault sasl-answers-as-client's
answer and the fault scram-accepts-any-proof's exchange (`ProoflessScram`). May touch: the
config's users; the engine only through the frame it is handed to send (the fault).
"""

from __future__ import annotations

import ipaddress

from amqpspec.amqp10.composites import SaslInit, SaslResponse
from amqpspec.amqp10.engine import Connection, ServerSasl
from amqpspec.amqp10.engine.scram import SCRAM_SHA_256, ScramServer
from amqpspec.amqp10.engine.transitions import SaslInput
from amqpspec.amqp10.errors import ErrorKind, ProtocolError
from amqpspec.amqp10.types import symbol

from ..config import BrokerConfig


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def anonymous_allowed(config: BrokerConfig, peer_host: str) -> bool:
    """ANONYMOUS (or no SASL at all, 5.3.1) for a client at `peer_host`."""
    mode = config.sasl_anonymous
    return mode == "always" or (mode == "loopback" and is_loopback(peer_host))


class ProoflessScram(ScramServer):
    """Fault scram-accepts-any-proof: the user must exist, its proof is never checked."""

    def proof_ok(self, client_key: bytes, stored_key: bytes) -> bool:
        return True


def server_sasl(
    config: BrokerConfig, peer_host: str, tls_identity: str | None, *, proofless: bool = False
) -> ServerSasl:
    """The SASL layer of one connection: PLAIN, SCRAM-SHA-256 (and ANONYMOUS where allowed;
    EXTERNAL first when the client presented a verified certificate whose CN is
    `tls_identity`); `proofless`: the fault scram-accepts-any-proof."""
    loopback = is_loopback(peer_host)
    mechanisms = ["PLAIN", SCRAM_SHA_256]
    if anonymous_allowed(config, peer_host):
        mechanisms.append("ANONYMOUS")
    loopback_users = set(config.loopback_users)

    def verify(authzid: str, username: str, password: str) -> bool:
        user = config.user(username)
        if user is None or user.password != password:
            return False
        return loopback or username not in loopback_users

    def scram_password(username: str) -> str | None:
        user = config.user(username)
        if user is None or not (loopback or username not in loopback_users):
            return None
        return user.password

    if tls_identity is not None:  # RabbitMQ's rabbitmq_auth_mechanism_ssl
        mechanisms.insert(0, "EXTERNAL")
    return ServerSasl(
        tuple(mechanisms),
        verify_plain=verify,
        scram_password=scram_password,
        scram_server=ProoflessScram if proofless else ScramServer,
        external_identity=tls_identity,
        verify_external=lambda name: (
            config.user(name) is not None and (loopback or name not in loopback_users)
        ),
    )


def answer_as_sasl_client(engine: Connection, error: ProtocolError | None) -> None:
    """Fault sasl-answers-as-client: the server-only frame the engine refused (5.3.2)
    answered as a SASL client would, written past the engine's tables. Keyed on the
    error's kind and the refused input, never on its words (amqp10/errors.py)."""
    if error is None or error.kind != ErrorKind.STATE_REFUSED:
        return
    answer: SaslInit | SaslResponse | None = None
    if error.refused_input == SaslInput.RECV_MECHANISMS.value:
        answer = SaslInit(mechanism=symbol("ANONYMOUS"))
    elif error.refused_input == SaslInput.RECV_CHALLENGE.value:
        answer = SaslResponse(response=b"")
    if answer is not None:
        engine.send_performative(answer, 0, strict=False)
