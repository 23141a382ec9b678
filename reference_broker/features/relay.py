"""The reference broker's anonymous relay: the `ANONYMOUS-RELAY` connection capability and
the routing errors of a sender attached with a null target (each message routed by its
properties.to).

Owns: the capability the broker offers in its open, whether the sender's source supports
the rejected outcome, and the error a routing failure carries. The delivery handler
(protocol/delivery_handler.py) routes each message and calls `routing_error` / `rejects`
when a message cannot be routed; it rejects the delivery or detaches the link as they say.

The convention: OASIS "Using the AMQP Anonymous Terminus for Message Routing Version 1.0"
(Committee Specification 01, 17 September 2018,
https://docs.oasis-open.org/amqp/anonterm/v1.0/anonterm-v1.0.html). A container that can
route messages sent to the anonymous terminus (a link whose target address is null) offers
ANONYMOUS-RELAY in its open. Its 2.2.2 Routing Errors, as Qpid Broker-J's
AnonymousTerminusTest quotes it: "the routing node MUST communicate the error back to the
sender of the message. If the source of the link supports the rejected outcome, and the
message has not already been settled by the sender, then the routing node MUST reject the
message."; "If the source of the link does not support the rejected outcome, [...] then the
routing node MUST detach the link with an error", as when "the message has already been
settled by the sender"; "the info field of error MUST contain an entry with symbolic key
delivery-tag and binary value of the delivery-tag of the message which caused the failure."

A source that lists no outcomes is taken to support rejected (RabbitMQ 4 rejects there too;
3.5.3 outcomes leaves an empty list to the default-outcome); one that lists outcomes
without amqp:rejected:list does not.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Error
from amqpspec.amqp10.extensions import ANONYMOUS_RELAY_CAPABILITY as RELAY_CAPABILITY
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import symbol

from ..faults.catalog import Faults

DELIVERY_TAG = symbol("delivery-tag")
REJECTED_OUTCOME = "amqp:rejected:list"
# no `to`, a `to` that is no address of this broker, nothing at it: a routing error
ROUTING_ERRORS = frozenset({Cond.PRECONDITION_FAILED, Cond.NOT_FOUND})


def offered_capabilities() -> list[str]:
    """What the broker offers in its open (2.7.1 offered-capabilities)."""
    return [RELAY_CAPABILITY]


def rejects(link: Any) -> bool:
    """Whether the sender's source (its attach) supports the rejected outcome."""
    attach = link.remote_attach
    source = attach.source if attach is not None else None
    outcomes = getattr(source, "outcomes", None)
    if outcomes is None:
        return True
    if isinstance(outcomes, str):
        outcomes = [outcomes]
    return REJECTED_OUTCOME in {str(outcome) for outcome in outcomes}


def routing_error(delivery_tag: bytes, condition: str, reason: str, faults: Faults) -> Error:
    """The error of a message the relay cannot route: the delivery-tag in its info (the
    `relay-error-without-delivery-tag` fault leaves it out)."""
    if faults.relay_error_without_delivery_tag:
        return Error(condition=condition, description=reason)
    info = {DELIVERY_TAG: bytes(delivery_tag)}
    return Error(condition=condition, description=reason, info=info)
