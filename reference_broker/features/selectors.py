"""The reference broker's SQL-like source filters: `amqp:sql-filter` (OASIS "AMQP Filter
Expressions Version 1.0" CSD01, the SQL filter section; descriptor 0x120 as RabbitMQ 4.2
ships it) and the JMS selector `apache.org:selector-filter:string` (descriptor
0x0000468C:0x00000004, Qpid's AMQP filter registry; Qpid Broker-J applies it).

Owns: `compile_expression(text, dialect, faults=...)`, which parses one expression (a
hand-written tokenizer and recursive-descent parser) into a `SqlExpression` whose
`passes(message)` decides one message, and `SelectorError` (an expression this broker
cannot put in place: features/filters.py then leaves it out of the attach reply). No AMQP
bytes: features/filters.py decodes the payload with amqp10.message.

The rules (the JMS selector's, Jakarta Messaging 3.1 section 3.8.1, which the filtex SQL
filter takes over): comparison `= <> < <= > >=` (numbers of any type compare as numbers;
strings and booleans only by `=` / `<>`; values of unlike types compare false), arithmetic
`+ - * /` and unary signs on numbers (anything else, or a zero divisor, is unknown; two
integers divide as integers, truncated), `[NOT] LIKE 'pattern' [ESCAPE 'c']` (`%` any
sequence, `_` one character, the escape character makes the next one literal; a
non-string operand is unknown), `[NOT] BETWEEN a AND b`, `[NOT] IN (literal, ...)`,
`IS [NOT] NULL`, and AND / OR / NOT in SQL's three-valued logic (unknown is None here; a
value that is no boolean is unknown as a condition). A message is selected only when the
whole expression is true. Identifiers: an unqualified one names an application-properties
key; the SQL filter also reads `header.<field>` / `h.<field>` (priority, 4 when absent,
and durable) and `properties.<field>` / `p.<field>` (the 3.2.4 fields, `_` for `-`); the
JMS selector reads the JMS header fields as the AMQP JMS mapping maps them: JMSPriority
(header priority), JMSDeliveryMode ('PERSISTENT' when the header is durable, else
'NON_PERSISTENT') and JMSCorrelationID (properties correlation-id). Keywords are
case-insensitive, identifiers are not. Limits (filtex 7.1, RabbitMQ's figures): 4096
characters, 200 tokens.

The `selector-like-escape-ignored` fault compiles LIKE patterns without their ESCAPE
character: an escaped `%` or `_` stays a wildcard.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from amqpspec.amqp10.message import Message

from ..faults.catalog import Faults

SQL = "sql"
SELECTOR = "selector"
MAX_CHARS = 4096
MAX_TOKENS = 200
DEFAULT_PRIORITY = 4  # 3.2.1 header priority
KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "BETWEEN", "LIKE", "ESCAPE", "IN", "IS", "NULL", "TRUE", "FALSE"}
)
_TOKENS = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)"
    r"|(?P<str>'(?:[^']|'')*')"
    r"|(?P<op><>|<=|>=|[=<>+\-*/(),])"
    r"|(?P<word>[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)?))"
)
HEADER_FIELDS = {"priority", "durable"}
PROPERTY_FIELDS = {
    "message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
    "content_encoding", "absolute_expiry_time", "creation_time", "group_id",
    "group_sequence", "reply_to_group_id",
}  # fmt: skip
_PREFIXES = {"header": "header", "h": "header", "properties": "properties", "p": "properties"}
JMS_HEADERS = {
    "JMSPriority": ("header", "priority"),
    "JMSDeliveryMode": ("header", "durable"),
    "JMSCorrelationID": ("properties", "correlation_id"),
}

Value = Any  # None (unknown / null), bool, int, float, str or another AMQP value
Node = Callable[[Message], Value]


class SelectorError(ValueError):
    """An expression this broker cannot parse or put in place."""


@dataclass(frozen=True, slots=True)
class SqlExpression:
    """One compiled expression: `passes(message)` is true only when it evaluates to true."""

    text: str
    node: Node

    def passes(self, message: Message) -> bool:
        return self.node(message) is True


def compile_expression(text: Any, dialect: str, *, faults: Faults | None = None) -> SqlExpression:
    """Parse `text` (a string) in `dialect` (SQL or SELECTOR); SelectorError if invalid."""
    if not isinstance(text, str) or not text.strip():
        raise SelectorError(f"not a non-empty string: {text!r}")
    if len(text) > MAX_CHARS:
        raise SelectorError(f"longer than {MAX_CHARS} characters")
    tokens = _tokenize(text)
    if len(tokens) > MAX_TOKENS:
        raise SelectorError(f"more than {MAX_TOKENS} tokens")
    escape_ignored = bool(faults and faults.selector_like_escape_ignored)
    parser = _Parser(tokens, dialect, escape_ignored)
    node = parser.expression()
    if parser.peek() is not None:
        raise SelectorError(f"unexpected {parser.peek()!r} in {text!r}")
    return SqlExpression(text, node)


def _tokenize(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: num, str, op, kw (upper-cased) or id."""
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        match = _TOKENS.match(text, pos)
        if match is None or match.end() == pos:
            raise SelectorError(f"cannot read {text[pos : pos + 10]!r}")
        kind = match.lastgroup or ""
        word = match.group(kind)
        if kind == "word":
            kind, word = ("kw", word.upper()) if word.upper() in KEYWORDS else ("id", word)
        out.append((kind, word))
        pos = match.end()
    return out


# --- three-valued logic and the comparison rules ------------------------------------------
def _is_number(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _truth(value: Value) -> bool | None:
    return value if isinstance(value, bool) else None


def _and(left: Value, right: Value) -> bool | None:
    a, b = _truth(left), _truth(right)
    if a is False or b is False:
        return False
    return True if a is True and b is True else None


def _or(left: Value, right: Value) -> bool | None:
    a, b = _truth(left), _truth(right)
    if a is True or b is True:
        return True
    return False if a is False and b is False else None


def _not(value: Value) -> bool | None:
    truth = _truth(value)
    return None if truth is None else not truth


def _compare(op: str, left: Value, right: Value) -> bool | None:
    if left is None or right is None:
        return None
    if _is_number(left) and _is_number(right):
        return {
            "=": left == right, "<>": left != right, "<": left < right,
            "<=": left <= right, ">": left > right, ">=": left >= right,
        }[op]  # fmt: skip
    same = (isinstance(left, str) and isinstance(right, str)) or (
        isinstance(left, bool) and isinstance(right, bool)
    )
    if op in ("=", "<>") and same:
        return (left == right) is (op == "=")
    return False  # unlike types, or an order between strings / booleans


def _arithmetic(op: str, left: Value, right: Value) -> Value:
    if not (_is_number(left) and _is_number(right)):
        return None
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if right == 0:
        return None
    if isinstance(left, int) and isinstance(right, int):
        quotient = abs(left) // abs(right)  # truncated toward zero, as Java's long division
        return quotient if (left < 0) == (right < 0) else -quotient
    return left / right


def like_pattern(pattern: str, escape: str | None) -> re.Pattern[str]:
    """A LIKE pattern as a regular expression matching the whole string."""
    parts: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if escape is not None and char == escape:
            literal = next(chars, None)
            if literal is None:
                raise SelectorError(f"LIKE pattern {pattern!r} ends with its escape character")
            parts.append(re.escape(literal))
        elif char == "%":
            parts.append(".*")
        elif char == "_":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


# --- reading a message's fields --------------------------------------------------------------
def _plain(value: Any) -> Value:
    """An AMQP value as the rules see it: symbols are strings, integer types integers."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def _field(section: str, name: str) -> Node:
    if section == "header":

        def header(message: Message) -> Value:
            value = getattr(message.header, name, None) if message.header else None
            if name == "priority":
                return DEFAULT_PRIORITY if value is None else int(value)
            return bool(value)

        return header

    def prop(message: Message) -> Value:
        properties = message.properties
        return _plain(getattr(properties, name, None)) if properties else None

    return prop


def _application(key: str) -> Node:
    def read(message: Message) -> Value:
        return _plain((message.application_properties or {}).get(key))

    return read


def identifier(name: str, dialect: str) -> Node:
    """The node reading identifier `name` (see the module docstring)."""
    if dialect == SELECTOR:
        if "." in name:
            raise SelectorError(f"{name!r} is no JMS identifier")
        if name == "JMSDeliveryMode":
            durable = _field("header", "durable")
            return lambda m: "PERSISTENT" if durable(m) else "NON_PERSISTENT"
        if name in JMS_HEADERS:
            return _field(*JMS_HEADERS[name])
        return _application(name)
    if "." not in name:
        return _application(name)
    prefix, field = name.split(".", 1)
    section = _PREFIXES.get(prefix)
    known = HEADER_FIELDS if section == "header" else PROPERTY_FIELDS
    if section is None or field not in known:
        raise SelectorError(f"no such field {name!r}")
    return _field(section, field)


class _Parser:
    """Recursive descent over the tokens, lowest precedence first: OR, AND, NOT, the
    predicates (comparison, BETWEEN, LIKE, IN, IS NULL), + -, * /, unary signs."""

    def __init__(self, tokens: list[tuple[str, str]], dialect: str, escape_ignored: bool):
        self.tokens = tokens
        self.pos = 0
        self.dialect = dialect
        self.escape_ignored = escape_ignored

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def accept(self, kind: str, text: str | None = None) -> str | None:
        token = self.peek()
        if token is None or token[0] != kind or (text is not None and token[1] != text):
            return None
        self.pos += 1
        return token[1]

    def expect(self, kind: str, text: str | None = None) -> str:
        got = self.accept(kind, text)
        if got is None:
            raise SelectorError(f"expected {text or kind}, found {self.peek()!r}")
        return got

    def expression(self) -> Node:
        return self._chain("OR", self.conjunction, _or)

    def conjunction(self) -> Node:
        return self._chain("AND", self.negation, _and)

    def _chain(
        self, keyword: str, operand: Callable[[], Node], combine: Callable[[Value, Value], Value]
    ) -> Node:
        """operand (keyword operand)*, bound left to right with `combine` (OR, AND)."""
        node = operand()
        while self.accept("kw", keyword):
            left, right = node, operand()
            node = _bind(combine, left, right)
        return node

    def negation(self) -> Node:
        if self.accept("kw", "NOT"):
            inner = self.negation()
            return lambda m: _not(inner(m))
        return self.predicate()

    def predicate(self) -> Node:
        left = self.sum()
        for op in ("=", "<>", "<=", ">=", "<", ">"):
            if self.accept("op", op):
                right = self.sum()
                return lambda m, op=op: _compare(op, left(m), right(m))
        if self.accept("kw", "IS"):
            negated = bool(self.accept("kw", "NOT"))
            self.expect("kw", "NULL")
            return lambda m: (left(m) is None) is not negated
        negated = bool(self.accept("kw", "NOT"))
        node = self.special(left)
        if node is None:
            if negated:
                raise SelectorError("NOT must be followed by BETWEEN, LIKE or IN here")
            return left
        return (lambda m: _not(node(m))) if negated else node

    def special(self, left: Node) -> Node | None:
        """The BETWEEN / LIKE / IN predicate on `left`, None when none follows."""
        if self.accept("kw", "BETWEEN"):
            low = self.sum()
            self.expect("kw", "AND")
            high = self.sum()
            return lambda m: _between(left(m), low(m), high(m))
        if self.accept("kw", "LIKE"):
            pattern = _string(self.expect("str"))
            escape = None
            if self.accept("kw", "ESCAPE"):
                escape = _string(self.expect("str"))
                if len(escape) != 1:
                    raise SelectorError(f"ESCAPE {escape!r} is not one character")
            regex = like_pattern(pattern, None if self.escape_ignored else escape)
            return lambda m: _like(left(m), regex)
        if self.accept("kw", "IN"):
            self.expect("op", "(")
            items = [self.literal()]
            while self.accept("op", ","):
                items.append(self.literal())
            self.expect("op", ")")
            return lambda m: _in(left(m), items)
        return None

    def sum(self) -> Node:
        node = self.product()
        while (op := self.accept("op", "+") or self.accept("op", "-")) is not None:
            node = _bind(lambda a, b, op=op: _arithmetic(op, a, b), node, self.product())
        return node

    def product(self) -> Node:
        node = self.unary()
        while (op := self.accept("op", "*") or self.accept("op", "/")) is not None:
            node = _bind(lambda a, b, op=op: _arithmetic(op, a, b), node, self.unary())
        return node

    def unary(self) -> Node:
        if self.accept("op", "-"):
            inner = self.unary()
            return lambda m: -v if _is_number(v := inner(m)) else None
        if self.accept("op", "+"):
            inner = self.unary()
            return lambda m: v if _is_number(v := inner(m)) else None
        return self.primary()

    def primary(self) -> Node:
        if self.accept("op", "("):
            node = self.expression()
            self.expect("op", ")")
            return node
        name = self.accept("id")
        if name is not None:
            return identifier(name, self.dialect)
        value = self.literal()
        return lambda m: value

    def literal(self) -> Value:
        token = self.peek()
        if token is None:
            raise SelectorError("the expression ends too early")
        kind, text = token
        self.pos += 1
        if kind == "num":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "str":
            return _string(text)
        if kind == "kw" and text in ("TRUE", "FALSE"):
            return text == "TRUE"
        if kind == "kw" and text == "NULL":
            return None
        raise SelectorError(f"unexpected {text!r}")


def _bind(op: Callable[[Value, Value], Value], left: Node, right: Node) -> Node:
    return lambda m: op(left(m), right(m))


def _string(token: str) -> str:
    return token[1:-1].replace("''", "'")


def _between(value: Value, low: Value, high: Value) -> bool | None:
    return _and(_compare(">=", value, low), _compare("<=", value, high))


def _like(value: Value, regex: re.Pattern[str]) -> bool | None:
    if not isinstance(value, str):
        return None
    return regex.fullmatch(value) is not None


def _in(value: Value, items: list[Value]) -> bool | None:
    if value is None:
        return None
    return any(_compare("=", value, item) is True for item in items)
