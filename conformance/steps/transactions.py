"""Steps of the transaction cases (Part 4): the suite as the transaction controller.

Owns `Controller` (a control link to the broker's coordinator, 4.5.1: attached, gated on
the capability the broker's attach states, declare / discharge as messages whose outcome
is read from the broker's disposition, 4.2 / 4.3) and the helpers that post transactionally
(4.4.1) and name a broker's answer in a line. A broker that refuses the coordinator, does
not state `amqp:local-transactions` in its attach, or does not answer a declare with
`declared` has no local transactions: the case is UNSUPPORTED (Part 4 is optional), never
FAILED for that. Registers no case. Touches nothing else.
"""

from __future__ import annotations

import itertools
from typing import Any

from amqpspec.amqp10.composites import (
    Coordinator,
    Declare,
    Declared,
    Discharge,
    Received,
    Source,
    TransactionalState,
)
from amqpspec.amqp10.engine import (
    DispositionReceived,
    Link,
    RemoteAttach,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    Session,
    TransportClosed,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.probe import Probe, WaitTimeout
from amqpspec.conformance.verdicts import Unanswered, Unsupported

LOCAL_TRANSACTIONS = symbol("amqp:local-transactions")  # 4.5.7 txn-capability
UNKNOWN_ID = "amqp:transaction:unknown-id"  # 4.5.8 transaction-error
TRANSACTION_ERRORS = frozenset(
    {UNKNOWN_ID, "amqp:transaction:rollback", "amqp:transaction:timeout"}
)
TXN_ID = symbol("txn-id")  # 4.4.3: the flow property asking for transactional acquisition
_names = itertools.count(1)  # control link names (unique per connection is enough, 2.6.1)


def describe(answer: Any) -> str:
    """A broker's answer to a coordinator message (a delivery state or a detach), in words."""
    if isinstance(answer, RemoteDetach):
        error = answer.error
        return f"a detach of the control link with {error.condition if error else 'no error'}"
    if answer is None:
        return "no outcome"
    name = getattr(answer, "NAME", type(answer).__name__)
    error = getattr(answer, "error", None)
    if error is not None:
        return f"{name} with {error.condition} ({error.description or 'no description'})"
    return repr(answer) if name in ("declared", "transactional-state") else str(name)


def error_condition(answer: Any) -> str | None:
    """The condition a rejected outcome or a detach carried (None: no error)."""
    error = getattr(answer, "error", None)
    return str(error.condition) if error is not None else None


class Controller:
    """A control link to the coordinator on `session` (4.5.1) and the transactions it
    declares. Constructing it is the gate: Unsupported when the broker has no local
    transactions (see the module docstring)."""

    def __init__(
        self,
        probe: Probe,
        session: Session,
        *,
        name: str | None = None,
        source: Source | None = None,
    ) -> None:
        self.probe = probe
        self.session = session
        # 4.2's example: a coordinator target asking for amqp:local-transactions, the
        # default source (its outcomes include rejected: 4.2 "SHOULD establish a control
        # link that allows the rejected outcome")
        since = probe.mark()
        self.link: Link = session.attach_sender(
            name or f"txn-ctl-{next(_names)}",
            Source() if source is None else source,
            Coordinator(capabilities=[LOCAL_TRANSACTIONS]),
        )
        probe.flush()
        link = self.link
        try:  # the attach, or the end of the session / connection refusing it
            first = probe.expect(
                lambda e: (
                    (isinstance(e, RemoteAttach) and e.link is link)
                    or (isinstance(e, RemoteEnd) and e.session is session)
                    or isinstance(e, RemoteClose | TransportClosed)
                ),
                None,
                "an attach of the coordinator",
            )
        except WaitTimeout as exc:
            reason = f"no transactions: no answer to the coordinator attach ({exc})"
            raise Unsupported(reason) from None
        if not isinstance(first, RemoteAttach):
            raise Unsupported(
                f"no transactions: the broker refused the coordinator attach; "
                f"{probe.observed(since)}"
            )
        probe.inbox.insert(0, first)
        try:
            attach = probe.wait_attached(self.link)
        except Unanswered as exc:
            raise Unsupported(f"no transactions: the coordinator attach {exc}") from None
        target = attach.target
        if not isinstance(target, Coordinator):
            raise Unsupported(f"no transactions: the broker attached the target as {target!r}")
        capabilities = target.capabilities
        if isinstance(capabilities, str):
            capabilities = [capabilities]
        if LOCAL_TRANSACTIONS not in [symbol(str(c)) for c in capabilities or ()]:
            raise Unsupported(
                f"no transactions: the broker's coordinator does not state "
                f"amqp:local-transactions (capabilities {capabilities!r})"
            )

    def request(self, body: Any, *, timeout: float | None = None, settled: bool = False) -> Any:
        """Send `body` (declare or discharge) unsettled (4.2, 4.3: never settled, unless a
        case sends it `settled` on purpose); the broker's outcome for it, or its detach of
        the control link (RemoteDetach). Bounded: WaitTimeout when neither comes."""
        probe = self.probe
        delivery_id = probe.send_message(self.link, Message.of(body), settled=settled)
        link = self.link

        def answer(event: Any) -> bool:
            if isinstance(event, RemoteDetach):
                return event.link is link
            return (
                isinstance(event, DispositionReceived)
                and event.role == Role.RECEIVER
                and event.first <= delivery_id <= event.last
                and event.state is not None
                and not isinstance(event.state, Received)
            )

        found = probe.expect(answer, timeout, "the coordinator's outcome")
        return found if isinstance(found, RemoteDetach) else found.state

    def declare(self) -> bytes:
        """4.2: a new transaction's id. Unsupported unless the answer is `declared` (the
        capability stated and then no transaction: the case cannot go on)."""
        try:
            answer = self.request(Declare())
        except WaitTimeout as exc:
            raise Unsupported(f"no transaction: a declare got no outcome ({exc})") from None
        if not isinstance(answer, Declared) or answer.txn_id is None:
            raise Unsupported(f"no transaction: a declare was answered with {describe(answer)}")
        return bytes(answer.txn_id)

    def discharge(self, txn_id: bytes, fail: bool = False) -> Any:
        return self.request(Discharge(txn_id=txn_id, fail=fail))


def post(probe: Probe, link: Link, txn_id: bytes, body: bytes, *, settled: bool = False) -> int:
    """4.4.1 transactional posting: one message whose transfer state names the transaction;
    its delivery-id."""
    message = Message.of(body)
    delivery_id = link.send(
        message.encode(),
        f"txn-{body.decode(errors='replace')}".encode(),
        settled,
        state=TransactionalState(txn_id=txn_id),
    )
    probe.flush()
    return delivery_id


def outcome_of_post(probe: Probe, delivery_id: int, timeout: float) -> Any:
    """The broker's first disposition state for a posted delivery, or None (bounded)."""
    try:
        event = probe.expect(
            lambda e: (
                isinstance(e, DispositionReceived)
                and e.role == Role.RECEIVER
                and e.first <= delivery_id <= e.last
                and e.state is not None
            ),
            timeout,
            "a disposition for the posted message",
        )
    except WaitTimeout:
        return None
    return event.state
