"""Reference broker acceptance runs, traced: every client session with the reference broker is
recorded by the recording proxy (`amqpspec capture`, a subprocess) and the pcap is checked with
`amqpspec trace check` (the real CLI); the Parquet frame log proves the volume and the credit
pattern each run used.

Runs (the broker is a `python -m amqpspec.reference_broker` subprocess with its admin API):
- default suite: python-qpid-proton clients through a classic queue, a durable queue and
  each exchange type (direct, fanout, topic, headers via the amq.* exchanges); on every
  route each queue is read by four receivers in turn: manual credit 1, 2 and 200 (new
  credit only once the old is used up) and MessagingHandler(prefetch=2) (credit re-granted
  after every message, the RabbitMQ #2597 pattern).
- slow: 100k messages per route with the Qpid Proton C example `send` and a `receive`
  built from the C example with a credit window (bench.broker_bench.build_c_clients):
  credit 200, topped up once down to 100; and 20k through the classic queue with credit
  2 topped up after every message (the re-grant pattern, one round trip per message).
- control: a sender paced one message per arrival, then a burst, to a receiver that tops
  credit up to 2 after every message: the correct broker is clean; against the broker with
  fault overdeliver-on-regrant `trace check` exits 1, and the broker's MUST findings are
  link.credit.transfer-beyond-credit only. (With a full queue this fault stays invisible:
  the broker has spent its credit before each re-grant arrives.)
"Clean" means no finding of the broker's and, of the Proton clients', only the delivery-count
their receivers set before the broker's attach (PROTON_CLIENT_RULES, 2.7.4).
Owns only this file; the C client variants come from bench/broker_bench.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from broker_support import ROUTE_IDS, ROUTES
from traces_support.processes import Capture, start_capture

from amqpspec.bench.broker_bench import build_c_clients, c_examples_available, run_c_client
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.runtime.process import BrokerProcess

pytestmark = [pytest.mark.proton]

ROOT = pathlib.Path(__file__).resolve().parent.parent
WAIT = 30.0
C_COUNT = 100_000
PY_COUNT = 500  # per receiver; four receivers per queue and route
BEYOND_CREDIT = "link.credit.transfer-beyond-credit"

# receiver modes: (link name, credit, re-grant after every message)
MODES = [("credit-1", 1, False), ("credit-2", 2, False), ("credit-200", 200, False)]
PREFETCH_2 = ("prefetch-2", 2, True)


# --- processes -------------------------------------------------------------------------------


@dataclasses.dataclass
class Broker:
    port: int
    admin: ManagementClient


@contextlib.contextmanager
def broker_process(data_dir: pathlib.Path, *args: str) -> Iterator[Broker]:
    log = data_dir.parent / f"broker-{data_dir.name}.log"
    process = BrokerProcess("--data-dir", str(data_dir), *args, admin=True, log=log, wait=WAIT)
    admin = ManagementClient(f"http://127.0.0.1:{process.admin_port}")
    try:
        yield Broker(process.port, admin)
    finally:
        admin.close()
        process.stop()


@contextlib.contextmanager
def recording(broker: Broker, out: pathlib.Path) -> Iterator[Capture]:
    """`amqpspec capture` in front of the broker; stopped with SIGINT, which must exit 0."""
    capture = start_capture(broker.port, str(out), trace_id="traced")
    try:
        yield capture
    finally:
        code = capture.stop(signal.SIGINT)
    assert code == 0, capture.process.stderr.read().decode(errors="replace")[-2000:]


# Proton's receivers (C and Python) grant credit with delivery-count 0 before the broker's
# attach came back (2.7.4: "In the event that the Receiving Link Endpoint has not yet seen
# the initial attach frame from the Sender this field MUST NOT be set"): the client's.
PROTON_CLIENT_RULES = {"link.flow.receiver-delivery-count-before-attach"}


def trace_check(pcap: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "amqpspec.cli", "trace", "check", "--json", pcap],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(ROOT),
    )


def findings(result: subprocess.CompletedProcess, origin: str) -> list[dict]:
    """The violations `trace check --json` reported for `origin` ("client" or "server")."""
    lines = (json.loads(line) for line in result.stdout.splitlines() if line.startswith("{"))
    return [f for f in lines if f.get("origin") == origin]


def assert_clean(capture: Capture) -> None:
    """Nothing of the broker's; of the Proton clients', only PROTON_CLIENT_RULES."""
    result = trace_check(capture.pcap)
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-2000:]
    assert findings(result, "server") == [], result.stdout[-3000:]
    client = {f["rule_id"] for f in findings(result, "client")}
    assert client <= PROTON_CLIENT_RULES, result.stdout[-3000:]


# --- the Parquet frame log -------------------------------------------------------------------


@dataclasses.dataclass
class ConnectionSummary:
    link_names: list[str]
    transfers_in: int = 0  # client -> server
    transfers_out: int = 0  # server -> client
    client_flows: int = 0
    max_client_credit: int = 0
    multi_frame: int = 0


def summarize(parquet: str) -> dict[int, ConnectionSummary]:
    """Per connection: the client's link names, transfers each way, the client's flows."""
    table = pq.read_table(
        parquet,
        columns=["connection_id", "direction", "performative", "link_name", "link_credit", "more"],
    )
    summaries: dict[int, ConnectionSummary] = {}
    attaches = table.filter(
        pc.and_(pc.equal(table["performative"], "attach"), pc.equal(table["direction"], "client"))
    )
    for row in attaches.to_pylist():
        summary = summaries.setdefault(row["connection_id"], ConnectionSummary([]))
        summary.link_names.append(row["link_name"])
    grouped = (
        table.filter(pc.is_in(table["performative"], value_set=pa.array(["transfer", "flow"])))
        .group_by(["connection_id", "direction", "performative"])
        .aggregate([("link_credit", "max"), ("performative", "count"), ("more", "sum")])
    )
    for row in grouped.to_pylist():
        summary = summaries.setdefault(row["connection_id"], ConnectionSummary([]))
        count = row["performative_count"]
        if row["performative"] == "transfer":
            summary.multi_frame += int(row["more_sum"] or 0)
            if row["direction"] == "client":
                summary.transfers_in += count
            else:
                summary.transfers_out += count
        elif row["direction"] == "client":
            summary.client_flows += count
            summary.max_client_credit = int(row["link_credit_max"] or 0)
    return summaries


def by_link(summaries: dict[int, ConnectionSummary]) -> dict[str, list[ConnectionSummary]]:
    links: dict[str, list[ConnectionSummary]] = {}
    for summary in summaries.values():
        for name in summary.link_names:
            links.setdefault(name, []).append(summary)
    return links


# --- python-qpid-proton clients --------------------------------------------------------------


def proton_send(port: int, address: str, count: int) -> int:
    """Send `count` messages (unsettled); return how many the broker accepted."""
    import proton
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    outcome = {"accepted": 0, "other": 0, "timed_out": False}

    class Sender(MessagingHandler):
        def __init__(self) -> None:
            super().__init__()
            self.sent = 0

        def on_start(self, event: Any) -> None:
            self.timer = event.container.schedule(WAIT * 2, self)
            self.conn = event.container.connect(f"amqp://127.0.0.1:{port}")
            event.container.create_sender(self.conn, address, name="py-sender")

        def on_sendable(self, event: Any) -> None:
            while event.sender.credit and self.sent < count:
                event.sender.send(proton.Message(body=f"m{self.sent}"))
                self.sent += 1

        def _outcome(self, event: Any, key: str) -> None:
            outcome[key] += 1
            if outcome["accepted"] + outcome["other"] == count:
                self.timer.cancel()
                event.connection.close()

        def on_accepted(self, event: Any) -> None:
            self._outcome(event, "accepted")

        def on_rejected(self, event: Any) -> None:
            self._outcome(event, "other")

        def on_released(self, event: Any) -> None:
            self._outcome(event, "other")

        def on_timer_task(self, event: Any) -> None:
            outcome["timed_out"] = True
            self.conn.close()

    Container(Sender()).run()
    assert not outcome["timed_out"], f"send to {address} timed out: {outcome}"
    return outcome["accepted"]


def proton_receive(port: int, address: str, count: int, mode: tuple[str, int, bool]) -> list[str]:
    """Receive exactly `count` messages with link name mode[0]. Manual credit C: grant
    min(C, remaining) whenever the credit is used up. Re-grant (prefetch=C): proton's
    flow controller tops credit up to C after every message."""
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    name, credit, regrant = mode
    bodies: list[str] = []
    state = {"timed_out": False}

    class Receiver(MessagingHandler):
        def __init__(self) -> None:
            super().__init__(prefetch=credit if regrant else 0)
            self.granted = 0

        def on_start(self, event: Any) -> None:
            self.timer = event.container.schedule(WAIT * 2, self)
            self.conn = event.container.connect(f"amqp://127.0.0.1:{port}")
            self.link = event.container.create_receiver(self.conn, address, name=name)
            if not regrant:
                self._grant()

        def _grant(self) -> None:
            remaining = count - len(bodies)
            if remaining > 0:
                self.granted = min(credit, remaining)
                self.link.flow(self.granted)

        def on_message(self, event: Any) -> None:
            bodies.append(event.message.body)
            if len(bodies) == count:
                self.timer.cancel()
                event.connection.close()
            elif not regrant:
                self.granted -= 1
                if self.granted == 0:
                    self._grant()

        def on_timer_task(self, event: Any) -> None:
            state["timed_out"] = True
            self.conn.close()

    Container(Receiver()).run()
    assert not state["timed_out"], f"{name} on {address}: {len(bodies)} of {count} by the timeout"
    return bodies


def declare(broker: Broker, bindings: list) -> None:
    broker.admin.declare_queue("cq", durable=False)
    broker.admin.declare_queue("dq", durable=True)
    for exchange, queue, key, arguments in bindings:
        broker.admin.bind(exchange, queue, key, arguments)


# --- default suite: python clients, every route, credits 1, 2, 200 and prefetch 2 ----------


@pytest.mark.parametrize(("name", "target", "queues", "bindings"), ROUTES, ids=ROUTE_IDS)
def test_python_clients_traced(tmp_path, name, target, queues, bindings):
    modes = [*MODES, PREFETCH_2]  # prefetch-2 last: its spare credit finds the queue empty
    total = PY_COUNT * len(modes)
    fsync = () if name == "durable" else ("--no-fsync",)
    with broker_process(tmp_path / "data", *fsync) as broker:
        declare(broker, bindings)
        with recording(broker, tmp_path / "trace") as capture:
            assert proton_send(capture.port, target, total) == total
            for queue in queues:
                assert broker.admin.queue(queue)["messages"] == total
                received: list[str] = []
                for mode in modes:
                    received += proton_receive(capture.port, f"/queues/{queue}", PY_COUNT, mode)
                assert received == [f"m{i}" for i in range(total)]  # FIFO, nothing lost
                assert broker.admin.queue(queue)["messages"] == 0
    assert_clean(capture)
    links = by_link(summarize(capture.parquet))
    [sender] = links["py-sender"]
    assert (sender.transfers_in, sender.transfers_out) == (total, 0)
    for link_name, credit, regrant in modes:
        receivers = links[link_name]
        assert len(receivers) == len(queues)
        for receiver in receivers:
            assert (receiver.transfers_in, receiver.transfers_out) == (0, PY_COUNT)
            assert receiver.multi_frame == 0
            assert receiver.max_client_credit == credit
            if regrant:  # a flow after every message (proton: at least one per read of two)
                assert receiver.client_flows >= PY_COUNT // 2
            else:  # one grant per `credit` messages
                assert receiver.client_flows == -(-PY_COUNT // credit)


def proton_ping_pong_then_burst(port: int, address: str, ping: int, count: int) -> int:
    """One sender and one receiver (link name "regrant-2") on two connections. The receiver
    grants credit 2 and tops it up to 2 after every message (the prefetch-2 re-grant
    pattern, as MessagingHandler(prefetch=2) intends). The first `ping` messages are sent
    one at a time, each once the previous one arrived, so every re-grant reaches the broker
    while it still holds one credit; then the rest go as fast as credit allows. Returns the
    number received."""
    import proton
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    state = {"sent": 0, "received": 0, "timed_out": False}

    class PingPong(MessagingHandler):
        def __init__(self) -> None:
            super().__init__(prefetch=0)

        def on_start(self, event: Any) -> None:
            self.timer = event.container.schedule(WAIT * 2, self)
            url = f"amqp://127.0.0.1:{port}"
            self.connections = [event.container.connect(url), event.container.connect(url)]
            self.sender = event.container.create_sender(self.connections[0], address)
            self.receiver = event.container.create_receiver(
                self.connections[1], address, name="regrant-2"
            )
            self.receiver.flow(2)

        def _send(self) -> None:
            limit = state["received"] + 1 if state["received"] < ping else count
            while self.sender.credit and state["sent"] < min(limit, count):
                self.sender.send(proton.Message(body=f"m{state['sent']}"))
                state["sent"] += 1

        def on_sendable(self, event: Any) -> None:
            self._send()

        def on_message(self, event: Any) -> None:
            state["received"] += 1
            if state["received"] == count:
                self.timer.cancel()
                for connection in self.connections:
                    connection.close()
                return
            if self.receiver.credit < 2:
                self.receiver.flow(2 - self.receiver.credit)
            self._send()

        def on_timer_task(self, event: Any) -> None:
            state["timed_out"] = True
            for connection in self.connections:
                connection.close()

    Container(PingPong()).run()
    assert not state["timed_out"], f"ping-pong timed out: {state}"
    return state["received"]


@pytest.mark.parametrize("fault", [None, "overdeliver-on-regrant"], ids=["correct", "fault"])
def test_regrant_pattern_trace_check_control(tmp_path, fault):
    """Control for the checker on the re-grant pattern: the correct broker passes `trace
    check`; with the RabbitMQ #2597 fault (a re-grant added to the remaining credit) the
    same run must fail it, on the credit rule (2.6.7) only. The fault shows once re-grants
    reach the broker while it still holds credit, so the first messages are sent one by
    one (queue dry at every re-grant), then a burst spends the inflated credit."""
    count, ping = 2000, 50
    args = ("--fault", fault) if fault else ()
    with broker_process(tmp_path / "data", *args) as broker:
        declare(broker, [])
        with recording(broker, tmp_path / "trace") as capture:
            assert proton_ping_pong_then_burst(capture.port, "/queues/cq", ping, count) == count
            assert broker.admin.queue("cq")["messages"] == 0
    [receiver] = by_link(summarize(capture.parquet))["regrant-2"]
    assert receiver.transfers_out == count
    assert receiver.max_client_credit == 2
    # a re-grant after every message (proton writes one flow per read: at least one per two)
    assert receiver.client_flows >= count // 2
    if fault is None:
        assert_clean(capture)
        return
    result = trace_check(capture.pcap)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    must = [f["rule_id"] for f in findings(result, "server") if f["level"] == "MUST"]
    assert must, result.stdout[-2000:]
    assert set(must) == {BEYOND_CREDIT}, must[:5]


# --- slow: 100k messages per route with the Proton C example clients -------------------------


@pytest.fixture(scope="module")
def c_clients(tmp_path_factory) -> pathlib.Path:
    if not c_examples_available():
        script = ROOT / "tools" / "brokers" / "proton-c-broker.sh"
        pytest.skip(f"proton C examples not installed: run '{script} install'")
    return build_c_clients(tmp_path_factory.mktemp("proton-c"), (2, 200))


def c_clients_traced(
    c_clients: pathlib.Path, tmp_path: pathlib.Path, route: tuple, count: int, credit: int
) -> None:
    """C `send` of `count` messages to the route's target, then the credit-window C
    receiver empties each queue; all through the recording proxy; trace check clean; the
    frame log holds `count` transfers each way per link and the receiver's credit pattern."""
    name, target, queues, bindings = route
    receive = c_clients / f"receive-quiet-credit-{credit}"
    fsync = () if name == "durable" else ("--no-fsync",)
    with broker_process(tmp_path / "data", *fsync) as broker:
        declare(broker, bindings)
        with recording(broker, tmp_path / "trace") as capture:
            sent = run_c_client(c_clients / "send", capture.port, target, count)
            assert sent == f"{count} messages sent and acknowledged"
            for queue in queues:
                assert broker.admin.queue(queue)["messages"] == count
                got = run_c_client(receive, capture.port, f"/queues/{queue}", count)
                assert got == f"{count} messages received"
                assert broker.admin.queue(queue)["messages"] == 0
    assert_clean(capture)
    links = by_link(summarize(capture.parquet))
    [sender] = links["my_sender"]
    assert (sender.transfers_in, sender.transfers_out) == (count, 0)
    receivers = links["my_receiver"]
    assert len(receivers) == len(queues)
    for receiver in receivers:
        assert (receiver.transfers_in, receiver.transfers_out) == (0, count)
        assert receiver.max_client_credit == credit
        if credit <= 2:  # re-granted after every message (one flow per read of two or one)
            assert receiver.client_flows >= count // 2
        else:  # topped up only once down to half: each flow grants credit/2 to credit
            assert count // credit <= receiver.client_flows <= count // (credit // 2) + 1


@pytest.mark.slow
@pytest.mark.parametrize(("name", "target", "queues", "bindings"), ROUTES, ids=ROUTE_IDS)
def test_100k_c_clients_traced(c_clients, tmp_path, name, target, queues, bindings):
    c_clients_traced(c_clients, tmp_path, (name, target, queues, bindings), C_COUNT, 200)


@pytest.mark.slow
def test_c_regrant_2_traced(c_clients, tmp_path):
    """The prefetch-2 re-grant pattern with the C client: credit topped up to 2 after every
    message (20k messages: each one costs a round trip through the proxy)."""
    c_clients_traced(c_clients, tmp_path, ROUTES[0], 20_000, 2)
