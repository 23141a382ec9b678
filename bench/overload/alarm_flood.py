"""Alarm flood: publish far more than the memory watermark as fast as possible; the memory
alarm must hold the broker's RSS down by blocking publishers through the session window,
while consumers on the same connection keep draining.

    amqpspec bench alarm-flood [--total-mb 1024] [--watermark-mb 256] [--body-kb 32]
    python -m amqpspec.bench.overload.alarm_flood [same options]

The broker runs with `--memory-high-watermark-bytes` (alarm while its RSS >= the watermark;
read every 0.2 s and after every 1/32 of the watermark read from peers). One client
connection holds two sessions: a publisher session (a sender to a non-durable classic queue,
unsettled transfers, as many as credit and the broker's session window allow) and a consumer
session (a receiver, credit 200 topped up at half, every delivery accepted). The consumer
starts only once the publisher session has been blocked (a session flow with incoming-window
0, 2.5.6 / RabbitMQ's alarm flow), so the queue grows to the watermark first; from then on
it drains as fast as it can. Sampled every 0.1 s: the broker's RSS (/proc/PID/statm); every
0.5 s the alarm state (admin API).
Verdict:
- peak RSS <= 1.5 x watermark;
- the publisher session was blocked (incoming-window 0) at least once and the consumer
  received messages while it was blocked;
- publishing resumed after the alarm cleared (a later flow opened the window) and every
  message was published;
- every message published was received exactly once (ids in the body): 0 lost.
Owns: its broker process (stopped by PID).
"""

from __future__ import annotations

import argparse
import struct
import time
from typing import Any

from amqpspec.amqp10.composites import Accepted
from amqpspec.amqp10.engine import DispositionReceived, Event, FlowReceived, TransferReceived
from amqpspec.amqp10.message import Message
from amqpspec.bench.overload.peer import Peer, Pump, exit_status, rss, write_report
from amqpspec.bench.script import script_main
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.runtime.process import BrokerProcess

QUEUE = "flood"
CREDIT = 200
MB = 1 << 20
_SEQ = struct.Struct(">Q")


class Flood:
    """The client side: one connection, a publisher session and a consumer session."""

    def __init__(self, port: int, count: int, body_size: int) -> None:
        self.count = count
        self.body = b"\0" * (body_size - _SEQ.size)
        self.peer = Peer(port, "alarm-flood", on_event=self.on_event, max_frame_size=1 << 20)
        conn = self.peer.conn
        conn.open()
        self.pub_session = conn.begin()
        self.sub_session = conn.begin()
        self.sender = self.pub_session.attach_sender("flood-pub", target=f"/queues/{QUEUE}")
        self.receiver = self.sub_session.attach_receiver("flood-sub", source=f"/queues/{QUEUE}")
        self.sent = 0
        self.accepted = 0
        self.received = bytearray(count)  # times each sequence number arrived
        self.received_total = 0
        self.blocked = False  # the broker's incoming window on the publisher session is 0
        self.blocks = 0
        self.unblocks = 0
        self.blocked_seconds = 0.0
        self._blocked_at = 0.0
        self.received_while_blocked = 0
        self.consuming = False
        self.sent_after_unblock = 0

    def on_event(self, event: Event) -> None:
        if isinstance(event, TransferReceived):
            self.on_transfer(event)
        elif getattr(event, "session", None) is self.pub_session:
            if isinstance(event, FlowReceived) and event.link is None:
                self.on_session_flow(event.flow.incoming_window)
            elif isinstance(event, DispositionReceived) and isinstance(event.state, Accepted):
                self.accepted += event.last - event.first + 1

    def on_session_flow(self, window: int | None) -> None:
        now = time.monotonic()
        if window == 0 and not self.blocked:
            self.blocked, self._blocked_at = True, now
            self.blocks += 1
            if not self.consuming:
                self.consuming = True
                self.receiver.flow(link_credit=CREDIT)
        elif window and self.blocked:
            self.blocked = False
            self.unblocks += 1
            self.blocked_seconds += now - self._blocked_at

    def on_transfer(self, event: TransferReceived) -> None:
        message = Message.decode(event.payload)
        seq = _SEQ.unpack_from(message.value)[0]
        self.received[seq] += 1
        self.received_total += 1
        if self.blocked:
            self.received_while_blocked += 1
        event.link.disposition(event.delivery_id, settled=True, state=Accepted())
        if event.link.credit <= CREDIT // 2:
            event.link.flow(link_credit=CREDIT)

    def publish(self) -> None:
        sender, session = self.sender, self.pub_session
        # keep a few frames queued in the engine, no more: it holds what the window stops
        while self.sent < self.count and sender.credit > 0 and session.queued_frames < 8:
            payload = Message.of(_SEQ.pack(self.sent) + self.body).encode()
            sender.send(payload, settled=False)
            self.sent += 1
            if self.unblocks:
                self.sent_after_unblock += 1

    @property
    def done(self) -> bool:
        return self.received_total >= self.count or self.peer.closed


def _sampled(
    broker: BrokerProcess,
    pump: Pump,
    count: int,
    body_size: int,
    timeout: float,
    into: tuple[list[tuple[float, int]], list[tuple[float, bool]]],
) -> tuple[Flood, int, float, Any]:
    """The flood published and consumed, the broker's RSS sampled every 0.1 s and the
    admin API's alarms every 0.5 s (into `into`); the client, the RSS before, the seconds
    it took and the alarms in effect at the end."""
    samples, alarm_samples = into
    baseline = rss(broker.proc.pid)
    with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as admin:
        admin.declare_queue(QUEUE, durable=False)
        client = Flood(broker.port, count, body_size)
        pump.add(client.peer)
        started = time.monotonic()
        next_alarm_check = 0.0
        next_rss = 0.0

        def tick() -> None:
            nonlocal next_alarm_check, next_rss
            client.publish()
            now = time.monotonic()
            if now >= next_rss:
                samples.append((now - started, rss(broker.proc.pid)))
                next_rss = now + 0.1
            if now >= next_alarm_check:
                alarm_samples.append((now - started, "memory" in admin.alarms_in_effect()))
                next_alarm_check = now + 0.5

        pump.run_until(lambda: client.done, timeout, "the flood", tick)
        elapsed = time.monotonic() - started
        samples.append((elapsed, rss(broker.proc.pid)))
        alarm_after = admin.alarms_in_effect()
    return client, baseline, elapsed, alarm_after


def flood(total_mb: int, watermark_mb: int, body_kb: int, timeout: float) -> dict[str, Any]:
    watermark = watermark_mb * MB
    body_size = body_kb * 1024
    count = total_mb * MB // body_size
    broker = BrokerProcess("--memory-high-watermark-bytes", str(watermark), admin=True)
    pump = Pump()
    samples: list[tuple[float, int]] = []
    alarm_samples: list[tuple[float, bool]] = []
    try:
        client, baseline, elapsed, alarm_after = _sampled(
            broker, pump, count, body_size, timeout, (samples, alarm_samples)
        )
    finally:
        pump.close()
        broker.stop()
    peak = max(value for _, value in samples)
    lost = sum(1 for n in client.received if n == 0)
    duplicated = sum(1 for n in client.received if n > 1)
    result = {
        "total_mb": total_mb,
        "watermark_mb": watermark_mb,
        "body_bytes": body_size,
        "messages": count,
        "published": client.sent,
        "accepted": client.accepted,
        "received": client.received_total,
        "lost": lost,
        "duplicated": duplicated,
        "baseline_rss_mb": round(baseline / MB, 1),
        "peak_rss_mb": round(peak / MB, 1),
        "peak_over_watermark": round(peak / watermark, 3),
        "rss_limit_mb": round(1.5 * watermark / MB, 1),
        "publisher_blocked_times": client.blocks,
        "publisher_unblocked_times": client.unblocks,
        "blocked_seconds": round(client.blocked_seconds, 2),
        "received_while_blocked": client.received_while_blocked,
        "published_after_first_unblock": client.sent_after_unblock,
        "alarm_seen_by_admin_api": any(active for _, active in alarm_samples),
        "alarms_at_end": alarm_after,
        "seconds": round(elapsed, 2),
        "mb_per_s": round(total_mb / elapsed, 1),
        "rss_samples_mb": [
            (round(t, 1), round(v / MB, 1)) for t, v in samples[:: max(1, len(samples) // 200)]
        ],
    }
    result["ok"] = ok(result)
    return result


def ok(result: dict[str, Any]) -> bool:
    return (
        result["peak_over_watermark"] <= 1.5
        and result["publisher_blocked_times"] > 0
        and result["received_while_blocked"] > 0
        and result["publisher_unblocked_times"] > 0
        and result["published_after_first_unblock"] > 0
        and result["published"] == result["messages"]
        and result["lost"] == 0
        and result["duplicated"] == 0
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--total-mb", type=int, default=1024, help="MiB to publish (1 GiB)")
    parser.add_argument("--watermark-mb", type=int, default=256, help="memory watermark, MiB")
    parser.add_argument("--body-kb", type=int, default=32, help="message body size, KiB")
    parser.add_argument("--timeout", type=float, default=900.0, help="bound on the run, s")
    parser.add_argument("--out", default=None, help="report directory (default reports/bench)")


def run(args: argparse.Namespace) -> int:
    result = flood(args.total_mb, args.watermark_mb, args.body_kb, args.timeout)
    result["command"] = (
        f"amqpspec bench alarm-flood --total-mb {args.total_mb} "
        f"--watermark-mb {args.watermark_mb} --body-kb {args.body_kb}"
    )
    path = write_report("alarm-flood", result, args.out)
    print(f"alarm flood: {result['total_mb']} MiB in {result['seconds']} s -> {path}")
    print(
        f"RSS peak {result['peak_rss_mb']} MiB = {result['peak_over_watermark']}x the "
        f"{result['watermark_mb']} MiB watermark (baseline {result['baseline_rss_mb']} MiB)"
    )
    print(
        f"publisher blocked {result['publisher_blocked_times']}x for {result['blocked_seconds']} s,"
        f" {result['received_while_blocked']} received meanwhile; "
        f"{result['published_after_first_unblock']} published after the first unblock"
    )
    print(f"published {result['published']}, received {result['received']}, lost {result['lost']}")
    return exit_status(result["ok"])


def main(argv: list[str] | None = None) -> int:
    return script_main(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
