"""What both arrow implementations (C on libqpid-proton, Python on amqp10) agree on.

Owns: `ArrowSpec` (the options one arrow process takes, and their command line), the
message stamp (the first 9 bytes of the message body: the send time as big-endian int64
nanoseconds of CLOCK_MONOTONIC, then 1 on a sender link's last message in duration mode),
the receiver's record file (native int64 pairs: send_ns, receive_ns per message), the
"ready" line each arrow writes to stderr (listening, or every link attached) and the JSON
line it prints on stdout when it exits. Touches no sockets.
"""

from __future__ import annotations

import argparse
import struct
from array import array
from dataclasses import dataclass, fields
from urllib.parse import urlsplit

STAMP = struct.Struct(">qB")  # send time (ns, CLOCK_MONOTONIC), last-message flag
MIN_BODY = 16
ROLES = ("send", "receive")


@dataclass
class ArrowSpec:
    role: str  # "send" | "receive"
    host: str = "127.0.0.1"
    port: int = 5672
    address: str = "arrows"
    listen: bool = False  # the receiver listens: peer-to-peer, no broker
    count: int = 0  # total messages (0: run for `duration`)
    duration: float = 0.0  # seconds the sender sends (count 0)
    body_size: int = 100
    credit: int = 1000  # per receiving link: granted, topped up at half
    presettled: bool = False  # else at-least-once: unsettled, receiver accepts
    durable: bool = False  # header durable=true
    rate: int = 0  # msg/s over all links, 0 = as fast as credit allows
    max_unsettled: int = 0  # sender: at most this many unacknowledged in flight (0: no limit)
    connections: int = 1
    links: int = 1  # per connection
    senders: int = 1  # receiver in duration mode: sender links whose last message ends it
    user: str = ""
    password: str = ""
    out: str = ""  # receiver: the record file
    timeout: float = 300.0  # the arrow gives up (exit 3) after this many seconds

    def argv(self) -> list[str]:
        """The arrow command line (both implementations parse it with `parse`)."""
        args = [self.role, "--host", self.host, "--port", str(self.port)]
        args += ["--address", self.address, "--count", str(self.count)]
        args += ["--duration", str(self.duration), "--body-size", str(self.body_size)]
        args += ["--credit", str(self.credit), "--rate", str(self.rate)]
        args += ["--max-unsettled", str(self.max_unsettled)]
        args += ["--connections", str(self.connections), "--links", str(self.links)]
        args += ["--senders", str(self.senders), "--timeout", str(self.timeout)]
        if self.listen:
            args.append("--listen")
        if self.presettled:
            args.append("--presettled")
        if self.durable:
            args.append("--durable")
        if self.user:
            args += ["--user", self.user, "--password", self.password]
        if self.out:
            args += ["--out", self.out]
        return args


def parse(argv: list[str]) -> ArrowSpec:
    """The inverse of ArrowSpec.argv (defaults: ArrowSpec's)."""
    parser = argparse.ArgumentParser(prog="arrow")
    parser.add_argument("role", choices=ROLES)
    for item in fields(ArrowSpec):
        if item.name == "role":
            continue
        option = "--" + item.name.replace("_", "-")
        if item.type == "bool":
            parser.add_argument(option, action="store_true")
        else:
            kind = {"int": int, "float": float}.get(str(item.type), str)
            parser.add_argument(option, type=kind, default=item.default)
    return ArrowSpec(**vars(parser.parse_args(argv)))


def split_url(url: str) -> tuple[str, int, str, str]:
    """amqp://[user:pass@]host[:port] -> (host, port, user, password)."""
    parts = urlsplit(url if "://" in url else f"amqp://{url}")
    return (
        parts.hostname or "127.0.0.1",
        parts.port or 5672,
        parts.username or "",
        (parts.password or ""),
    )


def stamp(body_size: int, now_ns: int, last: bool = False) -> bytes:
    """The body of one message: the stamp, then zero bytes up to body_size."""
    return STAMP.pack(now_ns, 1 if last else 0).ljust(body_size, b"\0")


def read_stamp(body: bytes) -> tuple[int, bool]:
    sent, last = STAMP.unpack_from(body)
    return sent, bool(last)


def read_records(path: str) -> tuple[array, array]:
    """The receiver's records: (send_ns, receive_ns) arrays, one entry per message."""
    records = array("q")
    with open(path, "rb") as handle:
        records.frombytes(handle.read())
    return records[0::2], records[1::2]
