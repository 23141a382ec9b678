"""Bytes of one connection -> TraceItems, the way the peers' decoders saw them.

Owns: `ConnectionDecoder`, which keeps one `amqp10.frames.FrameDecoder` per direction,
switches both directions back to protocol headers after a sasl-outcome (5.3.2), and
turns anything the core cannot decode into raw items: on a DecodeError the rest of that
direction is recorded as raw bytes, never dropped. Memory is bounded by
`max_frame_size` (a frame header announcing a bigger frame is a decode error here).
Touches nothing but the core's frame decoder; no I/O.
"""

from __future__ import annotations

from amqp10.errors import DecodeError
from amqp10.frames import Frame, FrameDecoder, ProtocolHeader
from traces.model import CLIENT, SERVER, TraceItem

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024


class _Direction:
    __slots__ = ("after_sasl_frame", "decoder", "error", "pending", "raw_mode")

    def __init__(self, expect_header: bool, max_frame_size: int) -> None:
        self.decoder = FrameDecoder(expect_header=expect_header, max_frame_size=max_frame_size)
        self.pending = bytearray()  # bytes fed to the decoder, not yet returned as items
        self.raw_mode = False
        self.after_sasl_frame = False
        self.error: DecodeError | None = None


class ConnectionDecoder:
    """Feed each direction's bytes in order; get headers, frames and raw runs back."""

    def __init__(
        self,
        connection_id: int,
        expect_header: bool = True,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.connection_id = connection_id
        self.next_index = 0
        self._sides = {
            CLIENT: _Direction(expect_header, max_frame_size),
            SERVER: _Direction(expect_header, max_frame_size),
        }

    def error(self, direction: str) -> DecodeError | None:
        """The decode error that switched `direction` to raw recording, if any."""
        return self._sides[direction].error

    def feed(self, direction: str, data: bytes, time: float) -> list[TraceItem]:
        side = self._sides[direction]
        if not data:
            return []
        if side.raw_mode:
            return [self._item(direction, time, None, bytes(data))]
        side.decoder.feed(data)
        side.pending += data
        items: list[TraceItem] = []
        self._drain(direction, time, items)
        return items

    def lose(self, direction: str, time: float) -> list[TraceItem]:
        """Bytes of `direction` went missing (a capture gap): record the rest as raw."""
        side = self._sides[direction]
        items: list[TraceItem] = []
        if not side.raw_mode:
            side.raw_mode = True
            side.error = DecodeError(side.decoder.offset, "contiguous bytes (capture gap)")
            if side.pending:
                items.append(self._item(direction, time, None, bytes(side.pending)))
                side.pending.clear()
        return items

    def finish(self, time: float) -> list[TraceItem]:
        """Whatever is left undecoded in either direction, as raw items."""
        items: list[TraceItem] = []
        for direction, side in self._sides.items():
            if side.pending:
                items.append(self._item(direction, time, None, bytes(side.pending)))
                side.pending.clear()
        return items

    def _drain(self, direction: str, time: float, items: list[TraceItem]) -> None:
        side = self._sides[direction]
        decoder = side.decoder
        while True:
            try:
                item = decoder.next_item()
            except DecodeError as exc:
                if side.after_sasl_frame and side.pending[:4] == b"AMQP":
                    # A client may pipeline its AMQP header right after its last SASL
                    # frame, before the outcome arrives (5.3.2): it is a header, not junk.
                    side.after_sasl_frame = False
                    decoder.expect_protocol_header()
                    continue
                side.error = exc
                side.raw_mode = True
                if side.pending:
                    items.append(self._item(direction, time, None, bytes(side.pending)))
                    side.pending.clear()
                return
            if item is None:
                return
            raw = item.raw if isinstance(item, Frame) else item.encode()
            del side.pending[: len(raw)]
            items.append(self._item(direction, time, item, raw))
            side.after_sasl_frame = isinstance(item, Frame) and item.type == 1
            if isinstance(item, Frame) and item.name == "sasl-outcome":
                # 5.3.2: after the outcome both peers continue with a protocol header.
                decoder.expect_protocol_header()
                peer = CLIENT if direction == SERVER else SERVER
                peer_side = self._sides[peer]
                if not peer_side.raw_mode:
                    peer_side.decoder.expect_protocol_header()
                    self._drain(peer, time, items)

    def _item(
        self, direction: str, time: float, item: ProtocolHeader | Frame | None, raw: bytes
    ) -> TraceItem:
        index = self.next_index
        self.next_index += 1
        return TraceItem(self.connection_id, direction, index, time, item, raw)
