"""The checker (oracle): feed it one connection's frames, both directions, in order.

Owns: `Checker` (dispatch, framing 2.2/2.3, SASL order 5.3.2, connection 2.4/2.7.1/2.7.9,
idle timeout 2.4.5, the time-based sweeps) and `check_connection`. Sessions, links and
settlement live in `sessions.py`, `links.py` (the time-based link rules in
`liveness.py`) and `settlement.py` (mixins over the same state). Pure: time only comes in
as the `time` argument; no I/O.

Conservative where frames race: a frame of one side can only depend on frames of the
other side that appear before it in the trace, and which of those it had read is
unknown unless proven (see `horizons.py`). Rules that need time are checked only when
the caller gives times; liveness-style rules (stall, unanswered drain/echo/close) only
when `liveness_bound` is set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from amqpspec.amqp10.checker.fastlane import FastLane
from amqpspec.amqp10.checker.fields import FieldRules
from amqpspec.amqp10.checker.links import LinkRules
from amqpspec.amqp10.checker.liveness import LivenessRules
from amqpspec.amqp10.checker.rules import Violation, violation
from amqpspec.amqp10.checker.sessions import SessionRules
from amqpspec.amqp10.checker.settlement import SettlementRules
from amqpspec.amqp10.checker.state import Link, Peer, Session
from amqpspec.amqp10.frames import Frame, FrameType, ProtocolHeader, ProtocolId
from amqpspec.amqp10.origins import CLIENT, ORIGINS, SERVER, other
from amqpspec.amqp10.spec import MIN_MAX_FRAME_SIZE

_NO_LIMIT = 0xFFFFFFFF
_MANDATORY: dict[type, tuple[str, ...]] = {}


def _mandatory(kind: type) -> tuple[str, ...]:
    """The attribute names of a performative type's mandatory fields (remembered)."""
    spec = getattr(kind, "SPEC", None)
    fields = spec.fields if spec is not None else ()
    names = _MANDATORY[kind] = tuple(f.name.replace("-", "_") for f in fields if f.mandatory)
    return names


class _Lanes(dict):
    """Performative type -> (mandatory field names, handler) when the fast lane takes its
    frames (a transfer's handler is None: `_fast_transfer`), else None. Filled lazily:
    whatever class the decoder made a frame with, its NAME says what it is."""

    def __missing__(self, kind: type) -> tuple[tuple[str, ...], Any] | None:
        name = getattr(kind, "NAME", None)
        lane = None
        if name in ("transfer", "flow", "disposition"):
            handler = None if name == "transfer" else Checker._HANDLERS[name]
            lane = (_mandatory(kind), handler)
        self[kind] = lane
        return lane


_LANES = _Lanes()


def _complete(performative: Any) -> bool:
    """All mandatory fields present. The wire decoder enforces this; frames built in
    memory (fuzzers) may not, and the checker judges protocol state, not encodings."""
    names = _MANDATORY.get(type(performative))
    if names is None:
        names = _mandatory(type(performative))
    for name in names:  # noqa: SIM110 - a loop, not all(genexpr): runs for every frame
        if getattr(performative, name, None) is None:
            return False
    return True


class Checker(SessionRules, LinkRules, LivenessRules, SettlementRules, FieldRules, FastLane):
    """Checks one connection. `feed` each item in trace order; `finish` at the end.

    `fast=False` turns off the fast lane (fastlane.py): every frame then goes through the
    general rule code; the verdicts are the same either way (the differential tests)."""

    def __init__(self, liveness_bound: float | None = None, *, fast: bool = True) -> None:
        self.liveness_bound = liveness_bound
        self.fast = fast
        self.violations: list[Violation] = []
        self.index = -1
        self.now: float | None = None
        self.peers: dict[str, Peer] = {CLIENT: Peer(), SERVER: Peer()}
        # proven[o]: trace index up to which peer `o` provably read the other side's frames
        self.proven: dict[str, int] = {CLIENT: -1, SERVER: -1}
        # Live links and sessions (by id), dropped once both ends detached / ended.
        self._links: dict[int, Link] = {}
        self._sessions: dict[int, Session] = {}
        self._close_reported: set[str] = set()
        self._next_sweep: float | None = None
        self._new: list[Violation] = []
        self._finished = False

    # --- public API -------------------------------------------------------------------
    def feed(
        self,
        origin: str,
        item: ProtocolHeader | Frame,
        time: float | None = None,
        index: int | None = None,
    ) -> list[Violation]:
        """Check the next item of the trace, sent by `origin`; returns the new violations.

        `index` is the item's position in the caller's trace (default: one after the last
        item fed). A caller whose trace holds items the checker is not shown (undecodable
        bytes) passes it, so violations cite the caller's own numbering; it must increase.
        """
        if origin not in ORIGINS:
            raise ValueError(f"origin must be 'client' or 'server', got {origin!r}")
        if index is None:
            self.index += 1
        elif index > self.index:
            self.index = index
        else:
            raise ValueError(f"trace index {index} after index {self.index}")
        return self._feed(origin, item, time)

    def feed_run(self, items: Iterable[Any]) -> list[tuple[int, list[Violation]]]:
        """`feed` each of a run of items in order: objects with `direction` (the origin),
        `item`, `time` and `index` (e.g. `amqp10.monitor.TraceItem`), each index given.
        Returns (position in the run, its new violations) for the items that gave any:
        one call per run, not per item, for the common case of silent frames."""
        found: list[tuple[int, list[Violation]]] = []
        feed, fast_frame, peers = self._feed, self._fast_frame, self.peers
        lanes = _LANES if self.fast and self.liveness_bound is None else {}
        position = -1
        for item in items:
            position += 1
            origin = item.direction
            index = item.index
            if origin not in ORIGINS or index is None or index <= self.index:
                new = self.feed(origin, item.item, item.time, index)  # raises
            else:
                self.index = index
                frame, time = item.item, item.time
                lane = lanes.get(type(frame.performative)) if type(frame) is Frame else None
                if lane is None or time is None:
                    new = feed(origin, frame, time)
                else:  # `_feed` of a fast-lane frame with its time, no liveness sweeps
                    self._new = new = []
                    peer = peers[origin]
                    self.now = time
                    if not fast_frame(
                        origin, peer, frame, frame.performative, lane[0], lane[1], time, index
                    ):
                        self._on_frame(origin, peer, frame, time)
                    peer.last_time = time
            if new:
                found.append((position, new))
        return found

    def _feed(self, origin: str, item: ProtocolHeader | Frame, time: float | None) -> list:
        """`feed` once `origin` and the index are checked and the index recorded."""
        self._new = new = []
        peer = self.peers[origin]
        if time is not None:
            self.now = time
        if type(item) is Frame:
            performative = item.performative
            lane = _LANES[type(performative)] if self.fast else None
            if lane is None or not self._fast_frame(
                origin, peer, item, performative, lane[0], lane[1], time, self.index
            ):
                self._on_frame(origin, peer, item, time)
        elif isinstance(item, ProtocolHeader):
            self._on_header(origin, peer, item)
        elif isinstance(item, Frame):
            self._on_frame(origin, peer, item, time)
        else:
            raise TypeError(f"expected a ProtocolHeader or Frame, got {type(item).__name__}")
        if time is not None:
            peer.last_time = time
            if self.liveness_bound is not None and (
                self._next_sweep is None or time >= self._next_sweep
            ):
                self._sweep(time)
                self._next_sweep = time + self.liveness_bound / 4
        return new

    def finish(self, now: float | None = None) -> list[Violation]:
        """End of trace: idle timeout and the liveness-style rules. Returns new violations."""
        self._new = new = []
        if self._finished:
            return new
        self._finished = True
        now = self.now if now is None else now
        if now is not None:
            for origin in ORIGINS:
                self._check_idle(origin, self.peers[origin], now, self.index)
            if self.liveness_bound is not None:
                self._sweep(now)
        self._finish_proven()
        return new

    def note_available(
        self, sender_origin: str, channel: int, handle: int, count: int | None = None
    ) -> None:
        """The caller knows the sender of this link has messages (`count`, None = some).

        `channel` and `handle` are those the sender uses in its own frames. Feeds the
        liveness rule like a sender flow's `available`.
        """
        end = self.peers[sender_origin].sessions.get(channel)
        link = end.handles.get(handle) if end is not None else None
        if link is None:
            raise KeyError(f"no attached link on channel {channel} handle {handle}")
        link.caller_available = -1 if count is None else count
        if link.progress_time is None or self.now is not None:
            link.progress_time = self.now

    # --- reporting ----------------------------------------------------------------------
    def _report(self, rule_id: str, frame_index: int, origin: str, reason: str) -> None:
        found = violation(rule_id, frame_index, origin, reason)
        self.violations.append(found)
        self._new.append(found)

    def _prove(self, origin: str, frame_index: int) -> None:
        """`origin` has provably read every frame of its peer up to `frame_index`."""
        if frame_index > self.proven[origin]:
            self.proven[origin] = frame_index

    # --- framing (2.2, 2.3) and SASL (5.3.2) --------------------------------------------
    def _on_header(self, origin: str, peer: Peer, header: ProtocolHeader) -> None:
        idx = self.index
        if peer.tls:
            return
        if peer.closed:
            self._report("connection.frame-after-close", idx, origin, "protocol header after close")
            return
        if peer.layer is None:
            if header.protocol_id == ProtocolId.TLS:
                peer.tls = True  # what follows is TLS records, not frames
            else:
                peer.layer = "sasl" if header.protocol_id == ProtocolId.SASL else "amqp"
            return
        if peer.layer == "sasl" and header.protocol_id == ProtocolId.AMQP:
            # The server sends it after its outcome; a client after the server's outcome,
            # or pipelined after its own sasl-init.
            partner = self.peers[other(origin)]
            done = peer.sasl_outcome is not None or (
                partner.sasl_outcome is not None or (origin == CLIENT and peer.sasl_init)
            )
            if not done:
                self._report(
                    "security.sasl-order", idx, origin, "AMQP header before the SASL outcome"
                )
            peer.layer = "amqp"
            return
        self._report(
            "framing.unexpected-header",
            idx,
            origin,
            f"protocol header id {header.protocol_id} inside the {peer.layer} layer",
        )

    def _on_frame(self, origin: str, peer: Peer, frame: Frame, time: float | None) -> None:
        idx = self.index
        if peer.tls:
            return
        if time is not None:
            self._check_idle(origin, peer, time, idx)
        if peer.closed:
            self._report(
                "connection.frame-after-close",
                idx,
                origin,
                f"{frame.name} frame after this peer's close (frame {peer.close_idx})",
            )
            return
        if peer.layer is None:
            self._report(
                "framing.header-first",
                idx,
                origin,
                f"{frame.name} frame before any protocol header",
            )
            peer.layer = "amqp"
        performative = frame.performative
        name = frame.name
        sasl_body = name.startswith("sasl-")
        self._check_frame_shape(origin, frame, name, sasl_body, idx)
        is_sasl = sasl_body or frame.type == FrameType.SASL
        if is_sasl:
            if peer.layer != "sasl":
                self._report("security.sasl-order", idx, origin, f"{name} frame outside SASL")
            elif name == "sasl-outcome":
                peer.sasl_outcome = performative
            elif name == "sasl-init":
                peer.sasl_init = True
            return
        if peer.layer == "sasl":
            self._report(
                "security.sasl-order", idx, origin, f"AMQP {name} frame before the AMQP header"
            )
            return
        if performative is None:
            return  # empty frame (heartbeat)
        if peer.open is None and name != "open" and peer.open_idx != -2:
            self._report("connection.open-first", idx, origin, f"{name} before this peer's open")
            peer.open_idx = -2  # report once
        handler = self._HANDLERS.get(name)
        # open's one mandatory field (container-id) is a rule of its own
        if handler is not None and (name == "open" or _complete(performative)):
            handler(self, origin, peer, frame, idx, time)

    def _check_frame_shape(
        self, origin: str, frame: Frame, name: str, sasl_body: bool, idx: int
    ) -> None:
        """`sasl_body`: the performative's name says SASL ('sasl-...')."""
        raw = frame.raw
        if len(raw) >= 8:
            doff = raw[4]
            if doff < 2 or 4 * doff > len(raw):
                self._report("framing.doff", idx, origin, f"DOFF {doff} in a {len(raw)}-byte frame")
        if frame.type not in (FrameType.AMQP, FrameType.SASL):
            self._report("framing.wrong-frame-type", idx, origin, f"frame type {frame.type:#x}")
        elif frame.performative is not None and sasl_body != (frame.type == FrameType.SASL):
            kind = "SASL" if frame.type == FrameType.SASL else "AMQP"
            self._report("framing.wrong-frame-type", idx, origin, f"{name} in a {kind} frame")
        size = frame.size or len(raw)
        if not size:
            return  # built in memory without a size: nothing to check
        partner = self.peers[other(origin)]
        if partner.open is None:
            if size > MIN_MAX_FRAME_SIZE:
                self._report(
                    "framing.pre-open-frame-size",
                    idx,
                    origin,
                    f"{size}-byte {name} frame before the partner's open (limit 512)",
                )
            return
        limit = partner.open.max_frame_size
        # 2.7.1: every peer takes frames of MIN-MAX-FRAME-SIZE (512); a partner that
        # advertises less does not shrink that (found by the fuzzer: max-frame-size 1)
        limit = _NO_LIMIT if limit is None else max(limit, MIN_MAX_FRAME_SIZE)
        if size > limit:
            self._report(
                "framing.max-frame-size",
                idx,
                origin,
                f"{size}-byte {name} frame, partner's max-frame-size is {limit}",
            )

    # --- connection (2.4, 2.7.1, 2.7.9) -------------------------------------------------
    def _on_open(self, origin: str, peer: Peer, frame: Frame, idx: int, time: float | None):
        open_ = frame.performative
        if peer.open is not None:
            self._report("connection.open-channel", idx, origin, "second open on the connection")
            return
        if frame.channel != 0:
            self._report("connection.open-channel", idx, origin, f"open on channel {frame.channel}")
        if open_.container_id is None:
            self._report("connection.container-id", idx, origin, "open without container-id")
        peer.open = open_
        peer.open_idx = idx
        peer.open_time = time

    def _on_close(self, origin: str, peer: Peer, frame: Frame, idx: int, time: float | None):
        peer.closed = True
        peer.close_idx = idx
        peer.close_time = time

    def _check_idle(self, origin: str, peer: Peer, time: float, idx: int) -> None:
        """2.4.5: something must be sent within the partner's advertised idle-time-out."""
        partner = self.peers[other(origin)]
        if peer.closed or partner.closed or partner.open is None:
            return
        timeout_ms = partner.open.idle_time_out
        if not timeout_ms:
            return
        starts = [t for t in (peer.last_time, partner.open_time) if t is not None]
        if not starts:
            return
        silent = time - max(starts)
        if silent > timeout_ms / 1000:
            self._report(
                "connection.idle-timeout",
                idx,
                origin,
                f"nothing sent for {silent:.3f} s, partner's idle-time-out is "
                f"{timeout_ms / 1000:.3f} s",
            )
            peer.last_time = time  # one report per silent gap

    # --- time-based sweeps and end of trace -------------------------------------------
    def _sweep(self, now: float) -> None:
        bound = self.liveness_bound
        assert bound is not None
        for origin in ORIGINS:
            peer, partner = self.peers[origin], self.peers[other(origin)]
            if (
                peer.closed
                and not partner.closed
                and peer.close_time is not None
                and now - peer.close_time >= bound
                and origin not in self._close_reported
            ):
                self._report(
                    "connection.close-unanswered",
                    peer.close_idx,
                    other(origin),
                    f"no close answered the close of frame {peer.close_idx} within {bound} s",
                )
                self._close_reported.add(origin)
        if self.peers[CLIENT].closed or self.peers[SERVER].closed:
            return
        for link in list(self._links.values()):
            self._link_sweep(link, now, bound)
        for session in list(self._sessions.values()):
            self._session_sweep(session, now, bound)

    def _finish_proven(self) -> None:
        """End of trace: requests a peer provably read and never answered. A close from
        either peer ends every link (2.7.9): nothing is owed after it (as in `_sweep`)."""
        if self.peers[CLIENT].closed or self.peers[SERVER].closed:
            return
        for link in list(self._links.values()):
            self._link_finish(link)


Checker._HANDLERS = {
    "open": Checker._on_open,
    "close": Checker._on_close,
    "begin": SessionRules._on_begin,
    "end": SessionRules._on_end,
    "flow": SessionRules._on_flow,
    "transfer": SessionRules._on_transfer,
    "attach": LinkRules._on_attach,
    "detach": LinkRules._on_detach,
    "disposition": SettlementRules._on_disposition,
}


def check_connection(
    items: Iterable[tuple[str, Any] | tuple[str, Any, float]],
    liveness_bound: float | None = None,
) -> list[Violation]:
    """Every violation in one connection's trace: (origin, item[, time]) tuples in order."""
    checker = Checker(liveness_bound)
    for entry in items:
        if len(entry) == 3:
            checker.feed(entry[0], entry[1], entry[2])
        else:
            checker.feed(entry[0], entry[1])
    checker.finish()
    return checker.violations
