"""The error an endpoint sends when it closes, ends or detaches with a condition.

Owns: `as_error`, which turns what a caller of `Connection.close`, `Session.end` or
`Link.detach` passed (an error condition symbol, an `Error` composite, or nothing) into the
`error` field of the close, end or detach performative (2.7.7-2.7.9, 2.8.14). A module of
its own so the connection, session and link import it without importing each other.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Error


def as_error(error: Error | str | None, description: str | None = None) -> Error | None:
    """An Error composite from a condition symbol (or an Error, or None)."""
    if error is None or isinstance(error, Error):
        return error
    return Error(condition=error, description=description)
