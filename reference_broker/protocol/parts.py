"""What a handler of one broker connection reads of it (connection.py's split into open,
session, link and delivery handlers).

Owns: `ConnectionPart`, the base of the four handlers: each holds its `connection` and its
own references to the connection's parts it names in `SHARED`, taken once when the
connection makes it, so that the per-frame code reads `self.vhost` rather than
`self.connection.vhost` (delivery_handler.py, the hot path); their types are the
connection's attributes'. May touch: nothing but the attributes its subclass names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .connection import BrokerConnection


class ConnectionPart:
    """A handler of `connection`; every name in `SHARED` is the connection's attribute of
    that name (the same object: dicts and lists the handler fills are the connection's)."""

    __slots__ = ("connection",)
    SHARED: tuple[str, ...] = ()

    def __init__(self, connection: BrokerConnection) -> None:
        self.connection = connection
        for name in self.SHARED:
            setattr(self, name, getattr(connection, name))
