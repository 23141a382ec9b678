"""Frame-sequence builders for the checker tests (test_checker_rules.py, test_checker_credit.py).

Frames go through encode_frame + decode_frame, so they carry real SIZE/DOFF like the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10 import composites
from amqpspec.amqp10.checker import Checker, Violation
from amqpspec.amqp10.frames import (
    AMQP_HEADER,
    Frame,
    FrameType,
    ProtocolHeader,
    decode_frame,
    encode_frame,
)

C, S = "client", "server"


def wire(performative: Any, channel: int = 0, payload: bytes = b"", frame_type: int = 0) -> Frame:
    return decode_frame(encode_frame(performative, channel, payload, frame_type))


@dataclass
class Trace:
    """A connection trace under construction: (origin, item, time) in order."""

    items: list[tuple[str, ProtocolHeader | Frame, float | None]] = field(default_factory=list)
    next_out: dict[str, int] = field(default_factory=lambda: {C: 0, S: 0})
    next_delivery: dict[str, int] = field(default_factory=lambda: {C: 0, S: 0})

    def add(self, origin: str, item: ProtocolHeader | Frame, time: float | None = None) -> int:
        self.items.append((origin, item, time))
        return len(self.items) - 1

    def frame(
        self,
        origin: str,
        performative: Any,
        channel: int = 0,
        payload: bytes = b"",
        time: float | None = None,
        frame_type: int = FrameType.AMQP,
    ) -> int:
        return self.add(origin, wire(performative, channel, payload, frame_type), time)

    def header(self, origin: str, header: ProtocolHeader = AMQP_HEADER, time=None) -> int:
        return self.add(origin, header, time)

    # --- common openings ---------------------------------------------------------------
    def headers(self, time: float | None = None) -> Trace:
        """Both protocol headers, the client's first."""
        self.header(C, time=time)
        self.header(S, time=time)
        return self

    def connect(self, time: float | None = None, client_open=None, server_open=None) -> Trace:
        self.headers(time)
        self.frame(C, client_open or composites.Open(container_id="client"), time=time)
        self.frame(S, server_open or composites.Open(container_id="server"), time=time)
        return self

    def begin(self, window: int = 1000, time: float | None = None, handle_max=None) -> Trace:
        extra = {} if handle_max is None else {"handle_max": handle_max}
        self.frame(
            C,
            composites.Begin(
                next_outgoing_id=0, incoming_window=window, outgoing_window=window, **extra
            ),
            time=time,
        )
        self.frame(
            S,
            composites.Begin(
                remote_channel=0,
                next_outgoing_id=0,
                incoming_window=window,
                outgoing_window=window,
                **extra,
            ),
            time=time,
        )
        return self

    def link(
        self,
        sender: str = S,
        name: str = "q",
        handle: int = 0,
        snd_settle_mode: int = 2,
        rcv_settle_mode: int = 0,
        initial_delivery_count: int = 0,
        time: float | None = None,
    ) -> Trace:
        """The receiver attaches first, then the sender answers."""
        receiver = C if sender == S else S
        modes = {"snd_settle_mode": snd_settle_mode, "rcv_settle_mode": rcv_settle_mode}
        self.frame(
            receiver,
            composites.Attach(
                name=name, handle=handle, role=True, source=composites.Source(address=name), **modes
            ),
            time=time,
        )
        self.frame(
            sender,
            composites.Attach(
                name=name,
                handle=handle,
                role=False,
                target=composites.Target(address=name),
                initial_delivery_count=initial_delivery_count,
                **modes,
            ),
            time=time,
        )
        return self

    def setup(self, sender: str = S, time: float | None = None, **link: Any) -> Trace:
        return self.connect(time=time).begin(time=time).link(sender=sender, time=time, **link)

    # --- link traffic -------------------------------------------------------------------
    def flow(
        self,
        origin: str,
        delivery_count: int | None,
        link_credit: int | None,
        handle: int = 0,
        time: float | None = None,
        **extra: Any,
    ) -> int:
        fields = {
            "incoming_window": extra.pop("incoming_window", 1000),
            "next_outgoing_id": extra.pop("next_outgoing_id", self.next_out[origin]),
            "outgoing_window": 1000,
            "handle": handle,
            "delivery_count": delivery_count,
            "link_credit": link_credit,
        }
        if "next_incoming_id" not in extra:
            fields["next_incoming_id"] = self.next_out[C if origin == S else S]
        fields.update(extra)
        return self.frame(origin, composites.Flow(**fields), time=time)

    def transfer(
        self,
        origin: str = S,
        handle: int = 0,
        time: float | None = None,
        delivery_id: int | None = -1,
        payload: bytes = b"\x00Sw\xa1\x02hi",
        **extra: Any,
    ) -> int:
        """A transfer frame; delivery_id -1 = the next id (None = omit), tag from it."""
        continuation = extra.pop("continuation", False)
        if delivery_id == -1:
            delivery_id = None if continuation else self.next_delivery[origin]
        if not continuation:
            self.next_delivery[origin] = (delivery_id or 0) + 1
        fields = {"handle": handle, "delivery_id": delivery_id}
        if not continuation and "delivery_tag" not in extra:
            fields["delivery_tag"] = str(delivery_id).encode()
        if not continuation and "message_format" not in extra:
            fields["message_format"] = 0
        fields.update(extra)
        self.next_out[origin] += 1
        return self.frame(origin, composites.Transfer(**fields), payload=payload, time=time)

    def disposition(self, origin: str, first: int, last: int | None = None, **extra) -> int:
        role = extra.pop("role", origin == C)
        time = extra.pop("time", None)
        return self.frame(
            origin, composites.Disposition(role=role, first=first, last=last, **extra), time=time
        )

    def detach(self, origin: str, handle: int = 0, time=None) -> int:
        return self.frame(origin, composites.Detach(handle=handle, closed=True), time=time)

    def end(self, origin: str, time=None) -> int:
        return self.frame(origin, composites.End(), time=time)

    def close(self, origin: str, time=None) -> int:
        return self.frame(origin, composites.Close(), time=time)

    # --- running ------------------------------------------------------------------------
    def check(self, liveness_bound: float | None = None, now: float | None = None):
        checker = Checker(liveness_bound)
        for origin, item, time in self.items:
            checker.feed(origin, item, time)
        checker.finish(now)
        return checker.violations


def found(violations: list[Violation], rule_id: str) -> list[int]:
    """Frame indices at which `rule_id` was reported."""
    return [v.frame_index for v in violations if v.rule_id == rule_id]


def publishing(
    sender: str = C, initial_delivery_count: int = 0, name: str = "p", **attach: Any
) -> Trace:
    """The sender attaches a link `name` first and the receiver answers (a client publishing
    when `sender` is C); `attach`: more fields of the sender's attach."""
    trace = Trace().connect().begin()
    receiver = S if sender == C else C
    trace.frame(
        sender,
        composites.Attach(
            name=name, handle=0, role=False, target=composites.Target(address="q"),
            initial_delivery_count=initial_delivery_count, **attach,
        ),
    )  # fmt: skip
    trace.frame(
        receiver,
        composites.Attach(name=name, handle=0, role=True, target=composites.Target(address="q")),
    )
    return trace
