"""Volatile nodes: queues that cannot keep durable messages, which refuse a message whose
header asks for durability (3.2.1 header durable).

3.2.1: "Durable Messages MUST NOT be lost even if an intermediary is unexpectedly terminated
and restarted. A target which is not capable of fulfilling this guarantee MUST NOT accept
messages where the durable header is set to true: if the source allows the rejected outcome
then the message should be rejected with the precondition-failed error, otherwise the link
must be detached by the receiver with the same error." A queue declared with the argument
`x-amqpspec-volatile` = true (through the admin API, as any queue argument) is such a
target: it keeps its messages in memory only, takes messages with durable false (or no
header), and refuses durable ones with amqp:precondition-failed: rejected when the
transfer is unsettled and the sender's source supports the rejected outcome
(features/relay.py `rejects`: 3.5.3 outcomes), else the link detached with the error (a
settled transfer cannot be rejected). Qpid Broker-J's TransferTest.durableTransferWith(out)
RejectedOutcome checks the same on a broker-specific non-durable store.

Owns: the queue argument, which publishers publish to a volatile queue (`is_volatile`),
whether a message asks for durability (`asks_durability`) and the error
(`durable_refused`). The delivery handler (protocol/delivery_handler.py) calls them. The
`accept-durable-on-volatile` fault takes durable messages all the same.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Error
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Cond

VOLATILE_ARGUMENT = "x-amqpspec-volatile"


def is_volatile(queue: Any) -> bool:
    """Whether `queue` (a queues/classic.py queue, or None) was declared volatile."""
    return queue is not None and bool(queue.arguments.get(VOLATILE_ARGUMENT))


def asks_durability(payload: bytes) -> bool:
    """Whether the message's header says durable=true (an undecodable message asks
    nothing: the publish path judges its sections)."""
    try:
        header = Message.decode(payload).header
    except Exception:
        return False
    return header is not None and bool(header.durable)


def durable_refused(queue_name: str) -> Error:
    """The error a durable message to a volatile queue is refused with (3.2.1)."""
    return Error(
        condition=Cond.PRECONDITION_FAILED,
        description=f"queue '{queue_name}' is volatile: it cannot keep durable messages",
    )
