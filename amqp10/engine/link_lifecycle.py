"""A link's attach and detach (2.6.3, 2.6.6, 2.7.3, 2.7.7), its errors, and the
terminus check of the peer's attach (3.5.3, 3.5.4, 4.5.1).

Owns: our attach (made by us, or answering the peer's: `attach`, `accept`, `reject`,
`attach_frame`), the peer's attach (`receive_attach`: its handle, settle modes, and the
refusal of a terminus of the wrong archetype), our detach and the peer's (auto-reply), and
`fail()`: a link rule broken by the peer, reported and answered with a detach (or, when the
link cannot be detached, the session's end). A part of `Link` (link.py composes it); every
state change through LINK_TABLE (the hub's `machine`). May touch: its Session through the
documented engine methods (`allocate_handle`, `write_attach`, `write_detach`,
`await_attach`, `link_detached`, `remote_link_detached`, `fail`) and the connection's
(`emit`, `reply_when_sendable`, `answer_due`); the credit part's `start_delivery_count`,
`_learn_initial_delivery_count` and `_send_flow` (link_credit.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.composites import Attach, Coordinator, Detach, Source, Target
from amqpspec.amqp10.engine import events as ev
from amqpspec.amqp10.engine.conditions import as_error
from amqpspec.amqp10.engine.transitions import (
    ATTACH_THEN_DETACH,
    LinkInput,
    LinkState,
    SessInput,
    SessState,
    UsageError,
)
from amqpspec.amqp10.errors import ErrorKind, ProtocolError
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import Described

if TYPE_CHECKING:
    from amqpspec.amqp10.composites import Error

_ECHO = object()  # accept(): "answer with the peer's terminus"


class LinkLifecycle:
    """Attach, detach and link errors (a part of Link)."""

    def attach(self, fields: dict[str, Any]) -> None:
        self._check(LinkInput.SEND_ATTACH, SessInput.SEND_ATTACH)
        self.handle = self.session.allocate_handle(self)
        self.max_message_size = fields.get("max_message_size")
        self.machine.process(LinkInput.SEND_ATTACH)
        self.session.write_attach(self.attach_frame(fields))
        if self.state is LinkState.ATTACH_SENT:
            self.session.await_attach(self)

    def attach_frame(self, fields: dict[str, Any]) -> Attach:
        return Attach(
            name=self.name,
            handle=self.handle,
            role=self.role,
            snd_settle_mode=self.snd_settle_mode,
            rcv_settle_mode=self.rcv_settle_mode,
            source=self.source,
            target=self.target,
            initial_delivery_count=self.initial_delivery_count if self.is_sender else None,
            **fields,
        )

    def accept(
        self,
        source: Any = _ECHO,
        target: Any = _ECHO,
        *,
        snd_settle_mode: int | None = None,
        rcv_settle_mode: int | None = None,
        initial_delivery_count: int = 0,
        **attach_fields: Any,
    ) -> None:
        """Answer the peer's attach (ATTACH_RCVD) with ours (2.6.3). source/target
        default to the peer's; pass None for a null terminus. Settle modes default to
        the peer's."""
        self.machine.refuse_unless(LinkInput.SEND_ATTACH)
        remote = self.remote_attach
        if remote is None:
            raise UsageError("accept() answers a peer's attach; this link was attached by us")
        self.source = remote.source if source is _ECHO else source
        self.target = remote.target if target is _ECHO else target
        self.snd_settle_mode = (
            remote.snd_settle_mode if snd_settle_mode is None else snd_settle_mode
        )
        self.rcv_settle_mode = (
            remote.rcv_settle_mode if rcv_settle_mode is None else rcv_settle_mode
        )
        if self.is_sender:
            self.start_delivery_count(initial_delivery_count)
        self.attach(attach_fields)
        if self._echo_owed:  # 2.7.4: an echo that came before our attach, answered now
            self._echo_owed = False
            self._send_flow()

    def reject(self, error: Error | str | None = None, description: str | None = None) -> None:
        """Refuse the peer's attach: our attach with a null local terminus, then a
        closing detach carrying `error` (2.6.3)."""
        if self.is_sender:
            self.source = None
        else:
            self.target = None
        self.detach(closed=True, error=error, description=description)

    def receive_attach(self, attach: Attach) -> None:
        self.machine.process(LinkInput.RECV_ATTACH)
        self.remote_attach = attach
        self.remote_handle = attach.handle
        if self.snd_settle_mode is None:  # an incoming link: take the peer's modes
            self.snd_settle_mode = attach.snd_settle_mode
            self.rcv_settle_mode = attach.rcv_settle_mode
        if not self.is_sender:
            self._learn_initial_delivery_count(attach)
        problem = terminus_problem(attach)
        if problem is not None:  # refused here: the application never sees the link
            self.fail(
                ProtocolError(
                    Cond.INVALID_FIELD,
                    problem,
                    "link",
                    ErrorKind.INVALID_TERMINUS,
                    performative="attach",
                )
            )
            return
        if self.state is LinkState.ATTACH_RCVD:
            self.session.connection.answer_due = True  # accept() or reject() first
        self.session.connection.emit(ev.RemoteAttach(self, attach))

    def detach(
        self, closed: bool = True, error: Error | str | None = None, description: str | None = None
    ) -> None:
        """Send detach (2.7.7); closed=False only suspends the link."""
        self._check(LinkInput.SEND_DETACH, SessInput.SEND_DETACH)
        never_attached = self.handle is None  # the peer's attach is still unanswered
        if never_attached:  # refusing it: our attach needs a handle
            self.handle = self.session.allocate_handle(self)
        replying = self.state is LinkState.DETACH_RCVD  # the peer destroyed its end first
        action = self.machine.process(LinkInput.SEND_DETACH)
        # 2.6.3: our attach goes first, also when the peer's detach came before we answered
        # its attach (both in one read: DETACH_RCVD)
        if action == ATTACH_THEN_DETACH or never_attached:
            if self.is_sender and self.initial_delivery_count is None:
                self.initial_delivery_count = self.delivery_count = 0  # 2.7.3: a sender's
            self.session.write_attach(self.attach_frame({}))
        detach = Detach(handle=self.handle, closed=closed, error=as_error(error, description))
        self.session.write_detach(detach, self, replying)
        self.maybe_detached()

    def receive_detach(self, detach: Detach) -> None:
        self.machine.process(LinkInput.RECV_DETACH)
        self.remote_detach = detach
        self.session.remote_link_detached(self)
        self.session.connection.emit(ev.RemoteDetach(self, detach.closed, detach.error))
        if self.session.connection.auto_reply:
            answer = lambda: self._answer_detach(detach.closed)  # noqa: E731
            self.session.connection.reply_when_sendable(answer, self.session)
        self.maybe_detached()

    def _answer_detach(self, closed: bool) -> None:
        if self.machine.allows(LinkInput.SEND_DETACH) and self.session.state in _CAN_REPLY:
            self.detach(closed=closed)  # 2.6.6: answer with our detach

    def maybe_detached(self) -> None:
        if self.state is LinkState.DETACHED:
            self.session.link_detached(self)

    def fail(self, exc: ProtocolError) -> None:
        """The peer broke a link rule: report it and detach with its condition."""
        self.session.connection.emit(ev.ProtocolErrorRaised.of(exc, "link", self.session, self))
        session = self.session
        session.connection.reply_when_sendable(lambda: self._send_error(exc), session)

    def _send_error(self, exc: ProtocolError) -> None:
        """Detach with `exc` (2.6.3), or end the session when the link cannot be detached."""
        session = self.session
        if not session.machine.allows(SessInput.SEND_DETACH):
            return  # the session is ending: the end settles the link too (2.6.1)
        if self.machine.allows(LinkInput.SEND_DETACH):
            self.detach(closed=True, error=exc.condition, description=exc.description)
        else:  # the link cannot be detached (2.6.3): the session goes with it
            session.fail(exc.rescoped("session"))


_CAN_REPLY = frozenset({SessState.MAPPED, SessState.BEGIN_RCVD})
_SOURCE_ARCHETYPE = (Source,)
_TARGET_ARCHETYPE = (Target, Coordinator)


def terminus_problem(attach: Attach) -> str | None:
    """3.5.3 / 3.5.4 / 4.5.1: an attach's source must provide the `source` archetype
    (Source) and its target the `target` archetype (Target, Coordinator), or be null.
    The codec already refuses a known composite of another archetype (decode-error); a
    described value of an unknown type cannot be used as a terminus, so the link is
    refused with amqp:invalid-field. Returns what is wrong, or None."""
    source, target = attach.source, attach.target
    if source is not None and not isinstance(source, _SOURCE_ARCHETYPE):
        return f"attach source is {_kind(source)}, not a source (3.5.3)"
    if target is not None and not isinstance(target, _TARGET_ARCHETYPE):
        return f"attach target is {_kind(target)}, not a target (3.5.4)"
    return None


def _kind(value: Any) -> str:
    if isinstance(value, Described):
        return f"a described value with descriptor {value.descriptor!r}"
    return f"a {type(value).__name__}"
