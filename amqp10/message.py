"""The AMQP message format (3.2) and multi-frame transfers (2.6.14, 2.7.5).

Owns: `Message` (header, delivery-annotations, message-annotations, properties,
application-properties, body as data / amqp-sequence / amqp-value sections, footer) with
its strict section-order decoding (3.2's order: `SECTION_ORDER`; the cheap walk of a
message's sections that a broker runs on every publish is amqp10.message_head's),
`split_sections` (each section with its exact bytes, so
the bare message can be compared section by section), and the split of one delivery's
payload into transfer frames that fit a max-frame-size, plus reassembly of such frames
(and the part of a delivery received so far, for link recovery: `received_point` and
`resume_offset` count its sections as 3.4.1's received state does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10 import codec
from amqpspec.amqp10.composites import (
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    DeliveryAnnotations,
    Footer,
    Header,
    MessageAnnotations,
    Properties,
    Section,
    Transfer,
)
from amqpspec.amqp10.errors import DecodeError, EncodeError, ErrorKind
from amqpspec.amqp10.frames import encode_frame

# 3.2: the order sections must appear in (their rank); body sections share one slot.
SECTION_ORDER = {
    "header": 0,
    "delivery-annotations": 1,
    "message-annotations": 2,
    "properties": 3,
    "application-properties": 4,
    "data": 5,
    "amqp-sequence": 5,
    "amqp-value": 5,
    "footer": 6,
}


@dataclass(slots=True)
class Message:
    """A bare message plus its annotations. `body` is a list of Data or AmqpSequence
    sections, or exactly one AmqpValue; `Message.of(x)` builds the common cases."""

    header: Header | None = None
    delivery_annotations: dict | None = None
    message_annotations: dict | None = None
    properties: Properties | None = None
    application_properties: dict | None = None
    body: list[Section] = field(default_factory=list)
    footer: dict | None = None

    @classmethod
    def of(cls, body: Any, **sections: Any) -> Message:
        """bytes -> one data section; anything else -> one amqp-value section."""
        section = Data(bytes(body)) if isinstance(body, (bytes, bytearray)) else AmqpValue(body)
        return cls(body=[section], **sections)

    @property
    def value(self) -> Any:
        """The body as one Python value: bytes for data, the value of amqp-value."""
        if len(self.body) == 1:
            return self.body[0].value
        if all(isinstance(s, Data) for s in self.body):
            return b"".join(s.value for s in self.body)
        return [s.value for s in self.body]

    def encode(self) -> bytes:
        out = bytearray()
        self.encode_into(out)
        return bytes(out)

    def encode_into(self, out: bytearray) -> None:
        """Append the message's sections in 3.2 order."""
        if self.header is not None:
            self.header.encode_into(out)
        if self.delivery_annotations is not None:
            DeliveryAnnotations(self.delivery_annotations).encode_into(out)
        if self.message_annotations is not None:
            MessageAnnotations(self.message_annotations).encode_into(out)
        if self.properties is not None:
            self.properties.encode_into(out)
        if self.application_properties is not None:
            ApplicationProperties(self.application_properties).encode_into(out)
        body = self.body
        if len(body) != 1 or type(body[0]) not in _BODY_KINDS:
            self._check_body()
        for section in body:
            section.encode_into(out)
        if self.footer is not None:
            Footer(self.footer).encode_into(out)

    def _check_body(self) -> None:
        kinds = {type(s) for s in self.body}
        if len(kinds) > 1 or (AmqpValue in kinds and len(self.body) != 1):
            raise EncodeError("a body is data sections, amqp-sequence sections, or one amqp-value")
        if kinds - {Data, AmqpSequence, AmqpValue}:
            raise EncodeError("body sections must be Data, AmqpSequence or AmqpValue")

    @classmethod
    def decode(cls, payload: bytes) -> Message:
        """Decode a whole message; sections must come in 3.2 order (`split_sections`)."""
        message = cls()
        for raw in split_sections(payload):
            if raw.name in _BODY_NAMES:
                message.body.append(raw.section)
            else:
                _assign(message, raw.name, raw.section)
        return message


_BODY_KINDS = (Data, AmqpSequence, AmqpValue)
_BODY_NAMES = frozenset(kind.NAME for kind in _BODY_KINDS)
# 3.2: the class of each section -> its rank in the order above
_RANK_OF_CLASS: dict[type, int] = {
    Header: 0,
    DeliveryAnnotations: 1,
    MessageAnnotations: 2,
    Properties: 3,
    ApplicationProperties: 4,
    Data: 5,
    AmqpSequence: 5,
    AmqpValue: 5,
    Footer: 6,
}
assert {cls.NAME: rank for cls, rank in _RANK_OF_CLASS.items()} == SECTION_ORDER


# 3.2: "The bare message consists of sections standard properties, application-properties,
# and application-data (the body)."
BARE_SECTIONS = frozenset(
    {"properties", "application-properties", "data", "amqp-sequence", "amqp-value"}
)


@dataclass(frozen=True, slots=True)
class RawSection:
    """One section of an encoded message: its name ("properties", "data", ...), its exact
    bytes as they were in the payload, and its decoded value."""

    name: str
    raw: bytes
    section: Any

    @property
    def bare(self) -> bool:
        """Part of the bare message (3.2)."""
        return self.name in BARE_SECTIONS


def split_sections(payload: bytes) -> list[RawSection]:
    """The sections of an encoded message in order, each with its exact bytes; the same
    checks as `Message.decode` (3.2 order, one kind of body), DecodeError otherwise."""
    sections: list[RawSection] = []
    pos, end = 0, len(payload)
    last_rank = -1
    body_kind: type | None = None
    while pos < end:
        start = pos
        section, pos = codec.decode_value(payload, pos, end)
        kind = type(section)
        rank = _RANK_OF_CLASS.get(kind)
        if rank is None:
            raise DecodeError(
                start, f"a message section, got {kind.__name__}", kind=ErrorKind.NOT_A_SECTION
            )
        if rank < last_rank or (rank == last_rank and rank != 5):
            raise DecodeError(
                start,
                f"section {section.NAME} in 3.2 order",
                kind=ErrorKind.SECTION_ORDER,
                performative=section.NAME,
            )
        if rank == 5:
            if body_kind is not None and (body_kind is not kind or body_kind is AmqpValue):
                raise DecodeError(
                    start, "one kind of body section (3.2)", kind=ErrorKind.BODY_KINDS
                )
            body_kind = kind
        last_rank = rank
        sections.append(RawSection(section.NAME, bytes(payload[start:pos]), section))
    return sections


def received_point(partial: bytes) -> tuple[int, int]:
    """3.4.1 received, as the receiver states it for the first bytes of a message:
    (section-number, section-offset) of the first byte not yet received. Each whole section
    is stepped over (codec.value_end); one cut off gives its number and the bytes of it
    received ("the first byte of the given section which has not yet been received")."""
    pos, end, number = 0, len(partial), 0
    while pos < end:
        try:
            following = codec.value_end(partial, pos, end)
        except DecodeError:
            return number, end - pos
        pos, number = following, number + 1
    return number, 0


def resume_offset(partial: bytes, section_number: int, section_offset: int) -> int | None:
    """Where in the message's bytes a resumed delivery whose first transfer carries
    received(section-number, section-offset) starts (3.4.1: "the offset in the payload at
    which the first resumed delivery is starting"), counted on the `partial` bytes received
    before; None when that point lies past them."""
    pos, end = 0, len(partial)
    for _ in range(section_number):
        try:
            pos = codec.value_end(partial, pos, end)
        except DecodeError:
            return None
    start = pos + section_offset
    return start if start <= end else None


def _assign(message: Message, name: str, section: Any) -> None:
    if name in ("header", "properties"):
        setattr(message, name, section)
    else:
        setattr(message, name.replace("-", "_"), section.value)


def max_transfer_payload(transfer: Transfer, max_frame_size: int, channel: int = 0) -> int:
    """Payload bytes that fit in one frame of at most `max_frame_size` behind `transfer`
    (its frame header and encoded performative are the overhead, 2.3.1, 2.7.5); may be
    zero or negative when the performative alone does not fit."""
    return max_frame_size - len(encode_frame(transfer, channel))


def _split_plan(
    transfer: Transfer, payload_size: int, max_frame_size: int, channel: int
) -> tuple[int, int, int]:
    """How transfer_frames() splits a payload: (room in the first frame, room in each
    continuation frame, number of frames)."""
    if max_transfer_payload(transfer.replace(more=False), max_frame_size, channel) >= payload_size:
        return payload_size, 0, 1
    first = max_transfer_payload(transfer.replace(more=True), max_frame_size, channel)
    rest = max_transfer_payload(
        Transfer(handle=transfer.handle, more=True), max_frame_size, channel
    )
    if first <= 0 or rest <= 0:
        raise EncodeError(f"max-frame-size {max_frame_size} too small for a transfer")
    left = payload_size - first
    return first, rest, 1 + -(-left // rest)


def transfer_frame_count(
    transfer: Transfer, payload_size: int, max_frame_size: int, channel: int = 0
) -> int:
    """How many frames transfer_frames() makes of a `payload_size`-byte delivery (2.6.14):
    what a multi-frame delivery costs in transfer-ids (2.5.6)."""
    return _split_plan(transfer, payload_size, max_frame_size, channel)[2]


def transfer_frames(
    transfer: Transfer, payload: bytes, max_frame_size: int, channel: int = 0
) -> list[bytes]:
    """Split one delivery into frames of at most `max_frame_size` bytes (2.6.14).

    The first frame carries every field of `transfer`; continuation frames repeat only
    the handle (and `more`), as the spec allows. All but the last have more=true.
    """
    first, rest, count = _split_plan(transfer, len(payload), max_frame_size, channel)
    if count == 1:
        return [encode_frame(transfer.replace(more=False), channel, payload)]
    frames = [encode_frame(transfer.replace(more=True), channel, payload[:first])]
    continuation = Transfer(handle=transfer.handle, more=True)
    for start in range(first, len(payload), rest):
        chunk = payload[start : start + rest]
        last = start + rest >= len(payload)
        frames.append(encode_frame(continuation.replace(more=not last), channel, chunk))
    return frames


class TransferAssembler:
    """Reassembles multi-frame deliveries of one link: feed transfers in order."""

    def __init__(self) -> None:
        self._first: Transfer | None = None
        self._chunks: list[bytes] = []
        # a delivery under way (its first transfer fed, not yet complete): an attribute, not a
        # property, as the engine reads it for every transfer (bench/README.md, "Cause of the
        # send delta")
        self.in_progress = False

    def pending(self) -> tuple[Transfer, bytes] | None:
        """The delivery under way: its first transfer and the payload received so far (a
        link suspended in the middle of it keeps them for its resumption, 2.6.13)."""
        if self._first is None:
            return None
        return self._first, b"".join(self._chunks)

    def feed(self, transfer: Transfer, payload: bytes) -> tuple[Transfer, bytes] | None:
        """Returns (first transfer, whole payload) when the delivery is complete.

        An aborted transfer discards what was gathered and returns (transfer, b"").
        """
        if self._first is None:
            self._first = transfer
            self.in_progress = True
        self._chunks.append(payload)
        if transfer.aborted:
            first = self._first
            self._reset()
            return first, b""
        if transfer.more:
            return None
        first, whole = self._first, b"".join(self._chunks)
        self._reset()
        return first, whole

    def _reset(self) -> None:
        self._first = None
        self._chunks = []
        self.in_progress = False
