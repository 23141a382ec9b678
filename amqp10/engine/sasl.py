"""SASL (5.3) configuration and mechanism logic: ANONYMOUS and PLAIN (RFC 4616).

Owns: what a client puts in its sasl-init and how a server judges one. The SASL state
machine itself is SASL_TABLE in transitions.py; the Connection drives it and calls in
here for the frame bodies. Pass `ClientSasl(...)` or `ServerSasl(...)` as
`Connection(sasl=...)`; `None` means no SASL layer (straight to the AMQP header).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from amqp10.composites import SaslInit, SaslMechanisms
from amqp10.errors import ProtocolError
from amqp10.spec import Cond, SaslCode
from amqp10.types import symbol

ANONYMOUS = "ANONYMOUS"
PLAIN = "PLAIN"

# verify_plain(authzid, username, password) -> True to accept
PlainVerifier = Callable[[str, str, str], bool]


@dataclass(frozen=True, slots=True)
class ClientSasl:
    """The client's choice: mechanism ANONYMOUS, or PLAIN with username/password."""

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
            )
        response = None
        if self.mechanism == PLAIN:  # RFC 4616: authzid NUL authcid NUL passwd
            response = f"{self.authzid}\0{self.username}\0{self.password}".encode()
        return SaslInit(
            mechanism=symbol(self.mechanism), initial_response=response, hostname=self.hostname
        )


@dataclass(frozen=True, slots=True)
class ServerSasl:
    """The server's offer. PLAIN is offered only with a verifier; without mechanisms
    left the server offers ANONYMOUS."""

    mechanisms: tuple[str, ...] = (ANONYMOUS,)
    verify_plain: PlainVerifier | None = None

    def offered(self) -> tuple[str, ...]:
        return tuple(m for m in self.mechanisms if m != PLAIN or self.verify_plain is not None)

    def mechanisms_frame(self) -> SaslMechanisms:
        return SaslMechanisms(sasl_server_mechanisms=[symbol(m) for m in self.offered()])

    def judge(self, init: SaslInit) -> tuple[int, str | None]:
        """(sasl-code, username) for a client's sasl-init (5.3.3.6)."""
        mechanism = str(init.mechanism)
        if mechanism not in self.offered():
            return SaslCode.AUTH, None
        if mechanism == ANONYMOUS:
            return SaslCode.OK, None
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
