"""The reference broker's message-level checks on a publish, past 3.2's section order
(amqp10.message_head.publish_head, protocol/delivery_handler.py): the annotation keys 3.2.10
reserves and the properties' user-id (3.2.4).

Owns: `Refusal` and `refusal(head, user, faults)`, what the broker answers a message whose
head (amqp10.message_head: delivery-annotations, message-annotations, properties) it will
not take. The delivery handler reads the head of each publish and detaches the link or
rejects the delivery as the refusal says.

- 3.2.10 annotations: "All ulong keys, and all symbolic keys except those beginning with
  "x-" are reserved. On receiving an annotations map containing keys or values which it
  does not recognize, and for which the key does not begin with the string "x-opt-" an
  AMQP container MUST detach the link with the not-implemented amqp-error." The broker
  recognizes every "x-" key (it keeps them as the message's annotations, 3.2.3) and no
  reserved one (the specification defines none for these maps): a reserved key in the
  delivery- or message-annotations detaches the link with amqp:not-implemented. (RabbitMQ
  4 detaches with amqp:decode-error, its reserved_annotation test: not the condition the
  MUST names.) The footer, after the body, is not read.
- 3.2.4 user-id: "The identity of the user responsible for producing the message. The
  client sets this value, and it MAY be authenticated by intermediaries." As RabbitMQ 4
  does (its user_id test), a user-id other than the connection's authenticated user is
  refused with amqp:unauthorized-access: the delivery rejected, or the link detached when
  the message came settled (no outcome can tell the sender); a matching one is kept as it
  came (3.2.4: the properties section remains completely unaltered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amqpspec.amqp10.message_head import EMPTY_HEAD, MessageHead, reserved_key
from amqpspec.amqp10.spec import Cond

from ..faults.catalog import Faults


@dataclass(frozen=True, slots=True)
class Refusal:
    """How a message is refused: `detach` the link (3.2.10 says so), else reject the
    delivery (or detach when it came settled)."""

    condition: str
    description: str
    detach: bool = False


def refusal(head: MessageHead | Any, user: str | None, faults: Faults) -> Refusal | None:
    """What to answer a publish whose head is `head` (an amqp10 MessageHead, or a decoded
    Message: the same fields) on a connection authenticated as `user`; None: take it."""
    if head is EMPTY_HEAD:
        return None  # nothing to judge (the delivery handler does not ask for these)
    refused = None if faults.accept_reserved_annotations else _reserved(head)
    if refused is None and not faults.accept_any_user_id:
        refused = _other_user(head, user)
    return refused


def _reserved(head: MessageHead | Any) -> Refusal | None:
    """3.2.10: a reserved key in the delivery- or message-annotations."""
    for name, entries in (
        ("delivery-annotations", head.delivery_annotations),
        ("message-annotations", head.message_annotations),
    ):
        key = reserved_key(entries)
        if key is not None:
            reason = f"{name} key {key!r} is reserved and not recognized (3.2.10)"
            return Refusal(Cond.NOT_IMPLEMENTED, reason, detach=True)
    return None


def _other_user(head: MessageHead | Any, user: str | None) -> Refusal | None:
    """3.2.4 user-id authenticated (RabbitMQ 4's rule): one naming another user."""
    if isinstance(head, MessageHead):
        user_id = head.user_id
    else:  # a decoded Message
        user_id = head.properties.user_id if head.properties is not None else None
    if user_id is None or user is None or bytes(user_id) == user.encode():
        return None
    reason = f"user_id property set to {bytes(user_id)!r} but authenticated user was {user!r}"
    return Refusal(Cond.UNAUTHORIZED_ACCESS, reason)
