"""2.6.5 link errors on the publishing side: the node a sender publishes to is deleted under
it through the admin adapter (RabbitMQ's amqp_client_SUITE server_closes_link_exchange_settled
/ _unsettled: an exchange deleted; server_closes_link_classic_queue: a queue), and what the
broker does with the link and with a message sent after the deletion.

What binds: 2.6.5 "When an error occurs at a Link Endpoint, the endpoint MUST be detached
with appropriate error information supplied in the error field of the detach frame": a
broker that detaches the sender because its node is gone detaches it with an error (a
detach without one FAILS). Which condition is left open: 2.8.15 defines
amqp:resource-deleted as "A server entity the client is working with has been deleted"
(RabbitMQ 4 detaches a /queues/ publisher with it) and amqp:not-found as "The peer tried to
use a node that does not exist" (RabbitMQ 4's answer for a deleted exchange, at the next
message): recorded. Whether the broker detaches at all, and what a message sent after the
deletion gets (RabbitMQ 4: released), no sentence says: RabbitMQ 4's model (DIFFERS when
not; the reference broker detaches at once with amqp:resource-deleted,
reference_broker/features/deleted_targets.py).

Owns the cases `2.6.5/publisher-*-deleted*`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from amqpspec.amqp10.engine import (
    DispositionReceived,
    Link,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    TransportClosed,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role
from amqpspec.conformance.probe import Probe, WaitTimeout
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.run.registry import MUST, case
from amqpspec.conformance.steps.refusals import published_answer
from amqpspec.conformance.steps.sentences import RABBITMQ4
from amqpspec.conformance.verdicts import Unsupported

LINK_ERROR = "2.6.5/link-errors.1"  # a link endpoint's error: detached with error information
DETACH_WAIT = 1.0  # a broker that detaches at the deletion does it within this
ANSWER_WAIT = 2.0  # the answer to a message sent after the deletion
ENDINGS = (RemoteDetach, RemoteEnd, RemoteClose, TransportClosed)
KEY = "amqpspec-key"


def _ends(event: object, link: Link) -> bool:
    """Whether `event` ends `link`: its detach, or the end or close of more."""
    if isinstance(event, RemoteDetach):
        return event.link is link
    return isinstance(event, ENDINGS)


def _ending(probe: Probe, link: Link, timeout: float) -> object | None:
    """The broker's detach of `link` (or the end or close that ends it), or None."""
    try:
        return probe.expect(lambda e: _ends(e, link), timeout, "the broker's detach")
    except WaitTimeout:
        return None


def _answer(probe: Probe, link: Link, settled: bool) -> tuple[str, object | None]:
    """One message sent after the deletion: (the broker's answer to it, the ending that
    followed within ANSWER_WAIT, or None). A settled message gets no answer ('settled')."""
    message = Message.of(b"amqpspec-after-deletion")
    if settled:
        probe.send_message(link, message, settled=True)
        return "settled", _ending(probe, link, ANSWER_WAIT)
    delivery_id = probe.send_message(link, message, settled=False)

    def answers(event: object) -> bool:
        if isinstance(event, DispositionReceived):
            return event.role == Role.RECEIVER and event.first <= delivery_id <= event.last
        return _ends(event, link)

    try:
        event = probe.expect(answers, ANSWER_WAIT, "the broker's answer to the message")
    except WaitTimeout:
        return "no answer", None
    if not isinstance(event, DispositionReceived):
        return "none before the link ended", event
    state = event.state
    name = type(state).__name__.lower() if state is not None else "no outcome"
    return name, _ending(probe, link, ANSWER_WAIT)


def _described(ending: object | None) -> str:
    """An ending as a line: 'detach with amqp:resource-deleted', 'end with ...'."""
    if ending is None:
        return "no detach"
    kind = {RemoteDetach: "detach", RemoteEnd: "end", RemoteClose: "close"}.get(type(ending))
    if kind is None:
        return "the TCP connection closed"
    error = getattr(ending, "error", None)
    return f"{kind} with {error.condition if error is not None else 'no error'}"


def _deleted_under(
    probe: Probe, ctx: CaseContext, address: str, delete: Callable[[], None], settled: bool
) -> None:
    """A sender to `address` whose first message is accepted, then `delete()` (the node
    gone through the admin adapter): the broker's detach within DETACH_WAIT, else one more
    message (`settled` or not) and what follows it. Graded: a detach carries an error
    (2.6.5 MUST); the link ends and the late message is not accepted (RabbitMQ 4's model);
    the condition and the late message's outcome recorded."""
    session = probe.open_session()
    sender = probe.attach_sender(session, address)
    first = published_answer(probe, sender, Message.of(b"amqpspec-before-deletion"))
    if first != "accepted":
        raise Unsupported(f"the broker answered a message to the live node with {first}")
    since = probe.mark()
    delete()
    ending = _ending(probe, sender, DETACH_WAIT)
    late = "not sent (the link ended first)"
    if ending is None:  # RabbitMQ 4 detaches a deleted exchange's publisher at its next message
        late, ending = _answer(probe, sender, settled)
    ctx.note(f"after the deletion: {_described(ending)}; the message sent after it: {late}")
    if isinstance(ending, RemoteDetach):
        ctx.check(
            ending.error is not None,
            f"expected the detach that ended the sender once its node was deleted to carry "
            f"error information; observed a detach without error ({probe.observed(since)})",
        )
    ctx.model(
        late != "accepted",
        f"expected the message sent to the deleted node not accepted (RabbitMQ 4 releases "
        f"it); observed accepted ({probe.observed(since)})",
    )
    ctx.model(
        ending is not None,
        f"expected the sender's link detached once its node was deleted (RabbitMQ 4: at "
        f"once for a queue, at the next message for an exchange); observed {late} for the "
        f"message sent after it and no detach within {ANSWER_WAIT:g}s ({probe.observed(since)})",
    )


DELETED = (
    "When an error occurs at a Link Endpoint, the endpoint MUST be detached with "
    "appropriate error information: a sender whose node is deleted under it is detached "
    "with an error (its condition recorded); RabbitMQ 4 detaches it and does not accept a "
    "message sent after the deletion."
)


# every case here: the 2.6.5 MUST on the broker as the link's receiver, RabbitMQ 4's model
# for the rest; no pipelined variant (the deletion needs the broker to know the link: each
# case waits for the attach)
GRADED = {
    "sentences": (LINK_ERROR,),
    "role": "receiver",
    "model": RABBITMQ4,
    "pipelined": False,
}


@case(
    "2.6.5/publisher-queue-deleted",
    MUST,
    DELETED,
    requires={"queues", "declare-queues"},
    **GRADED,
)
def publisher_queue_deleted(probe, ctx):
    """Counters the publishing half of RabbitMQ's server_closes_link_classic_queue: a
    sender to a fresh queue, one message accepted, the queue deleted through the admin
    adapter: the broker detaches the sender with an error (RabbitMQ 4:
    amqp:resource-deleted at once); a broker that keeps it attached is sent one unsettled
    message, which it must not accept, and must detach the link then."""
    queue = ctx.queue()
    delete = functools.partial(ctx.admin.delete_queue, queue)
    _deleted_under(probe, ctx, ctx.target_address(queue), delete, False)


def _exchange_deleted(probe: Probe, ctx: CaseContext, settled: bool) -> None:
    """A fresh direct exchange bound to a fresh queue, a sender to it, the exchange deleted
    (and deleted at the end whatever happened)."""
    queue = ctx.queue()
    exchange = f"{queue}-x"
    ctx.admin.declare_exchange(exchange, queue, KEY)
    try:
        address = ctx.profile.exchange(exchange, KEY)
        delete = functools.partial(ctx.admin.delete_exchange, exchange)
        _deleted_under(probe, ctx, address, delete, settled)
    finally:
        ctx.admin.delete_exchange(exchange)


@case(
    "2.6.5/publisher-exchange-deleted-settled",
    MUST,
    DELETED,
    requires={"queues", "declare-queues", "exchanges"},
    **GRADED,
)
def publisher_exchange_deleted_settled(probe, ctx):
    """Counters RabbitMQ's server_closes_link_exchange_settled: a sender to a fresh direct
    exchange (bound to a fresh queue), one message accepted, the exchange deleted through
    the admin adapter; unless the broker detaches the sender at once, one settled message
    more: the broker then detaches it with an error (RabbitMQ 4: amqp:not-found)."""
    _exchange_deleted(probe, ctx, settled=True)


@case(
    "2.6.5/publisher-exchange-deleted-unsettled",
    MUST,
    DELETED,
    requires={"queues", "declare-queues", "exchanges"},
    **GRADED,
)
def publisher_exchange_deleted_unsettled(probe, ctx):
    """Counters RabbitMQ's server_closes_link_exchange_unsettled: as the settled case, the
    message after the deletion unsettled: it is not accepted (RabbitMQ 4 releases it) and
    the link is detached with an error (RabbitMQ 4: amqp:not-found); its outcome and the
    condition recorded."""
    _exchange_deleted(probe, ctx, settled=False)
