"""kill -9 soak: N cycles of `kill -9` while confirmed publishing and consuming run against a
durable classic queue and a stream queue; then every confirmed message is counted.

    amqpspec bench kill-soak [--cycles 100] [--min-run 0.2] [--max-run 1.0] [--seed 1]
    python -m amqpspec.bench.overload.kill_soak [same options]

Each cycle starts `python -m amqpspec.reference_broker --data-dir D` (the same D every cycle), one
publisher connection (two sender links, unsettled transfers: a message is confirmed when its
`accepted` disposition arrives; at most --in-flight unconfirmed per link) and one consumer
connection (a receiver per queue, credit 100 topped up at half, every delivery accepted),
runs them for a random time in [--min-run, --max-run] s and SIGKILLs the broker while
transfers and dispositions are in flight. The stream consumer resumes at the offset after
the last one it read (rabbitmq:stream-offset-spec). Every message carries its message-id
(c-N / s-N), so the counts are exact. After the last cycle a clean start drains the classic
queue and reads the whole stream from `first`; then:
- lost: confirmed ids never received (classic: in any cycle or the final drain; stream: in
  the final full read) — must be 0;
- classic duplicates: a message received again must carry the 3.2.1 redelivery marks
  (first-acquirer false or delivery-count > 0) — unmarked duplicates must be 0;
- stream duplicates: an id twice in the full read — must be 0; offsets reused: an offset
  the consumer read before a kill naming another message after it (an entry delivered
  before it was on disk, lost with the unsynced tail) — must be 0, or a consumer resuming
  by offset skips the messages that took those offsets.
- transactions (kill_soak_txn.py: a third connection commits and rolls back transactions
  of numbered messages to a durable classic queue, Part 4): every message of an accepted
  commit there, none of a rollback, a commit in flight at the kill all there or none.
Owns: its broker processes (killed / stopped by PID) and its temp data dir.
"""

from __future__ import annotations

import argparse
import collections
import random
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from amqpspec.amqp10.composites import Accepted, Header, Properties, Source
from amqpspec.amqp10.engine import (
    DispositionReceived,
    Event,
    FlowReceived,
    RemoteAttach,
    TransferReceived,
)
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import Described, symbol
from amqpspec.bench.overload import kill_soak_txn
from amqpspec.bench.overload.kill_soak_txn import TXN_QUEUE, TxnPublisher, TxnTally
from amqpspec.bench.overload.peer import (
    WAIT,
    Peer,
    Pump,
    ended,
    exit_status,
    write_report,
)
from amqpspec.bench.script import script_main
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.runtime.process import BrokerProcess

CLASSIC = "soak-classic"
STREAM = "soak-stream"
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
STREAM_OFFSET = symbol("x-stream-offset")
CREDIT = 100


def declare_queues(broker: BrokerProcess) -> None:
    with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as admin:
        admin.declare_queue(CLASSIC, durable=True)
        admin.declare_queue(STREAM, durable=True, arguments={"x-queue-type": "stream"})
        admin.declare_queue(TXN_QUEUE, durable=True)


def stream_source(offset: Any) -> Source:
    return Source(address=f"/queues/{STREAM}", filter={OFFSET_SPEC: Described(OFFSET_SPEC, offset)})


@dataclass
class Received:
    """One delivery as the consumer saw it."""

    msg_id: str
    first_acquirer: bool
    delivery_count: int
    offset: int | None = None


@dataclass
class Tally:
    published: collections.Counter = field(default_factory=collections.Counter)
    confirmed: dict[str, set[str]] = field(default_factory=lambda: {CLASSIC: set(), STREAM: set()})
    not_accepted: int = 0  # outcomes other than accepted (released/rejected/modified)
    classic: list[Received] = field(default_factory=list)  # every classic delivery, in order
    stream_offsets: collections.Counter = field(default_factory=collections.Counter)
    next_offset: Any = "first"  # where the stream consumer resumes
    txn: TxnTally = field(default_factory=TxnTally)  # the transactional side


class Publisher:
    """One connection, a sender per queue; numbered durable messages, unsettled."""

    def __init__(self, port: int, tally: Tally, in_flight: int, start: dict[str, int]) -> None:
        self.tally = tally
        self.in_flight = in_flight
        self.peer = Peer(port, "soak-publisher", on_event=self.on_event)
        self.peer.conn.open()
        self.session = self.peer.conn.begin()
        self.links = {
            q: self.session.attach_sender(f"pub-{q}", target=f"/queues/{q}")
            for q in (CLASSIC, STREAM)
        }
        self.next = start
        self.pending: dict[int, tuple[str, str]] = {}  # delivery-id -> (queue, msg-id)
        self.unconfirmed = collections.Counter()

    def on_event(self, event: Event) -> None:
        if isinstance(event, DispositionReceived) and event.role:
            for delivery_id in range(event.first, event.last + 1):
                entry = self.pending.pop(delivery_id, None)
                if entry is None:
                    continue
                queue, msg_id = entry
                self.unconfirmed[queue] -= 1
                if isinstance(event.state, Accepted):
                    self.tally.confirmed[queue].add(msg_id)
                else:
                    self.tally.not_accepted += 1

    def publish(self) -> None:
        if self.peer.closed:
            return
        for queue, link in self.links.items():
            while link.credit > 0 and self.unconfirmed[queue] < self.in_flight:
                msg_id = f"{queue[5]}-{self.next[queue]}"
                self.next[queue] += 1
                payload = Message.of(
                    msg_id.encode(),
                    header=Header(durable=True),
                    properties=Properties(message_id=msg_id),
                ).encode()
                self.pending[link.send(payload, settled=False)] = (queue, msg_id)
                self.unconfirmed[queue] += 1
                self.tally.published[queue] += 1


class Consumer:
    """One connection, a receiver per queue (the stream one from `tally.next_offset`); every
    delivery accepted at once; credit topped up to CREDIT when it falls to half."""

    def __init__(self, port: int, tally: Tally, *, record_classic: bool = True) -> None:
        self.tally = tally
        self.record_classic = record_classic
        self.stream_ids: list[str] = []  # what the stream receiver read, in order
        self.drained = {CLASSIC: False, STREAM: False, TXN_QUEUE: False}
        self.peer = Peer(port, "soak-consumer", on_event=self.on_event)
        self.peer.conn.open()
        self.session = self.peer.conn.begin()
        self.classic = self.session.attach_receiver("sub-classic", source=f"/queues/{CLASSIC}")
        self.stream = self.session.attach_receiver(
            "sub-stream", source=stream_source(tally.next_offset)
        )
        self.txn = self.session.attach_receiver("sub-txn", source=f"/queues/{TXN_QUEUE}")
        self.queues = {self.classic: CLASSIC, self.stream: STREAM, self.txn: TXN_QUEUE}
        self.attached = 0
        self.draining = False

    def on_event(self, event: Event) -> None:
        if isinstance(event, RemoteAttach):
            self.attached += 1
            event.link.flow(link_credit=CREDIT, drain=self.draining)
        elif isinstance(event, TransferReceived):
            self.on_transfer(event)
        elif isinstance(event, FlowReceived) and event.link is not None and self.draining:
            link = event.link
            if link.credit == 0:
                self.drained[self.queues[link]] = True

    def on_transfer(self, event: TransferReceived) -> None:
        message = Message.decode(event.payload)
        header = message.header or Header()
        assert message.properties is not None
        msg_id = str(message.properties.message_id)
        link = event.link
        link.disposition(event.delivery_id, settled=True, state=Accepted())
        if link is self.txn:
            self.tally.txn.seen[msg_id] += 1
        elif link is self.classic:
            self.tally.classic.append(
                Received(msg_id, header.first_acquirer is not False, header.delivery_count or 0)
            )
        else:
            offset = int((message.message_annotations or {})[STREAM_OFFSET])
            self.tally.stream_offsets[offset] += 1
            self.tally.next_offset = offset + 1
            self.stream_ids.append(msg_id)
        if not self.draining and link.credit <= CREDIT // 2:
            link.flow(link_credit=CREDIT)

    def drain(self) -> None:
        """Drain both links again (a fresh grant of CREDIT with drain=true)."""
        self.draining = True
        for link, queue in self.queues.items():
            self.drained[queue] = False
            link.flow(link_credit=CREDIT, drain=True)


def run_cycle(
    data_dir: str, tally: Tally, start: dict[str, int], seconds: float, in_flight: int
) -> dict[str, Any]:
    """One broker life: start, traffic for `seconds`, kill -9. Returns the cycle's counts."""
    broker = BrokerProcess("--data-dir", data_dir, admin=True, wait=WAIT * 2)
    pump = Pump()
    before = (sum(len(c) for c in tally.confirmed.values()), len(tally.classic))
    try:
        declare_queues(broker)  # idempotent: 204 once they exist (recovered)
        publisher = Publisher(broker.port, tally, in_flight, start)
        consumer = Consumer(broker.port, tally)
        controller = TxnPublisher(broker.port, tally.txn)
        pump.add(publisher.peer)
        pump.add(consumer.peer)
        pump.add(controller.peer)
        pump.run_until(lambda: consumer.attached == 3, what="consumer attach")
        deadline = time.monotonic() + seconds

        def tick() -> None:
            publisher.publish()
            controller.tick()

        pump.run_until(lambda: time.monotonic() >= deadline, seconds + WAIT, tick=tick)
        in_flight_at_kill = len(publisher.pending)
        broker.kill()
        peers = (publisher.peer, consumer.peer, controller.peer)
        pump.run_until(lambda: all(ended(peer) for peer in peers), what="EOF")
    finally:
        pump.close()
        broker.kill()
    return {
        "seconds": round(seconds, 3),
        "confirmed": sum(len(c) for c in tally.confirmed.values()) - before[0],
        "classic_received": len(tally.classic) - before[1],
        "unconfirmed_at_kill": in_flight_at_kill,
    }


def final_count(data_dir: str, tally: Tally) -> tuple[list[str], dict[str, Any]]:
    """A clean start: drain the classic queue, read the whole stream from `first`."""
    broker = BrokerProcess("--data-dir", data_dir, wait=WAIT * 2)
    pump = Pump()
    try:
        tally.next_offset = "first"
        offsets_before = collections.Counter(tally.stream_offsets)
        consumer = Consumer(broker.port, tally)
        consumer.draining = True
        pump.add(consumer.peer)
        pump.run_until(lambda: consumer.attached == 3, what="final attach")
        while True:
            start = (len(tally.classic), len(consumer.stream_ids))
            consumer.drain()
            pump.run_until(lambda: all(consumer.drained.values()), WAIT * 4, "final drain")
            if (len(tally.classic), len(consumer.stream_ids)) == start:
                break
        tally.stream_offsets = offsets_before  # the final full read is not a resume
        consumer.peer.conn.close()
        pump.run_until(lambda: ended(consumer.peer) or consumer.peer.conn.finished, what="close")
    finally:
        pump.close()
        broker.stop()
    return consumer.stream_ids, {"stream_entries": len(consumer.stream_ids)}


def verdict(tally: Tally, stream_ids: list[str]) -> dict[str, Any]:
    seen: collections.Counter = collections.Counter()
    unmarked = []
    for got in tally.classic:
        if seen[got.msg_id] and got.first_acquirer and got.delivery_count == 0:
            unmarked.append(got.msg_id)
        seen[got.msg_id] += 1
    classic_lost = sorted(tally.confirmed[CLASSIC] - set(seen))
    stream_seen = collections.Counter(stream_ids)
    stream_lost = sorted(tally.confirmed[STREAM] - set(stream_seen))
    return {
        "classic": {
            "published": tally.published[CLASSIC],
            "confirmed": len(tally.confirmed[CLASSIC]),
            "deliveries": len(tally.classic),
            "distinct_received": len(seen),
            "lost": len(classic_lost),
            "lost_ids": classic_lost[:20],
            "duplicates": sum(n - 1 for n in seen.values()),
            "duplicates_unmarked": len(unmarked),
            "unmarked_ids": unmarked[:20],
        },
        "stream": {
            "published": tally.published[STREAM],
            "confirmed": len(tally.confirmed[STREAM]),
            "entries_in_final_read": len(stream_ids),
            "lost": len(stream_lost),
            "lost_ids": stream_lost[:20],
            "duplicate_ids": sum(n - 1 for n in stream_seen.values()),
            "offsets_reused": sum(n - 1 for n in tally.stream_offsets.values()),
        },
        "not_accepted_outcomes": tally.not_accepted,
        "transactions": kill_soak_txn.verdict(tally.txn),
    }


def soak(cycles: int, min_run: float, max_run: float, seed: int, in_flight: int) -> dict:
    rng = random.Random(seed)
    tally = Tally()
    start = {CLASSIC: 0, STREAM: 0}
    per_cycle = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="amqpspec-kill-soak-") as tmp:
        for _ in range(cycles):
            seconds = rng.uniform(min_run, max_run)
            per_cycle.append(run_cycle(tmp, tally, start, seconds, in_flight))
        stream_ids, final = final_count(tmp, tally)
    result = verdict(tally, stream_ids)
    result.update(final)
    result["cycles"] = cycles
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    result["per_cycle"] = per_cycle
    return result


def ok(result: dict) -> bool:
    classic, stream = result["classic"], result["stream"]
    return not (
        classic["lost"]
        or classic["duplicates_unmarked"]
        or stream["lost"]
        or stream["duplicate_ids"]
        or stream["offsets_reused"]
        or not kill_soak_txn.ok(result["transactions"])
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cycles", type=int, default=100, help="kill -9 cycles (default 100)")
    parser.add_argument("--min-run", type=float, default=0.2, help="shortest broker life, s")
    parser.add_argument("--max-run", type=float, default=1.0, help="longest broker life, s")
    parser.add_argument("--in-flight", type=int, default=64, help="unconfirmed per sender")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=None, help="report directory (default reports/bench)")


def run(args: argparse.Namespace) -> int:
    result = soak(args.cycles, args.min_run, args.max_run, args.seed, args.in_flight)
    result["command"] = (
        f"amqpspec bench kill-soak --cycles {args.cycles} --min-run {args.min_run} "
        f"--max-run {args.max_run} --in-flight {args.in_flight} --seed {args.seed}"
    )
    result["ok"] = ok(result)
    path = write_report("kill-soak", result, args.out)
    classic, stream = result["classic"], result["stream"]
    print(f"kill -9 soak: {args.cycles} cycles in {result['wall_seconds']} s -> {path}")
    print(
        f"classic: {classic['confirmed']} confirmed, {classic['lost']} lost, "
        f"{classic['duplicates']} duplicates ({classic['duplicates_unmarked']} unmarked)"
    )
    print(
        f"stream: {stream['confirmed']} confirmed, {stream['lost']} lost, "
        f"{stream['duplicate_ids']} duplicate ids, {stream['offsets_reused']} offsets reused"
    )
    txn = result["transactions"]
    print(
        f"transactions: {txn['committed']} committed, {txn['rolled_back']} rolled back, "
        f"{txn['in_doubt_at_kills']} in doubt at a kill ({txn['in_doubt_applied']} applied); "
        f"{txn['committed_lost']} committed messages lost, {txn['rolled_back_seen']} "
        f"rolled-back messages seen, {txn['partial']} partial"
    )
    return exit_status(result["ok"])


def main(argv: list[str] | None = None) -> int:
    return script_main(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
