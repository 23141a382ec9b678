"""Error types of the protocol core, and the kinds they carry.

Owns: the one exception every decoder raises on bad input (DecodeError, with the byte
offset and what was expected), the encoder's error, the protocol error that carries an
AMQP error condition (2.8.15-2.8.18) for the engine to send to the peer, and `ErrorKind`:
the machine-readable name of what went wrong; and `kept`, an error stripped of its
traceback for whoever keeps it past the except block. The message text (`expected`,
`description`, `str(exc)`) is for humans and may be reworded at any time; code that acts
on an error keys on `kind`, `condition` and the structured facts (`performative`,
`field`, `declared`, `allowed`, `limit`, `channel`, `refused_input`), never on the text
(tests/test_error_kinds.py rewords every message and checks nothing else changes).
Errors are off the hot path: nothing here runs while decoding succeeds.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

E = TypeVar("E", bound=BaseException)


class ErrorKind(StrEnum):
    """What went wrong, one value per distinct rule (a str: it pickles, prints and
    compares as its value, so it crosses process and JSON boundaries as is)."""

    UNSPECIFIED = "unspecified"  # raised outside amqp10 without a kind
    # -- the codec (1.2-1.6): values and their encodings
    SHORT_INPUT = "short-input"  # fewer bytes than a fixed width or a length prefix needs
    MISSING_CONSTRUCTOR = "missing-constructor"  # input ends where a constructor was due
    RESERVED_CONSTRUCTOR = "reserved-constructor"  # a format code the spec does not assign
    INVALID_VALUE = "invalid-value"  # a boolean other than 0/1, a char outside Unicode
    INVALID_ENCODING = "invalid-encoding"  # string/symbol bytes that are not UTF-8/ASCII
    COMPOUND_OVERRUN = "compound-overrun"  # a list/map/array size beyond its bytes (limit)
    COUNT_EXCEEDS_SIZE = "count-exceeds-size"  # more items declared than bytes to hold them
    COMPOUND_END = "compound-end"  # the items do not end where the size says
    VALUE_OVERRUN = "value-overrun"  # a value's width runs past the input (value_end)
    TRAILING_BYTES = "trailing-bytes"  # bytes after the one value (or performative)
    NESTING_TOO_DEEP = "nesting-too-deep"  # beyond codec.MAX_DEPTH (an implementation limit)
    ODD_MAP_COUNT = "odd-map-count"  # a map's count is not even (1.6.23)
    DUPLICATE_MAP_KEY = "duplicate-map-key"
    UNHASHABLE_MAP_KEY = "unhashable-map-key"
    ARRAY_ELEMENT_CONSTRUCTOR = "array-element-constructor"  # not a primitive one
    ZERO_WIDTH_ARRAY_LIMIT = "zero-width-array-limit"  # an implementation limit (limit)
    NESTED_DESCRIPTOR = "nested-descriptor"  # a descriptor that is itself described (1.5)
    INVALID_DESCRIBED = "invalid-described"  # a described value that cannot be built
    # -- composites (1.3, the spec's types)
    NOT_A_LIST = "not-a-list"  # a composite not encoded as a list
    TOO_MANY_FIELDS = "too-many-fields"  # performative, declared, allowed
    FIELD_TYPE = "field-type"  # a field of the wrong type: performative, field
    MANDATORY_FIELD = "mandatory-field"  # a mandatory field null: performative, field
    FIELD_ARCHETYPE = "field-archetype"  # a value not of the archetype the field requires
    SECTION_TYPE = "section-type"  # a message section carrying the wrong type
    # -- messages (3.2)
    NOT_A_SECTION = "not-a-section"
    SECTION_ORDER = "section-order"
    BODY_KINDS = "body-kinds"  # more than one kind of body section
    # -- frames (2.2, 2.3)
    SHORT_PROTOCOL_HEADER = "short-protocol-header"
    BAD_PROTOCOL_HEADER = "bad-protocol-header"  # not 'AMQP'
    SHORT_FRAME_HEADER = "short-frame-header"
    FRAME_SIZE_TOO_SMALL = "frame-size-too-small"  # SIZE < 8 (2.3.1)
    DOFF_TOO_SMALL = "doff-too-small"  # DOFF < 2 (2.3.1)
    DOFF_BEYOND_SIZE = "doff-beyond-size"  # 4*DOFF > SIZE (2.3.1)
    FRAME_SIZE_OVER_MAX = "frame-size-over-max"  # SIZE > max-frame-size (limit)
    FRAME_SIZE_MISMATCH = "frame-size-mismatch"  # SIZE is not the bytes given
    FRAME_TYPE = "frame-type"  # neither 0 (AMQP) nor 1 (SASL)
    NOT_A_PERFORMATIVE = "not-a-performative"  # an AMQP frame body that is not one
    NOT_A_SASL_BODY = "not-a-sasl-body"  # a SASL frame body that is not one
    CAPTURE_GAP = "capture-gap"  # the connection monitor lost bytes of a capture
    # -- the engine: connection (2.4), SASL (5.3)
    UNSUPPORTED_HEADER = "unsupported-header"
    AMQP_FRAME_DURING_SASL = "amqp-frame-during-sasl"
    EMPTY_FRAME_DURING_SASL = "empty-frame-during-sasl"
    SASL_FRAME_AFTER_SASL = "sasl-frame-after-sasl"
    SASL_MECHANISM = "sasl-mechanism"  # the server does not offer ours
    SASL_UNSUPPORTED = "sasl-unsupported"  # a challenge/response our mechanisms cannot answer
    MAX_FRAME_SIZE_TOO_SMALL = "max-frame-size-too-small"  # open below 512 (limit)
    STATE_REFUSED = "state-refused"  # the endpoint's state table refuses the input
    UNMAPPED_CHANNEL = "unmapped-channel"  # channel
    CHANNEL_OVER_MAX = "channel-over-max"  # channel, limit
    CHANNEL_IN_USE = "channel-in-use"  # a begin on a channel already in use: channel
    BEGIN_UNKNOWN_CHANNEL = "begin-unknown-channel"  # remote-channel not ours: channel
    # -- the engine: session (2.5) and link (2.6, 2.7)
    HANDLE_OVER_MAX = "handle-over-max"  # limit
    UNATTACHED_HANDLE = "unattached-handle"  # performative
    WINDOW_VIOLATION = "window-violation"
    INVALID_TERMINUS = "invalid-terminus"  # field (source or target)
    TRANSFER_TO_SENDER = "transfer-to-sender"
    MESSAGE_SIZE_EXCEEDED = "message-size-exceeded"  # limit
    DELIVERY_WITHOUT_ID = "delivery-without-id"
    NO_LINK_CREDIT = "no-link-credit"


# the structured facts an error may carry besides its kind (None: not known / not relevant)
FACTS = ("performative", "field", "declared", "allowed", "limit", "channel", "refused_input")


class AMQPError(Exception):
    """Base class of every error the core raises."""

    kind: str = ErrorKind.UNSPECIFIED
    performative: str | None = None  # the performative or composite concerned ("open")
    field: str | None = None  # its field ("container-id")
    declared: int | None = None  # a count or size the input declared
    allowed: int | None = None  # the most the rule allows for it
    limit: int | None = None  # the bytes (or value) available or permitted
    channel: int | None = None
    refused_input: str | None = None  # STATE_REFUSED: the state table's input ("RECV_OPEN")

    def facts(self) -> dict[str, Any]:
        """kind and the structured facts that are known, e.g. for a log record."""
        return {"kind": str(self.kind)} | self._known()

    def _known(self) -> dict[str, Any]:
        return {name: value for name in FACTS if (value := getattr(self, name)) is not None}

    def _set_facts(self, kind: str, facts: dict[str, Any]) -> None:
        self.kind = kind
        for name, value in facts.items():
            if name not in FACTS:
                raise TypeError(f"{type(self).__name__} has no fact {name!r}")
            setattr(self, name, value)


def kept(exc: E) -> E:
    """`exc` without its traceback (and those of its cause and context), for an error
    that is kept after its except block: a traceback holds the frames it passed through,
    and each frame its locals and callers, so a kept error made a reference cycle that
    only the cyclic collector frees, and with it everything those frames held (a whole
    connection's trace: the collector cost a fuzz campaign a fifth of its CPU,
    bench/README.md "Fuzzer speed"). What an error says is in its fields, not its frames."""
    seen: set[int] = set()
    chain: list[BaseException | None] = [exc]
    while chain:
        error = chain.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        error.__traceback__ = None
        chain += (error.__cause__, error.__context__)  # both: they may differ
    return exc


class DecodeError(AMQPError):
    """Bytes that are not valid AMQP 1.0. `offset` is where decoding failed; `kind` what
    is wrong (ErrorKind); `expected` says it in words, for humans only."""

    def __init__(
        self,
        offset: int,
        expected: str,
        condition: str = "amqp:decode-error",
        kind: str = ErrorKind.UNSPECIFIED,
        **facts: Any,
    ) -> None:
        super().__init__(f"at byte {offset}: {expected}")
        self.offset = offset
        self.expected = expected
        self.condition = condition
        self._set_facts(kind, facts)

    def moved(self, offset: int) -> DecodeError:
        """The same error at another offset (a decoder's position in its whole stream)."""
        return DecodeError(offset, self.expected, self.condition, self.kind, **self._known())


class EncodeError(AMQPError, ValueError):
    """A value that cannot be encoded as the AMQP type asked for."""


class ProtocolError(AMQPError):
    """The peer broke a rule; `condition` is the spec's error symbol to answer with.

    `scope` says which endpoint the error ends: "connection", "session" or "link";
    `kind` what rule was broken (ErrorKind), `description` says it in words for humans
    (and for the peer, as the error's description), never for code to match.
    """

    def __init__(
        self,
        condition: str,
        description: str,
        scope: str = "connection",
        kind: str = ErrorKind.UNSPECIFIED,
        **facts: Any,
    ) -> None:
        super().__init__(f"{condition}: {description}")
        self.condition = condition
        self.description = description
        self.scope = scope
        self._set_facts(kind, facts)

    @classmethod
    def of_decode(cls, exc: DecodeError, scope: str = "connection") -> ProtocolError:
        """The protocol error a DecodeError is for the peer: its condition, kind and
        facts; the description keeps the byte offset."""
        return cls(exc.condition, str(exc), scope, exc.kind, **exc._known())

    def rescoped(self, scope: str) -> ProtocolError:
        """The same error ending another endpoint (a link that cannot detach ends its
        session, 2.6.3)."""
        return ProtocolError(self.condition, self.description, scope, self.kind, **self._known())
