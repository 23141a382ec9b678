"""Quorum-queue variants of classic-queue cases: the same run, every queue the case declares
a quorum queue (`x-queue-type: quorum` through the profile's admin adapter), so that link
flow control (2.6.7), settlement (2.6.12), outcomes (3.4) and the errors of a deleted node
(2.8.15) are graded on the queue type a RabbitMQ team runs in production, not only on
classic queues.

Owns the cases `<section>/quorum-<slug>`, one per base case in BASES: the base case's level,
sentences (its own and those conformance/manifest/links.toml links to it), role and model,
under the base's capabilities plus `quorum`, without a pipelined variant (the base case's
`/pipelined` grades pipelining; the queue type does not change which frames go in one
write, and the reference run stays within its time budget). A variant that declares no
queue is a harness error (the run would grade a classic queue under a quorum name).
Stream variants are not made this way: a stream consumer reads from the offset its filter
names, which a classic case's consumer does not ask for (conformance/cases/s2_6_7_streams.py
has the stream cases).
"""

from __future__ import annotations

from amqpspec.conformance.run.registry import (
    RunFunction,
    case,
    case_function,
    case_sentences,
    load_cases,
)
from amqpspec.conformance.verdicts import HarnessError

QUORUM = {"x-queue-type": "quorum"}

# the classic-queue cases run again on quorum queues (RabbitMQ's amqp_client_SUITE runs
# each of these behaviours on classic and quorum queues: docs/anchor-parity.md)
BASES = (
    "2.6.7/credit-1",
    "2.6.7/credit-2",
    "2.6.7/credit-granted-before-messages",
    "2.6.7/credit-queue-fills-later",
    "2.6.7/credit-regrant-after-batch",
    "2.6.7/credit-reduced-in-flight",
    "2.6.7/drain-credit-after",
    "2.6.7/drain-empty-queue",
    "2.6.7/drain-large-credit",
    "2.6.7/available-reported",
    "2.6.12/disposition-range",
    "2.6.6/requeue-after-detach-closed",
    "2.6.6/requeue-held-not-shared",
    "3.4.4/released-several",
    "3.2.1/message-header-durable-kept",
    "2.8.15/resource-deleted-source",
    "2.6.7/drain-exact",
    "2.6.7/credit-grow-grant",
    "2.6.7/drain-after-partial-consumption",
    "2.6.7/credit-after-consumption",
    "2.8.2/snd-settle-mode-settled",
    "2.6.7/drain-partial",
    "2.6.7/credit-reduce-to-zero-then-grant",
    "2.6.7/available-after-consumption",
    "2.6.7/available-empty-queue",
    "2.6.7/credit-prefetch-10-regrant",
    "2.6.12/settlement-range-partial",
    "3.4.2/accepted-on-publish",
    "3.4.3/rejected-not-redelivered",
    "3.4.4/released-redelivered",
    "3.4.5/modified-no-flags",
    "3.4.5/modified-delivery-failed-count",
    "3.4.5/modified-undeliverable-here",
    "3.4.5/modified-failed-not-first-acquirer",
    "3.2.1/redelivery-first-delivery-marks",
    "2.6.12/settlement-publish-many-unsettled",
    "2.6.12/settlement-mixed-publish",
    "2.6.7/credit-exact-100",
)


def variant_id(base_id: str) -> str:
    """`2.6.7/credit-1` -> `2.6.7/quorum-credit-1`."""
    section, slug = base_id.split("/", 1)
    return f"{section}/quorum-{slug}"


def on_quorum(base: RunFunction) -> RunFunction:
    def run(probe, ctx) -> None:
        ctx.queue_arguments = dict(QUORUM)
        base(probe, ctx)
        if not ctx.queues:
            raise HarnessError("the quorum variant declared no queue: it graded no quorum queue")

    return run


def register() -> None:
    registered = {c.case_id: c for c in load_cases()}
    for base_id in BASES:
        base = registered[base_id]
        name = variant_id(base_id)
        run = case_function(
            on_quorum(base.run),
            name.replace("/", "_").replace(".", "_").replace("-", "_"),
            f"On a quorum queue: {base.description}",
            __name__,
        )
        case(
            name,
            base.level,
            base.expectation,
            sentences=tuple(sorted(case_sentences(base))),
            role=base.role,
            model=base.model,
            requires=base.requires | {"quorum"},
            outcomes=base.outcomes,
            lenient=base.lenient,
            budget=base.budget,
            ignore_rules=base.ignore_rules,
            pipelined=False,
            serial=base.serial,
        )(run)


register()
