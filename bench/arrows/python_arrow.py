"""The Python arrows: a sender and a receiver on the amqp10 sans-IO engine over plain
non-blocking sockets and select (one process, `connections` x `links` links).

    python -m amqpspec.bench.arrows.python_arrow send|receive --port P
        [options of bench.arrows.spec]

Owns: the arrows' I/O loop only. Frames and messages are built and parsed by amqp10
(Connection, Message); the body's stamp comes from bench.arrows.spec. The receiver writes
its records to --out; both print "ready" on stderr once listening or with every link
attached, and one JSON line on stdout on exit (bench.arrows.spec).
"""

from __future__ import annotations

import json
import os
import resource
import select
import socket
import sys
import time
from array import array

from amqpspec.amqp10.composites import Accepted, Data, Header
from amqpspec.amqp10.engine import (
    ClientSasl,
    Connection,
    RemoteAttach,
    RemoteBegin,
    RemoteClose,
    RemoteOpen,
    ServerSasl,
    TransferReceived,
)
from amqpspec.amqp10.engine.events import DispositionReceived, ProtocolErrorRaised
from amqpspec.amqp10.engine.transitions import LinkState, SessState
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import RcvSettleMode, SndSettleMode
from amqpspec.bench.arrows.spec import ArrowSpec, parse, read_stamp, stamp

now_ns = time.monotonic_ns


class _Peer:
    """One connection: its socket, its engine, bytes not yet written."""

    def __init__(self, sock: socket.socket, conn: Connection) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.conn = conn
        self.pending = b""
        self.closed = False

    def flush(self) -> None:
        data = self.conn.data_to_send(time.monotonic())
        if data:
            self.pending += data
        if self.pending and not self.closed:
            try:
                sent = self.sock.send(self.pending)
            except BlockingIOError:
                return
            except OSError:
                self.closed = True
                return
            self.pending = self.pending[sent:]

    def read(self) -> None:
        try:
            chunk = self.sock.recv(1 << 18)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.closed = True
        self.conn.receive_data(chunk, time.monotonic())


class Arrow:
    def __init__(self, spec: ArrowSpec) -> None:
        self.spec = spec
        self.peers: list[_Peer] = []
        self.links: list = []
        self.listener: socket.socket | None = None
        self.deadline = time.monotonic() + spec.timeout
        self.done = False
        self.error = ""
        self._current: Connection | None = None  # whose events are being handled
        self._unattached: list[_Peer | None] = []
        self._attached = 0

    # --- connections ----------------------------------------------------------------

    def connect(self) -> None:
        spec = self.spec
        if spec.listen:
            self.listener = socket.create_server((spec.host, spec.port), backlog=64)
            self.listener.setblocking(False)
            print("ready", file=sys.stderr, flush=True)
            return
        sasl = ClientSasl("PLAIN", spec.user, spec.password) if spec.user else ClientSasl()
        for index in range(spec.connections):
            sock = socket.create_connection((spec.host, spec.port), timeout=30)
            conn = Connection("client", f"arrow-{spec.role}-{os.getpid()}-{index}", sasl=sasl)
            conn.open()
            self.peers.append(_Peer(sock, conn))
        self._unattached = list(self.peers)

    def _attach_all(self) -> None:
        """Sessions and links on every connection whose SASL is through (2.4, 5.3)."""
        for index, peer in enumerate(self._unattached):
            if peer is None or not peer.conn.can_begin:
                continue
            session = peer.conn.begin()
            for number in range(self.spec.links):
                self.links.append(self._attach(session, f"{self.spec.role}-{index}-{number}"))
            self._unattached[index] = None

    def _attach(self, session, name: str):
        spec = self.spec
        settle = SndSettleMode.SETTLED if spec.presettled else SndSettleMode.UNSETTLED
        if spec.role == "send":
            return session.attach_sender(
                name, source=name, target=spec.address, snd_settle_mode=settle
            )
        link = session.attach_receiver(
            name,
            source=spec.address,
            target=name,
            snd_settle_mode=settle,
            rcv_settle_mode=RcvSettleMode.FIRST,
        )
        link.flow(link_credit=spec.credit)
        return link

    def _accept_peer(self) -> None:
        assert self.listener is not None
        try:
            sock, _ = self.listener.accept()
        except BlockingIOError:
            return
        conn = Connection("server", f"arrow-{self.spec.role}-{os.getpid()}", sasl=ServerSasl())
        self.peers.append(_Peer(sock, conn))

    def on_event(self, event) -> None:
        """Events every arrow handles: a listener's answers, errors."""
        conn = self._current
        if isinstance(event, RemoteOpen) and conn is not None and conn.role == "server":
            conn.open()  # a listener answers the sender's open
        elif isinstance(event, RemoteBegin) and event.session.state is SessState.BEGIN_RCVD:
            event.session.accept()
        elif isinstance(event, RemoteAttach) and event.link.state is LinkState.ATTACH_RCVD:
            link = event.link
            link.accept(rcv_settle_mode=RcvSettleMode.FIRST)
            if not link.is_sender:
                link.flow(link_credit=self.spec.credit)
            self.links.append(link)
        elif isinstance(event, RemoteAttach) and not self.spec.listen:
            self._attached += 1
            if self._attached == self.spec.connections * self.spec.links:
                print("ready", file=sys.stderr, flush=True)  # all links attached
        elif isinstance(event, RemoteClose) and not self.done and not self.complete():
            self.error = f"the peer closed the connection: {event.error}"
        elif isinstance(event, ProtocolErrorRaised):
            self.error = f"{event.condition}: {event.description}"

    # --- the loop -------------------------------------------------------------------

    def loop(self, step, timeout_for) -> None:
        """Until every peer is finished (after `self.done`) or the deadline: read, handle
        events, `step()` (send what is due), flush."""
        while True:
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"arrow {self.spec.role} timed out")
            if self.error:
                raise RuntimeError(f"arrow {self.spec.role}: {self.error}")
            self._attach_all()
            step()
            waiting = False
            for peer in self.peers:
                peer.flush()
                waiting |= bool(peer.pending) and not peer.closed
            finished = all(p.conn.finished or p.closed for p in self.peers)
            if self.done and finished and not waiting:
                return
            readers = [p.sock for p in self.peers if not p.closed]
            if self.listener is not None:
                readers.append(self.listener)
            writers = [p.sock for p in self.peers if p.pending and not p.closed]
            if not readers and not writers:
                if not self.done:
                    raise RuntimeError(f"arrow {self.spec.role}: the peer closed the socket")
                return
            ready, _, _ = select.select(readers, writers, [], timeout_for())
            for peer in self.peers:
                if peer.sock in ready:
                    peer.read()
                self._current = peer.conn
                for event in peer.conn.events():
                    self.handle(event)
            if self.listener is not None and self.listener in ready:
                self._accept_peer()

    def handle(self, event) -> None:
        self.on_event(event)

    def complete(self) -> bool:
        return self.done

    def finish(self) -> None:
        self.done = True
        for peer in self.peers:
            # a listener leaves closing to the sender (whose other connections may still
            # have acknowledgements to read); a client closes its own
            if self.listener is None and not peer.conn.finished and peer.conn.remote_close is None:
                peer.conn.close()
        if self.listener is not None:
            self.listener.close()
            self.listener = None


class Sender(Arrow):
    def run(self) -> dict:
        spec = self.spec
        self.sent = self.accepted = 0
        self.last_sent: set[int] = set()  # links whose last message is out (duration mode)
        self.start_ns = 0
        self.end_ns = 0
        header = Header(durable=True) if spec.durable else None
        self.header = header
        self.connect()
        self.loop(self.step, self.timeout_for)
        return {
            "sent": self.sent,
            "accepted": self.accepted,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
        }

    def timeout_for(self) -> float:
        if self.spec.rate and self.start_ns and not self.done:
            due = self.start_ns + self.sent * 1_000_000_000 // self.spec.rate
            return max(0.0, (due - now_ns()) / 1e9)
        return 0.1

    def _all_sent(self) -> bool:
        spec = self.spec
        if spec.count:
            return self.sent >= spec.count
        return len(self.last_sent) >= len(self.links) and len(self.links) >= self._links_wanted()

    def _links_wanted(self) -> int:
        return self.spec.connections * self.spec.links

    def step(self) -> None:
        spec = self.spec
        if self.done:
            return
        if not self.start_ns and any(link.link_credit > 0 for link in self.links):
            self.start_ns = now_ns()
        if self.start_ns:
            ending = not spec.count and now_ns() - self.start_ns >= spec.duration * 1e9
            for index, link in enumerate(self.links):
                while link.link_credit > 0 and not self._all_sent():
                    if index in self.last_sent:
                        break
                    if spec.count and self.sent >= spec.count:
                        break
                    if spec.max_unsettled and self.sent - self.accepted >= spec.max_unsettled:
                        break
                    t = now_ns()
                    if spec.rate and t < self.start_ns + self.sent * 1_000_000_000 // spec.rate:
                        break
                    body = stamp(spec.body_size, t, last=ending)
                    message = Message(header=self.header, body=[Data(body)])
                    link.send(message.encode(), settled=spec.presettled)
                    self.sent += 1
                    if ending:
                        self.last_sent.add(index)
                    if spec.rate:
                        break  # round robin over the links at a fixed rate
        if self.complete():
            self.end_ns = now_ns()
            self.finish()

    def complete(self) -> bool:
        return self._all_sent() and (self.spec.presettled or self.accepted >= self.sent)

    def handle(self, event) -> None:
        if isinstance(event, DispositionReceived):
            if isinstance(event.state, Accepted):
                self.accepted += event.last - event.first + 1 if event.last is not None else 1
            elif event.state is not None:
                self.error = f"delivery {event.first} not accepted: {event.state!r}"
            if not event.settled:
                event.session.disposition(False, event.first, event.last, True, event.state)
            return
        self.on_event(event)


class Receiver(Arrow):
    def run(self) -> dict:
        self.records = array("q")
        self.received = 0
        self.ended = 0
        self.connect()
        self.loop(lambda: None, lambda: 0.1)
        if self.spec.out:
            with open(self.spec.out, "wb") as handle:
                self.records.tofile(handle)
        return {"received": self.received}

    def handle(self, event) -> None:
        if not isinstance(event, TransferReceived):
            self.on_event(event)
            return
        received = now_ns()
        link = event.link
        body = Message.decode(event.payload).body[0].value
        sent, last = read_stamp(body)
        self.records.append(sent)
        self.records.append(received)
        self.received += 1
        self.ended += last
        if not event.settled:
            link.disposition(event.delivery_id, settled=True, state=Accepted())
        credit = self.spec.credit
        if link.link_credit <= credit // 2:
            link.flow(link_credit=credit)
        spec = self.spec
        if not self.done and (
            (spec.count and self.received >= spec.count)
            or (not spec.count and self.ended >= spec.senders)
        ):
            self.finish()


def main(argv: list[str] | None = None) -> int:
    spec = parse(sys.argv[1:] if argv is None else argv)
    arrow = Sender(spec) if spec.role == "send" else Receiver(spec)
    result = {"arrow": "python", "role": spec.role}
    code = 0
    try:
        result |= arrow.run()
        for peer in arrow.peers:
            peer.sock.close()
    except (OSError, RuntimeError, TimeoutError) as exc:
        result["error"] = str(exc)
        code = 3
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_s"] = usage.ru_utime + usage.ru_stime
    result["max_rss_kib"] = usage.ru_maxrss
    print(json.dumps(result), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
