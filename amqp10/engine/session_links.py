"""A session's links (2.6.1, 2.6.2, 2.7.2): attaching our own, the peer's attach and
detach, and the handle maps.

Owns: handle allocation within handle-max (ours and the peer's), the links waiting for the
peer's attach (by name and role: a link pair may share a name), `attach_sender` /
`attach_receiver`, the routing of the peer's attach, flow and detach to the link its handle
names (`amqp:session:unattached-handle` otherwise, 2.8.16), and writing attach and detach
frames (a detach stays behind the link's queued transfers). A part of `Session`
(session.py composes it); reads and writes the hub's `links`,
`links_by_remote_handle` and transfer queue. May touch its Links through their documented
engine methods (`attach`, `receive_attach`, `receive_detach`).
"""

from __future__ import annotations

from typing import Any

from amqpspec.amqp10.composites import Attach, Detach, Source, Target
from amqpspec.amqp10.engine.link import Link
from amqpspec.amqp10.engine.transitions import SessInput, UsageError
from amqpspec.amqp10.errors import ErrorKind, ProtocolError
from amqpspec.amqp10.frames import Frame, encode_frame
from amqpspec.amqp10.spec import Cond, RcvSettleMode, Role, SndSettleMode


def _source(source: Any) -> Any:
    """A plain address string stands for Source(address=...)."""
    return Source(address=source) if isinstance(source, str) else source


def _target(target: Any) -> Any:
    return Target(address=target) if isinstance(target, str) else target


class SessionLinks:
    """Attach, detach and the handle maps (a part of Session)."""

    def attach_sender(
        self,
        name: str,
        source: Any = None,
        target: Any = None,
        *,
        snd_settle_mode: int = SndSettleMode.MIXED,
        rcv_settle_mode: int = RcvSettleMode.FIRST,
        initial_delivery_count: int = 0,
        **attach_fields: Any,
    ) -> Link:
        """Attach a sending link (2.6.3). source/target: Source/Target composites, an
        address string, or None; other Attach fields pass through by keyword
        (max_message_size, properties, offered_capabilities, ...)."""
        link = Link(
            self,
            name,
            Role.SENDER,
            _source(source),
            _target(target),
            snd_settle_mode,
            rcv_settle_mode,
        )
        link.initial_delivery_count = link.delivery_count = initial_delivery_count
        link.attach(attach_fields)
        return link

    def attach_receiver(
        self,
        name: str,
        source: Any = None,
        target: Any = None,
        *,
        snd_settle_mode: int = SndSettleMode.MIXED,
        rcv_settle_mode: int = RcvSettleMode.FIRST,
        **attach_fields: Any,
    ) -> Link:
        """Attach a receiving link (2.6.3); grant credit with link.flow(link_credit=n)."""
        link = Link(
            self,
            name,
            Role.RECEIVER,
            _source(source),
            _target(target),
            snd_settle_mode,
            rcv_settle_mode,
        )
        link.attach(attach_fields)
        return link

    def write_detach(
        self, detach: Detach, link: Link | None = None, replying: bool = False
    ) -> None:
        """Our detach of `link`: behind the link's transfers still waiting for the peer's
        window; but when `replying` to the peer's detach (the peer destroyed its end, 2.6.6)
        those are dropped, never sent, and the detach goes out now: the application took
        them back when the link went (a broker requeues them), and nothing may follow our
        detach for the handle (2.7.4 flow handle)."""
        self.connection.check_can_send()
        self.machine.process(SessInput.SEND_DETACH)
        frame = encode_frame(detach, self.channel)
        if replying and link is not None:
            self.drop_queued_of(link)
        if self._queue and not (replying and link is not None):
            self._queue.append((frame, False, link))  # keep it behind the link's transfers
        else:
            self.connection.write_frame(frame)

    def write_attach(self, attach: Attach) -> None:
        self._send_checked(SessInput.SEND_ATTACH, attach)

    def allocate_handle(self, link: Link) -> int:
        limit = min(self.handle_max, self.remote_handle_max)
        handle = 0
        while handle in self.links:
            handle += 1
        if handle > limit:
            raise UsageError(f"no free handle <= handle-max {limit} (2.7.2)")
        self.links[handle] = link
        return handle

    def await_attach(self, link: Link) -> None:
        self._attaching[(link.name, link.role)] = link

    def link_detached(self, link: Link) -> None:
        if link.handle is not None and self.links.get(link.handle) is link:
            del self.links[link.handle]

    def remote_link_detached(self, link: Link) -> None:
        if (
            link.remote_handle is not None
            and self.links_by_remote_handle.get(link.remote_handle) is link
        ):
            del self.links_by_remote_handle[link.remote_handle]

    def _on_attach(self, frame: Frame) -> None:
        attach: Attach = frame.performative
        if attach.handle > self.handle_max:  # 2.7.2 handle-max: close with framing-error
            raise ProtocolError(
                Cond.FRAMING_ERROR,
                f"handle {attach.handle} > handle-max {self.handle_max}",
                kind=ErrorKind.HANDLE_OVER_MAX,
                performative="attach",
                declared=attach.handle,
                allowed=self.handle_max,
            )
        link = self.links_by_remote_handle.get(attach.handle)
        if link is None:
            link = self._attaching.pop((attach.name, not attach.role), None)
            if link is None:
                link = Link(self, attach.name, not attach.role, None, None, None, None)
        self.links_by_remote_handle.setdefault(attach.handle, link)
        link.receive_attach(attach)

    def _link_for(self, handle: int, what: str) -> Link:
        link = self.links_by_remote_handle.get(handle)
        if link is None:  # 2.8.16 (session-error): not currently attached
            raise ProtocolError(
                Cond.UNATTACHED_HANDLE,
                f"{what} on handle {handle}",
                "session",
                ErrorKind.UNATTACHED_HANDLE,
                performative=what,
                declared=handle,
            )
        return link

    def _on_detach(self, frame: Frame) -> None:
        detach: Detach = frame.performative
        self._link_for(detach.handle, "detach").receive_detach(detach)
