"""The requeued messages of a queue: a heap in original (msg_id) order, taken before the
ready ones.

Owns `take_requeued`: the oldest requeued message a consumer may take (3.4.5: one modified
with undeliverable-here by that consumer is skipped for it, kept for the others).
classic.ClassicQueue keeps the heap and calls it when it hands a message out.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .classic import QueuedMessage


def take_requeued(returned: list[QueuedMessage], tag: str) -> QueuedMessage | None:
    """Pop from the heap `returned` the oldest message consumer `tag` may take; None when
    every one is undeliverable to it."""
    head = returned[0]
    if head.undeliverable_to is None or tag not in head.undeliverable_to:
        return heapq.heappop(returned)
    for msg in sorted(returned):  # rare: skip the ones undeliverable here
        if msg.undeliverable_to is None or tag not in msg.undeliverable_to:
            returned.remove(msg)
            heapq.heapify(returned)
            return msg
    return None
