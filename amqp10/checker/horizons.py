"""Exact credit-horizon tracking for link credit (2.6.7) and session windows (2.5.6).

Owns: `Horizons`, the set of grants one side has given and the other side may still be
acting on. Pure bookkeeping over serial numbers; knows nothing about frames.

The algorithm (both for link credit and session incoming windows)
-----------------------------------------------------------------
A grant from the receiving side R defines a *horizon*: for link credit
`delivery-count(flow) + link-credit(flow)` (2.6.7; `initial-delivery-count` from the
sender's attach stands in when the flow has no delivery-count), for a session
`next-incoming-id(flow) + incoming-window(flow)` (2.5.6). The sending side S may send
delivery (resp. transfer frame) number `n` only while `n < horizon` of the grant it has
applied last. S applies grants in the order R sent them (one TCP stream), and each new
grant replaces the previous one entirely, so S's state at any moment is the horizon of
*some* grant in R's sequence: the last one S had read when it sent.

The checker sees one interleaving of both directions (a capture anywhere on the path).
A frame of S can only depend on grants that appear before it; which of those S had
already read is unknown, except where S proves it. Hence:

* Candidates: every grant of R from the last one S has *provably* read onwards. A grant
  is superseded (dropped) once S has provably read a later one.
* Verdict: S's delivery `n` is a violation iff `n >= horizon` for EVERY candidate, i.e.
  `n >= max(candidate horizons)`. A transfer that raced a credit reduction is within the
  older, larger horizon, which stays a candidate until S proves it read the reduction:
  never a false violation.
* Proofs (fed by the checker as "S has read every frame of R up to trace index P"):
  S's own flow for the link carries its delivery-count X and link-credit L; its horizon
  X + L names the grant it applied. The earliest not-yet-superseded grant with horizon
  X + L is a safe lower bound (a later one would prune grants S may not have read).
  Only L > 0 is exact: a sender that has used up or overdrawn its credit (a reduction
  raced its transfers) may report L = 0 and so name a grant it never read. L = 0 counts
  only as a drain reply (the flow has drain set and X + 0 is the horizon of a drain
  request), which is also what the transfer-after-drain rule (DISPATCH-1090) rests on.
  A sender flow naming no grant (fe2o3-amqp#264: a sender zeroing its link-credit)
  proves nothing and sets nothing: only the receiver sets link-credit; the stall that
  follows is the liveness rule's business. A begin answering R's begin (remote-channel)
  also proves S read everything R sent before it.

Worked example (RabbitMQ 3.10, docs/real-brokers.md): R grants (0x178, 1) -> horizon
0x179; S's flow (0x178, 1) names it (proof); R grants (0x178, 2) -> 0x17a; S sends
deliveries 0x178, 0x179, 0x17a. Candidates are {0x179, 0x17a}; 0x17a >= both: the third
transfer is beyond every grant. Reduction race: R grants 5 then 1 at delivery-count 0,
S sends five: the grant of 5 is still a candidate (no proof S read the reduction), so
none is flagged.

Representation, O(1) amortized per grant/check; memory bounded by the caps below and
by the grants that can still matter (a strictly falling run of horizons). Only the
maximum over candidates matters, and candidates are dropped as a prefix. So grants
live in a monotonic deque ("sliding-window maximum"): a new grant evicts older grants
at the back whose horizon is <= its own (they can never be the unique maximum
while it remains, and a prefix drop removes them first). Each entry remembers the
first trace index of the grants it absorbed (`first_idx`), so a prefix drop "up to the
last grant at or before P" is exact. For proof look-ups a dict maps horizon -> trace
indices of grants with that horizon, and a capped queue of grant indices not yet proven
read gives the last grant known read (entries before it are superseded and purged).
Every cap errs the safe way: a forgotten grant index only means a missed proof, i.e.
more candidates, never a false violation.
"""

from __future__ import annotations

from collections import deque

from amqpspec.amqp10.serial import HALF, MASK, serial_diff

_MAX_KEYS = 256  # distinct horizon values remembered for proof look-ups
_MAX_PER_KEY = 8  # grant indices remembered per horizon value
_MAX_UNREAD = 1024  # grants not yet proven read, remembered to place the last one read


def horizon_of(start: int, amount: int) -> int:
    """The horizon of a grant of `amount` (link-credit or incoming-window) from `start`.
    An amount of 2**31 or more reaches past what serial-number arithmetic can compare
    (RFC 1982, 2.8.10): it is taken as 2**31 - 1, so every number it could cover is
    within it (a window of 2**32 - 1 must not make transfer 0 look beyond it)."""
    return (start + (amount if amount < HALF - 1 else HALF - 1)) & MASK  # serial_add, inlined


class Grant:
    """One surviving grant: trace index, first absorbed index, horizon and extras."""

    __slots__ = ("credit", "drain", "first_idx", "horizon", "idx")

    def __init__(self, idx: int, first_idx: int, horizon: int, credit: int, drain: bool):
        self.idx = idx
        self.first_idx = first_idx
        self.horizon = horizon
        self.credit = credit
        self.drain = drain


class Horizons:
    """Candidate horizons granted by one side to the other (see the module header).

    `lookups=False` (session windows: no sender ever names a window it applied) keeps
    only the maximum structure.
    """

    __slots__ = (
        "_by_horizon",
        "_grants",
        "_lookups",
        "_purged_at",
        "_read_from",
        "_unread",
        "last",
        "proven",
    )

    def __init__(self, lookups: bool = True) -> None:
        self._grants: deque[Grant] = deque()
        self._lookups = lookups
        self._by_horizon: dict[int, list[int]] = {}
        self._unread: deque[int] = deque()  # grant indices after `proven`, oldest first
        self._read_from = -1  # the last grant known read: a lower bound of the true one
        self._purged_at = -1
        self.last: Grant | None = None  # the most recent grant (what S will end up with)
        self.proven = -1  # trace index up to which S provably read R's frames

    def grant(self, idx: int, horizon: int, credit: int = 0, drain: bool = False) -> None:
        """R granted `horizon` in the frame at trace index `idx` (indices increase)."""
        grants = self._grants
        first_idx = idx
        while grants:
            older = grants[-1].horizon
            if older != horizon and not 0 < ((horizon - older) & MASK) < HALF:
                break  # not serial_le(older, horizon), inlined
            first_idx = grants.pop().first_idx
        entry = Grant(idx, first_idx, horizon, credit, drain)
        grants.append(entry)
        self.last = entry
        if self._lookups:
            if len(self._unread) < _MAX_UNREAD:
                self._unread.append(idx)  # past the cap the last-read bound only lags
            self._remember(horizon, idx)

    def _remember(self, horizon: int, idx: int) -> None:
        by_horizon = self._by_horizon
        indices = by_horizon.get(horizon)
        if indices is None:
            if len(by_horizon) >= _MAX_KEYS:
                if self._purged_at != self._read_from:
                    self._purge()
                if len(by_horizon) >= _MAX_KEYS:
                    return  # forget it: a missed proof only keeps more candidates
            by_horizon[horizon] = [idx]
        elif len(indices) < _MAX_PER_KEY:
            indices.append(idx)

    def _purge(self) -> None:
        """Drop grants older than the last one read: superseded, never a proof again."""
        self._purged_at = read_from = self._read_from
        stale = [h for h, indices in self._by_horizon.items() if indices[-1] < read_from]
        for h in stale:
            del self._by_horizon[h]

    def prove(self, proven_idx: int) -> None:
        """S has read every frame of R up to trace index `proven_idx`: drop superseded grants.

        Among grants at or before `proven_idx` only the latest still counts; grants
        after it all stay candidates.
        """
        if proven_idx <= self.proven:
            return
        self.proven = proven_idx
        grants = self._grants
        while len(grants) >= 2 and grants[1].first_idx <= proven_idx:
            grants.popleft()
        unread = self._unread
        while unread and unread[0] <= proven_idx:
            self._read_from = unread.popleft()

    def earliest_with(self, horizon: int) -> int | None:
        """Trace index of the earliest grant with this horizon not known superseded.

        Grants before the last one known read are superseded; the earliest remaining
        one is the safe choice (the sender may have applied it or any later one).
        """
        indices = self._by_horizon.get(horizon)
        if not indices:
            return None
        read_from = self._read_from
        while indices and indices[0] < read_from:
            indices.pop(0)
        if not indices:
            del self._by_horizon[horizon]
            return None
        return indices[0]

    def best(self) -> Grant | None:
        """The candidate with the largest horizon (None when R granted nothing yet)."""
        return self._grants[0] if self._grants else None

    def beyond_every(self, number: int) -> bool:
        """True when `number` is at or past the horizon of every candidate."""
        best = self.best()
        return best is None or serial_diff(best.horizon, number) >= 0

    def admits(self, number: int, proven_idx: int) -> bool:
        """`prove(proven_idx)`, then not `beyond_every(number)`, in one call (the checker's
        fast lane): True when `number` is before the horizon of some candidate."""
        if proven_idx > self.proven:
            self.prove(proven_idx)
        grants = self._grants
        # serial_diff(best.horizon, number) < 0, inlined
        return bool(grants) and ((number - grants[0].horizon) & MASK) > HALF

    def __len__(self) -> int:
        return len(self._grants)
