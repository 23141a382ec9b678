"""What the broker did, in a line: the "observed" half of a verdict's reason.

Owns `brief(item)` (one trace item in broker terms: `end with amqp:internal-error "..."
(frame #12)`, `flow [handle=0, link-credit=4, ...] (frame #9)`) and `broker_did(recording,
since)`, which a wait that found nothing and a graded outcome use to say what the broker
did instead of only what the probe waited for: the frame that ended something (close, end,
a detach with an error) and how long after the probe's last frame it came, the TCP close,
or the broker's last frame (or none) with the connection still open, never how long the
probe waited (docs/conformance.md, "Reasons").
Pure functions of a recording; touches nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqpspec.amqp10.frames import Frame, ProtocolHeader
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.traces.render import describe

if TYPE_CHECKING:
    from amqpspec.amqp10.monitor import TraceItem
    from amqpspec.conformance.probe.recording import Recording

ENDINGS = ("close", "end", "detach")
LONGEST = 200  # characters of a frame's description in a reason


def _cut(text: str, length: int = LONGEST) -> str:
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 1] + "…"


def brief(item: TraceItem) -> str:
    """One trace item in a line: an ending frame by its error, others by their fields."""
    frame = item.item
    where = f"(frame #{item.index})"
    if isinstance(frame, Frame) and frame.name in ENDINGS and frame.performative is not None:
        error = frame.performative.error
        if error is None:
            closed = getattr(frame.performative, "closed", None)
            extra = f" closed={str(closed).lower()}" if frame.name == "detach" else ""
            return f"{frame.name}{extra} without error {where}"
        text = f" {_cut(str(error.description), 120)!r}" if error.description else ""
        return f"{frame.name} with {error.condition}{text} {where}"
    if isinstance(frame, ProtocolHeader):
        return f"protocol header {describe(item)} {where}"
    return f"{_cut(describe(item))} {where}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _ours(items: list[TraceItem], *, heartbeats: bool = True) -> TraceItem | None:
    """The probe's last item in `items` (a frame or a protocol header; an empty frame only
    with `heartbeats`), or None."""
    for item in reversed(items):
        if item.direction != CLIENT or item.item is None:
            continue
        if heartbeats or not isinstance(item.item, Frame) or item.item.performative is not None:
            return item
    return None


def _our_name(item: TraceItem) -> str:
    """`our open (frame #6)`, `our header (frame #0)`, `our empty frame (frame #9)`."""
    name = item.item.name if isinstance(item.item, Frame) else "header"
    if isinstance(item.item, Frame) and item.item.performative is None:
        name = "empty frame"
    return f"our {name} (frame #{item.index})"


def _after(items: list[TraceItem], position: int) -> str:
    """`N ms after our <frame> (frame #k)`: the probe's last item before `position`."""
    earlier = _ours(items[:position])
    if earlier is None:
        return ""
    delay = items[position].time - earlier.time
    return f" {_ms(max(0.0, delay))} after {_our_name(earlier)}"


def broker_did(recording: Recording, since: int = 0, *, closed: bool = False) -> str:
    """What the broker did after trace position `since`: 'the broker <...>' in a line.
    `closed`: the TCP connection is closed (by the broker when no close frame came)."""
    items = recording.items
    for position in range(since, len(items)):
        item = items[position]
        frame = item.item
        if item.direction != SERVER or not isinstance(frame, Frame):
            continue
        if frame.name in ENDINGS and frame.performative is not None:
            if frame.name == "detach" and frame.performative.error is None:
                continue
            return f"the broker sent {brief(item)}{_after(items, position)}"
    later = [i for i in items[since:] if i.direction == SERVER]
    if closed:
        last = f"; its last frame: {brief(later[-1])}" if later else ""
        opened = any(
            i.direction == SERVER and isinstance(i.item, Frame) and i.item.name == "open"
            for i in items
        )
        undecoded = any(i.direction == SERVER and i.item is None for i in items)
        if not opened:  # before the open exchange a TCP close is how a peer refuses
            return f"the broker closed the TCP connection{last}"
        if undecoded:  # its close may be among the bytes the monitor could not decode
            return f"the broker closed the TCP connection after bytes we could not decode{last}"
        return f"the broker closed the TCP connection without a close frame{last}"
    ours = _ours(items, heartbeats=False)  # the frame the broker owes an answer, if any
    if later:
        last = later[-1]
        also = f" (after {_our_name(ours)})" if ours is not None and ours.index > last.index else ""
        return (
            f"the broker's last frame: {brief(last)}; no frame after it{also}, and the "
            "connection still open"
        )
    before = [i for i in items[:since] if i.direction == SERVER]
    after = f" after {_our_name(ours)}" if ours is not None else ""
    silent = f"the broker sent no frame{after} and kept the connection open"
    if before:
        return f"{silent} (its last frame before: {brief(before[-1])})"
    return silent
