"""Steps of the transaction cases (Part 4): the suite as the transaction controller.

Owns `Controller` (a control link to the broker's coordinator, 4.5.1: attached, gated on
the capability the broker's attach states, declare / discharge as messages whose outcome
is read from the broker's disposition, 4.2 / 4.3), how the Part 4 cases are declared
(`coordinator_case`, `posting_case`, `retiring_case`) and the helpers that post transactionally
(4.4.1), receive deliveries to retire (4.4.2), look at what a queue holds, and name a
broker's answer in a line. A broker that refuses the coordinator, does
not state `amqp:local-transactions` in its attach, or does not answer a declare with
`declared` has no local transactions: the case is UNSUPPORTED (Part 4 is optional), never
FAILED for that. Registers no case. Touches nothing else.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

from amqpspec.amqp10.composites import (
    Accepted,
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
    TransferReceived,
    TransportClosed,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role, SndSettleMode
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.probe import Probe, WaitTimeout
from amqpspec.conformance.run.registry import MUST, Level, RunFunction, case
from amqpspec.conformance.steps.deliveries import collect
from amqpspec.conformance.steps.links import consumer, publisher
from amqpspec.conformance.steps.queues import fill, message_text
from amqpspec.conformance.verdicts import SHORTFALL, CaseFailed, Unanswered, Unsupported

LOCAL_TRANSACTIONS = symbol("amqp:local-transactions")  # 4.5.7 txn-capability
UNKNOWN_ID = "amqp:transaction:unknown-id"  # 4.5.8 transaction-error
TRANSACTION_ERRORS = frozenset(
    {UNKNOWN_ID, "amqp:transaction:rollback", "amqp:transaction:timeout"}
)
ROLLBACK_COMPLETES = "4.3/discharging-a-transaction.5"  # MUST always complete fail=true
TIMEOUT = "amqp:transaction:timeout"  # 4.5.8 transaction-timeout
TIMEOUT_MARGIN = 0.3  # seconds past a transaction timeout before the case looks
TXN_ID = symbol("txn-id")  # 4.4.3: the flow property asking for transactional acquisition
QUIET = 1.0  # seconds in which nothing may arrive at a consumer looking at a queue
_names = itertools.count(1)  # control link names (unique per connection is enough, 2.6.1)
QUEUES = frozenset({"queues"})
RETIRE_NEEDS = frozenset({"queues", "unsettled-deliveries"})  # deliveries left to retire


def coordinator_case(
    case_id: str, level: Level, sentence: str, *sentences: str
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a Part 4 case on the coordinator alone: the broker the receiver of our
    declares and discharges (its `sentences`). Like every Part 4 case, no pipelined variant:
    its first wait is the gate, the broker's attach of the coordinator, which `Controller`
    reads before anything else is sent."""
    return case(case_id, level, sentence, sentences=sentences, role="receiver", pipelined=False)


def posting_case(
    case_id: str, sentence: str, *sentences: str, requires: Iterable[str] = QUEUES
) -> Callable[[RunFunction], RunFunction]:
    """`case` for a MUST on transactional posting (4.4.1): the broker the receiver of the
    messages posted in a transaction (no pipelined variant: `coordinator_case`)."""
    return case(
        case_id,
        MUST,
        sentence,
        sentences=sentences,
        role="receiver",
        requires=requires,
        pipelined=False,
    )


def retiring_case(
    case_id: str, level: Level, sentence: str, *sentences: str, requires: Iterable[str]
) -> Callable[[RunFunction], RunFunction]:
    """`case` for transactional retirement or acquisition (4.4.2, 4.4.3): the broker the
    sender of the deliveries the controller retires or acquires in a transaction (no
    pipelined variant: `coordinator_case`)."""
    return case(
        case_id,
        level,
        sentence,
        sentences=sentences,
        role="sender",
        requires=requires,
        pipelined=False,
    )


def describe(answer: Any) -> str:
    """A broker's answer to a coordinator message (a delivery state or a detach), in words."""
    if isinstance(answer, RemoteDetach):
        error = answer.error
        return f"a detach of the control link with {error.condition if error else 'no error'}"
    if isinstance(answer, RemoteClose):
        error = answer.error
        return f"a close of the connection with {error.condition if error else 'no error'}"
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


def declared(probe: Probe, **options: Any) -> tuple[Controller, bytes]:
    """A controller on a new session (`options` for its control link) and a transaction it
    declared (4.2): (controller, txn-id). The gate of every transaction case."""
    controller = Controller(probe, probe.open_session(), **options)
    return controller, controller.declare()


def posting(probe: Probe, ctx: Any, queue: str) -> tuple[Controller, bytes, Link]:
    """A transaction declared (`declared`) and a sender to `queue` on the controller's
    session, ready to post in it (4.4.1): (controller, txn-id, sender)."""
    controller, txn_id = declared(probe)
    _, sender = publisher(probe, ctx, queue, session=controller.session)
    return controller, txn_id, sender


def commit(controller: Controller, txn_id: bytes) -> None:
    """Commit `txn_id`; a refusal leaves nothing to grade after it (SHORTFALL: no sentence
    makes a commit succeed)."""
    answer = controller.discharge(txn_id)
    if not isinstance(answer, Accepted):
        raise CaseFailed(
            f"expected the commit accepted; observed {describe(answer)}", level=SHORTFALL
        )


def accept_in(
    probe: Probe, controller: Controller, link: Link, delivery_id: int, *, settled: bool = True
) -> bytes:
    """4.4.2 transactional retirement: a transaction declared on `controller`, and the
    delivery `delivery_id` of `link` given transactional-state(txn-id, accepted) (`settled`
    or not); the txn-id."""
    txn_id = controller.declare()
    state = TransactionalState(txn_id=txn_id, outcome=Accepted())
    link.disposition(delivery_id, settled=settled, state=state)
    probe.flush()
    return txn_id


def check_at_queue(
    ctx: Any, queue: str, expected: list[bytes], what: str, *sentences: str
) -> list[bytes]:
    """4.4: what a fresh consumer of `queue` gets (`visible`) is `expected` (in any order),
    or FAILED quoting `sentences`, the reason saying what was expected (`what`) and what
    the consumer got. What it got."""
    got = visible(ctx, queue)
    ctx.must(sorted(got) == sorted(expected), f"expected {what}; a consumer got {got}", *sentences)
    return got


def roll_back(ctx: Any, controller: Controller, txn_id: bytes) -> None:
    """Discharge `txn_id` with fail=true: accepted, or FAILED (4.3: "the coordinator MUST
    always be able to complete a discharge where the fail flag is set to true")."""
    answer = controller.discharge(txn_id, fail=True)
    ctx.must(
        isinstance(answer, Accepted),
        f"expected accepted for a discharge with fail=true; observed {describe(answer)}",
        ROLLBACK_COMPLETES,
    )


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


def unknown_txn_id(txn_id: bytes) -> bytes:
    """A txn-id the broker never declared: `txn_id` with every octet flipped."""
    return bytes(b ^ 0xFF for b in txn_id) or b"\xff"


def visible(ctx: Any, queue: str, credit: int = 5, quiet: float = QUIET) -> list[bytes]:
    """The message bodies a fresh connection's consumer of `queue` gets until nothing came
    for `quiet` seconds (each settled accepted, so that a later look does not see them)."""
    other = ctx.probe()
    _, link = consumer(other, ctx, queue, credit=credit)
    got: list[bytes] = []
    for delivery in collect(other, link, quiet):
        got.append(message_text(delivery))
        if not delivery.settled:
            other.settle(link, delivery)
    other.close()
    return got


def retire(
    probe: Probe,
    ctx: Any,
    queue: str,
    count: int = 1,
    *,
    source: Source | None = None,
    **attach: Any,
) -> tuple[Controller, Link, list[TransferReceived]]:
    """`count` queued messages received unsettled on the controller's session (from
    `source`, default the queue's; `attach` fields for the receiver's attach), ready to be
    retired (4.4.2): (controller, receiver, deliveries). A delivery that came settled
    leaves nothing to retire: a SHORTFALL (the profile's unsettled-deliveries was wrong)."""
    fill(probe, ctx, queue, count)
    session = probe.open_session()
    controller = Controller(probe, session)
    link = probe.attach_receiver(
        session,
        ctx.source(queue) if source is None else source,
        credit=count,
        snd_settle_mode=SndSettleMode.UNSETTLED,
        **attach,
    )
    deliveries = [probe.next_transfer(link) for _ in range(count)]
    if any(d.settled for d in deliveries):
        raise CaseFailed("a message came settled: nothing to retire", level=SHORTFALL)
    return controller, link, deliveries


def acquire(probe: Probe, ctx: Any, queue: str, session: Session, txn_id: bytes) -> Any:
    """4.4.3 transactional acquisition: one message queued; a receiver on `session` (the
    controller's) grants credit in a flow whose properties carry `txn_id`. The broker's
    answer: a TransferReceived or a RemoteDetach on that link (WaitTimeout: neither)."""
    fill(probe, ctx, queue, 1)
    link = probe.attach_receiver(
        session, ctx.source(queue), snd_settle_mode=SndSettleMode.UNSETTLED
    )
    link.flow(link_credit=1, properties={TXN_ID: txn_id})
    probe.flush()
    return probe.expect(
        lambda e: isinstance(e, TransferReceived | RemoteDetach) and e.link is link,
        ctx.profile.wait,
        "a transfer or a detach",
    )


def answer_in_words(
    probe: Probe,
    link: Link,
    timeout: float,
    delivery_id: int | None = None,
    role: Role = Role.RECEIVER,
) -> str:
    """The broker's answer to something the case did on `link`, as a recorded outcome:
    `detach:<condition>` (the link detached), `<state>:<condition>` (a disposition from
    the broker in `role` covering `delivery_id`), `transfer:<state>` (a delivery on the
    link), or `timeout` when nothing came within `timeout` seconds."""

    def answer(event: Any) -> bool:
        if isinstance(event, RemoteDetach | TransferReceived):
            return event.link is link
        return (
            delivery_id is not None
            and isinstance(event, DispositionReceived)
            and event.role == role
            and event.first <= delivery_id <= event.last
            and event.state is not None
        )

    try:
        event = probe.expect(answer, timeout, "the broker's answer")
    except WaitTimeout:
        return "timeout"
    if isinstance(event, TransferReceived):
        return f"transfer:{getattr(event.state, 'NAME', type(event.state).__name__)}"
    return in_words(event if isinstance(event, RemoteDetach) else event.state)


def in_words(answer: Any) -> str:
    """A detach (`detach:<condition>`) or a delivery state (`<name>[:<condition>]`, the
    condition of its error or of its outcome's) as a recorded outcome."""
    if isinstance(answer, RemoteDetach):
        return f"detach:{error_condition(answer)}"
    name = getattr(answer, "NAME", type(answer).__name__)
    condition = error_condition(answer) or error_condition(getattr(answer, "outcome", None))
    return f"{name}:{condition}" if condition else str(name)


def transaction_timeout(probe: Probe, ctx: Any) -> float:
    """The seconds after its declare in which the broker times out a transaction declared
    on `probe`'s connection from now on: the profile's [timeouts] transaction, which the
    admin adapter sets for this connection where it can (the reference broker's admin
    API), else the broker's own configured one. Unsupported when the profile names none.
    The connection is open already (the admin API lists it from its open)."""
    seconds = ctx.profile.transaction_timeout
    if seconds is None:
        raise Unsupported(
            f"profile {ctx.profile.name!r} names no transaction timeout ([timeouts] transaction)"
        )
    try:
        ctx.admin.set_transaction_timeout(ctx.broker_side_port(probe), seconds)
    except Unsupported:
        pass  # the broker's configured timeout, as the profile names it
    return float(seconds)


def outlive(probe: Probe, seconds: float, since: float) -> RemoteClose | None:
    """Wait until `seconds` and TIMEOUT_MARGIN have passed since `since` (a time.monotonic()
    before the declare); the broker's close of the connection if it closed it meanwhile
    (Qpid Broker-J's answer to a timed-out transaction), else None."""
    end = since + seconds + TIMEOUT_MARGIN
    while not probe.closed and (left := end - time.monotonic()) > 0:
        probe.pump(left)
    try:
        return probe.expect(lambda e: isinstance(e, RemoteClose), 0, "a close")
    except WaitTimeout:
        return None
