"""Craft tcpdump-style captures with scapy (an independent writer): a real AMQP exchange
encoded by the core, cut into TCP segments that split frames and merge several frames,
with a retransmission, an overlapping segment and an out-of-order pair. Also
`session_frames`: a receiver's credit grant and a sender's transfers as (origin, bytes)."""

from __future__ import annotations

from amqpspec.amqp10 import composites
from amqpspec.amqp10.frames import AMQP_HEADER, encode_frame
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.spec import Role

CLIENT_ADDR = ("10.0.0.1", 40000)
SERVER_ADDR = ("10.0.0.2", 5672)


def begin(remote_channel: int | None = None) -> bytes:
    """A begin with windows of 100 (an answer when `remote_channel` is given)."""
    return encode_frame(
        composites.Begin(
            remote_channel=remote_channel,
            next_outgoing_id=0,
            incoming_window=100,
            outgoing_window=100,
        )
    )


def grant(credit: int) -> bytes:
    """The receiver's first flow on handle 0: `credit` from delivery-count 0."""
    flow = composites.Flow(
        next_incoming_id=0,
        incoming_window=100,
        next_outgoing_id=0,
        outgoing_window=100,
        handle=0,
        delivery_count=0,
        link_credit=credit,
    )
    return encode_frame(flow)


def attach(role: bool) -> bytes:
    """Link "l" on handle 0, its target the node q, attached in `role`."""
    link = composites.Attach(
        name="l",
        handle=0,
        role=role,
        source=composites.Source(),
        target=composites.Target(address="q"),
    )
    return encode_frame(link)


def settled_transfer(number: int, body: bytes) -> bytes:
    """Pre-settled delivery `number` on handle 0 (its delivery-id, its one-byte tag) of `body`."""
    transfer = composites.Transfer(
        handle=0,
        delivery_id=number,
        delivery_tag=bytes([number]),
        message_format=0,
        settled=True,
    )
    return encode_frame(transfer, payload=Message.of(body).encode())


def exchange(transfers: int = 30) -> tuple[bytes, bytes]:
    """(client bytes, server bytes) of a short sender session."""
    client = [
        AMQP_HEADER.encode(),
        encode_frame(composites.Open(container_id="crafted-client")),
        begin(),
        attach(Role.SENDER),
    ]
    for number in range(transfers):
        client.append(settled_transfer(number, b"x" * (number * 7 % 300)))
    client.append(encode_frame(composites.Close()))
    server = [
        AMQP_HEADER.encode(),
        encode_frame(composites.Open(container_id="crafted-server")),
        begin(remote_channel=0),
        attach(Role.RECEIVER),
        grant(transfers),
        encode_frame(
            composites.Disposition(role=Role.RECEIVER, first=0, last=transfers - 1, settled=True)
        ),
        encode_frame(composites.Close()),
    ]
    return b"".join(client), b"".join(server)


def cut(data: bytes, sizes: list[int]) -> list[tuple[int, bytes]]:
    """(offset, bytes) segments of `data`, cycling through `sizes`."""
    segments, offset, turn = [], 0, 0
    while offset < len(data):
        size = sizes[turn % len(sizes)]
        segments.append((offset, data[offset : offset + size]))
        offset += size
        turn += 1
    return segments


def segment_plan(client: bytes, server: bytes) -> list[tuple[str, int, bytes]]:
    """Ordered (direction, stream offset, bytes) with tcpdump-like disorder: client
    segments 3 and 4 swapped (out of order), segment 2 sent again after segment 6 (a
    retransmission), segment 9 replaced by one that starts halfway into segment 8
    (overlapping bytes already delivered, then new ones)."""
    client_segments = cut(client, [5, 300, 13, 700, 3, 1000, 61, 200])  # split and merge
    server_segments = cut(server, [11, 90, 4, 500])
    offset8, data8 = client_segments[8]
    offset9, data9 = client_segments[9]
    overlap_start = offset8 + len(data8) // 2
    client_segments[9] = (overlap_start, client[overlap_start : offset9 + len(data9)])
    order: list[tuple[int, bytes]] = list(client_segments)
    order[3], order[4] = order[4], order[3]
    order.insert(7, client_segments[2])
    plan: list[tuple[str, int, bytes]] = []
    for number, (offset, data) in enumerate(order):
        plan.append(("client", offset, data))
        if number < len(server_segments):
            plan.append(("server", *server_segments[number]))
    plan.extend(("server", *s) for s in server_segments[len(order) :])
    return plan


def write_capture(
    path: str,
    link: str = "ethernet",
    ip: int = 4,
    nano: bool = False,
    endianness: str = "",
    pcapng: bool = False,
    transfers: int = 30,
) -> tuple[bytes, bytes]:
    """Write the crafted exchange; returns (client bytes, server bytes)."""
    from scapy.utils import PcapNgWriter, PcapWriter

    client, server = exchange(transfers)
    packets = tcp_packets(client, server, link, ip)
    for number, pkt in enumerate(packets):
        pkt.time = 1_700_000_000 + number / 1000
    if pcapng:
        writer = PcapNgWriter(path)
    else:
        writer = PcapWriter(path, nano=nano, endianness=endianness, sync=False)
    for pkt in packets:
        writer.write(pkt)
    writer.close()
    return client, server


def tcp_packets(client: bytes, server: bytes, link: str, ip: int) -> list:
    """The scapy packets of one TCP connection carrying `client` and `server` (the
    segment_plan's disorder): handshake, segments, both FINs, over `link` and IPv`ip`."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import CookedLinux, Ether, Loopback
    from scapy.packet import Raw

    isn = {"client": 1000, "server": 4_294_967_000}  # the server's sequence numbers wrap
    ends = {"client": CLIENT_ADDR, "server": SERVER_ADDR}
    if ip == 6:
        ends = {"client": ("fd00::1", 40000), "server": ("fd00::2", 5672)}

    def packet(direction: str, flags: str, seq: int, ack: int, payload: bytes = b""):
        src, dst = ends[direction], ends["server" if direction == "client" else "client"]
        layer3 = IP(src=src[0], dst=dst[0]) if ip == 4 else IPv6(src=src[0], dst=dst[0])
        pkt = layer3 / TCP(
            sport=src[1], dport=dst[1], flags=flags, seq=seq % 2**32, ack=ack % 2**32
        )
        if payload:
            pkt = pkt / Raw(payload)
        if link == "ethernet":
            return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / pkt
        if link == "sll":
            return CookedLinux(pkttype=0, lladdrtype=772, proto=0x0800 if ip == 4 else 0x86DD) / pkt
        if link == "null":
            return Loopback(type=2 if ip == 4 else 30) / pkt
        raise ValueError(link)

    packets = [
        packet("client", "S", isn["client"], 0),
        packet("server", "SA", isn["server"], isn["client"] + 1),
        packet("client", "A", isn["client"] + 1, isn["server"] + 1),
    ]
    for direction, offset, data in segment_plan(client, server):
        other = "server" if direction == "client" else "client"
        packets.append(packet(direction, "PA", isn[direction] + 1 + offset, isn[other] + 1, data))
    packets.append(
        packet("client", "FA", isn["client"] + 1 + len(client), isn["server"] + 1 + len(server))
    )
    packets.append(
        packet("server", "FA", isn["server"] + 1 + len(server), isn["client"] + 2 + len(client))
    )
    return packets


def session_frames(transfers: int, credit: int) -> list[tuple[str, bytes]]:
    """A receiver grants `credit`; the sender sends `transfers` (over-delivers if more)."""
    link = {
        "name": "r",
        "handle": 0,
        "source": composites.Source(address="q"),
        "target": composites.Target(),
    }
    frames = [
        (CLIENT, AMQP_HEADER.encode()),
        (CLIENT, encode_frame(composites.Open(container_id="receiver"))),
        (SERVER, AMQP_HEADER.encode()),
        (SERVER, encode_frame(composites.Open(container_id="broker"))),
        (CLIENT, begin()),
        (SERVER, begin(remote_channel=0)),
        (CLIENT, encode_frame(composites.Attach(role=Role.RECEIVER, **link))),
        (
            SERVER,
            encode_frame(composites.Attach(role=Role.SENDER, initial_delivery_count=0, **link)),
        ),
        (CLIENT, grant(credit)),
    ]
    for number in range(transfers):
        frames.append((SERVER, settled_transfer(number, b"hello")))
    return frames
