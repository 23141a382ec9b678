"""Credit the broker grants to publishers (links where the broker is the receiver).

Owns: the re-grant rule only (pure functions, no state). RabbitMQ 4 (PR #9022 items 18 and
20): each incoming link gets `max_link_credit` (170) at attach and again whenever its
remaining credit fell below half of it, but not while too many of its messages await a
confirm (a slow target queue slows only its own links). During a resource alarm publishers
are stopped by the session window (incoming-window 0), not by link credit.
"""

from __future__ import annotations


def initial_publisher_credit(max_link_credit: int = 170) -> int:
    return max_link_credit


def publisher_regrant(
    link_credit: int,
    unconfirmed: int,
    *,
    max_link_credit: int = 170,
    max_unconfirmed: int = 1000,
) -> int | None:
    """The new link-credit to send in a flow, or None when no flow is due.

    `link_credit` is what the publisher has left as the broker sees it; `unconfirmed` how
    many of the link's messages are routed but not yet confirmed (settled) to it.
    """
    if link_credit >= max_link_credit // 2:
        return None
    if unconfirmed >= max_unconfirmed:
        return None
    return max_link_credit
