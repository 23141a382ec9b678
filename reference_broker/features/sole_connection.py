"""The reference broker's sole connection for container: the `sole-connection-for-container`
connection capability and its two enforcement policies, per client container-id.

Owns: `SoleConnections` (one per broker, on the BrokerContext): the open connections of each
client container-id with the enforcement policy each asked for, the answer to a new open
(admit it; refuse it; or admit it and close the connections already open for its
container), the properties and capability the broker puts in its own open. The connection
(protocol/connection.py) asks `admit` when a peer's open arrives, applies the answer, and calls
`gone` when it ends.

The convention: OASIS "Advanced Message Queuing Protocol (AMQP) Enforcing Connection
Uniqueness Version 1.0" (Committee Specification 01, 17 September 2018,
https://docs.oasis-open.org/amqp/soleconn/v1.0/soleconn-v1.0.html), as Qpid Broker-J
implements it and its protocol tests (extensions/soleconn) check it:
- A container that enforces one connection per client container offers
  `sole-connection-for-container` in its open (2.7.1 offered-capabilities); a client asks for
  it in desired-capabilities with the connection property `sole-connection-enforcement-policy`
  (uint: 0 refuse-connection, the default; 1 close-existing). The broker's open echoes the
  policy and says how it detects other connections: `sole-connection-detection-policy`
  (uint: 0 strong, 1 weak). This broker detects strongly: every open connection of a
  container-id counts, whether or not it asked for the capability.
- The policy that decides is the one an already open connection of the container asked for,
  else the new connection's (Broker-J's ConnectionLimiter does the same; MixedPolicyTest).
- refuse-connection: the new connection's open carries the property
  `amqp:connection-establishment-failed` = true and is followed at once by a close with
  amqp:invalid-field, info {invalid-field: container-id}; the existing one is untouched.
- close-existing: each existing connection of the container is closed with
  amqp:resource-locked, info {sole-connection-enforcement: true}; the new one is opened.
A policy value that is neither 0 nor 1 is taken as the default (refuse-connection).

The `sole-connection-weak-detection` fault reports strong detection but lets a connection
whose open does not ask for the capability through unchecked and unregistered: the
strong-detection cases catch it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.composites import Error
from amqpspec.amqp10.extensions import (
    CLOSE_EXISTING,
    REFUSE_CONNECTION,
)
from amqpspec.amqp10.extensions import CONNECTION_ESTABLISHMENT_FAILED as ESTABLISHMENT_FAILED
from amqpspec.amqp10.extensions import CONTAINER_ID_FIELD as CONTAINER_ID
from amqpspec.amqp10.extensions import DETECTION_STRONG as STRONG
from amqpspec.amqp10.extensions import INVALID_FIELD_KEY as INVALID_FIELD
from amqpspec.amqp10.extensions import SOLE_CONNECTION_CAPABILITY as CAPABILITY
from amqpspec.amqp10.extensions import SOLE_CONNECTION_DETECTION_POLICY as DETECTION_POLICY
from amqpspec.amqp10.extensions import SOLE_CONNECTION_ENFORCEMENT as ENFORCEMENT
from amqpspec.amqp10.extensions import SOLE_CONNECTION_ENFORCEMENT_POLICY as ENFORCEMENT_POLICY
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import uint

from ..faults.catalog import Faults


def _symbols(value: Any) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, str):
        return {value}
    return {str(v) for v in value}


def requested_policy(open_frame: Any) -> int | None:
    """The enforcement policy a peer's open asks for: None when it does not desire the
    capability, else its `sole-connection-enforcement-policy` (refuse-connection without
    one or with a value that is no policy)."""
    if CAPABILITY not in _symbols(open_frame.desired_capabilities):
        return None
    props = open_frame.properties if isinstance(open_frame.properties, dict) else {}
    value = props.get(ENFORCEMENT_POLICY)
    return CLOSE_EXISTING if value == CLOSE_EXISTING else REFUSE_CONNECTION


@dataclass(slots=True)
class Admission:
    """What to do with a new connection: `refuse` it (open with `properties`, then close
    with `error`), or admit it and close each of `close` with `error`."""

    properties: dict[Any, Any]
    refuse: bool = False
    close: list[Any] = field(default_factory=list)
    error: Error | None = None


class SoleConnections:
    """The open connections of each client container-id and the policy each asked for."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self._by_container: dict[str, dict[Any, int | None]] = {}

    @staticmethod
    def offered_capabilities() -> list[str]:
        """What the broker offers in its open (2.7.1 offered-capabilities)."""
        return [CAPABILITY]

    def admit(self, connection: Any, open_frame: Any) -> Admission:
        """The answer to `connection`'s open (registering it when admitted)."""
        container = str(open_frame.container_id)
        policy = requested_policy(open_frame)
        properties: dict[Any, Any] = {DETECTION_POLICY: uint(STRONG)}
        if policy is not None:
            properties[ENFORCEMENT_POLICY] = uint(policy)
        if policy is None and self.faults.sole_connection_weak_detection:
            return Admission(properties)  # neither checked nor counted
        existing = self._by_container.setdefault(container, {})
        decides = next((p for p in existing.values() if p is not None), policy)
        if not existing or decides is None:
            existing[connection] = policy
            return Admission(properties)
        if decides == REFUSE_CONNECTION:
            properties[ESTABLISHMENT_FAILED] = True
            error = Error(
                condition=Cond.INVALID_FIELD,
                description=f"container {container!r} already has a connection "
                "(sole-connection-for-container, refuse-connection)",
                info={INVALID_FIELD: CONTAINER_ID},
            )
            return Admission(properties, refuse=True, error=error)
        error = Error(
            condition=Cond.RESOURCE_LOCKED,
            description=f"a new connection of container {container!r} replaces this one "
            "(sole-connection-for-container, close-existing)",
            info={ENFORCEMENT: True},
        )
        closing = list(existing)
        existing.clear()
        existing[connection] = policy
        return Admission(properties, close=closing, error=error)

    def gone(self, connection: Any, container_id: str | None) -> None:
        """`connection` ended (or is being closed): it no longer holds its container."""
        if container_id is None:
            return
        existing = self._by_container.get(str(container_id))
        if existing is None:
            return
        existing.pop(connection, None)
        if not existing:
            del self._by_container[str(container_id)]
