"""Slow and hostile peers: slowloris connections sending half-frames and connections sending
random bytes, beside a normal client whose rate is measured with and without them.

    amqpspec bench hostile [--slowloris 1000] [--random 1000] [--seconds 20] [--normal-rate N]
    python -m amqpspec.bench.overload.hostile [same options]

One broker (its default handshake timeout, --handshake-timeout to change it). The normal
client runs in a process of its own (so the hostile peers' driver does not take its CPU):
one connection, a sender and a receiver on one queue, 100 unsettled messages in flight,
every delivery accepted; it reports its confirmed round trips every 0.25 s. Three phases of
--seconds each in the same run: before (normal client alone), during (plus the hostile
peers), after (they are gone). Hostile peers, all driven from this process:
- slowloris: the AMQP header and the first half of an `open` frame, then one more byte every
  --trickle seconds, never completing the frame; reconnects when the broker drops it;
- random: random bytes (16-512), half of them after a valid AMQP header; reads the answer
  until EOF (bounded) and reconnects after --random-pause s.
Every answer is decoded with amqp10 and classified: `header+eof` (2.2: our header, then the
socket closes), `close:<condition>` (open + close with the spec's error), `eof` (a bare TCP
close: the broker's choice before any valid header), `undecodable` (the broker sent bytes
the core cannot decode) or `no-answer` (a random peer answered nothing within 30 s); peers
still connected when the phase ends are counted apart (`waiting`: within their bound).
Verdict: the broker stayed up, no undecodable and no unanswered peer, and the normal
client kept at least half its rate (the rates themselves are the figure). `--normal-rate N`
paces the normal client to N msgs/s (a client at its usual rate, below what the broker can
do) instead of as fast as its window allows (the broker saturated by it alone).
Owns: its broker process and the normal client's process (both stopped by PID), its sockets.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import random
import selectors
import socket
import time
from typing import Any

from amqpspec.amqp10.composites import Accepted, Open
from amqpspec.amqp10.engine import DispositionReceived, RemoteAttach, TransferReceived
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import AMQP_HEADER, Frame, decode_stream, encode_frame
from amqpspec.amqp10.message import Message
from amqpspec.bench.overload.peer import Peer, Pump, exit_status, write_report
from amqpspec.bench.script import script_main
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.runtime.process import BrokerProcess

QUEUE = "hostile-normal"
IN_FLIGHT = 100
ANSWER_WAIT = 30.0  # seconds a hostile peer waits for the broker's answer


# --- the normal client (its own process) -----------------------------------------------------


def normal_client(port: int, seconds: float, results: Any, rate: float = 0.0) -> None:
    """Send/receive round trips for `seconds` (paced to `rate` msgs/s; 0: as fast as the
    in-flight window allows); put [(monotonic time, count so far), ...]."""
    samples: list[tuple[float, int]] = []
    done = {"n": 0}
    peer = Peer(port, "normal-client")
    pump = Pump()
    pump.add(peer)
    peer.conn.open()
    session = peer.conn.begin()
    sender = session.attach_sender("normal-pub", target=f"/queues/{QUEUE}")
    receiver = session.attach_receiver("normal-sub", source=f"/queues/{QUEUE}")
    payload = Message.of(b"n" * 64).encode()
    unconfirmed = {"n": 0}

    def on_event(event: Any) -> None:
        if isinstance(event, RemoteAttach) and event.link is receiver:
            receiver.flow(link_credit=IN_FLIGHT * 2)
        elif isinstance(event, TransferReceived):
            event.link.disposition(event.delivery_id, settled=True, state=Accepted())
            done["n"] += 1
            if receiver.credit <= IN_FLIGHT:
                receiver.flow(link_credit=IN_FLIGHT * 2)
        elif isinstance(event, DispositionReceived) and event.role:
            unconfirmed["n"] -= event.last - event.first + 1

    peer.on_event = on_event
    started = time.monotonic()
    end = started + seconds
    next_sample = started
    sent = 0

    def tick() -> None:
        nonlocal next_sample, sent
        allowed = rate * (time.monotonic() - started) if rate else float("inf")
        while sender.credit > 0 and unconfirmed["n"] < IN_FLIGHT and sent < allowed:
            sender.send(payload, settled=False)
            unconfirmed["n"] += 1
            sent += 1
        now = time.monotonic()
        if now >= next_sample:
            samples.append((now, done["n"]))
            next_sample = now + 0.25

    try:
        pump.run_until(lambda: time.monotonic() >= end or peer.closed, seconds + 15, tick=tick)
    finally:
        samples.append((time.monotonic(), done["n"]))
        pump.close()
        results.put(samples)


def rate_between(samples: list[tuple[float, int]], start: float, end: float) -> float:
    inside = [(t, n) for t, n in samples if start <= t <= end]
    if len(inside) < 2:
        return 0.0
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0


# --- hostile peers ---------------------------------------------------------------------------


def classify(answer: bytes, eof: bool) -> str:
    if not answer:
        return "eof" if eof else "waiting"
    try:
        items = decode_stream(answer)
    except DecodeError:
        # a torn tail can be a frame the broker had not finished; decode what is whole
        return "undecodable"
    closes = [i for i in items if isinstance(i, Frame) and i.name == "close"]
    if closes:
        error = closes[-1].performative.error
        return f"close:{error.condition if error is not None else 'none'}"
    if items and not isinstance(items[-1], Frame) and eof:
        return "header+eof"
    return "eof" if eof else "waiting"


class Hostile:
    """One hostile connection at a time, reconnecting; `kind` is slowloris or random."""

    def __init__(self, kind: str, port: int, rng: random.Random, trickle: float) -> None:
        self.kind = kind
        self.port = port
        self.rng = rng
        self.trickle = trickle
        self.sock: socket.socket | None = None
        self.answer = bytearray()
        self.started = 0.0
        self.next_action = 0.0
        self.rest = b""  # slowloris: the bytes still to trickle (never the last one)
        self.pending_connect = False

    def connect(self, selector: selectors.BaseSelector, now: float) -> None:
        """Start a non-blocking connect; `connected` sends the first bytes."""
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", self.port))
        self.sock, self.answer, self.started = sock, bytearray(), now
        self.next_action = now + ANSWER_WAIT
        self.pending_connect = True
        selector.register(sock, selectors.EVENT_WRITE, self)

    def connected(self, selector: selectors.BaseSelector, now: float) -> str | None:
        assert self.sock is not None
        self.pending_connect = False
        if self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            return "connect-refused"
        selector.modify(self.sock, selectors.EVENT_READ, self)
        if self.kind == "slowloris":
            frame = encode_frame(Open(container_id=f"slow-{id(self)}"))
            half = len(frame) // 2
            self.send(AMQP_HEADER.encode() + frame[:half])
            self.rest = frame[half:-1]
            self.next_action = now + self.trickle
        else:
            noise = self.rng.randbytes(self.rng.randint(16, 512))
            if self.rng.random() < 0.5:
                noise = AMQP_HEADER.encode() + noise
            self.send(noise)
            self.next_action = now + ANSWER_WAIT
        return None

    def send(self, data: bytes) -> None:
        assert self.sock is not None
        try:
            self.sock.send(data)
        except OSError:
            pass  # the broker closed first: its answer (or EOF) is read next

    def act(self, now: float) -> str | None:
        """Trickle the next byte; a random peer unanswered past its bound is `no-answer`."""
        if self.kind == "slowloris" and self.rest:
            self.send(self.rest[:1])
            self.rest = self.rest[1:]
            self.next_action = now + self.trickle
            return None
        if self.kind == "random" or self.pending_connect:
            return "no-answer"
        self.next_action = now + self.trickle
        return None

    def read(self) -> str | None:
        """The broker's answer so far; a class once it closed."""
        assert self.sock is not None
        try:
            chunk = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            chunk = b""
        if chunk:
            self.answer += chunk
            return None
        return classify(bytes(self.answer), eof=True)

    def drop(self, selector: selectors.BaseSelector) -> None:
        if self.sock is not None:
            selector.unregister(self.sock)
            self.sock.close()
            self.sock = None


def drive_hostile(
    port: int, slowloris: int, randoms: int, seconds: float, trickle: float, pause: float
) -> dict[str, Any]:
    rng = random.Random(11)
    selector = selectors.DefaultSelector()
    peers = [Hostile("slowloris", port, rng, trickle) for _ in range(slowloris)]
    peers += [Hostile("random", port, rng, trickle) for _ in range(randoms)]
    answers: dict[str, collections.Counter] = {
        "slowloris": collections.Counter(),
        "random": collections.Counter(),
    }
    connections = collections.Counter()
    slow_lifetimes: list[float] = []
    reconnect_at: dict[Hostile, float] = {}
    now = time.monotonic()
    for peer in peers:
        peer.connect(selector, now)
        connections[peer.kind] += 1
    end = now + seconds
    while (now := time.monotonic()) < end:
        for key, _ in selector.select(0.05):
            peer = key.data
            verdict = peer.connected(selector, now) if peer.pending_connect else peer.read()
            if verdict is not None:
                answers[peer.kind][verdict] += 1
                if peer.kind == "slowloris":
                    slow_lifetimes.append(now - peer.started)
                peer.drop(selector)
                reconnect_at[peer] = now + (pause if peer.kind == "random" else 0.0)
        for peer in peers:
            if peer.sock is not None and now >= peer.next_action:
                verdict = peer.act(now)
                if verdict is not None:
                    answers[peer.kind][verdict] += 1
                    peer.drop(selector)
                    reconnect_at[peer] = now
        for peer, when in list(reconnect_at.items()):
            if now >= when:
                del reconnect_at[peer]
                peer.connect(selector, now)
                connections[peer.kind] += 1
    at_end: dict[str, collections.Counter] = {
        "slowloris": collections.Counter(),
        "random": collections.Counter(),
    }
    for peer in peers:  # what the ones still connected got so far (their bound not reached)
        if peer.sock is not None:
            at_end[peer.kind][classify(bytes(peer.answer), eof=False)] += 1
        peer.drop(selector)
    selector.close()
    return {
        "connections_made": dict(connections),
        "answers": {kind: dict(counter) for kind, counter in answers.items()},
        "still_connected_at_end": {kind: dict(counter) for kind, counter in at_end.items()},
        "slowloris_lifetime_s": (
            round(sum(slow_lifetimes) / len(slow_lifetimes), 2) if slow_lifetimes else None
        ),
    }


# --- the run ---------------------------------------------------------------------------------


def _phase_rates(samples: Any, bounds: tuple[float, float, float, float]) -> dict[str, float]:
    """The normal client's msgs/s before, during and after the hostile peers."""
    before, during, after, end = bounds
    return {
        "before": rate_between(samples, before, during),
        "during": rate_between(samples, during, after),
        "after": rate_between(samples, after, end),
    }


def hostile(
    slowloris: int,
    randoms: int,
    seconds: float,
    trickle: float,
    pause: float,
    handshake_timeout: float,
    normal_rate: float = 0.0,
) -> dict[str, Any]:
    broker = BrokerProcess("--handshake-timeout", str(handshake_timeout), admin=True)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    client = None
    try:
        with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as admin:
            admin.declare_queue(QUEUE, durable=False)
        client = context.Process(
            target=normal_client, args=(broker.port, seconds * 3, results, normal_rate)
        )
        client.start()
        time.sleep(min(2.0, seconds / 4))  # the client connects and settles
        t_before = time.monotonic()
        time.sleep(seconds - min(2.0, seconds / 4))
        t_during = time.monotonic()
        hostile_result = drive_hostile(broker.port, slowloris, randoms, seconds, trickle, pause)
        t_after = time.monotonic()
        samples = results.get(timeout=seconds * 3 + 60)
        client.join(15)
        alive = broker.proc.poll() is None
        with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as admin:
            admin_ok = admin.overview() is not None
    finally:
        if client is not None and client.is_alive():
            client.kill()
            client.join(5)
        broker.stop()
    rates = _phase_rates(samples, (t_before, t_during, t_after, t_after + seconds))
    answers = hostile_result["answers"]
    bad = sum(
        counter.get("undecodable", 0) + counter.get("no-answer", 0) for counter in answers.values()
    )
    result = {
        "slowloris": slowloris,
        "random": randoms,
        "seconds_per_phase": seconds,
        "handshake_timeout_s": handshake_timeout,
        "normal_client_rate_limit": normal_rate or None,
        "normal_client_msgs_per_s": {k: round(v, 1) for k, v in rates.items()},
        "during_over_before": round(rates["during"] / rates["before"], 3) if rates["before"] else 0,
        **hostile_result,
        "broker_alive": alive,
        "admin_api_answered": admin_ok,
        "unanswered_or_undecodable": bad,
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
    }
    result["ok"] = ok(result)
    return result


def ok(result: dict[str, Any]) -> bool:
    return (
        result["broker_alive"]
        and result["admin_api_answered"]
        and result["unanswered_or_undecodable"] == 0
        and result["during_over_before"] >= 0.5
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slowloris", type=int, default=1000, help="half-frame connections")
    parser.add_argument("--random", type=int, default=1000, help="random-byte connections")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--trickle", type=float, default=2.0, help="slowloris s per byte")
    parser.add_argument("--random-pause", type=float, default=0.5, help="s between random")
    parser.add_argument("--handshake-timeout", type=float, default=10.0, help="broker's, s")
    parser.add_argument(
        "--normal-rate", type=float, default=0.0,
        help="pace the normal client to this many msgs/s (default 0: as fast as it can)",
    )  # fmt: skip
    parser.add_argument("--out", default=None, help="report directory (default reports/bench)")


def run(args: argparse.Namespace) -> int:
    result = hostile(
        args.slowloris,
        args.random,
        args.seconds,
        args.trickle,
        args.random_pause,
        args.handshake_timeout,
        args.normal_rate,
    )
    result["command"] = (
        f"amqpspec bench hostile --slowloris {args.slowloris} --random {args.random} "
        f"--seconds {args.seconds} --trickle {args.trickle} --random-pause "
        f"{args.random_pause} --handshake-timeout {args.handshake_timeout}"
        + (f" --normal-rate {args.normal_rate:g}" if args.normal_rate else "")
    )
    path = write_report("hostile", result, args.out)
    rates = result["normal_client_msgs_per_s"]
    print(
        f"hostile peers: {args.slowloris} slowloris + {args.random} random, "
        f"{args.seconds} s per phase -> {path}"
    )
    print(
        f"normal client msgs/s: before {rates['before']}, during {rates['during']}, "
        f"after {rates['after']} (during/before {result['during_over_before']})"
    )
    print(f"connections made: {result['connections_made']}")
    for kind, counter in result["answers"].items():
        print(f"{kind} answers: {counter}")
    print(f"broker alive: {result['broker_alive']}, admin API: {result['admin_api_answered']}")
    return exit_status(result["ok"])


def main(argv: list[str] | None = None) -> int:
    return script_main(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
