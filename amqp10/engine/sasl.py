"""SASL (5.3) configuration and mechanism logic: ANONYMOUS, PLAIN (RFC 4616), EXTERNAL
(RFC 4422 appendix A: the identity the transport established, e.g. a TLS client
certificate, which the driver passes in; no I/O here) and, on the server's side,
SCRAM-SHA-256 (RFC 7677: one sasl-challenge and one sasl-response, scram.py).

Owns: what a client puts in its sasl-init and how a server judges one. The SASL state
machine itself is SASL_TABLE in transitions.py; the Connection drives it and calls in
here for the frame bodies. Pass `ClientSasl(...)` or `ServerSasl(...)` as
`Connection(sasl=...)`; `None` means no SASL layer (straight to the AMQP header).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from amqpspec.amqp10.composites import SaslInit, SaslMechanisms
from amqpspec.amqp10.engine.scram import SCRAM_SHA_256, PasswordLookup, ScramServer
from amqpspec.amqp10.errors import ErrorKind, ProtocolError
from amqpspec.amqp10.spec import Cond, SaslCode
from amqpspec.amqp10.types import symbol

ANONYMOUS = "ANONYMOUS"
PLAIN = "PLAIN"
EXTERNAL = "EXTERNAL"

# verify_plain(authzid, username, password) -> True to accept
PlainVerifier = Callable[[str, str, str], bool]
# verify_external(identity) -> True to accept the transport's identity as a user
ExternalVerifier = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class ClientSasl:
    """The client's choice: mechanism ANONYMOUS, PLAIN with username/password, or EXTERNAL
    (the initial response is the authzid: empty = the identity the transport proved)."""

    mechanism: str = ANONYMOUS
    username: str = ""
    password: str = ""
    authzid: str = ""
    hostname: str | None = None

    def init_for(self, offered: tuple[str, ...]) -> SaslInit:
        """5.3.3.2: pick our mechanism from the server's list and build sasl-init."""
        if self.mechanism not in offered:
            raise ProtocolError(
                Cond.NOT_IMPLEMENTED,
                f"server offers {list(offered)}, not {self.mechanism}",
                "connection",
                ErrorKind.SASL_MECHANISM,
            )
        response = None
        if self.mechanism == PLAIN:  # RFC 4616: authzid NUL authcid NUL passwd
            response = f"{self.authzid}\0{self.username}\0{self.password}".encode()
        elif self.mechanism == EXTERNAL:  # RFC 4422 A.1: the authzid, empty for "as proved"
            response = self.authzid.encode()
        return SaslInit(
            mechanism=symbol(self.mechanism), initial_response=response, hostname=self.hostname
        )


@dataclass(frozen=True, slots=True)
class ServerSasl:
    """The server's offer. PLAIN is offered only with a verifier, EXTERNAL only with the
    transport's identity (`external_identity`, e.g. a TLS client certificate's CN) and a
    verifier, SCRAM-SHA-256 only with a password lookup (`scram_password`); without
    mechanisms left the server offers ANONYMOUS."""

    mechanisms: tuple[str, ...] = (ANONYMOUS,)
    verify_plain: PlainVerifier | None = None
    external_identity: str | None = None
    verify_external: ExternalVerifier | None = None
    scram_password: PasswordLookup | None = None
    scram_server: type[ScramServer] = ScramServer  # the exchange's class (a broker's fault)

    def offered(self) -> tuple[str, ...]:
        external = self.external_identity is not None and self.verify_external is not None
        return tuple(
            m
            for m in self.mechanisms
            if (m != PLAIN or self.verify_plain is not None)
            and (m != EXTERNAL or external)
            and (m != SCRAM_SHA_256 or self.scram_password is not None)
        )

    def exchange_for(self, init: SaslInit) -> ScramServer | None:
        """A challenge/response exchange for `init` (SCRAM-SHA-256 when offered), or None:
        the mechanism is judged on the init alone (`judge`)."""
        if str(init.mechanism) != SCRAM_SHA_256 or SCRAM_SHA_256 not in self.offered():
            return None
        assert self.scram_password is not None
        return self.scram_server(self.scram_password)

    def mechanisms_frame(self) -> SaslMechanisms:
        return SaslMechanisms(sasl_server_mechanisms=[symbol(m) for m in self.offered()])

    def judge(self, init: SaslInit) -> tuple[int, str | None]:
        """(sasl-code, username) for a client's sasl-init (5.3.3.6)."""
        mechanism = str(init.mechanism)
        if mechanism not in self.offered():
            return SaslCode.AUTH, None
        if mechanism == ANONYMOUS:
            return SaslCode.OK, None
        if mechanism == EXTERNAL:
            return self._judge_external(init.initial_response or b"")
        parts = (init.initial_response or b"").split(b"\0")
        if len(parts) != 3:
            return SaslCode.AUTH, None
        try:
            authzid, username, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            return SaslCode.AUTH, None
        assert self.verify_plain is not None
        ok = self.verify_plain(authzid, username, password)
        return (SaslCode.OK if ok else SaslCode.AUTH), username

    def _judge_external(self, authzid: bytes) -> tuple[int, str | None]:
        """RFC 4422 A.1: an empty authzid asks for the transport's identity; another one is
        accepted only when it is that identity (no acting as someone else)."""
        identity = self.external_identity
        assert identity is not None and self.verify_external is not None
        try:
            wanted = authzid.decode()
        except UnicodeDecodeError:
            return SaslCode.AUTH, None
        if wanted and wanted != identity:
            return SaslCode.AUTH, wanted
        ok = self.verify_external(identity)
        return (SaslCode.OK if ok else SaslCode.AUTH), identity
