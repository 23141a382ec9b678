"""SCRAM-SHA-256 (RFC 7677, the SCRAM of RFC 5802 with SHA-256): the one challenge/response
SASL mechanism (5.3.2's sasl-challenge / sasl-response) the engine speaks.

Owns: the SCRAM messages of both ends, with no I/O and no AMQP framing. `ScramClient`
builds client-first (the sasl-init's initial-response) and client-final (the
sasl-response to the server's challenge) and checks the server's signature (the
sasl-outcome's additional-data, 5.3.3.6). `ScramServer` answers client-first with
server-first (the sasl-challenge) and judges client-final. No channel binding (gs2 header
"n,,"), no SASLprep (user names and passwords are taken as UTF-8 as they are).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable

SCRAM_SHA_256 = "SCRAM-SHA-256"
ITERATIONS = 4096  # RFC 7677 section 4: at least 4096
GS2_HEADER = b"n,,"  # RFC 5802 section 7: no channel binding, no authzid

# password_of(username) -> the user's password, or None for no such user
PasswordLookup = Callable[[str], str | None]


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _b64(data: bytes) -> bytes:
    return base64.b64encode(data)


def _nonce() -> bytes:
    return _b64(os.urandom(18))


def _attributes(message: bytes) -> dict[bytes, bytes]:
    """RFC 5802 section 5: `a=value` pairs separated by commas (values may hold '=')."""
    pairs = {}
    for part in message.split(b","):
        if len(part) < 2 or part[1:2] != b"=":
            raise ValueError(f"not a SCRAM attribute: {part!r}")
        pairs[part[:1]] = part[2:]
    return pairs


def _saslname(name: str) -> bytes:
    """RFC 5802 section 5.1: ',' and '=' escaped in the user name."""
    return name.replace("=", "=3D").replace(",", "=2C").encode()


def _keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey) of RFC 5802 section 3."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = _hmac(salted, b"Client Key")
    return client_key, hashlib.sha256(client_key).digest(), _hmac(salted, b"Server Key")


class ScramClient:
    """One client's exchange: first() -> final(server_first) -> verify(server_final)."""

    def __init__(self, username: str, password: str, nonce: bytes | None = None) -> None:
        self.password = password
        self.nonce = nonce or _nonce()
        self.bare = b"n=" + _saslname(username) + b",r=" + self.nonce
        self.server_signature = b""

    def first(self) -> bytes:
        """client-first-message: the sasl-init's initial-response."""
        return GS2_HEADER + self.bare

    def final(self, server_first: bytes, *, proof_password: str | None = None) -> bytes:
        """client-final-message for `server_first` (the challenge); `proof_password`: prove
        another password than ours (a case's wrong proof). ValueError when the challenge is
        not a server-first-message that extends our nonce."""
        fields = _attributes(server_first)
        nonce, salt, iterations = fields[b"r"], fields[b"s"], int(fields[b"i"])
        if not nonce.startswith(self.nonce) or iterations < 1:
            raise ValueError(f"server-first {server_first!r} does not extend our nonce")
        without_proof = b"c=" + _b64(GS2_HEADER) + b",r=" + nonce
        auth_message = self.bare + b"," + server_first + b"," + without_proof
        password = self.password if proof_password is None else proof_password
        client_key, stored_key, server_key = _keys(password, base64.b64decode(salt), iterations)
        signature = _hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_signature = _b64(_hmac(server_key, auth_message))
        return without_proof + b",p=" + _b64(proof)

    def verify(self, server_final: bytes | None) -> bool:
        """The server-final-message proves the server knows our password (RFC 5802 3)."""
        if not server_final or not self.server_signature:
            return False
        try:
            verifier = _attributes(server_final).get(b"v")
        except ValueError:
            return False
        return verifier is not None and hmac.compare_digest(verifier, self.server_signature)


class ScramServer:
    """One server's exchange: first(client_first) -> the challenge, then
    final(client_final) -> (accepted, server-final-message). An unknown user is challenged
    all the same (a made-up salt) and refused at the proof (RFC 5802 section 9)."""

    def __init__(self, password_of: PasswordLookup, iterations: int = ITERATIONS) -> None:
        self.password_of = password_of
        self.iterations = iterations
        self.username: str | None = None
        self._salt = os.urandom(16)
        self._client_bare = b""
        self._server_first = b""
        self._nonce = b""

    def first(self, client_first: bytes) -> bytes | None:
        """server-first-message, or None for a client-first that is not one."""
        if not client_first.startswith(GS2_HEADER):
            return None  # channel binding or an authzid: not supported here
        self._client_bare = client_first[len(GS2_HEADER) :]
        try:
            fields = _attributes(self._client_bare)
            name = fields[b"n"].decode().replace("=2C", ",").replace("=3D", "=")
            client_nonce = fields[b"r"]
        except (ValueError, KeyError, UnicodeDecodeError):
            return None
        self.username = name
        self._nonce = client_nonce + _nonce()
        self._server_first = b"r=%s,s=%s,i=%d" % (self._nonce, _b64(self._salt), self.iterations)
        return self._server_first

    def final(self, client_final: bytes) -> tuple[bool, bytes | None]:
        """(accepted, the server-final-message carrying the server's signature)."""
        try:
            fields = _attributes(client_final)
            proof = base64.b64decode(fields[b"p"], validate=True)
        except (ValueError, KeyError):
            return False, None
        password = self.password_of(self.username or "")
        if password is None or fields.get(b"r") != self._nonce:
            return False, None
        if fields.get(b"c") != _b64(GS2_HEADER):
            return False, None
        without_proof = client_final[: client_final.rindex(b",p=")]
        auth_message = self._client_bare + b"," + self._server_first + b"," + without_proof
        _, stored_key, server_key = _keys(password, self._salt, self.iterations)
        signature = _hmac(stored_key, auth_message)
        if len(proof) != len(signature):
            return False, None
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not self.proof_ok(client_key, stored_key):
            return False, None
        return True, b"v=" + _b64(_hmac(server_key, auth_message))

    def proof_ok(self, client_key: bytes, stored_key: bytes) -> bool:
        """RFC 5802 section 3: H(ClientKey) recovered from the proof is the StoredKey."""
        return hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key)
