"""The link pair of a `/management` node client: the link on which the broker receives
requests and the link, of the same name on the same session, on which it sends the replies.

Owns: the pair's state only: request credit (re-granted as requests are answered), the
replies waiting for the client's credit (2.6.7: never sent beyond it). May touch: the engine
Links given to it (flow, send, disposition through the session), management.answer for the
replies, the session (protocol/sessions.py) to settle a request sent unsettled. RabbitMQ 4 names the
pair "management-link-pair" and marks both links `paired`; here any name pairs a sender and
a receiver of the same name attached to /management on one session.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.engine import Link, UsageError

if TYPE_CHECKING:
    from ..protocol.sessions import BrokerSession

log = logging.getLogger("reference_broker.management")

REQUEST_CREDIT = 16  # requests a client may have outstanding on the request link


class ManagementPair:
    """One client's request link and reply link (either may attach first)."""

    __slots__ = ("pending", "replies", "requests", "session")

    def __init__(self, session: BrokerSession) -> None:
        self.session = session
        self.requests: Link | None = None  # the broker receives on it
        self.replies: Link | None = None  # the broker sends on it
        self.pending: deque[bytes] = deque()

    def attach_requests(self, link: Link) -> None:
        self.requests = link
        link.flow(link_credit=REQUEST_CREDIT)

    def request(
        self, link: Link, delivery_id: int, settled: bool, payload: bytes, answer: Callable
    ) -> None:
        """A request arrived: settle it (accepted) and queue the reply for the reply link."""
        if not settled:
            self.session.confirm(delivery_id)
        reply = answer(payload)
        if reply is not None:
            self.pending.append(reply)
        if link.link_credit < REQUEST_CREDIT // 2:
            link.flow(link_credit=REQUEST_CREDIT)
        self.send_replies()

    def send_replies(self) -> None:
        """Send the waiting replies the client has granted credit for (2.6.7)."""
        link = self.replies
        if link is None:
            return
        while self.pending and link.link_credit > 0:
            try:
                link.send(self.pending[0], settled=True)
            except UsageError as exc:
                log.debug("management reply not sent on %r: %s", link, exc)
                return
            self.pending.popleft()

    def forget(self, link: Any) -> bool:
        """`link` went away; True when neither link of the pair is left."""
        if link is self.requests:
            self.requests = None
        if link is self.replies:
            self.replies = None
            self.pending.clear()
        return self.requests is None and self.replies is None
