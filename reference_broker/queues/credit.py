"""The sender's side of link flow control (2.6.7) for a queue's consumer links.

Owns the arithmetic of one consumer's credit state (`classic.Consumer`): a receiver's flow
applied (`apply_flow`), a drain completed (`complete_drain`) and the flags of the reply a
drain or an echo is owed (`take_reply`), with the queue-layer faults that bend them
(overdeliver-on-regrant, ignore-drain, excess-credit-after-drain). The queue
(`classic.ClassicQueue`) owns when these happen: which consumer, dispatch order, replies.
Plain Python: no I/O, no clock, no engine objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqpspec.amqp10.engine.flowcontrol import sender_link_credit
from amqpspec.amqp10.serial import serial_add

from ..faults.catalog import Faults

if TYPE_CHECKING:
    from .classic import Consumer


def apply_flow(
    consumer: Consumer,
    faults: Faults,
    *,
    delivery_count: int | None,
    link_credit: int,
    drain: bool,
    echo: bool,
) -> None:
    """A receiver's flow (2.6.7): link-credit(snd) := delivery-count(rcv) + link-credit(rcv)
    - delivery-count(snd), from the initial delivery-count when the flow carries none; never
    below 0. Marks the reply it asks for (drain, echo) as due."""
    consumer.flows_seen += 1
    if faults.overdeliver_on_regrant:
        # fault (RabbitMQ #2597): the grant is added to what is left of the old credit
        consumer.credit = max(0, consumer.credit + link_credit)
    else:
        consumer.credit = sender_link_credit(  # 2.6.7
            delivery_count,
            link_credit,
            consumer.delivery_count,
            consumer.initial_delivery_count,
        )
    if drain and faults.ignore_drain:
        drain = False
    consumer.drain = drain
    # the latest flow decides whether a drain is asked: one it supersedes before the
    # queue answered it is owed no reply (2.6.7), and a reply claiming drain would zero
    # the link's credit under the new grant; an unanswered echo is still owed one
    consumer.reply_for_drain = drain
    consumer.reply_for_echo = consumer.reply_for_echo or echo
    consumer.reply_due = drain or consumer.reply_for_echo


def complete_drain(consumer: Consumer, faults: Faults) -> None:
    """2.6.7 drain: nothing more is available, so use up the credit: advance
    delivery-count by the remaining link-credit and set link-credit to 0."""
    consumer.delivery_count = serial_add(consumer.delivery_count, consumer.credit)
    consumer.drain = False
    if faults.excess_credit_after_drain:
        return  # fault (DISPATCH-1090): the old credit stays usable
    consumer.credit = 0


def take_reply(consumer: Consumer, faults: Faults) -> tuple[bool, bool]:
    """The reply due now: completes a pending drain, clears the owed reply and returns
    (drain, echo) as the reply must say them."""
    drain = consumer.reply_for_drain
    echo = consumer.reply_for_echo
    if consumer.drain:
        complete_drain(consumer, faults)
    consumer.reply_due = False
    consumer.reply_for_drain = False
    consumer.reply_for_echo = False
    return drain, echo
