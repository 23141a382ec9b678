"""The bare message (3.2) as sent and as delivered, compared section by section and byte for
byte.

Owns: `bare_changes(sent, delivered)` (what an intermediary inserted, dropped or changed in
the bare message: properties, application-properties, the body sections; header,
annotations and footer are the intermediary's to change), `check_bare_unchanged` (the case
check, its reason naming the section and showing both byte strings in short hex) and
`Encoded`, a message whose sections the case encodes itself (amqp10.builder), for
encodings other than the encoder's own. The sections and their exact bytes come from
amqp10.message.split_sections; nothing here reads AMQP bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.message import Message, RawSection, split_sections
from amqpspec.conformance.run.context import CaseContext

INSERTED = (
    "If a section of the bare message is omitted, one may not be inserted by an intermediary."
)
MODIFIED = "The exact encoding of sections of the bare message MUST NOT be modified."
SHORT = 24  # bytes of a section shown in a reason


@dataclass(slots=True)
class Encoded(Message):
    """A message sent as `payload`, bytes the case built (e.g. a properties section encoded
    as a list32 through amqp10.builder.mutate); the probe sends `encode()`."""

    payload: bytes = b""

    def encode(self) -> bytes:
        return self.payload


def short_hex(data: bytes | None, at: int = 0) -> str:
    """`data` in hex, at most SHORT bytes from about `at`, with its length."""
    if data is None:
        return "none"
    start = max(0, min(at - 4, len(data) - SHORT))
    shown = data[start : start + SHORT].hex()
    before = "…" if start else ""
    after = "…" if start + SHORT < len(data) else ""
    return f"{before}{shown}{after} ({len(data)} bytes)"


def _first_difference(a: bytes, b: bytes) -> int:
    same = (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    return next(same, min(len(a), len(b)))


def _compare(what: str, sent: RawSection | None, got: RawSection | None) -> str | None:
    """One line for a bare section that differs, None when it is the same."""
    if sent is None and got is None:
        return None
    if sent is None:
        return f"{what} inserted (3.2: '{INSERTED}'): sent none, delivered {short_hex(got.raw)}"
    if got is None:
        return f"{what} dropped (3.2: '{MODIFIED}'): sent {short_hex(sent.raw)}, delivered none"
    if sent.raw == got.raw:
        return None
    at = _first_difference(sent.raw, got.raw)
    kind = "" if sent.name == got.name else f" (sent {sent.name}, delivered {got.name})"
    return (
        f"{what} changed{kind} at byte {at} (3.2: '{MODIFIED}'): sent {short_hex(sent.raw, at)}, "
        f"delivered {short_hex(got.raw, at)}"
    )


def _named(sections: list[RawSection], name: str) -> RawSection | None:
    return next((s for s in sections if s.name == name), None)


def bare_changes(sent: bytes, delivered: bytes) -> list[str]:
    """What differs between the bare message of `sent` and of `delivered` (both whole
    message payloads): one line per section inserted, dropped or changed; [] when every
    bare section is there, byte for byte."""
    ours = [s for s in split_sections(sent) if s.bare]
    try:
        theirs = [s for s in split_sections(delivered) if s.bare]
    except DecodeError as exc:
        return [f"the delivered message does not decode ({exc}): {short_hex(delivered)}"]
    changes = [
        _compare(name, _named(ours, name), _named(theirs, name))
        for name in ("properties", "application-properties")
    ]
    body_ours = [s for s in ours if s.name not in ("properties", "application-properties")]
    body_theirs = [s for s in theirs if s.name not in ("properties", "application-properties")]
    sent_raw, got_raw = [s.raw for s in body_ours], [s.raw for s in body_theirs]
    if sent_raw != got_raw and sorted(sent_raw) == sorted(got_raw):
        order = [sent_raw.index(raw) + 1 for raw in got_raw]  # distinct sections assumed
        if len(set(order)) == len(order):
            changes.append(
                f"body sections delivered in another order, sent 1..{len(order)}, delivered "
                f"{', '.join(map(str, order))} (3.2: '{MODIFIED}'): sent "
                + " | ".join(short_hex(raw) for raw in sent_raw)
            )
            return [change for change in changes if change]
    count = max(len(body_ours), len(body_theirs))
    for index in range(count):
        sent_section = body_ours[index] if index < len(body_ours) else None
        got_section = body_theirs[index] if index < len(body_theirs) else None
        name = (sent_section or got_section).name
        what = f"body section {index + 1} of {len(body_ours)} sent ({name})"
        changes.append(_compare(what, sent_section, got_section))
    return [change for change in changes if change]


def check_bare_unchanged(ctx: CaseContext, sent: Message, delivered: bytes) -> None:
    """The case check: the delivered bare message is the one sent, section by section and
    byte for byte (3.2); the reason lists every section that differs."""
    changes = bare_changes(sent.encode(), delivered)
    ctx.check(not changes, "the broker changed the bare message: " + "; ".join(changes))
