"""An AMQP 1.0 boofuzz session: the peer fuzzer a broker team would write with boofuzz.

Owns: the boofuzz model of an AMQP 1.0 client (`requests()`: the SASL header, sasl-init, the
AMQP header, open, begin, attach as receiver and as sender, flow, transfer, disposition,
detach, end and close as boofuzz `Request`s of blocks with fuzzable fields), the state graph
(`build_session()`: `Session.connect` edges along the handshake), and what it detects:
- `ProcessMonitor`: the broker process exited (boofuzz's procmon would report the same);
  its `restart_target` waits for the port to accept connections again (bounded);
- `close_probe`, the post-test-case callback: after a case that got past the AMQP open it
  sends a close and reads the reply as a boofuzz user would, by looking for the close
  performative's descriptor bytes; a finding when the broker drops the connection without a
  close frame, or answers nothing within `REPLY_BOUND` seconds (a hang).
- `FirstFailure`: a fuzz-logger backend that records the first failure (test-case number,
  seconds since the start, boofuzz's failure text, the bytes of the fuzzed message).

The one documented exception to "nothing outside amqp10/ builds or parses AMQP bytes by
hand" (the project's style rules): this module IS the peer tool's input description,
written in boofuzz primitives as its users write one (format codes as `Static`, sizes as
`Size`, fields as `Byte`/`Word`/`DWord`/`String`), and reads replies with a byte search as
they would. It never imports amqp10: that is the point of a peer tool. The encodings follow
the spec's type system (1.6: uint 0x70, smallulong 0x53, str32 0xb1, sym32 0xb3, vbin32 0xb0,
list32 0xd0, described 0x00) and framing (2.3.1: SIZE, DOFF, TYPE, CHANNEL).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from boofuzz import (
    Block,
    Byte,
    Bytes,
    DWord,
    Request,
    Session,
    Size,
    Static,
    String,
    Target,
    TCPSocketConnection,
    Word,
    exception,
)
from boofuzz.ifuzz_logger_backend import IFuzzLoggerBackend
from boofuzz.monitors import BaseMonitor

REPLY_BOUND = 1.5  # seconds for the close reply: the same bound amqpspec's oracle uses
RECV_TIMEOUT = 0.1  # boofuzz's per-recv timeout (a reply is read in chunks until the bound)
CLOSE_DESCRIPTOR = b"\x00\x53\x18"  # close, 2.7.9: what the probe looks for in the reply
BEFORE_OPEN = ("sasl-header", "sasl-init", "amqp-header")  # the broker may drop these (2.2)
# a close frame: SIZE 12, DOFF 2, TYPE 0, CHANNEL 0, close with an empty list (list0)
CLOSE_FRAME = b"\x00\x00\x00\x0c\x02\x00\x00\x00" + CLOSE_DESCRIPTOR + b"\x45"


# -- AMQP 1.0 encodings (1.6) as boofuzz primitives ----------------------------------------


def uint(name: str, value: int) -> Block:
    return Block(name, children=(Static("code", b"\x70"), DWord("value", value, endian=">")))


def ushort(name: str, value: int) -> Block:
    return Block(name, children=(Static("code", b"\x60"), Word("value", value, endian=">")))


def ubyte(name: str, value: int) -> Block:
    return Block(name, children=(Static("code", b"\x50"), Byte("value", value)))


def boolean(name: str, value: bool) -> Byte:
    return Byte(name, 0x41 if value else 0x42)  # true / false format codes


def null(name: str) -> Static:
    return Static(name, b"\x40")


def _variable(name: str, code: bytes, child: Any) -> Block:
    size = Size("size", block_name=".value", length=4, endian=">")
    return Block(name, children=(Static("code", code), size, child))


def string(name: str, value: str) -> Block:
    return _variable(name, b"\xb1", String("value", value))


def symbol(name: str, value: str) -> Block:
    return _variable(name, b"\xb3", String("value", value))


def binary(name: str, value: bytes) -> Block:
    return _variable(name, b"\xb0", Bytes("value", value))


def described_list(name: str, code: int, fields: tuple[Any, ...]) -> Block:
    """A described list32 (1.6.22): 0x00, smallulong descriptor, size, count, fields."""
    descriptor = (Static("constructor", b"\x00"), Byte("ulong", 0x53), Byte("code", code))
    fields_block = Block("fields", children=fields)
    size = Size("size", block_name=".list", length=4, endian=">")
    items = (DWord("count", len(fields), endian=">"), fields_block)
    return Block(
        name,
        children=(*descriptor, Byte("list32", 0xD0), size, Block("list", children=items)),
    )


def frame(name: str, body: tuple[Any, ...], frame_type: int = 0, channel: int = 0) -> Request:
    """A frame (2.3.1): the SIZE is computed (not fuzzed, so every case is one whole frame);
    DOFF, TYPE and CHANNEL are fuzzable like the body's fields."""
    header = (Byte("doff", 2), Byte("type", frame_type), Word("channel", channel, endian=">"))
    size = Size("size", block_name="frame", length=4, endian=">", inclusive=True, fuzzable=False)
    return Request(name, children=(size, Block("frame", children=(*header, *body))))


def protocol_header(name: str, protocol_id: int) -> Request:
    """The protocol header (2.2): 'AMQP' then id, major, minor, revision, each fuzzable."""
    version = (Byte("protocol-id", protocol_id), Byte("major", 1), Byte("minor", 0))
    return Request(name, children=(Static("amqp", b"AMQP"), *version, Byte("revision", 0)))


Performatives = dict[str, tuple[int, tuple, int]]  # name -> (descriptor, fields, frame type)


def _connection_performatives() -> Performatives:
    """SASL init, open and begin: what comes before a link."""
    return {
        "sasl-init": (  # 5.3.3.2; SASL frames are TYPE 1
            0x41,
            (
                symbol("mechanism", "ANONYMOUS"),
                binary("initial-response", b""),
                string("hostname", "localhost"),
            ),
            1,
        ),
        "open": (  # 2.7.1
            0x10,
            (
                string("container-id", "boofuzz"),
                string("hostname", "localhost"),
                uint("max-frame-size", 65536),
                ushort("channel-max", 255),
                uint("idle-time-out", 0),
            ),
            0,
        ),
        "begin": (  # 2.7.2
            0x11,
            (
                null("remote-channel"),
                uint("next-outgoing-id", 0),
                uint("incoming-window", 2048),
                uint("outgoing-window", 2048),
                uint("handle-max", 255),
            ),
            0,
        ),
    }


def _link_performatives(queue: str) -> Performatives:
    """A receiver on `queue`, its flow, disposition and detach, then a sender to it."""
    return {**_receiver_performatives(queue), **_sender_performatives(queue)}


def _attach_fields(name: str, handle: int, role: bool, source: Any, target: Any) -> tuple:
    """An attach's fields up to its target (2.7.3), settle modes mixed (0)."""
    return (
        string("name", name),
        uint("handle", handle),
        boolean("role", role),
        ubyte("snd-settle-mode", 0),
        ubyte("rcv-settle-mode", 0),
        source,
        target,
    )


def _receiver_performatives(queue: str) -> Performatives:
    source = described_list("source", 0x28, (string("address", queue),))
    no_target = described_list("target", 0x29, (null("address"),))
    accepted = Static("state", b"\x00\x53\x24\x45")  # accepted, 3.4.2: an empty list
    return {
        "attach-receiver": (  # 2.7.3, role receiver: the broker sends from the queue
            0x12,
            _attach_fields("boofuzz-receiver", 0, True, source, no_target),
            0,
        ),
        "flow": (  # 2.7.4
            0x13,
            (
                uint("next-incoming-id", 0),
                uint("incoming-window", 2048),
                uint("next-outgoing-id", 0),
                uint("outgoing-window", 2048),
                uint("handle", 0),
                uint("delivery-count", 0),
                uint("link-credit", 10),
                uint("available", 0),
                boolean("drain", False),
                boolean("echo", False),
            ),
            0,
        ),
        "disposition": (  # 2.7.6
            0x15,
            (
                boolean("role", True),
                uint("first", 0),
                uint("last", 0),
                boolean("settled", True),
                accepted,
            ),
            0,
        ),
        "detach": (0x16, (uint("handle", 0), boolean("closed", True)), 0),  # 2.7.7
    }


def _sender_performatives(queue: str) -> Performatives:
    target = described_list("target", 0x29, (string("address", queue),))
    no_source = described_list("source", 0x28, (null("address"),))
    return {
        "attach-sender": (  # 2.7.3, role sender: the client publishes to the queue
            0x12,
            (
                *_attach_fields("boofuzz-sender", 1, False, no_source, target),
                null("unsettled"),
                boolean("incomplete-unsettled", False),
                uint("initial-delivery-count", 0),
            ),
            0,
        ),
    }


def requests(queue: str) -> dict[str, Request]:
    """Every message of the model, by name."""
    performatives = {
        **_connection_performatives(),
        **_link_performatives(queue),
        "end": (0x17, (), 0),  # 2.7.8
        "close": (0x18, (), 0),  # 2.7.9
    }
    messages = {
        "sasl-header": protocol_header("sasl-header", 3),
        "amqp-header": protocol_header("amqp-header", 0),
    }
    for name, (code, fields, frame_type) in performatives.items():
        body = (described_list("performative", code, fields),)
        messages[name] = frame(name, body, frame_type)
    transfer = (  # 2.7.5, then one data section (3.2.6) as the message
        uint("handle", 1),
        uint("delivery-id", 0),
        binary("delivery-tag", b"t0"),
        uint("message-format", 0),
        boolean("settled", False),
    )
    data = Block(
        "data", children=(Static("descriptor", b"\x00\x53\x75"), binary("payload", b"hello"))
    )
    messages["transfer"] = frame("transfer", (described_list("performative", 0x14, transfer), data))
    return messages


# the state graph: each message follows the one whose reply it needs (2.4.1, 2.5.1, 2.6.1)
EDGES = (
    (None, "sasl-header"),
    ("sasl-header", "sasl-init"),
    ("sasl-init", "amqp-header"),
    ("amqp-header", "open"),
    ("open", "begin"),
    ("open", "close"),
    ("begin", "attach-receiver"),
    ("begin", "attach-sender"),
    ("begin", "end"),
    ("attach-receiver", "flow"),
    ("flow", "disposition"),
    ("attach-receiver", "detach"),
    ("attach-sender", "transfer"),
)
# the AMQP messages after the protocol header, in the order one connection sends them all
AMQP_MESSAGES = (
    "open",
    "begin",
    "attach-receiver",
    "flow",
    "disposition",
    "detach",
    "attach-sender",
    "transfer",
    "end",
    "close",
)


# -- detection ------------------------------------------------------------------------------


class ProcessMonitor(BaseMonitor):  # type: ignore[misc]
    """The broker process exited (what boofuzz's procmon reports).

    `broker` is anything with `.broker.proc` (a Popen) and `.port`: fuzz.detection's
    `Supervised`, which starts a new process on the same port when one exits. The monitor
    watches one process id from case to case: a process that died, or was replaced by the
    supervisor between two checks, is reported once, at the first check after its death
    (a crash that comes after a case's checks is charged to the next case, as with
    procmon)."""

    def __init__(self, broker: Any, settle: float = 20.0) -> None:
        super().__init__()
        self.broker = broker
        self.settle = settle
        self._pid: int | None = None  # the process watched
        self._dead: int | None = None  # the last one reported
        self._synopsis = ""

    def alive(self) -> bool:
        return True

    def __repr__(self) -> str:  # boofuzz names the monitor in its failure text
        return "ProcessMonitor"

    def _adopt(self) -> None:
        proc = self.broker.broker.proc
        if self._pid is None and proc.pid != self._dead and proc.poll() is None:
            self._pid = proc.pid

    def pre_send(
        self, target: Any = None, fuzz_data_logger: Any = None, session: Any = None
    ) -> None:
        self._adopt()

    def post_send(
        self, target: Any = None, fuzz_data_logger: Any = None, session: Any = None
    ) -> bool:
        self._adopt()
        proc = self.broker.broker.proc
        if self._pid is None or (proc.pid == self._pid and proc.poll() is None):
            self._synopsis = ""
            return True
        status = proc.poll() if proc.pid == self._pid else "seen restarted"
        self._synopsis = f"broker process {self._pid} exited (status {status})"
        self._dead, self._pid = self._pid, None
        return False

    def get_crash_synopsis(self) -> str:
        return self._synopsis

    def restart_target(
        self, target: Any = None, fuzz_data_logger: Any = None, session: Any = None
    ) -> bool:
        """The supervisor restarts an exited process; wait (bounded) until it accepts
        again. False when the process never exited (a dropped or hung connection: nothing
        to restart, boofuzz then sleeps `restart_sleep_time`)."""
        proc = self.broker.broker.proc
        if self._pid is not None and proc.pid == self._pid and proc.poll() is None:
            return False
        deadline = time.monotonic() + self.settle
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.broker.port), timeout=0.5).close()
                return True
            except OSError:
                time.sleep(0.1)
        return False


def close_probe(
    target: Any, fuzz_data_logger: Any, session: Any, *args: Any, **kwargs: Any
) -> None:
    """After a case past the AMQP open: send a close, expect a close back (2.4.3: the broker
    sends a close before it drops the connection). The reply the broker sent to the fuzzed
    message (`session.last_recv`) counts too: a close there already answers the case."""
    if session.fuzz_node.name in BEFORE_OPEN:
        return  # before the open the broker may drop the socket with no frame (2.2, 5.3.2)
    reply = bytearray(session.last_recv or b"")
    fuzz_data_logger.log_check("the broker answers a close with a close, in bounded time")
    if CLOSE_DESCRIPTOR in reply:
        fuzz_data_logger.log_pass("the broker closed the connection with a close frame")
        return
    try:
        target.send(CLOSE_FRAME)
    except (exception.BoofuzzTargetConnectionReset, exception.BoofuzzTargetConnectionAborted):
        pass  # already closed: what was sent before the drop is still read below
    deadline = time.monotonic() + REPLY_BOUND
    dropped = False
    while CLOSE_DESCRIPTOR not in reply and time.monotonic() < deadline:
        started = time.monotonic()
        try:
            chunk = target.recv(65536)
        except (exception.BoofuzzTargetConnectionReset, exception.BoofuzzTargetConnectionAborted):
            dropped = True
            break
        if not chunk and time.monotonic() - started < RECV_TIMEOUT * 0.8:
            dropped = True  # recv returned at once with nothing: the peer closed (EOF)
            break
        reply += chunk
    if CLOSE_DESCRIPTOR in reply:
        fuzz_data_logger.log_pass("the broker answered the close")
    elif dropped:
        fuzz_data_logger.log_fail("the broker dropped the connection without a close frame")
    else:
        fuzz_data_logger.log_fail(f"no close from the broker within {REPLY_BOUND} s (hang)")


@dataclass
class FirstFailure(IFuzzLoggerBackend):  # type: ignore[misc]
    """Records the first failed test case and stops the session after it."""

    session: Any = None
    started: float = field(default_factory=time.monotonic)
    index: int | None = None
    seconds: float | None = None
    message: str = ""
    node: str = ""
    case_name: str = ""  # boofuzz's name of the case: the message and the mutated primitive
    data: bytes = b""
    cases: int = 0
    _current: int = 0
    _name: str = ""

    def open_test_case(
        self, test_case_id: Any, name: Any, index: Any, *args: Any, **kwargs: Any
    ) -> None:
        self._current, self._name = index, name
        self.cases += 1

    def log_fail(self, description: str = "", data: Any = None) -> None:
        if self.index is not None:
            return
        self.index = self._current
        self.seconds = time.monotonic() - self.started
        self.message = description
        self.case_name = str(self._name)
        if self.session is not None:
            self.node = self.session.fuzz_node.name
            self.data = bytes(self.session.last_send or b"")
            self.session._index_end = self._current  # the loop ends after this case

    def stop(self) -> None:
        """Called when the budget is spent: the session ends after the case in flight."""
        if self.session is not None:
            self.session._index_end = self.session.total_mutant_index

    def open_test_step(self, description: str) -> None: ...
    def log_check(self, description: str) -> None: ...
    def log_error(self, description: str) -> None: ...
    def log_recv(self, data: bytes) -> None: ...
    def log_send(self, data: bytes) -> None: ...
    def log_info(self, description: str) -> None: ...
    def log_pass(self, description: str = "") -> None: ...
    def close_test_case(self) -> None: ...
    def close_test(self) -> None: ...


def build_session(
    host: str, port: int, queue: str, workdir: str, broker: Any = None, **options: Any
) -> tuple[Session, FirstFailure]:
    """A boofuzz Session against host:port with the model, its graph and its detectors.
    `broker` (optional) is watched by a `ProcessMonitor`; `options` go to `Session`."""
    recorder = FirstFailure()
    connection = TCPSocketConnection(host, port, send_timeout=2.0, recv_timeout=RECV_TIMEOUT)
    session = Session(
        target=Target(connection=connection),
        web_port=None,
        keep_web_open=False,
        fuzz_loggers=[recorder],
        db_filename=os.path.join(workdir, "boofuzz.db"),
        receive_data_after_fuzz=True,
        restart_sleep_time=0.5,
        restart_threshold=3,
        post_test_case_callbacks=[close_probe],
        **options,
    )
    recorder.session = session
    if broker is not None:  # after the callback monitor: the probe gives a crash time to show
        session.targets[0].monitors.append(ProcessMonitor(broker))
    messages = requests(queue)
    for src, dst in EDGES:
        if src is None:
            session.connect(messages[dst])
        else:
            session.connect(messages[src], messages[dst])
    return session, recorder


def render_path(queue: str, names: list[str]) -> bytes:
    """The unfuzzed bytes of `names` in order (what boofuzz sends along a path)."""
    messages = requests(queue)
    return b"".join(messages[name].render() for name in names)
