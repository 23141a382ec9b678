"""The probe's links: attach a receiver or a sender, wait for the broker's attach, grant
credit, detach.

Owns: `ProbeLinks` (attach_receiver, attach_sender, wait_attached, grant, detach).
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Attach, Source, Target
from amqpspec.amqp10.engine import (
    Link,
    RemoteAttach,
    RemoteDetach,
    Session,
)
from amqpspec.conformance.probe.waits import ProbeWaits
from amqpspec.conformance.verdicts import Unanswered


class ProbeLinks(ProbeWaits):
    """Links on the probe's sessions."""

    def attach_receiver(
        self,
        session: Session,
        address: str | Source | None,
        *,
        credit: int = 0,
        name: str | None = None,
        wait: bool = True,
        **attach_fields: Any,
    ) -> Link:
        """Attach a receiving link from `address`; grant `credit` once attached."""
        source = Source(address=address) if isinstance(address, str) else address
        link = session.attach_receiver(
            name or f"recv-{self._unique()}", source, Target(), **attach_fields
        )
        self.flush()
        if wait:
            self.wait_attached(link)
            if credit:
                self.grant(link, credit)
        return link

    def attach_sender(
        self,
        session: Session,
        address: str | Target | None,
        *,
        name: str | None = None,
        wait: bool = True,
        **attach_fields: Any,
    ) -> Link:
        target = Target(address=address) if isinstance(address, str) else address
        link = session.attach_sender(
            name or f"send-{self._unique()}", Source(), target, **attach_fields
        )
        self.flush()
        if wait:
            self.wait_attached(link)
        return link

    def wait_attached(self, link: Link, timeout: float | None = None) -> Attach:
        event = self._answer(
            lambda e: isinstance(e, RemoteAttach) and e.link is link, timeout, "attach"
        )
        attach: Attach = event.attach
        terminus = attach.target if link.is_sender else attach.source
        if terminus is None:
            # 2.6.3: a refused link is attached with a null terminus and detached at once
            detach = self._answer(
                lambda e: isinstance(e, RemoteDetach) and e.link is link, timeout, "detach"
            )
            condition = detach.error.condition if detach.error is not None else "none"
            raise Unanswered(
                f"expected the link the case needs; the broker refused link {link.name!r} "
                f"(a null terminus, then a detach with {condition})"
            )
        return attach

    def grant(self, link: Link, credit: int, *, drain: bool = False, echo: bool = False) -> None:
        """Receiver: a flow granting `credit` (link-credit = credit, 2.6.7)."""
        link.flow(link_credit=credit, drain=drain, echo=echo)
        self.flush()

    def detach(self, link: Link, closed: bool = True, wait: bool = True) -> RemoteDetach | None:
        link.detach(closed=closed)
        self.flush()
        if not wait:
            return None
        return self._answer(
            lambda e: isinstance(e, RemoteDetach) and e.link is link, None, "detach reply"
        )
