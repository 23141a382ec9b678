"""Known upstream issues, as data: which rule, on which broker product, is which public bug.

Owns: `KNOWN_ISSUES` and `known_issue(rule, brokers)`. A cluster links to an entry when its
rule matches and (if the entry names a product) one of the cluster's brokers is that
product. Add rows here, nothing else changes. The fault-injection catalog of the reference
broker (reference_broker/faults/catalog.py) names the same bugs by their origin.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class KnownIssue:
    rule: str
    product: str | None  # broker product as in its open frame's properties, None: any
    issue: str
    url: str
    title: str


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        "link.credit.transfer-beyond-credit",
        "RabbitMQ",
        "RabbitMQ #2597",
        "https://github.com/rabbitmq/rabbitmq-server/issues/2597",
        "AMQP 1.0 plugin sends transfers beyond the link credit the receiver granted",
    ),
    KnownIssue(
        "link.drain.no-reply",
        None,
        "go-amqp#255",
        "https://github.com/Azure/go-amqp/issues/255",
        "drain requests never answered (ActiveMQ, the Qpid example brokers; any broker)",
    ),
    KnownIssue(
        "link.credit.transfer-without-credit",
        "RabbitMQ",
        "rabbitmq-amqp1.0#43",
        "https://github.com/rabbitmq/rabbitmq-amqp1.0/issues/43",
        "transfers sent on a link before the receiver granted any credit",
    ),
    KnownIssue(
        "session.window-violation",
        "RabbitMQ",
        "RabbitMQ #12904",
        "https://github.com/rabbitmq/rabbitmq-server/issues/12904",
        "session window not enforced / goes negative after an alarm",
    ),
)


def known_issue(rule: str, brokers: Iterable[str]) -> dict | None:
    """The first entry for `rule` whose product is among `brokers` (or that names none)."""
    products = {broker.split(" ")[0].lower() for broker in brokers if broker}
    for entry in KNOWN_ISSUES:
        if entry.rule == rule and (entry.product is None or entry.product.lower() in products):
            return asdict(entry)
    return None
