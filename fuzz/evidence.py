"""What one fuzz case showed, in broker terms: who sent which frame, and when after the bad one.

Owns: `BrokerStream` (the broker's side of a recording decoded leniently, frame by frame:
a whole frame whose body does not decode is kept as an undecodable frame and decoding goes
on with the next one, since AMQP frames are length-prefixed (2.3.1); only a frame header
that cannot be read ends it), `Exchange` / `read_exchange(...)` (the fuzzer's bytes split
into the case's steps and its own teardown close, the broker's frames, the drop, all timed
from the bad frame), `stream_status(steps)` (the client's stream as a spec-following peer
decodes it; `stream_error` the same with the core's DecodeError and its kind),
`bad_step(steps, sent)` (the frame the case is about: the first undecodable one, else the
last mutated one, else the last sent) and the renderings a finding carries:
`Exchange.record()` (findings.json `evidence`) and `Exchange.lines()` (reproducer.txt).

The oracle (fuzz.oracle) decides; this module only reads the recording. Decoding is
amqp10's (`FrameDecoder`, which skips a whole frame whose body fails); nothing here parses
AMQP bytes by hand.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import Frame, FrameDecoder, ProtocolHeader
from amqpspec.amqp10.monitor import ConnectionMonitor
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.conformance.probe import Chunk, Recording
from amqpspec.fuzz.case import Step, mutation_label
from amqpspec.traces.render import format_composite

HEADER, FRAME, UNDECODABLE, RAW = "protocol-header", "frame", "undecodable", "raw"
STEP, TEARDOWN = "case step", "fuzzer teardown (not a case step)"
_ENDINGS = ("close", "end", "detach")


@dataclass(frozen=True, slots=True)
class Received:
    """One thing the broker sent: a protocol header, a frame, a whole frame that does not
    decode (`error` says why), or the raw rest of a stream whose framing broke."""

    time: float
    kind: str
    item: ProtocolHeader | Frame | None
    size: int
    channel: int | None = None
    error: str = ""

    @property
    def name(self) -> str:
        if isinstance(self.item, Frame):
            return self.item.name
        return self.kind

    @property
    def condition(self) -> str | None:
        """The error condition of a close, end or detach (None: no error)."""
        if isinstance(self.item, Frame) and self.item.name in _ENDINGS:
            error = self.item.performative.error
            return str(error.condition) if error is not None else None
        return None

    def describe(self) -> str:
        if isinstance(self.item, ProtocolHeader):
            h = self.item
            return f"protocol header {h.protocol_id}.{h.major}.{h.minor}.{h.revision}"
        if isinstance(self.item, Frame):
            if self.item.performative is None:
                return "(empty frame)"
            return format_composite(self.item.performative)
        if self.kind == UNDECODABLE:
            return f"UNDECODABLE frame ({self.size} B, channel {self.channel}): {self.error}"
        return f"raw {self.size} B, framing lost: {self.error}"

    def short(self) -> str:
        """'close with amqp:decode-error', 'open', 'undecodable frame'."""
        if self.kind == UNDECODABLE:
            return f"an undecodable frame on channel {self.channel} ({self.error})"
        if self.kind == RAW:
            return f"{self.size} bytes that are no frame ({self.error})"
        name = self.name
        if name in _ENDINGS:
            condition = self.condition
            return f"{name} with {condition}" if condition else f"{name} without an error"
        return name


class BrokerStream:
    """The broker's chunks of a recording, decoded leniently; `update()` reads new ones.

    `monitored`: the recording's items are a live probe's connection monitor's reading of
    the same bytes (conformance.probe): its headers and frames are taken as they are, not
    decoded again, as long as it decoded every byte of the broker's; at the first it could
    not (a raw item), the chunks are read leniently from the start, as without it."""

    def __init__(self, monitored: bool = False) -> None:
        self._decoder = FrameDecoder(expect_header=True)
        self._seen = 0  # chunks of the recording already read
        self._data = bytearray()  # the broker's bytes so far (to tell a header from junk)
        self.items: list[Received] = []
        self.broken = False  # the framing itself broke: the rest is raw
        self._monitored = monitored
        self._items_seen = 0  # monitored: the recording's items already read

    def update(self, recording: Recording) -> BrokerStream:
        if self._monitored and self._take_monitored(recording):
            return self
        chunks = recording.chunks
        while self._seen < len(chunks):
            chunk = chunks[self._seen]
            self._seen += 1
            if chunk.direction == SERVER:
                self._feed(chunk)
        return self

    def _take_monitored(self, recording: Recording) -> bool:
        """The monitor's new items of the broker's; False once one is raw (items reset)."""
        items = recording.items
        while self._items_seen < len(items):
            traced = items[self._items_seen]
            self._items_seen += 1
            if traced.direction != SERVER:
                continue
            item = traced.item
            if isinstance(item, Frame):
                self.items.append(Received(traced.time, FRAME, item, item.size, item.channel))
            elif isinstance(item, ProtocolHeader):
                self.items.append(Received(traced.time, HEADER, item, 8))
            else:
                self._monitored = False
                self.items = []
                return False
        return True

    def _feed(self, chunk: Chunk) -> None:
        if self.broken:
            last = self.items[-1]
            self.items[-1] = Received(
                last.time, RAW, None, last.size + len(chunk.data), None, last.error
            )
            return
        decoder = self._decoder
        decoder.feed(chunk.data)
        self._data += chunk.data
        while True:
            before, buffered = decoder.offset, decoder.buffered
            try:
                item = decoder.next_item()
            except DecodeError as exc:
                if decoder.offset > before:  # a whole frame whose body does not decode
                    size = decoder.offset - before
                    channel = int.from_bytes(self._data[before + 6 : before + 8], "big")
                    self.items.append(
                        Received(chunk.time, UNDECODABLE, None, size, channel, exc.expected)
                    )
                    continue
                if self._data[before : before + 4] == b"AMQP":
                    decoder.expect_protocol_header()  # a header where a frame was due
                    continue
                self.broken = True
                self.items.append(Received(chunk.time, RAW, None, buffered, None, exc.expected))
                return
            if item is None:
                return
            if isinstance(item, ProtocolHeader):
                self.items.append(Received(chunk.time, HEADER, item, 8))
                continue
            self.items.append(Received(chunk.time, FRAME, item, item.size, item.channel))
            if item.name == "sasl-outcome":
                decoder.expect_protocol_header()  # 5.3.2: the AMQP header follows

    def frames(self) -> list[Frame]:
        return [r.item for r in self.items if isinstance(r.item, Frame)]

    def first(self, *names: str) -> Received | None:
        return next((r for r in self.items if r.name in names), None)

    @property
    def closed(self) -> bool:
        """The broker sent a close frame."""
        return self.first("close") is not None

    @property
    def refused(self) -> bool:
        """The broker ended something with an error."""
        return any(r.condition for r in self.items)

    def reacted(self, since: float) -> bool:
        """The broker closed, or ended something with an error, at or after `since`."""
        return any(r.time >= since and (r.name == "close" or r.condition) for r in self.items)

    def undecodable(self) -> Received | None:
        return next((r for r in self.items if r.kind in (UNDECODABLE, RAW)), None)


def stream_status(steps: list[Step]) -> tuple[str, int | None, str]:
    """('ok' | 'malformed' | 'pending', step index, reason) of the client's byte stream
    as a spec-following peer decodes it (the core's connection monitor: SASL and
    pipelined headers followed). The reason is for humans; `stream_error` has the kind."""
    status, index, error = stream_error(steps)
    if error is not None:
        return status, index, f"{error.condition}: {error.expected}"
    if status == "pending":
        return status, index, "the stream ends inside a frame"
    return status, index, ""


def stream_error(steps: list[Step]) -> tuple[str, int | None, DecodeError | None]:
    """stream_status with the DecodeError itself (its kind and facts) for 'malformed'.
    A function of the steps' bytes alone: the last few answers are kept (a case asks it of
    the same steps more than once: the oracle's reply wait, then `bad_step` for its
    evidence: decoding them again cost a twentieth of a campaign's CPU, bench/README.md
    "Whole campaigns against real brokers")."""
    return _stream_error(tuple(s.data for s in steps))


@functools.lru_cache(maxsize=64)
def _stream_error(datas: tuple[bytes, ...]) -> tuple[str, int | None, DecodeError | None]:
    monitor = ConnectionMonitor(check=False)
    ends, total = [], 0
    for data in datas:
        total += len(data)
        ends.append(total)
    monitor.feed(CLIENT, b"".join(datas), 0.0)
    error = monitor.decode_error(CLIENT)
    if error is not None:
        index = next((i for i, end in enumerate(ends) if error.offset < end), len(datas) - 1)
        return "malformed", index, error
    if monitor.finish(0.0).items:
        return "pending", len(datas) - 1, None
    return "ok", None, None


def bad_step(steps: list[Step], sent: int) -> int:
    """The step the case is about: the first the core decoder rejects in the stream as
    sent, else the last one a mutator changed, else the last one sent."""
    sent_steps = steps[:sent] if sent else steps
    if not sent_steps:
        return 0
    status, where, _ = stream_status(sent_steps)
    if status == "malformed" and where is not None:
        return where
    for index in range(len(sent_steps) - 1, -1, -1):
        label = sent_steps[index].label
        if "[" in mutation_label(label) or "+" in label:
            return index
    return len(sent_steps) - 1


@dataclass(frozen=True, slots=True)
class Sent:
    """Bytes the fuzzer wrote: one case step, or its own closing close."""

    index: int | None  # the step's position; None for the teardown close
    label: str
    role: str
    time: float
    size: int


@dataclass(slots=True)
class Exchange:
    """One case's connection in broker terms."""

    sent: list[Sent]
    received: list[Received]
    dropped: float | None  # when the broker closed the TCP stream (None: it did not)
    bad: int | None  # index into `sent` of the bad step
    bound: float
    strict: bool  # the fuzzer held its close until the bound after the last step
    start: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def bad_time(self) -> float:
        if self.bad is not None and self.bad < len(self.sent):
            return self.sent[self.bad].time
        return self.start

    def after_bad(self, time: float) -> str:
        """'+3.3 ms' / '-0.1 ms' relative to the bad frame."""
        ms = (time - self.bad_time) * 1000
        if abs(ms) >= 1000:
            return f"{ms / 1000:+.2f} s"
        return f"{ms:+.3f} ms" if abs(ms) < 1 else f"{ms:+.1f} ms"

    def when(self, time: float) -> str:
        """'3.3 ms after the bad frame' / '2.4 ms before the bad frame'."""
        text = self.after_bad(time)
        side = "before" if text.startswith("-") else "after"
        return f"{text[1:]} {side} the bad frame"

    @property
    def teardown(self) -> Sent | None:
        return next((s for s in self.sent if s.role == TEARDOWN), None)

    @property
    def bad_label(self) -> str:
        if self.bad is None or self.bad >= len(self.sent):
            return "(none)"
        return f"step {self.bad} {self.sent[self.bad].label}"

    def broker_after_bad(self) -> list[Received]:
        return [r for r in self.received if r.time >= self.bad_time]

    def first_close(self) -> Received | None:
        return next((r for r in self.received if r.name == "close"), None)

    def closed_first(self) -> bool:
        """The fuzzer's own close went out before the broker closed or dropped."""
        ours = self.teardown
        if ours is None:
            return False
        theirs = [r.time for r in self.received if r.name == "close"]
        if self.dropped is not None:
            theirs.append(self.dropped)
        return not theirs or ours.time <= min(theirs)

    def broker_summary(self) -> str:
        """The broker's reaction after the bad frame, in order, with times."""
        parts = [f"{r.short()} at +{self.after_bad(r.time)[1:]}" for r in self.broker_after_bad()]
        if self.dropped is not None:
            parts.append(f"a TCP close at +{self.after_bad(self.dropped)[1:]}")
        return "; ".join(parts) if parts else "nothing"

    def teardown_note(self) -> str:
        ours = self.teardown
        if ours is None:
            return "the fuzzer sent no close of its own"
        return f"the fuzzer's own close (teardown, not a case step) went out {self.when(ours.time)}"

    def record(self) -> dict[str, Any]:
        """findings.json `evidence`: every frame both ways, ms after the bad frame."""

        def ms(time: float) -> float:
            return round((time - self.bad_time) * 1000, 3)

        return {
            "bad_step": self.bad,
            "bad_frame": self.bad_label,
            "bound_s": self.bound,
            "fuzzer_held_close_until_bound": self.strict,
            "fuzzer_closed_first": self.closed_first(),
            "fuzzer_frames": [
                {"step": s.index, "label": s.label, "role": s.role, "ms_after_bad": ms(s.time)}
                for s in self.sent
            ],
            "broker_frames": [
                {
                    "frame": r.name,
                    "channel": r.channel,
                    "error": r.condition or (r.error or None),
                    "ms_after_bad": ms(r.time),
                }
                for r in self.received
            ],
            "broker_dropped_ms_after_bad": ms(self.dropped) if self.dropped is not None else None,
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """The exchange in time order, each line saying who sent it and when."""
        rows: list[tuple[float, int, str]] = []
        for s in self.sent:
            mark = "  <== the bad frame" if s.index is not None and s.index == self.bad else ""
            who = f"fuzzer step {s.index}" if s.index is not None else "fuzzer TEARDOWN"
            rows.append((s.time, 0, f"{self.after_bad(s.time):>12}  -> {who}: {s.label}{mark}"))
        for r in self.received:
            rows.append((r.time, 1, f"{self.after_bad(r.time):>12}  <- broker: {r.describe()}"))
        if self.dropped is not None:
            rows.append(
                (self.dropped, 2, f"{self.after_bad(self.dropped):>12}  <- broker: TCP close (FIN)")
            )
        return [text for _, _, text in sorted(rows, key=lambda row: (row[0], row[1]))]


def _sent(recording: Recording, steps: list[Step], sent: int) -> list[Sent]:
    """The client's bytes as the case's steps (by length, in order) and what followed them:
    the fuzzer's own close."""
    ends, total = [], 0
    for s in steps[:sent]:
        total += len(s.data)
        ends.append(total)
    out: list[Sent] = []
    written = 0
    position = 0
    for chunk in recording.chunks:
        if chunk.direction != CLIENT:
            continue
        written += len(chunk.data)
        while position < len(ends) and ends[position] <= written:
            s = steps[position]
            out.append(Sent(position, s.label, STEP, chunk.time, len(s.data)))
            position += 1
        if position == len(ends) and written > total and not any(o.role == TEARDOWN for o in out):
            out.append(Sent(None, "close", TEARDOWN, chunk.time, written - total))
    return out


def bad_time(recording: Recording, steps: list[Step], sent: int) -> float:
    """When the bad step (`bad_step`) went out; the recording's start if none did."""
    fuzzer = _sent(recording, steps, sent)
    bad = bad_step(steps, sent)
    return fuzzer[bad].time if bad < len(fuzzer) else recording.start


def read_exchange(
    recording: Recording,
    steps: list[Step],
    sent: int,
    peer_closed: bool,
    bound: float,
    strict: bool,
    stream: BrokerStream | None = None,
) -> Exchange:
    stream = (stream or BrokerStream()).update(recording)
    fuzzer = _sent(recording, steps, sent)
    bad = bad_step(steps, sent) if fuzzer else None
    dropped = recording.end if peer_closed else None
    return Exchange(fuzzer, list(stream.items), dropped, bad, bound, strict, recording.start)
