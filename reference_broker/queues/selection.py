"""Which queued message a consumer with a selector takes next (classic and quorum queues).

Owns: `count_accepted(ready, returned, tag, accepts)` (the consumer's 2.6.7 `available`)
and `take_accepted(ready, returned, tag, accepts)`: the oldest message a consumer whose
source carries a SQL filter or JMS selector (features/filters.py, features/selectors.py)
accepts, requeued ones first as the queue hands them out, skipping those marked
undeliverable to it (3.4.5); it is removed from its container, the others stay queued for
other consumers (as Qpid Broker-J and ActiveMQ Artemis leave them). Plain Python over the
queue's own containers (classic.py): a linear scan, the price of a selector only.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any


def _deliverable(msg: Any, tag: str) -> bool:
    return msg.undeliverable_to is None or tag not in msg.undeliverable_to


def count_accepted(
    ready: deque[Any], returned: list[Any], tag: str, accepts: Callable[[bytes], bool]
) -> int:
    """How many queued messages the consumer `tag` could be handed."""
    deliverable = sum(1 for msg in returned if _deliverable(msg, tag) and accepts(msg.payload))
    return deliverable + sum(1 for msg in ready if accepts(msg.payload))


def take_accepted(
    ready: deque[Any], returned: list[Any], tag: str, accepts: Callable[[bytes], bool]
) -> Any | None:
    """The oldest message `accepts` passes (requeued first), taken out; None if none."""
    for msg in sorted(returned):
        if _deliverable(msg, tag) and accepts(msg.payload):
            returned.remove(msg)
            heapq.heapify(returned)
            return msg
    for index, msg in enumerate(ready):
        if accepts(msg.payload):
            del ready[index]
            return msg
    return None
