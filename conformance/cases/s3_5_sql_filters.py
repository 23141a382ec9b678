"""SQL-like source filters (3.5.3 `filter`, the filter-set of 3.5.8): `amqp:sql-filter` (OASIS
"AMQP Filter Expressions Version 1.0" CSD01, its SQL filter section; RabbitMQ 4.2 ships it,
on streams) and the JMS selector `apache.org:selector-filter:string` (Qpid's AMQP filter
registry; Qpid Broker-J's FilterTest.selectorFilter).

Neither text is in conformance/spec: the rules (the JMS selector's, Jakarta Messaging 3.1
section 3.8.1, quoted in conformance/steps/sql_expressions.py) are a model. A broker whose
profile claims `sql-filter` / `selector-filter` and delivers otherwise DIFFERS from the
`filtex-sql` / `jms-selector` model, never FAILED; a broker without the capability is
UNSUPPORTED, and so is one without `drain-reply` (each receiver is drained: the drain
reply is how the case knows every delivery its filter let through has come). What a
broker delivers is judged by the suite's own evaluator
(conformance/steps/sql_expressions.py, a lark grammar), never the broker's: the
`*-fixed` cases check hand-picked expressions whose selections are also written out (the
LIKE escape, NULL in three-valued logic, BETWEEN, IN, arithmetic, header and properties
fields), the `*-generated` cases feed hypothesis-generated messages and expressions
(conformance/steps/sql_strategies.py; seed fixed, generate phase only, drawn once per
process) through one queue, a receiver per expression, each drained (2.6.7): the SQL
filter's on a stream where the profile has streams (RabbitMQ 4.2 applies it there, all
receivers at once from the first offset), the selector's on a plain queue (Broker-J and
Artemis apply selectors there; the receivers in turn, each giving its deliveries back by
detaching).

Owns the cases `3.5.3/sql-filter-*` and `3.5.3/selector-filter-*`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from amqpspec.amqp10.composites import Header, Properties
from amqpspec.amqp10.message import Message
from amqpspec.conformance.run.registry import MODEL, RunFunction, case
from amqpspec.conformance.steps.filtered_receivers import received_through
from amqpspec.conformance.steps.queues import publish_messages
from amqpspec.conformance.steps.sql_expressions import (
    SELECTOR,
    SQL,
    selector_filter,
    selects,
    sql_filter,
)
from amqpspec.conformance.steps.sql_strategies import (
    body_of,
    expressions,
    generate_only,
    messages,
)

MODELS = {SQL: "filtex-sql", SELECTOR: "jms-selector"}  # profile.MODELS
CAPABILITY = {SQL: "sql-filter", SELECTOR: "selector-filter"}
KEY = {SQL: "sql-filter", SELECTOR: "jms-selector"}  # the filter-set keys RabbitMQ / Qpid use
STREAM = {"x-queue-type": "stream"}
SEED = 20261127
EXAMPLES = 2  # messages + expressions drawn per case (the first, hypothesis's simplest, unused)
EXPRESSIONS = 12  # receivers (one expression each) per example


def _filter(dialect: str, text: str) -> dict[Any, Any]:
    described = sql_filter(text) if dialect == SQL else selector_filter(text)
    return {KEY[dialect]: described}


def _run(probe, ctx, dialect: str, batch: list[Message], texts: list[str]) -> None:
    """Publish `batch` to a fresh queue (for the SQL filter a stream when the profile has
    streams, as RabbitMQ 4.2 applies it; for the selector a queue, as Qpid Broker-J's
    FilterTest uses it), a receiver per expression: each must get exactly what the suite's
    evaluator selects."""
    stream = dialect == SQL and ctx.profile.has("streams")
    queue = ctx.queue("sql", STREAM) if stream else ctx.queue()
    publish_messages(probe, ctx, queue, batch)
    filter_sets = [_filter(dialect, text) for text in texts]
    results = received_through(probe, ctx, queue, filter_sets, len(batch), stream=stream)
    for text, (reported, got) in zip(texts, results, strict=True):
        ctx.model(
            reported is not None and KEY[dialect] in {str(k) for k in reported},
            f"expected the {KEY[dialect]} filter {text!r} in place (the profile claims "
            f"{CAPABILITY[dialect]}); observed the broker's source filter {reported!r}",
        )
        want = sorted(body_of(m) for m in batch if selects(text, dialect, m))
        ctx.check(
            got == want,
            f"expected {want} (the suite's evaluator) through {KEY[dialect]} {text!r} over "
            f"{[_fields(m) for m in batch]}; observed {got}",
        )


def _fields(message: Message) -> tuple:
    """What the expressions can see of a message: (body, application-properties, subject,
    priority, durable, correlation-id)."""
    header, properties = message.header, message.properties
    return (
        body_of(message).decode(),
        message.application_properties,
        properties.subject if properties else None,
        header.priority if header else None,
        header.durable if header else None,
        properties.correlation_id if properties else None,
    )


def _message(index: int, app: dict[str, Any], **fields: Any) -> Message:
    header = Header(priority=fields.pop("priority", None), durable=fields.pop("durable", None))
    return Message.of(
        f"m{index}".encode(),
        header=header,
        properties=Properties(**fields),
        application_properties=app or None,
    )


FIXED_MESSAGES = [
    _message(0, {"name": "a_b", "size": 1, "flag": True}, subject="apple", priority=7),
    _message(1, {"name": "axb", "size": 2.5, "flag": False}, subject="banana", durable=True),
    _message(2, {"name": "a%b", "size": 3}, correlation_id="c-1"),
    _message(3, {"size": None, "flag": True}, subject="apricot"),
]
# (text, the bodies selected) in both dialects: the LIKE escape, NULL and unknown, BETWEEN,
# IN, arithmetic; then each dialect's header and properties fields
BOTH = [
    ("name LIKE 'a!_b' ESCAPE '!'", [b"m0"]),
    ("name LIKE 'a_b'", [b"m0", b"m1", b"m2"]),
    ("name NOT LIKE 'a!%b' ESCAPE '!'", [b"m0", b"m1"]),
    ("size > 1 OR name = 'a_b'", [b"m0", b"m1", b"m2"]),
    ("NOT (size = 1)", [b"m1", b"m2"]),
    ("size BETWEEN 2 AND 3 AND flag", []),
    ("size IS NULL OR flag = FALSE", [b"m1", b"m3"]),
    ("name IN ('axb', 'a%b')", [b"m1", b"m2"]),
    ("size * 2 - 1 = 5", [b"m2"]),
]
FIXED = {
    SQL: [
        *BOTH,
        ("h.priority > 4", [b"m0"]),
        ("header.durable = TRUE", [b"m1"]),
        ("p.subject LIKE 'ap%'", [b"m0", b"m3"]),
    ],
    SELECTOR: [
        *BOTH,
        ("JMSPriority > 4", [b"m0"]),
        ("JMSDeliveryMode = 'PERSISTENT'", [b"m1"]),
        ("JMSCorrelationID = 'c-1'", [b"m2"]),
    ],
}


def _fixed(probe, ctx, dialect: str) -> None:
    _run(probe, ctx, dialect, FIXED_MESSAGES, [text for text, _ in FIXED[dialect]])


@lru_cache(maxsize=4)
def generated(dialect: str) -> tuple[tuple[tuple[Message, ...], tuple[str, ...]], ...]:
    """The examples of the `*-generated` cases: drawn once per process (hypothesis, seed
    SEED, generate phase only, the first and simplest draw left out), so every run and every
    broker sees the same ones."""
    drawn: list[tuple[tuple[Message, ...], tuple[str, ...]]] = []

    @generate_only(SEED, EXAMPLES)
    @given(messages(), st.lists(expressions(dialect), min_size=EXPRESSIONS, max_size=EXPRESSIONS))
    def draw(batch: list[Message], texts: list[str]) -> None:
        drawn.append((tuple(batch), tuple(texts)))

    draw()
    return tuple(drawn[1:])  # the first draw is the simplest one: every choice its first


def _generated(probe, ctx, dialect: str) -> None:
    examples = generated(dialect)
    for batch, texts in examples:
        _run(probe, ctx, dialect, list(batch), list(texts))
    ctx.note(
        f"{len(examples)} examples of {EXPRESSIONS} expressions each (seed {SEED}): "
        + "; ".join(text for _, texts in examples for text in texts)
    )


def _filter_case(
    case_id: str, dialect: str, sentence: str, *, generated: bool = False
) -> Callable[[RunFunction], RunFunction]:
    """`case` for the `dialect`'s filter (its model, on a broker with its capability that
    answers a drain); a `generated` case has no pipelined variant (the fixed case's covers
    the pipelined attach; run time)."""
    return case(
        case_id,
        MODEL,
        sentence,
        model=MODELS[dialect],
        requires={"queues", "drain-reply", CAPABILITY[dialect]},
        pipelined=not generated,
    )


@_filter_case(
    "3.5.3/sql-filter-fixed",
    SQL,
    "A receiver whose source carries amqp:sql-filter gets exactly the messages its "
    "expression selects (TRUE, not FALSE nor UNKNOWN): LIKE with ESCAPE, NULL, BETWEEN, "
    "IN, arithmetic, header. and properties. fields.",
)
def sql_filter_fixed(probe, ctx):
    """Counters RabbitMQ 4.2's amqp_filter_sql_SUITE: four messages (names a_b, axb, a%b;
    sizes 1, 2.5, 3, null; a subject, a priority 7, a durable one) and twelve expressions,
    one receiver each; the selections are written out in FIXED and equal the evaluator's."""
    _fixed(probe, ctx, SQL)


@_filter_case(
    "3.5.3/selector-filter-fixed",
    SELECTOR,
    "A receiver whose source carries apache.org:selector-filter:string gets exactly the "
    "messages its JMS selector selects: LIKE with ESCAPE, NULL, BETWEEN, IN, arithmetic, "
    "JMSPriority, JMSDeliveryMode, JMSCorrelationID.",
)
def selector_filter_fixed(probe, ctx):
    """Counters Qpid Broker-J's FilterTest.selectorFilter (two messages, a selector on an
    application property: only the matching one comes) with the FIXED messages and
    selectors, one receiver each."""
    _fixed(probe, ctx, SELECTOR)


@_filter_case(
    "3.5.3/sql-filter-generated",
    SQL,
    "Generated messages and SQL filter expressions: the broker delivers through each "
    "amqp:sql-filter exactly the messages the suite's own evaluator selects.",
    generated=True,
)
def sql_filter_generated(probe, ctx):
    """Hypothesis (seed 20261127, one example of 8 to 12 messages and 12 expressions):
    application-properties of every type, subject, priority, durable and correlation-id;
    expressions of one to four predicates joined by AND / OR / NOT."""
    _generated(probe, ctx, SQL)


@_filter_case(
    "3.5.3/selector-filter-generated",
    SELECTOR,
    "Generated messages and JMS selectors: the broker delivers through each "
    "apache.org:selector-filter:string exactly the messages the suite's own evaluator "
    "selects.",
    generated=True,
)
def selector_filter_generated(probe, ctx):
    """As 3.5.3/sql-filter-generated, with the JMS selector's identifiers (JMSPriority,
    JMSDeliveryMode, JMSCorrelationID for the header and properties fields)."""
    _generated(probe, ctx, SELECTOR)
