"""Per-user permissions on the one virtual host, RabbitMQ-style: three regular expressions,
configure / write / read, matched (unanchored, as RabbitMQ's `re:run`) against a queue or
exchange name.

Owns: `Permissions` (the three expressions of one user) and which operation needs which
(RabbitMQ's access-control table): declaring or deleting a queue or exchange needs configure
on it; publishing needs write on the exchange (`amq.default` for the default exchange and
the /queues/:q target); consuming or purging needs read on the queue; binding needs write on
the queue and read on the exchange. A refusal is `UnauthorizedError`
(`amqp:unauthorized-access`, HTTP 403). `ConnectionAccess`: those checks for the user of one
AMQP connection (a link's address at attach, the anonymous terminus's `to` per message;
the fault publish-without-write-permission skips the write check).
Plain Python; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..queues.addressing import Address, AddressKind, parse_to
from ..queues.errors import BrokerError
from ..queues.vhost import ConnectionSummary, VirtualHost

UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
DEFAULT_EXCHANGE_RESOURCE = "amq.default"  # the default exchange's name for permissions
CONFIGURE, WRITE, READ = "configure", "write", "read"


class UnauthorizedError(BrokerError):
    condition = UNAUTHORIZED_ACCESS
    status = 403


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"permission regex {pattern!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Permissions:
    """A user's configure / write / read expressions (".*" = everything, "^$" = nothing)."""

    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"
    _compiled: dict[str, re.Pattern[str]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for kind in (CONFIGURE, WRITE, READ):
            self._compiled[kind] = _compile(getattr(self, kind))

    def allows(self, kind: str, name: str) -> bool:
        pattern = getattr(self, kind)
        if pattern == "":
            return False  # RabbitMQ: an empty expression grants nothing
        return self._compiled[kind].search(name) is not None

    def check(self, user: str, kind: str, what: str, name: str) -> None:
        """Raise UnauthorizedError unless `user` may `kind` the `what` ("queue" or
        "exchange") named `name`."""
        resource = (name or DEFAULT_EXCHANGE_RESOURCE) if what == "exchange" else name
        if not self.allows(kind, resource):
            raise UnauthorizedError(
                f"{kind} access to {what} '{resource}' in vhost '/' refused for user '{user}'"
            )


FULL = Permissions()
NOTHING = Permissions("^$", "^$", "^$")


class ConnectionAccess:
    """What the authenticated user of one connection may do (RabbitMQ-style configure /
    write / read). The user is read from the connection's summary at each check: SASL sets
    it before any link attaches."""

    __slots__ = ("permissions_of", "skip_write", "summary", "vhost")

    def __init__(
        self,
        permissions_of: Callable[[str | None], Permissions],
        vhost: VirtualHost,
        summary: ConnectionSummary,
        *,
        skip_write: bool = False,
    ) -> None:
        self.permissions_of = permissions_of
        self.vhost = vhost
        self.summary = summary
        self.skip_write = skip_write  # the fault publish-without-write-permission

    @property
    def permissions(self) -> Permissions:
        """The authenticated user's."""
        return self.permissions_of(self.summary.user)

    def permit(self, kind: str, what: str, name: str) -> None:
        """UnauthorizedError (amqp:unauthorized-access) unless the user may do it."""
        permissions = self.permissions
        if permissions is not FULL:
            permissions.check(self.summary.user, kind, what, name)

    def check_anonymous_to(self, to: Any) -> None:
        """A message on the anonymous terminus: write permission on where its `to`
        publishes (raises as check_address)."""
        if self.permissions is not FULL:
            self.check_address(parse_to(to))

    def check_address(self, parsed: Address, *, declare_only: bool = False) -> None:
        """The permissions an address needs: configure to declare a v1 queue; to publish,
        write on its exchange (the default exchange for a queue address). The anonymous
        terminus is checked per message (its `to`)."""
        if parsed.declare and parsed.queue is not None and not self.vhost.has_queue(parsed.queue):
            self.permit(CONFIGURE, "queue", parsed.queue)
        if declare_only or parsed.kind is AddressKind.ANONYMOUS or self.skip_write:
            return
        exchange = parsed.exchange if parsed.kind is AddressKind.EXCHANGE else ""
        self.permit(WRITE, "exchange", exchange or "")
