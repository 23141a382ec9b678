"""The suite's own evaluator of the SQL-like source filters: `amqp:sql-filter` (OASIS "AMQP
Filter Expressions Version 1.0" CSD01, the SQL filter section; descriptor 0x120, as RabbitMQ
4.2 reads it) and the JMS selector `apache.org:selector-filter:string` (Qpid's AMQP filter
registry, descriptor 0x0000468C:0x00000004; Qpid Broker-J applies it). Neither text is in
conformance/spec, so what this evaluator decides is a model, never a verdict of the core
specification. Written apart from the reference broker's (reference_broker/features/
selectors.py is never imported here): its grammar is a lark LALR grammar, its tree is
evaluated by a table of node handlers, LIKE is matched without regular expressions.

Owns: `sql_filter(text)` / `selector_filter(text)` (the described values a receiver puts in
its source's filter-set), `parse(text, dialect)` and `selects(text, dialect, message)`.

The rules, Jakarta Messaging 3.1 section 3.8.1 (which the filtex SQL filter takes over): a
message is selected only when the expression is TRUE; AND / OR / NOT in three-valued logic
(UNKNOWN is None; a value that is no boolean is UNKNOWN as a condition); a comparison with
NULL is UNKNOWN; "Only like type values can be compared. One exception is that it is valid
to compare exact numeric values and approximate numeric values"; "String and Boolean
comparison is restricted to = and <>"; "If the comparison of non-like type values is
attempted, the value of the operation is false"; arithmetic on anything but numbers (or by
a zero divisor) is UNKNOWN, two integers divide as Java's longs do (truncated); LIKE's `%`
is any sequence, `_` one character, its ESCAPE character makes the next one literal, and
"If identifier of a LIKE or NOT LIKE operation is NULL, the value of the operation is
unknown" (any non-string too, as RabbitMQ 4.2 has it); `x BETWEEN a AND b` is
`a <= x AND x <= b`; IN of a NULL identifier is UNKNOWN; IS NULL is true of a missing or null
value. Identifiers: unqualified ones name application-properties keys; the SQL filter's
`header.` / `h.` (priority, 4 when absent; durable) and `properties.` / `p.` (3.2.4 fields,
`_` for `-`); the JMS selector's JMSPriority, JMSDeliveryMode ('PERSISTENT' /
'NON_PERSISTENT' from the header's durable) and JMSCorrelationID (the AMQP JMS mapping).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError

from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import Described, symbol, ulong

SQL = "sql"
SELECTOR = "selector"
SQL_FILTER_CODE = ulong(0x120)
SQL_FILTER_NAME = symbol("amqp:sql-filter")
SELECTOR_FILTER_CODE = ulong(0x0000468C00000004)
SELECTOR_FILTER_NAME = symbol("apache.org:selector-filter:string")

GRAMMAR = r"""
?start: disjunction
?disjunction: conjunction | disjunction "OR"i conjunction -> or_
?conjunction: negation | conjunction "AND"i negation -> and_
?negation: predicate | "NOT"i negation -> not_
?predicate: sum
    | sum COMPARISON sum -> compare
    | sum "IS"i "NULL"i -> is_null
    | sum "IS"i "NOT"i "NULL"i -> is_not_null
    | sum "BETWEEN"i sum "AND"i sum -> between
    | sum "NOT"i "BETWEEN"i sum "AND"i sum -> not_between
    | sum "LIKE"i STRING ["ESCAPE"i STRING] -> like
    | sum "NOT"i "LIKE"i STRING ["ESCAPE"i STRING] -> not_like
    | sum "IN"i "(" literal ("," literal)* ")" -> in_
    | sum "NOT"i "IN"i "(" literal ("," literal)* ")" -> not_in
?sum: product | sum SUM_OP product -> arithmetic
?product: unary | product PRODUCT_OP unary -> arithmetic
?unary: atom | "-" unary -> negative | "+" unary -> positive
?atom: literal | IDENTIFIER -> identifier | "(" disjunction ")"
literal: NUMBER | STRING | TRUE | FALSE | NULL
TRUE: "TRUE"i
FALSE: "FALSE"i
NULL: "NULL"i
COMPARISON: "<>" | "<=" | ">=" | "=" | "<" | ">"
SUM_OP: "+" | "-"
PRODUCT_OP: "*" | "/"
NUMBER: /(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+/
STRING: /'([^']|'')*'/
IDENTIFIER: /[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)?/i
%ignore /\s+/
"""
_PARSER = Lark(GRAMMAR, parser="lalr", maybe_placeholders=True)
_SECTIONS = {"header": "header", "h": "header", "properties": "properties", "p": "properties"}
_HEADER = ("priority", "durable")
_PROPERTIES = (
    "message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
    "content_encoding", "absolute_expiry_time", "creation_time", "group_id",
    "group_sequence", "reply_to_group_id",
)  # fmt: skip
_JMS = {
    "JMSPriority": ("header", "priority"),
    "JMSDeliveryMode": ("header", "durable"),
    "JMSCorrelationID": ("properties", "correlation_id"),
}


class InvalidExpressionError(ValueError):
    """Text that is no expression of the dialect."""


def sql_filter(text: str, *, by_name: bool = False) -> Described:
    """An amqp:sql-filter carrying `text`."""
    return Described(SQL_FILTER_NAME if by_name else SQL_FILTER_CODE, text)


def selector_filter(text: str, *, by_name: bool = False) -> Described:
    """An apache.org:selector-filter:string carrying `text`."""
    return Described(SELECTOR_FILTER_NAME if by_name else SELECTOR_FILTER_CODE, text)


@v_args(inline=True)
class _Tree(Transformer):
    """The parse tree as nested tuples (operator name first)."""

    def literal(self, token: Token) -> tuple:
        kind, text = token.type, str(token)
        if kind == "NUMBER":
            is_float = any(c in text for c in ".eE")
            return ("value", float(text) if is_float else int(text))
        if kind == "STRING":
            return ("value", _unquote(text))
        return ("value", {"TRUE": True, "FALSE": False, "NULL": None}[kind])

    def identifier(self, token: Token) -> tuple:
        return ("field", str(token))

    def compare(self, left, op, right):
        return ("compare", str(op), left, right)

    def arithmetic(self, left, op, right):
        return ("arithmetic", str(op), left, right)

    def like(self, operand, pattern, escape):
        return ("like", operand, _unquote(pattern), _unquote(escape) if escape else None)

    def not_like(self, operand, pattern, escape):
        return ("not", self.like(operand, pattern, escape))

    def between(self, operand, low, high):
        return ("between", operand, low, high)

    def not_between(self, operand, low, high):
        return ("not", ("between", operand, low, high))

    def in_(self, operand, *items):
        return ("in", operand, [item[1] for item in items])

    def not_in(self, operand, *items):
        return ("not", self.in_(operand, *items))

    def __default__(self, data, children, meta):
        return (str(data), *children)


def _unquote(token: Any) -> str:
    return str(token)[1:-1].replace("''", "'")


@lru_cache(maxsize=512)
def parse(text: str, dialect: str) -> tuple:
    """The expression tree of `text`; InvalidExpressionError if the grammar or the dialect's
    identifiers refuse it."""
    try:
        tree = _Tree().transform(_PARSER.parse(text))
    except LarkError as exc:
        raise InvalidExpressionError(f"{text!r}: {exc}") from None
    _check_fields(tree, dialect)
    return tree


def _check_fields(node: Any, dialect: str) -> None:
    if not isinstance(node, tuple):
        return
    if node[0] == "field":
        _source_of(node[1], dialect)
        return
    if node[0] == "like" and node[3] is not None:
        _check_escape(node[2], node[3])
    for child in node[1:]:
        _check_fields(child, dialect)


def _check_escape(pattern: str, escape: str) -> None:
    """An ESCAPE is one character, and it escapes something (never ends the pattern)."""
    if len(escape) != 1:
        raise InvalidExpressionError(f"ESCAPE {escape!r} is not one character")
    escaping = False
    for char in pattern:
        escaping = not escaping and char == escape
    if escaping:
        raise InvalidExpressionError(f"LIKE {pattern!r} ends with its ESCAPE character")


def _source_of(name: str, dialect: str) -> tuple[str, str]:
    """(section, field) an identifier reads: ("application", key) for a plain one."""
    if dialect == SELECTOR:
        if "." in name:
            raise InvalidExpressionError(f"{name!r}: no JMS identifier has a dot")
        return _JMS.get(name, ("application", name))
    if "." not in name:
        return ("application", name)
    prefix, rest = name.split(".", 1)
    section = _SECTIONS.get(prefix)
    if section is None or rest not in (_HEADER if section == "header" else _PROPERTIES):
        raise InvalidExpressionError(f"{name!r}: no such field")
    return (section, rest)


# --- evaluation -----------------------------------------------------------------------------
def _number(value: Any) -> bool:
    return type(value) is not bool and isinstance(value, int | float)


def _family(value: Any) -> str:
    if _number(value):
        return "number"
    if isinstance(value, bool):
        return "boolean"
    return "string" if isinstance(value, str) else type(value).__name__


def _as_condition(value: Any) -> bool | None:
    return value if type(value) is bool else None


def _compare(op: str, left: Any, right: Any) -> bool | None:
    if left is None or right is None:
        return None
    family = _family(left)
    if family != _family(right) or family not in ("number", "string", "boolean"):
        return False  # non-like types, or no type the selector rules compare (binary...)
    if family != "number" and op not in ("=", "<>"):
        return False  # strings and booleans: = and <> only
    if op == "=":
        return left == right
    if op == "<>":
        return left != right
    ordered = {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}
    return ordered[op]


def _divide(left: Any, right: Any) -> Any:
    if right == 0:
        return None
    if isinstance(left, float) or isinstance(right, float):
        return left / right
    quotient = left // right
    if quotient < 0 and quotient * right != left:
        quotient += 1  # toward zero, not toward minus infinity
    return quotient


def _arithmetic(op: str, left: Any, right: Any) -> Any:
    if not (_number(left) and _number(right)):
        return None
    if op == "/":
        return _divide(left, right)
    return {"+": left + right, "-": left - right, "*": left * right}[op]


def like_matches(text: str, pattern: str, escape: str | None) -> bool:
    """LIKE without regular expressions: the pattern as (literal?, char) steps, matched by
    dynamic programming over the text's positions."""
    steps: list[tuple[str, str]] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if escape is not None and char == escape and index + 1 < len(pattern):
            steps.append(("char", pattern[index + 1]))
            index += 2
            continue
        steps.append(("any" if char == "%" else "one" if char == "_" else "char", char))
        index += 1
    reachable = {0}  # positions in `text` after the steps so far
    for kind, char in steps:
        if kind == "any":
            reachable = set(range(min(reachable), len(text) + 1)) if reachable else set()
        elif kind == "one":
            reachable = {p + 1 for p in reachable if p < len(text)}
        else:
            reachable = {p + 1 for p in reachable if p < len(text) and text[p] == char}
    return len(text) in reachable


class _Evaluation:
    """One expression tree evaluated against one message."""

    def __init__(self, message: Message, dialect: str):
        self.message = message
        self.dialect = dialect

    def value(self, node: tuple) -> Any:
        handler: Callable[..., Any] = getattr(self, "node_" + node[0])
        return handler(*node[1:])

    def node_value(self, value: Any) -> Any:
        return value

    def node_field(self, name: str) -> Any:
        section, key = _source_of(name, self.dialect)
        message = self.message
        if section == "application":
            raw = (message.application_properties or {}).get(key)
        elif section == "properties":
            raw = getattr(message.properties, key, None) if message.properties else None
        else:
            raw = getattr(message.header, key, None) if message.header else None
            if key == "priority":
                raw = 4 if raw is None else raw
            else:
                raw = bool(raw)
                if name == "JMSDeliveryMode":
                    return "PERSISTENT" if raw else "NON_PERSISTENT"
        return _plain(raw)

    def node_or_(self, left: tuple, right: tuple) -> bool | None:
        a, b = _as_condition(self.value(left)), _as_condition(self.value(right))
        if True in (a, b):
            return True
        return None if None in (a, b) else False

    def node_and_(self, left: tuple, right: tuple) -> bool | None:
        a, b = _as_condition(self.value(left)), _as_condition(self.value(right))
        if False in (a, b):
            return False
        return None if None in (a, b) else True

    def node_not(self, inner: tuple) -> bool | None:
        value = _as_condition(self.value(inner))
        return None if value is None else not value

    node_not_ = node_not

    def node_compare(self, op: str, left: tuple, right: tuple) -> bool | None:
        return _compare(op, self.value(left), self.value(right))

    def node_arithmetic(self, op: str, left: tuple, right: tuple) -> Any:
        return _arithmetic(op, self.value(left), self.value(right))

    def node_negative(self, inner: tuple) -> Any:
        value = self.value(inner)
        return -value if _number(value) else None

    def node_positive(self, inner: tuple) -> Any:
        value = self.value(inner)
        return value if _number(value) else None

    def node_is_null(self, inner: tuple) -> bool:
        return self.value(inner) is None

    def node_is_not_null(self, inner: tuple) -> bool:
        return self.value(inner) is not None

    def node_between(self, operand: tuple, low: tuple, high: tuple) -> bool | None:
        value = self.value(operand)
        return self.node_and_(
            ("value", _compare("<=", self.value(low), value)),
            ("value", _compare("<=", value, self.value(high))),
        )

    def node_like(self, operand: tuple, pattern: str, escape: str | None) -> bool | None:
        value = self.value(operand)
        return like_matches(value, pattern, escape) if isinstance(value, str) else None

    def node_in(self, operand: tuple, items: list[Any]) -> bool | None:
        value = self.value(operand)
        if value is None:
            return None
        return any(_compare("=", value, item) is True for item in items)


def _plain(raw: Any) -> Any:
    """AMQP values as the rules compare them: symbol / string as str, integer types as
    int, floats as float."""
    if raw is None or type(raw) is bool:
        return raw
    for kind in (str, int, float):
        if isinstance(raw, kind):
            return kind(raw)
    return raw


def selects(text: str, dialect: str, message: Message) -> bool:
    """Is `message` selected by the expression `text` (TRUE, not FALSE nor UNKNOWN)?"""
    return _Evaluation(message, dialect).value(parse(text, dialect)) is True
