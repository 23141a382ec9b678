"""Receivers with source filters, many at once: the step the SQL and selector filter cases
(conformance/cases/s3_5_sql_filters.py) use to see what a broker delivers through each of
several filter-sets on one queue.

Owns: `received_through(probe, ctx, queue, filter_sets, most, stream=...)`: one session, a
receiver per filter-set, each drained with `most + 1` credit (2.6.7: the drain reply follows
every delivery the filter let through), then detached: on a stream all at once, each with
the offset-spec `first`; on a queue one after the other. Returns, per filter-set, the
filter the broker's attach reports in place and the sorted bodies received.
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Source
from amqpspec.amqp10.types import Described, symbol
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.steps.credit import drain_reply
from amqpspec.conformance.steps.queues import texts
from amqpspec.conformance.verdicts import CaseFailed

OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")


def received_through(
    probe, ctx, queue: str, filter_sets: list[dict[Any, Any]], most: int, *, stream: bool
) -> list[tuple[dict[Any, Any] | None, list[bytes]]]:
    """(the reported filter, the bodies received) for a receiver per filter-set. On a
    stream (`stream`) they all read from the first offset at once; on a queue they would
    compete for its messages, so each goes in turn and detaches (its deliveries unsettled:
    back to the queue, 3.4 released) before the next attaches."""
    session = probe.open_session()
    if stream:
        results, links = _drained(probe, ctx, session, queue, filter_sets, most, stream)
        for link in links:
            probe.detach(link, wait=False)
    else:
        results = []
        for filters in filter_sets:
            result, links = _drained(probe, ctx, session, queue, [filters], most, stream)
            results += result
            probe.detach(links[0])  # its reply: the broker has taken the deliveries back
    probe.end(session, wait=False)
    return results


def _drained(probe, ctx, session, queue, filter_sets, most, stream):
    """Attach a receiver per filter-set, all before the first wait, and drain each: (the
    results, the links)."""
    links = []
    for filters in filter_sets:
        filter_set = dict(filters)
        if stream:
            filter_set[OFFSET_SPEC] = Described(OFFSET_SPEC, "first")
        source = Source(address=ctx.source(queue), filter=filter_set)
        links.append(probe.attach_receiver(session, source, wait=False))
    reported = []
    for link in links:
        attach = probe.wait_attached(link)
        reported.append(attach.source.filter if attach.source is not None else None)
    since = probe.mark()
    for link in links:
        link.flow(link_credit=most + 1, drain=True)
    probe.flush()
    try:
        for link in links:
            drain_reply(probe, link, since)
    except (WaitTimeout, CaseFailed) as exc:
        raise CaseFailed(f"expected a drain reply (2.6.7) after the deliveries: {exc}") from None
    results = [(reported[i], texts(probe.transfers(link))) for i, link in enumerate(links)]
    return results, links
