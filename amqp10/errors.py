"""Error types of the protocol core.

Owns: the one exception every decoder raises on bad input (DecodeError, with the byte
offset and what was expected), the encoder's error, and the protocol error that carries
an AMQP error condition (2.8.15-2.8.18) for the engine to send to the peer.
"""

from __future__ import annotations


class AMQPError(Exception):
    """Base class of every error the core raises."""


class DecodeError(AMQPError):
    """Bytes that are not valid AMQP 1.0. `offset` is where decoding failed."""

    def __init__(self, offset: int, expected: str, condition: str = "amqp:decode-error") -> None:
        super().__init__(f"at byte {offset}: {expected}")
        self.offset = offset
        self.expected = expected
        self.condition = condition


class EncodeError(AMQPError, ValueError):
    """A value that cannot be encoded as the AMQP type asked for."""


class ProtocolError(AMQPError):
    """The peer broke a rule; `condition` is the spec's error symbol to answer with.

    `scope` says which endpoint the error ends: "connection", "session" or "link".
    """

    def __init__(self, condition: str, description: str, scope: str = "connection") -> None:
        super().__init__(f"{condition}: {description}")
        self.condition = condition
        self.description = description
        self.scope = scope
