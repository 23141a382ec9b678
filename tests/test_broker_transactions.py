"""The reference broker's local transactions (AMQP 1.0 Part 4, reference_broker/
transactions.py), in memory: the coordinator link and its capabilities, declare /
discharge, transactional posting and retirement applied at commit and undone at rollback,
rollback when the control link ends, the Part 4 error conditions, the transaction timeout
(the limit, and the connection's own through the admin API), the faults of the
catalog that break them; and over a socket, a commit into a durable queue that survives
`kill -9` while a rolled-back one leaves nothing."""

from __future__ import annotations

import base64
from urllib.parse import quote

from broker_support import broker_config, memory_session, recovered_after_restart

from amqpspec.amqp10.composites import (
    Accepted,
    Coordinator,
    Declare,
    Declared,
    Discharge,
    Properties,
    Released,
    Source,
    Target,
    TransactionalState,
)
from amqpspec.amqp10.engine import (
    DispositionReceived,
    RemoteAttach,
    RemoteDetach,
    TransferReceived,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import Role, SndSettleMode
from amqpspec.amqp10.types import symbol
from amqpspec.reference_broker.admin.api import AdminApi, Request
from amqpspec.reference_broker.runtime.memory import MemoryBroker
from amqpspec.reference_broker.runtime.process import BrokerProcess

LOCAL = "amqp:local-transactions"


class Controller:
    """A control link on a memory session and the dispositions it got back."""

    def __init__(self, broker, conn, session, name: str = "txn-ctl", **attach) -> None:
        self.broker, self.conn, self.session = broker, conn, session
        self.link = session.attach_sender(
            name, attach.pop("source", Source()), Coordinator(capabilities=[LOCAL]), **attach
        )
        broker.pump()

    def request(self, body) -> object:
        delivery_id = self.link.send(Message.of(body).encode(), settled=False)
        self.broker.pump()
        return state_of(self.conn, delivery_id, Role.RECEIVER)

    def declare(self) -> bytes:
        state = self.request(Declare())
        assert isinstance(state, Declared), state
        return state.txn_id

    def discharge(self, txn_id: bytes, fail: bool = False) -> object:
        return self.request(Discharge(txn_id=txn_id, fail=fail))

    def assert_times_out(self, seconds: float) -> None:
        """A transaction declared now, discharged `seconds` later, is refused with
        amqp:transaction:timeout (4.5.8 transaction-timeout)."""
        txn_id = self.declare()
        self.broker.advance(seconds)
        state = self.discharge(txn_id)
        assert str(state.error.condition) == "amqp:transaction:timeout"


def state_of(conn, delivery_id: int, role: bool) -> object:
    found = [
        e.state
        for e in conn.of(DispositionReceived)
        if e.role == role and e.first <= delivery_id <= e.last
    ]
    return found[-1] if found else None


def publishing_to_q(broker, conn, session) -> tuple[object, Controller, object]:
    """Queue q (not durable), a control link, then a sender publishing to /queues/q."""
    broker.vhost.declare_queue("q", durable=False)
    queue = broker.vhost.get_queue("q")
    ctl = Controller(broker, conn, session)
    sender = session.attach_sender("pub", Source(), Target(address="/queues/q"))
    broker.pump()
    return queue, ctl, sender


def post(broker, conn, sender, txn_id: bytes, text: bytes) -> object:
    delivery_id = sender.send(
        Message.of(text).encode(), settled=False, state=TransactionalState(txn_id=txn_id)
    )
    broker.pump()
    return state_of(conn, delivery_id, Role.RECEIVER)


def test_coordinator_attach_offers_local_transactions():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        Controller(broker, conn, session)
        (attach,) = [e.attach for e in conn.of(RemoteAttach)]
        assert isinstance(attach.target, Coordinator)
        assert LOCAL in [str(c) for c in attach.target.capabilities]


def test_posting_is_applied_at_commit_and_dropped_at_rollback():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        queue, ctl, sender = publishing_to_q(broker, conn, session)
        committed, rolled_back = ctl.declare(), ctl.declare()
        assert committed != rolled_back
        state = post(broker, conn, sender, committed, b"kept")
        # 4.4.1: the presumptive outcome, with the transaction it belongs to
        assert state == TransactionalState(txn_id=committed, outcome=Accepted())
        post(broker, conn, sender, rolled_back, b"dropped")
        assert queue.messages == 0  # nothing available before the discharge
        assert isinstance(ctl.discharge(rolled_back, fail=True), Accepted)
        assert isinstance(ctl.discharge(committed), Accepted)
        assert [Message.decode(m.payload).value for m in queue] == [b"kept"]


def test_retirement_applied_at_commit_and_released_at_rollback():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q", durable=False)
        queue = broker.vhost.get_queue("q")
        queue.publish(Message.of(b"a").encode())
        queue.publish(Message.of(b"b").encode())
        ctl = Controller(broker, conn, session)
        receiver = session.attach_receiver("sub", Source(address="/queues/q"), Target())
        broker.pump()
        receiver.flow(link_credit=2)
        broker.pump()
        first, second = [e.delivery_id for e in conn.of(TransferReceived)]
        commit, rollback = ctl.declare(), ctl.declare()
        accepted = TransactionalState(txn_id=commit, outcome=Accepted())
        receiver.disposition(first, settled=True, state=accepted)
        receiver.disposition(
            second, settled=True, state=TransactionalState(txn_id=rollback, outcome=Accepted())
        )
        broker.pump()
        assert queue.messages == 2  # both still acquired until the discharges
        assert isinstance(ctl.discharge(rollback, fail=True), Accepted)
        assert isinstance(ctl.discharge(commit), Accepted)
        # the committed one is gone; the rolled-back one got the default outcome (4.4.4.2)
        # and comes back to the consumer
        assert queue.messages == 1
        receiver.flow(link_credit=1)
        broker.pump()
        again = conn.of(TransferReceived)[2:]
        assert [Message.decode(e.payload).value for e in again] == [b"b"]


def test_control_link_detach_rolls_back():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        queue, ctl, sender = publishing_to_q(broker, conn, session)
        txn_id = ctl.declare()
        post(broker, conn, sender, txn_id, b"x")
        ctl.link.detach(closed=True)
        broker.pump()
        again = Controller(broker, conn, session, name="txn-ctl-2")
        state = again.discharge(txn_id)  # 4.1: rolled back, the id unknown now
        assert str(state.error.condition) == "amqp:transaction:unknown-id"
        assert queue.messages == 0


def test_unknown_id_and_rollback_conditions():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q", durable=False)
        ctl = Controller(broker, conn, session)
        state = ctl.discharge(b"\xff\xff")
        assert str(state.error.condition) == "amqp:transaction:unknown-id"
        # a posted message whose queue is deleted before the commit: 4.4.4.1, the
        # resource MUST NOT allow the successful discharge
        sender = session.attach_sender("pub", Source(), Target(address="/queues/q"))
        broker.pump()
        txn_id = ctl.declare()
        post(broker, conn, sender, txn_id, b"x")
        broker.vhost.delete_queue("q")
        broker.pump()
        state = ctl.discharge(txn_id)
        assert str(state.error.condition) == "amqp:transaction:rollback"


def test_a_refused_settled_post_makes_the_commit_fail():
    """4.4.4.1: a settled transactional transfer the resource cannot process (the anonymous
    terminus, `to` a missing queue) MUST NOT let the transaction commit."""
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        ctl = Controller(broker, conn, session)
        sender = session.attach_sender("anon", Source(), Target(address=None))
        broker.pump()
        txn_id = ctl.declare()
        payload = Message.of(b"x", properties=Properties(to="/queues/missing")).encode()
        sender.send(payload, settled=True, state=TransactionalState(txn_id=txn_id))
        broker.pump()
        state = ctl.discharge(txn_id)
        assert str(state.error.condition) == "amqp:transaction:rollback"


def test_transaction_timeout():
    config = broker_config(limits={"transaction_timeout": 5.0})
    with MemoryBroker(config) as broker, memory_session(broker) as (conn, session):
        Controller(broker, conn, session).assert_times_out(6.0)


def test_without_rejected_outcome_the_control_link_is_detached():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        source = Source(outcomes=["amqp:accepted:list"])
        ctl = Controller(broker, conn, session, source=source)
        ctl.link.send(Message.of(Discharge(txn_id=b"\x09")).encode(), settled=False)
        broker.pump()
        (detach,) = conn.of(RemoteDetach)
        assert str(detach.error.condition) == "amqp:transaction:unknown-id"


def test_fault_post_immediately_makes_posts_visible_and_keeps_them():
    config = broker_config(faults=("txn-post-immediately",))
    with MemoryBroker(config) as broker, memory_session(broker) as (conn, session):
        queue, ctl, sender = publishing_to_q(broker, conn, session)
        txn_id = ctl.declare()
        post(broker, conn, sender, txn_id, b"x")
        assert queue.messages == 1
        ctl.discharge(txn_id, fail=True)
        assert queue.messages == 1


def test_fault_discharge_unknown_accepted():
    config = broker_config(faults=("txn-discharge-unknown-accepted",))
    with MemoryBroker(config) as broker, memory_session(broker) as (conn, session):
        ctl = Controller(broker, conn, session)
        assert isinstance(ctl.discharge(b"\xff"), Accepted)


def test_unroutable_post_is_released_in_the_transaction():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q", durable=False)
        ctl = Controller(broker, conn, session)
        sender = session.attach_sender("pub", Source(), Target(address="/exchanges/amq.direct/k"))
        broker.pump()
        txn_id = ctl.declare()
        state = post(broker, conn, sender, txn_id, b"x")
        assert state == TransactionalState(txn_id=txn_id, outcome=Released())


def test_acquisition_in_a_transaction_rolled_back_and_committed():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q", durable=False)
        queue = broker.vhost.get_queue("q")
        for text in (b"a", b"b"):
            queue.publish(Message.of(text).encode())
        ctl = Controller(broker, conn, session)
        receiver = session.attach_receiver(
            "sub", Source(address="/queues/q"), Target(), snd_settle_mode=SndSettleMode.UNSETTLED
        )
        broker.pump()
        rollback = ctl.declare()
        receiver.flow(link_credit=1, properties={symbol("txn-id"): rollback})
        broker.pump()
        (first,) = conn.of(TransferReceived)
        assert first.state == TransactionalState(txn_id=rollback)  # 4.4: its transaction
        assert isinstance(ctl.discharge(rollback, fail=True), Accepted)
        # the acquisition is undone: settled released, the message back in the queue
        assert isinstance(state_of(conn, first.delivery_id, Role.SENDER), Released)
        assert queue.messages_ready == 2
        commit = ctl.declare()
        receiver.flow(link_credit=1, properties={symbol("txn-id"): commit})
        broker.pump()
        second = conn.of(TransferReceived)[1]
        assert second.state == TransactionalState(txn_id=commit)
        accepted = TransactionalState(txn_id=commit, outcome=Accepted())
        receiver.disposition(second.delivery_id, settled=True, state=accepted)
        assert isinstance(ctl.discharge(commit), Accepted)
        assert queue.messages == 1
        # the discharge cleared the link's txn-id: the next delivery is outside any
        receiver.flow(link_credit=1)
        broker.pump()
        assert conn.of(TransferReceived)[2].state is None


def test_acquisition_refused_on_a_settled_link_and_for_an_unknown_txn_id():
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        broker.vhost.declare_queue("q", durable=False)
        ctl = Controller(broker, conn, session)
        txn_id = ctl.declare()
        source = Source(address="/queues/q")
        settled = session.attach_receiver(
            "settled", source, Target(), snd_settle_mode=SndSettleMode.SETTLED
        )
        unknown = session.attach_receiver(
            "unknown", source, Target(), snd_settle_mode=SndSettleMode.UNSETTLED
        )
        broker.pump()
        settled.flow(link_credit=1, properties={symbol("txn-id"): txn_id})
        unknown.flow(link_credit=1, properties={symbol("txn-id"): b"\xff" + txn_id})
        broker.pump()
        conditions = {e.link.name: str(e.error.condition) for e in conn.of(RemoteDetach)}
        assert conditions == {  # 4.4.3 MUST: not-implemented where it is not supported
            "settled": "amqp:not-implemented",
            "unknown": "amqp:transaction:unknown-id",
        }


def _proton_transaction(url: str, address: str, bodies: list[str], commit: bool) -> None:
    """python-qpid-proton as the controller (an independent client): post `bodies` in one
    transaction to `address`, then commit or roll back; bounded."""
    import threading

    from proton import Message as ProtonMessage
    from proton.handlers import MessagingHandler, TransactionHandler
    from proton.reactor import Container

    done = threading.Event()

    class Client(MessagingHandler, TransactionHandler):
        def on_start(self, event):
            self.conn = event.container.connect(url)
            self.sender = event.container.create_sender(self.conn, address)
            event.container.declare_transaction(self.conn, handler=self)
            self.timer = event.container.schedule(10.0, self)

        def on_transaction_declared(self, event):
            for text in bodies:
                event.transaction.send(self.sender, ProtonMessage(body=text))
            if commit:
                event.transaction.commit()
            else:
                event.transaction.abort()

        def on_transaction_committed(self, event):
            self._finish(event)

        def on_transaction_aborted(self, event):
            self._finish(event)

        def _finish(self, event):
            done.set()
            self.timer.cancel()
            self.conn.close()

        def on_timer_task(self, event):
            event.container.stop()

    runner = threading.Thread(target=Container(Client()).run, daemon=True)
    runner.start()
    runner.join(15.0)
    assert done.is_set(), "the proton controller did not finish its transaction"


def test_committed_work_survives_kill_9_and_rollback_leaves_nothing(tmp_path):
    data_dir = str(tmp_path / "data")
    broker = BrokerProcess("--data-dir", data_dir)
    try:
        url = f"amqp://127.0.0.1:{broker.port}"
        _proton_transaction(url, "/queue/txq", ["c1", "c2"], commit=True)  # v1: durable
        _proton_transaction(url, "/queue/txq", ["r1"], commit=False)
    finally:
        broker.kill()
    assert recovered_after_restart(data_dir, "/queues/txq") == ["c1", "c2"]


def _retired_in(broker, conn, session, ctl) -> tuple[object, bytes]:
    """One message of queue q received and settled with transactional-state(a new
    transaction, accepted): (the queue, the txn-id)."""
    broker.vhost.declare_queue("q", durable=False)
    queue = broker.vhost.get_queue("q")
    queue.publish(Message.of(b"a").encode())
    receiver = session.attach_receiver("sub", Source(address="/queues/q"), Target())
    broker.pump()
    receiver.flow(link_credit=1)
    broker.pump()
    (delivery,) = conn.of(TransferReceived)
    txn_id = ctl.declare()
    state = TransactionalState(txn_id=txn_id, outcome=Accepted())
    receiver.disposition(delivery.delivery_id, settled=True, state=state)
    broker.pump()
    return queue, txn_id


def test_transaction_timeout_rolls_back_when_it_fires():
    """4.5.8 transaction-timeout: at the timeout, before any discharge, the retirement is
    rolled back (the message released back to the queue); the discharge is refused."""
    config = broker_config(limits={"transaction_timeout": 5.0})
    with MemoryBroker(config) as broker, memory_session(broker) as (conn, session):
        ctl = Controller(broker, conn, session)
        queue, txn_id = _retired_in(broker, conn, session, ctl)
        broker.advance(4.0)
        assert queue.messages_ready == 0  # still the transaction's
        broker.advance(2.0)
        assert queue.messages_ready == 1  # timed out: rolled back, released
        state = ctl.discharge(txn_id)
        assert str(state.error.condition) == "amqp:transaction:timeout"
        assert isinstance(ctl.discharge(ctl.declare()), Accepted)  # the next one is fine


def test_connection_transaction_timeout_through_the_admin_api():
    """PUT /api/connections/{name}/transaction-timeout sets the connection's timeout for
    the transactions it declares from then on; a bad value is a 400."""
    with MemoryBroker() as broker, memory_session(broker) as (conn, session):
        (name,) = broker.vhost.connections
        api = AdminApi(broker.vhost, None, broker.config)
        auth = "Basic " + base64.b64encode(b"guest:guest").decode()

        def put(body: bytes) -> int:
            path = f"/api/connections/{quote(name, safe='')}/transaction-timeout"
            segments = ["connections", name, "transaction-timeout"]
            request = Request("PUT", path, segments, {}, {"authorization": auth}, body)
            return api.handle(request).status

        assert put(b'{"seconds": -1}') == 400
        assert put(b'{"seconds": 0.5}') == 204
        Controller(broker, conn, session).assert_times_out(1.0)


def test_fault_timeout_never_fires():
    config = broker_config(limits={"transaction_timeout": 5.0}, faults=("txn-timeout-never-fires",))
    with MemoryBroker(config) as broker, memory_session(broker) as (conn, session):
        ctl = Controller(broker, conn, session)
        queue, txn_id = _retired_in(broker, conn, session, ctl)
        broker.advance(6.0)
        assert queue.messages_ready == 0
        assert isinstance(ctl.discharge(txn_id), Accepted)
