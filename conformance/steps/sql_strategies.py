"""Generated messages and SQL-like filter expressions (hypothesis strategies) for the
differential cases of conformance/cases/s3_5_sql_filters.py and tests/test_sql_filters.py:
what a broker delivers through an `amqp:sql-filter` or a JMS selector must equal what the
suite's evaluator (conformance/steps/sql_expressions.py) selects.

Owns: `messages()` (small pools of application-properties, subjects, priorities, durable
flags and correlation-ids, with strings holding `_`, `%` and the escape `!`, numbers of
both kinds, booleans and missing keys), `expressions(dialect)` (comparisons, arithmetic,
BETWEEN, LIKE with and without ESCAPE, IN, IS NULL and bare booleans joined by AND / OR /
NOT and parentheses), `body_of(message)` and `generate_only(seed, examples)` (the
settings of a case's @given: seeded, no database, no shrinking).

Left out on purpose, where the models in use disagree and the cases could only show the
disagreement: ordering comparisons with a string or boolean operand, division, and `<>`
between values of unlike types is kept (false, as Jakarta Messaging 3.8.1.2 says).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st

from amqpspec.amqp10.composites import Header, Properties
from amqpspec.amqp10.message import Message

from .sql_expressions import SELECTOR

COLORS = ["red", "blue", "a_b", "a%b", "a!b", "axb", ""]
NUMBERS: list[Any] = [-1, 0, 1, 2, 3, 1.0, 2.5]
APPLICATION = {
    "color": st.sampled_from(COLORS),
    "size": st.sampled_from(NUMBERS),
    "flag": st.booleans(),
    "note": st.sampled_from(["red", 2, True, None]),
}
SUBJECTS = ["apple", "apricot", "banana", None]
CORRELATIONS = ["c-1", "c-2", None]


def _message(index: int, drawn: tuple) -> Message:
    app, subject, priority, durable, correlation = drawn
    header = None if priority is None and durable is None else Header(priority=priority)
    if header is not None and durable is not None:
        header = Header(priority=priority, durable=durable)
    return Message.of(
        f"m{index}".encode(),
        header=header,
        properties=Properties(subject=subject, correlation_id=correlation),
        application_properties=app or None,
    )


def messages(min_size: int = 8, max_size: int = 12) -> st.SearchStrategy[list[Message]]:
    """Lists of messages whose bodies are m0, m1, ... (their order in the list)."""
    one = st.tuples(
        st.fixed_dictionaries({}, optional=APPLICATION),
        st.sampled_from(SUBJECTS),
        st.sampled_from([None, 0, 4, 7, 9]),
        st.sampled_from([None, True, False]),
        st.sampled_from(CORRELATIONS),
    )
    return st.lists(one, min_size=min_size, max_size=max_size).map(
        lambda drawn: [_message(i, d) for i, d in enumerate(drawn)]
    )


def body_of(message: Message) -> bytes:
    return bytes(message.body[0].value)


def _identifiers(dialect: str) -> dict[str, list[str]]:
    """Identifiers by what they usually hold: numbers, strings, booleans."""
    if dialect == SELECTOR:
        return {
            "number": ["size", "size", "note", "JMSPriority"],
            "string": ["color", "color", "note", "JMSDeliveryMode", "JMSCorrelationID"],
            "boolean": ["flag", "flag", "note"],
        }
    return {
        "number": ["size", "size", "note", "h.priority", "header.priority"],
        "string": ["color", "color", "note", "p.subject", "properties.correlation_id"],
        "boolean": ["flag", "flag", "note", "h.durable"],
    }


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


NUMBER_LITERALS = ["-1", "0", "1", "2", "3", "1.0", "2.5", "4"]
STRING_LITERALS = [_quote(c) for c in [*COLORS, "apple", "c-1", "PERSISTENT", "NON_PERSISTENT"]]
LIKE_PATTERNS = [
    ("'r%'", None), ("'%e%'", None), ("'_ed'", None), ("'a_b'", None), ("'a%b'", None),
    ("'%'", None), ("'ap%'", None), ("'a!_b'", "'!'"), ("'a!%b'", "'!'"), ("'a!!b'", "'!'"),
    ("'%!%%'", "'!'"), ("'NON!_%'", "'!'"),
]  # fmt: skip


def _predicates(dialect: str) -> st.SearchStrategy[str]:
    ids = _identifiers(dialect)
    number, string, boolean = (st.sampled_from(ids[k]) for k in ("number", "string", "boolean"))
    numbers = st.sampled_from(NUMBER_LITERALS)
    equality = st.sampled_from(["=", "<>"])
    ordering = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    negated = st.sampled_from(["", "NOT "])
    return st.one_of(
        st.builds("{} {} {}".format, number, ordering, numbers),
        st.builds("{} {} {}".format, string, equality, st.sampled_from(STRING_LITERALS)),
        st.builds("{} {} {}".format, boolean, equality, st.sampled_from(["TRUE", "FALSE"])),
        st.builds(
            "{} {} {} {} {}".format, number, st.sampled_from("+-*"), numbers, ordering, numbers
        ),
        st.builds("{} {}BETWEEN {} AND {}".format, number, negated, numbers, numbers),
        st.builds(_like, string, negated, st.sampled_from(LIKE_PATTERNS)),
        st.builds(
            "{} {}IN ({})".format,
            string,
            negated,
            st.lists(st.sampled_from(STRING_LITERALS), min_size=1, max_size=3).map(", ".join),
        ),
        st.builds(
            "{} IS {}NULL".format,
            st.sampled_from([name for names in ids.values() for name in names] + ["missing"]),
            negated,
        ),
        boolean,
    )


def _like(identifier: str, negated: str, pattern: tuple[str, str | None]) -> str:
    text, escape = pattern
    return f"{identifier} {negated}LIKE {text}" + (f" ESCAPE {escape}" if escape else "")


def expressions(dialect: str) -> st.SearchStrategy[str]:
    """Expressions of `dialect` (sql_expressions.SQL or SELECTOR) of one to four
    predicates."""
    keyword = st.sampled_from(["AND", "OR", "and", "or"])
    return st.recursive(
        _predicates(dialect),
        lambda inner: st.one_of(
            st.builds("{} {} {}".format, inner, keyword, inner),
            st.builds("NOT ({})".format, inner),
            st.builds("({})".format, inner),
        ),
        max_leaves=4,
    )


def generate_only(seed_value: int, examples: int):
    """A conformance case's hypothesis settings: `examples` draws from seed `seed_value`,
    the generate phase only (no shrinking, no example database), no deadline."""

    def apply(test):
        return seed(seed_value)(
            settings(
                max_examples=examples,
                database=None,
                deadline=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )(test)
        )

    return apply
