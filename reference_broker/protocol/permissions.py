"""Per-user permissions on the one virtual host, RabbitMQ-style: three regular expressions,
configure / write / read, matched (unanchored, as RabbitMQ's `re:run`) against a queue or
exchange name.

Owns: `Permissions` (the three expressions of one user) and which operation needs which
(RabbitMQ's access-control table): declaring or deleting a queue or exchange needs configure
on it; publishing needs write on the exchange (`amq.default` for the default exchange and
the /queues/:q target); consuming or purging needs read on the queue; binding needs write on
the queue and read on the exchange. A refusal is `UnauthorizedError`
(`amqp:unauthorized-access`, HTTP 403). Plain Python; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..queues.vhost import BrokerError

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
