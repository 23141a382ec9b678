"""Steps for the cases that restart the broker (3.2.1 durable, persistent dynamic nodes):
the restart through the profile's admin adapter (capability `restart`, a bounded wait until
the broker listens again), and what a new connection gets from a queue after it.

Owns compositions of admin and `Probe` calls only; registers no case. Touches nothing else.
"""

from __future__ import annotations

from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.steps.deliveries import collect
from amqpspec.conformance.steps.links import unsettled_consumer
from amqpspec.conformance.steps.queues import texts
from amqpspec.conformance.verdicts import NoDelivery

BACK_QUIET = 0.2  # seconds of nothing more once the expected messages came back


def restart(ctx: CaseContext) -> None:
    """Restart the broker through the admin adapter (bounded: it listens again)."""
    ctx.require("restart")
    ctx.admin.restart()
    ctx.note("the broker was restarted through the admin adapter")


def bodies_back(ctx: CaseContext, queue: str, count: int) -> list[bytes]:
    """The bodies a new connection's receiver from `queue` gets: `count` of them (each
    within the profile's wait; fewer when no more come), and any more within BACK_QUIET."""
    other = ctx.probe()
    _, link = unsettled_consumer(other, ctx, queue, credit=count + 5)
    got = []
    try:
        got = other.receive(link, count)
    except NoDelivery as exc:
        ctx.note(f"after the restart: {exc}")
        got = other.transfers(link)
    return texts(got + collect(other, link, BACK_QUIET))
