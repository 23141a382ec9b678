"""The connection monitor: one connection's bytes, both directions -> items -> the checker.

Owns: `ConnectionMonitor`, the one place that turns what crossed a connection into
`TraceItem`s with their origin and feeds them to `amqp10.checker.Checker`; `TraceItem`
(a protocol header, frame, or run of undecodable raw bytes, with origin, index, time and
the exact bytes) and its `KIND_*` values; `MonitorOutput` and `Note`.

Decoding, per direction, the way the peers' decoders saw the bytes:
- one `amqp10.frames.FrameDecoder` per direction, fed in any chunking;
- after a sasl-outcome both directions expect a protocol header again (5.3.2), and a
  client's AMQP header pipelined right after its last SASL frame, before the outcome
  arrived, is a header, not junk;
- `expect_header=None` sniffs each direction's first bytes: 'AMQP' means the stream
  starts with a protocol header, anything else that the capture began mid-connection;
- whatever the core cannot decode becomes raw items: after a DecodeError the rest of
  that direction is recorded raw, never dropped; `lose()` does the same for a capture
  gap; `finish()` returns what is left undecoded. Memory per direction is bounded by
  `max_frame_size` (a frame header announcing a bigger frame is a decode error here).

Judging (`check=True`): headers and frames go to the checker in trace order with the
trace's own index, so every violation's `frame_index` is an item index. Raw bytes are not
fed; the first raw item of a direction gives a `Note`. A connection whose first item is a
frame (the capture missed its start) is not checked at all: the peers' state at that
frame is unknown (one `Note`). `violations_of` keeps only the violations of one origin
(e.g. `SERVER`: the broker's, for a conformance run). `finish()` runs the checker's
end-of-trace rules (idle timeout, liveness). `observe(item)` judges items decoded
elsewhere (a frame log); `judge(item)` does the same and returns None when there
is nothing to say; `judge_run(items)` judges a run of them in one call.

Pure: no I/O, no clock (time comes in as `now`); imports only `amqp10`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amqpspec.amqp10.checker import Checker, Violation
from amqpspec.amqp10.errors import DecodeError, ErrorKind, kept
from amqpspec.amqp10.frames import Frame, FrameDecoder, FrameType, ProtocolHeader
from amqpspec.amqp10.origins import CLIENT, ORIGINS, SERVER, other

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024

# TraceItem.kind values
KIND_HEADER = "protocol-header"
KIND_FRAME = "frame"
KIND_RAW = "raw"

_MAGIC = b"AMQP"


@dataclass(slots=True)
class TraceItem:
    """One thing that crossed a connection: a header, a frame, or raw undecodable bytes.

    `direction` is the origin (`CLIENT` or `SERVER`); `item` is the decoded ProtocolHeader
    or Frame, or None for raw bytes; `raw` always holds the exact bytes as they were
    relayed; `time` is the caller's time (POSIX seconds in traces) of the chunk that
    completed it; `index` counts items per connection, both directions, from 0.
    """

    connection_id: int
    direction: str
    index: int
    time: float
    item: ProtocolHeader | Frame | None
    raw: bytes

    @property
    def kind(self) -> str:
        item = self.item
        if item is None:
            return KIND_RAW
        if type(item) is Frame:
            return KIND_FRAME
        if isinstance(item, ProtocolHeader):
            return KIND_HEADER
        return KIND_FRAME

    @property
    def name(self) -> str:
        """'flow', 'empty', 'sasl-init', 'protocol-header' or 'raw'."""
        item = self.item
        if type(item) is Frame or isinstance(item, Frame):
            return item.name
        return self.kind


@dataclass(frozen=True, slots=True)
class Note:
    """Why part of a connection was not judged; `index` is the item it is about."""

    index: int
    text: str


@dataclass(slots=True)
class MonitorOutput:
    """What one call to the monitor produced, in trace order within each list."""

    items: list[TraceItem] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.items or self.violations or self.notes)


class _Direction:
    __slots__ = ("after_sasl_frame", "decoder", "error", "noted", "pending", "raw_mode", "sniff")

    def __init__(self, expect_header: bool | None, max_frame_size: int) -> None:
        self.decoder = FrameDecoder(bool(expect_header), max_frame_size)
        self.sniff = expect_header is None  # decide from the first bytes
        self.pending = bytearray()  # bytes fed to the decoder, not yet returned as items
        self.raw_mode = False
        self.after_sasl_frame = False
        self.error: DecodeError | None = None
        self.noted = False  # a Note said this direction is not checked from here on


class ConnectionMonitor:
    """Feed each direction's bytes in order; get items, violations and notes back.

    `feed(direction, data, now)` for every chunk as it crossed (either direction, any
    chunking), `lose(direction, now)` where a capture lost bytes, `finish(now)` once at
    the end. `check=False` only decodes (no checker, no notes).
    """

    def __init__(
        self,
        connection_id: int = 0,
        *,
        expect_header: bool | None = True,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        check: bool = True,
        liveness_bound: float | None = None,
        violations_of: str | None = None,
    ) -> None:
        if violations_of is not None and violations_of not in ORIGINS:
            raise ValueError(f"violations_of must be one of {ORIGINS} or None")
        self.connection_id = connection_id
        self.next_index = 0
        self.checker = Checker(liveness_bound) if check else None
        self.violations_of = violations_of
        self.unchecked = False  # the connection's start was not seen: nothing is judged
        self.finished = False
        self.last_time: float | None = None
        self._started = False
        self._sides = {
            CLIENT: _Direction(expect_header, max_frame_size),
            SERVER: _Direction(expect_header, max_frame_size),
        }

    # --- public API -------------------------------------------------------------------
    def decode_error(self, direction: str) -> DecodeError | None:
        """The decode error (or capture gap) that switched `direction` to raw recording."""
        return self._sides[direction].error

    def feed(self, direction: str, data: bytes, now: float) -> MonitorOutput:
        """Bytes sent by `direction` (CLIENT or SERVER), in order, at time `now`."""
        self._check_open()
        side = self._sides[direction]
        out = MonitorOutput()
        if not data:
            return out
        self.last_time = now
        if side.raw_mode:
            self._emit(direction, now, None, bytes(data), out)
            return out
        if side.sniff:
            side.pending += data
            head = bytes(side.pending[:4])
            if len(head) < 4 and _MAGIC.startswith(head):
                return out  # too few bytes to tell a protocol header from a frame
            side.sniff = False
            if head == _MAGIC:
                side.decoder.expect_protocol_header()
            side.decoder.feed(side.pending)
        else:
            side.decoder.feed(data)
            side.pending += data
        self._drain(direction, now, out)
        return out

    def lose(self, direction: str, now: float) -> MonitorOutput:
        """Bytes of `direction` went missing (a capture gap): the rest of it is raw."""
        self._check_open()
        side = self._sides[direction]
        out = MonitorOutput()
        if not side.raw_mode:
            side.raw_mode = True
            side.error = DecodeError(
                side.decoder.offset, "contiguous bytes (capture gap)", kind=ErrorKind.CAPTURE_GAP
            )
            self._flush_pending(direction, now, out)
        return out

    def finish(self, now: float | None = None) -> MonitorOutput:
        """End of the connection at `now` (None: the time of the last bytes fed): what is
        left undecoded in either direction as raw items, then the checker's end-of-trace
        rules. Later calls return nothing."""
        out = MonitorOutput()
        if self.finished:
            return out
        self.finished = True
        stamp = now if now is not None else self.last_time or 0.0
        for direction in ORIGINS:
            self._flush_pending(direction, stamp, out)
        if self.checker is not None and not self.unchecked:
            self._keep(self.checker.finish(now), out)
        return out

    def observe(self, item: TraceItem) -> MonitorOutput:
        """Judge an item decoded elsewhere (e.g. read back from a frame log), as if this
        monitor had decoded it; do not mix with `feed` on one monitor."""
        out = MonitorOutput([item])
        self._judge_observed(item, out)
        return out

    def judge(self, item: TraceItem) -> MonitorOutput | None:
        """`observe(item)` for a caller that keeps the item itself: None when it gave no
        violation and no note, else the output (its `items` empty). Runs of decoded items
        go to the checker in one call through `judge_run`."""
        out = MonitorOutput()
        self._judge_observed(item, out)
        return out if out.violations or out.notes else None

    def _judge_observed(self, item: TraceItem, out: MonitorOutput) -> None:
        if self.finished:
            self._check_open()
        self.next_index = item.index + 1
        self.last_time = item.time
        self._judge(item, out)

    def judge_run(self, items: list[TraceItem]) -> list[tuple[int, MonitorOutput]]:
        """`judge` each of a run of items (in trace order): (position in the run, its
        output) for the items that gave a violation or note; one call per run."""
        checker = self.checker
        if self.finished or checker is None or not self._started or self.unchecked or not items:
            found = []
            for position, item in enumerate(items):
                out = self.judge(item)
                if out is not None:
                    found.append((position, out))
            return found
        found = []
        start = 0
        for position, item in enumerate(items):  # decoded runs go to the checker in one call
            if item.item is None:
                found += self._judge_decoded(checker, items, start, position)
                out = self.judge(item)
                if out is not None:
                    found.append((position, out))
                start = position + 1
        found += self._judge_decoded(checker, items, start, len(items))
        return found

    def _judge_decoded(
        self, checker: Checker, items: list[TraceItem], start: int, end: int
    ) -> list[tuple[int, MonitorOutput]]:
        if start >= end:
            return []
        run = items[start:end] if start or end < len(items) else items
        last = run[-1]
        self.next_index = last.index + 1
        self.last_time = last.time
        found = []
        for position, violations in checker.feed_run(run):
            out = MonitorOutput()
            self._keep(violations, out)
            if out.violations:
                found.append((start + position, out))
        return found

    # --- decoding ---------------------------------------------------------------------
    def _drain(self, direction: str, now: float, out: MonitorOutput) -> None:
        side = self._sides[direction]
        decoder = side.decoder
        pending = side.pending
        items = out.items
        judge = self._judge if self.checker is not None else None
        done = 0  # bytes at the start of `pending` returned as items: deleted once, not per item
        try:
            while True:
                try:
                    item = decoder.next_item()
                except DecodeError as exc:
                    del pending[:done]
                    done = 0
                    if side.after_sasl_frame and pending[:4] == _MAGIC:
                        # A client may pipeline its AMQP header right after its last SASL
                        # frame, before the outcome arrives (5.3.2): a header, not junk.
                        side.after_sasl_frame = False
                        decoder.expect_protocol_header()
                        continue
                    side.error = kept(exc)  # kept past the except: no frames
                    side.raw_mode = True
                    self._flush_pending(direction, now, out)
                    return
                if item is None:
                    return
                if isinstance(item, Frame):
                    raw = item.raw
                    sasl = item.type == FrameType.SASL
                else:
                    raw = item.encode()
                    sasl = False
                done += len(raw)
                trace_item = TraceItem(
                    self.connection_id, direction, self.next_index, now, item, raw
                )
                self.next_index += 1
                items.append(trace_item)
                if judge is not None:
                    judge(trace_item, out)
                side.after_sasl_frame = sasl
                if sasl and item.name == "sasl-outcome":
                    # 5.3.2: after the outcome both peers continue with a protocol header.
                    decoder.expect_protocol_header()
                    peer = other(direction)
                    peer_side = self._sides[peer]
                    if not peer_side.raw_mode and not peer_side.sniff:
                        peer_side.decoder.expect_protocol_header()
                        self._drain(peer, now, out)
        finally:
            del pending[:done]

    def _flush_pending(self, direction: str, now: float, out: MonitorOutput) -> None:
        side = self._sides[direction]
        if side.pending:
            self._emit(direction, now, None, bytes(side.pending), out)
            side.pending.clear()

    def _emit(
        self,
        direction: str,
        now: float,
        item: ProtocolHeader | Frame | None,
        raw: bytes,
        out: MonitorOutput,
    ) -> None:
        trace_item = TraceItem(self.connection_id, direction, self.next_index, now, item, raw)
        self.next_index += 1
        out.items.append(trace_item)
        if self.checker is not None:
            self._judge(trace_item, out)

    # --- judging ----------------------------------------------------------------------
    def _judge(self, item: TraceItem, out: MonitorOutput) -> None:
        if self.checker is None:
            return
        if not self._started:
            self._started = True
            if isinstance(item.item, Frame):
                # 2.2: a connection starts with a protocol header. Without it the capture
                # began mid-connection: the peers' state is unknown, so nothing is judged.
                self.unchecked = True
                out.notes.append(
                    Note(
                        item.index,
                        "the capture starts mid-connection (no protocol header); not checked",
                    )
                )
        if self.unchecked:
            return
        if item.item is None:
            side = self._sides[item.direction]
            if not side.noted:
                side.noted = True
                why = f": {side.error}" if side.error is not None else ""
                out.notes.append(
                    Note(
                        item.index,
                        f"{item.direction} bytes from here on could not be decoded "
                        f"({len(item.raw)} bytes{why}); not checked",
                    )
                )
            return
        self._keep(self.checker.feed(item.direction, item.item, item.time, item.index), out)

    def _keep(self, violations: list[Violation], out: MonitorOutput) -> None:
        if not violations:
            return
        wanted = self.violations_of
        out.violations += (v for v in violations if wanted is None or v.origin == wanted)

    def _check_open(self) -> None:
        if self.finished:
            raise RuntimeError("the connection monitor is finished")
