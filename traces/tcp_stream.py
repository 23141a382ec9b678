"""One direction of a captured TCP connection: its sequence numbers, the bytes in order, and
the capture defects met on the way. The one TCP sequence tracker of the project: reassembly
(traces/reassembly.py) delivers what it returns, triage (spark_triage/check.py) reports
what it counts.

Owns: `HalfStream` (32-bit serial arithmetic, RFC 1982 style; segments ahead of the next
expected byte held until the hole before them fills, within a byte bound; retransmitted and
overlapping bytes trimmed, keeping the bytes seen first) and the defect names it counts into
the dict it is given:
- `out-of-order`: a segment that filled a hole (bytes seen later than bytes after them);
- `retransmit`: a segment wholly below the highest byte seen that filled no hole;
  `overlap`: one that partly did; `conflicting-retransmit`: a resend of a recent segment's
  start and length whose bytes differ (the first copy is the one delivered);
- `sequence-wrap`: the raw sequence number wrapped past 2**32 (not a retransmit);
- `gap`: a hole never filled (at the byte bound or at the end); the bytes after it are still
  delivered, after a `LOST` marker, so the reader can stop decoding that direction.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict

MAX_OUT_OF_ORDER_BYTES = 16 * 1024 * 1024
CONFLICT_MEMORY = 4096  # recent segments remembered to spot a resend with other bytes
LOST = None  # a chunk's payload: the bytes before the next chunk went missing

_MASK = 0xFFFFFFFF
_HALF = 0x80000000


def seq_diff(a: int, b: int) -> int:
    """a - b in 32-bit serial arithmetic (RFC 1982 style), as a signed int."""
    return ((a - b + _HALF) & _MASK) - _HALF


Chunk = tuple[bytes | None, float]  # (in-order bytes, or LOST; capture time)


class HalfStream:
    """One direction's sequence state. `accept` takes a data segment and returns the chunks
    now deliverable in order; `finish` gives up every hole left and returns the rest."""

    __slots__ = (
        "defects",
        "fin",
        "held",
        "held_bytes",
        "high",
        "last_seq",
        "max_held_bytes",
        "next_seq",
        "recent",
    )

    def __init__(
        self, defects: dict[str, int], max_held_bytes: int = MAX_OUT_OF_ORDER_BYTES
    ) -> None:
        self.defects = defects
        self.max_held_bytes = max_held_bytes
        self.next_seq: int | None = None  # the next byte to deliver
        self.high: int | None = None  # one past the highest byte seen
        self.last_seq: int | None = None  # the raw seq of the last data segment
        self.held: dict[int, tuple[bytes, float]] = {}  # seq -> segment ahead of next_seq
        self.held_bytes = 0
        self.recent: OrderedDict[int, tuple[int, int]] = OrderedDict()  # seq -> (len, crc)
        self.fin = False

    def count(self, name: str, times: int = 1) -> None:
        self.defects[name] = self.defects.get(name, 0) + times

    def syn(self, seq: int) -> None:
        """A SYN: the stream starts after `seq`; what was held belongs to an older one."""
        self.next_seq = self.high = (seq + 1) & _MASK
        self.last_seq = seq
        self.held.clear()
        self.held_bytes = 0
        self.recent.clear()

    def accept(self, seq: int, payload: bytes, time: float) -> list[Chunk]:
        last = self.last_seq
        if last is not None and seq < last and last - seq > _HALF:
            self.count("sequence-wrap")
        self.last_seq = seq
        size = len(payload)
        if self.next_seq is None:  # the start of this direction was not captured
            self.next_seq = self.high = seq
        above = seq_diff(seq, self.high)  # type: ignore[arg-type]
        recent = self.recent
        crc = None
        if above < 0:
            crc = self._classify(seq, size, payload, above)
        if seq not in recent:
            recent[seq] = (size, zlib.crc32(payload) if crc is None else crc)
            if len(recent) > CONFLICT_MEMORY:
                recent.popitem(last=False)
        if above + size > 0:
            self.high = (seq + size) & _MASK
        return self._reassemble(seq, payload, time)

    def finish(self, time: float) -> list[Chunk]:
        """The end of the capture for this direction: each hole left is a gap; the bytes
        after it are delivered behind a LOST marker."""
        chunks: list[Chunk] = []
        while self.held:
            chunks.extend(self._give_up(time))
        return chunks

    # -- defects -----------------------------------------------------------------------
    def _classify(self, seq: int, size: int, payload: bytes, above: int) -> int | None:
        """A segment starting below the highest byte seen: it fills a hole, or repeats
        bytes (all of them: retransmit; some: overlap). Returns the crc it computed."""
        start = seq_diff(seq, self.next_seq)  # type: ignore[arg-type]
        if start + size > 0 and self.held and self._fills_hole(start, start + size):
            self.count("out-of-order")
            return None
        self.count("retransmit" if above + size <= 0 else "overlap")
        seen = self.recent.get(seq)
        if seen is None or seen[0] != size:
            return None
        crc = zlib.crc32(payload)
        if seen[1] != crc:
            self.count("conflicting-retransmit")
        return crc

    def _fills_hole(self, start: int, end: int) -> bool:
        """Whether [start, end) (relative to next_seq) meets a byte between next_seq and the
        highest byte seen that no held segment covers."""
        base = self.next_seq
        covered = sorted(
            (seq_diff(s, base), seq_diff(s, base) + len(p))  # type: ignore[arg-type]
            for s, (p, _t) in self.held.items()
        )
        cursor = 0
        for low, top in covered:
            if low > cursor and start < low and end > cursor:
                return True
            cursor = max(cursor, top)
        high = seq_diff(self.high, base)  # type: ignore[arg-type]
        return cursor < high and start < high and end > cursor

    # -- reassembly --------------------------------------------------------------------
    def _reassemble(self, seq: int, payload: bytes, time: float) -> list[Chunk]:
        diff = seq_diff(seq, self.next_seq)  # type: ignore[arg-type]
        if diff > 0:
            held = self.held
            if seq not in held or len(held[seq][0]) < len(payload):
                held[seq] = (payload, time)
                self.held_bytes += len(payload)
            if self.held_bytes > self.max_held_bytes:
                return self._give_up(time)
            return []
        if -diff >= len(payload):
            return []  # bytes already delivered
        if diff < 0:
            payload = payload[-diff:]
        chunks: list[Chunk] = [(payload, time)]
        self.next_seq = (self.next_seq + len(payload)) & _MASK  # type: ignore[operator]
        if self.held:
            self._drain(chunks)
        return chunks

    def _drain(self, chunks: list[Chunk]) -> None:
        held = self.held
        progress = True
        while held and progress:
            progress = False
            for seq in sorted(held, key=lambda s: seq_diff(s, self.next_seq)):  # type: ignore[arg-type]
                diff = seq_diff(seq, self.next_seq)  # type: ignore[arg-type]
                if diff > 0:
                    break
                payload, time = held.pop(seq)
                self.held_bytes -= len(payload)
                if -diff < len(payload):
                    payload = payload[-diff:] if diff else payload
                    chunks.append((payload, time))
                    self.next_seq = (self.next_seq + len(payload)) & _MASK  # type: ignore[operator]
                    progress = True
                    break

    def _give_up(self, time: float) -> list[Chunk]:
        """The hole before the first held segment will not fill: a gap; go on after it."""
        self.count("gap")
        base = self.next_seq
        self.next_seq = min(self.held, key=lambda s: seq_diff(s, base))  # type: ignore[arg-type]
        chunks: list[Chunk] = [(LOST, time)]
        self._drain(chunks)
        return chunks
