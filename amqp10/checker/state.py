"""What the checker remembers about one connection: peers, sessions, links, deliveries.

Owns: plain slotted state records. No rules live here; the checker modules mutate them.
Every record is O(1) in size except the per-session maps keyed by handle/name and the
capped settlement memory of `Deliveries`.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from amqpspec.amqp10.checker.horizons import Horizons
from amqpspec.amqp10.serial import HALF, MASK

_SETTLED_MEMORY = 8192  # delivery-ids whose settlement is remembered per direction
_STARTED_MEMORY = 4096  # deliveries not yet proven read, remembered per direction


class Peer:
    """One side of the connection, as seen from what it sent."""

    __slots__ = (
        "close_idx",
        "close_time",
        "closed",
        "ended_channels",
        "idle_reported",
        "last_time",
        "layer",
        "open",
        "open_idx",
        "open_time",
        "sasl_init",
        "sasl_outcome",
        "sessions",
        "tls",
        "unanswered_begins",
    )

    def __init__(self) -> None:
        self.layer: str | None = None  # None (no header yet), "sasl" or "amqp"
        self.tls = False
        self.sasl_outcome: Any = None  # the sasl-outcome this peer sent
        self.sasl_init = False  # this peer sent a sasl-init
        self.open: Any = None
        self.open_idx = -1
        self.open_time: float | None = None
        self.closed = False
        self.close_idx = -1
        self.close_time: float | None = None
        self.last_time: float | None = None
        self.idle_reported = False
        self.sessions: dict[int, SessionEnd] = {}  # outgoing channel -> its session end
        self.unanswered_begins: dict[int, Session] = {}  # channel -> session begun, no answer
        self.ended_channels: set[int] = set()  # channels whose session this peer ended


class Deliveries:
    """Deliveries one endpoint sent on a session: id range and settlement memory."""

    __slots__ = ("high", "low", "settled_by")

    def __init__(self) -> None:
        self.low: int | None = None
        self.high: int | None = None
        self.settled_by: OrderedDict[int, str] = OrderedDict()  # id -> "transfer" or origin

    def sent(self, delivery_id: int, settled: bool | None) -> None:
        """The endpoint sent delivery `delivery_id` (2.7.5): widen the id range
        (serial_lt inlined, 2.8.9); a transfer sent settled settles it."""
        low = self.low
        if low is None:
            self.low = self.high = delivery_id
        else:
            if 0 < ((low - delivery_id) & MASK) < HALF:  # serial_lt(id, low)
                self.low = delivery_id
            if 0 < ((delivery_id - self.high) & MASK) < HALF:  # serial_lt(high, id)
                self.high = delivery_id
        if settled:
            self.settle(delivery_id, "transfer")

    def settle(self, delivery_id: int, by: str) -> None:
        settled = self.settled_by
        settled[delivery_id] = by
        if len(settled) > _SETTLED_MEMORY:
            settled.popitem(last=False)


class SessionEnd:
    """One endpoint of a session: the begin it sent and what it sent since."""

    __slots__ = (
        "begin",
        "begin_idx",
        "channel",
        "deliveries",
        "detached_handles",
        "ended",
        "handles",
        "incoming",
        "next_outgoing_id",
        "pending_grants",
        "session",
        "started",
        "started_link",
    )

    def __init__(self, session: Session, channel: int, begin: Any, begin_idx: int) -> None:
        self.session = session
        self.channel = channel
        self.begin = begin
        self.begin_idx = begin_idx
        self.next_outgoing_id: int = begin.next_outgoing_id
        self.ended = False
        # Session-window grants this end gave for the PEER's transfer frames (2.5.6).
        self.incoming = Horizons(lookups=False)
        # Grants made before the peer's begin told its initial next-outgoing-id.
        self.pending_grants: list[tuple[int, int]] = []  # (trace index, incoming-window)
        self.handles: dict[int, Link] = {}
        self.detached_handles: set[int] = set()
        self.deliveries = Deliveries()
        # Deliveries this end began that the peer has not yet provably read, oldest first:
        # (transfer-id, delivery-id, link, the link's lenient delivery-count before it),
        # for what a receiver provably knows (fields.py); the oldest are forgotten first.
        self.started: deque[tuple[int, int | None, Link, int]] = deque(maxlen=_STARTED_MEMORY)
        self.started_link: Link | None = None  # the link of every entry; None: several

    def began(self, transfer_id: int, delivery_id: int | None, link: Link, floor: int) -> None:
        """This end began a delivery on `link` at `transfer_id` (see `started`)."""
        started = self.started
        if link is not self.started_link:
            self.started_link = None if started else link
        started.append((transfer_id, delivery_id, link, floor))


class Session:
    """A session: the two ends, paired by the answering begin's remote-channel."""

    __slots__ = ("echo_pending", "ends", "links")

    def __init__(self) -> None:
        self.ends: dict[str, SessionEnd] = {}
        # (link name, the sending peer's origin) -> links in attach order: a name identifies
        # a link in one direction (2.6.1), so a sender and a receiver may share it (a link
        # pair); a peer that attaches a name again before the first is answered makes a
        # second link, and the partner's attaches answer them in order
        self.links: dict[tuple[str, str], list[Link]] = {}
        self.echo_pending: dict[str, tuple[int, float | None]] = {}  # asked origin -> idx


class LinkEnd:
    __slots__ = ("attach", "attach_idx", "detached", "handle", "role")

    def __init__(self, attach: Any, attach_idx: int) -> None:
        self.attach = attach
        self.attach_idx = attach_idx
        self.handle: int = attach.handle
        self.role: bool = bool(attach.role)
        self.detached = False


class Link:
    """A link and the sender's credit state (2.6.7) as far as the trace shows it."""

    __slots__ = (
        "aborted",
        "available",
        "caller_available",
        "delivery_count",
        "delivery_id",
        "delivery_settled",
        "drain_done",
        "drain_grants",
        "drain_pending",
        "echo_pending",
        "ends",
        "grants",
        "in_delivery",
        "irregular",
        "name",
        "pending_flows",
        "progress_time",
        "rcv_floor",
        "rcv_seen",
        "settled_idx",
        "stall_reported",
        "stated",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.ends: dict[str, LinkEnd] = {}
        self.delivery_count: int | None = None  # the sender's, tracked from its frames
        self.grants = Horizons()  # the receiver's credit horizons
        self.pending_flows: list[tuple[int, Any, float | None]] = []  # before sender attach
        self.in_delivery = False  # a multi-frame delivery is open
        self.delivery_settled = False
        self.settled_idx = -1  # the frame that settled the current delivery
        self.delivery_id: int | None = None
        self.drain_pending: tuple[int, int, float | None] | None = None  # idx, horizon, time
        self.drain_grants: deque[int] = deque(maxlen=16)  # indices of recent drain requests
        self.drain_done = -1  # trace index of the drain grant the sender proved it completed
        self.aborted = 0  # aborted deliveries since the sender last stated its delivery-count
        self.echo_pending: dict[str, tuple[int, float | None]] = {}  # asked origin -> idx
        self.available: int | None = None  # sender's estimate, minus deliveries since
        self.caller_available: int | None = None  # -1 = unbounded
        self.progress_time: float | None = None
        self.stall_reported = False
        # What the receiver provably knows of the sender's delivery-count (2.7.4):
        self.rcv_seen = False  # it saw the sender's attach
        self.rcv_floor: tuple[int, tuple] | None = None  # a value it knows, and how we know
        self.stated: tuple[int, int] | None = None  # the sender's last flow: (idx, count)
        # aborted deliveries or a regressed sender: counts the spec leaves open
        self.irregular = False

    def delivered(self, time: float | None) -> None:
        """The sender began a delivery (its first transfer frame, 2.6.7): count it, take it
        off what is available, and drop a drain request whose credit it used up. Serial
        arithmetic inlined (serial_add, serial_lt; 2.8.9): this runs for every delivery."""
        count = ((self.delivery_count or 0) + 1) & MASK
        self.delivery_count = count
        if self.available:
            self.available -= 1
        if self.caller_available and self.caller_available > 0:
            self.caller_available -= 1
        self.progress_time = time
        self.stall_reported = False
        pending = self.drain_pending
        if pending is not None:
            if self.aborted:  # LinkRules._lenient_count
                count = (count - self.aborted) & MASK
            if not 0 < ((pending[1] - count) & MASK) < HALF:
                self.drain_pending = None  # the credit was used up by deliveries

    def sender_origin(self) -> str | None:
        for origin, end in self.ends.items():
            if end.role is False:
                return origin
        return None
