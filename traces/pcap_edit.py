"""Packet-level edits of the flows `PcapWriter` writes: capture noise made to order.

Owns the Ethernet/IPv4/TCP byte layout of edited packets (writing them is
traces/pcap_writer.py's `RecordWriter`): `Packet`, `read_flows(path)` (a PcapWriter
capture's packets per TCP flow), `move_flow(...)` (a flow put on other ports, starting at
another time) and `add_noise(packets, kind, rng)`, the capture noise of `NOISE_KINDS`:
a data segment retransmitted, two adjacent segments of one direction reordered, a segment
cut by a snap length (its wire length kept), a segment missing (a capture gap). Only TCP
and below is touched; the AMQP bytes inside the segments never are. No I/O but the read.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from pathlib import Path

from amqpspec.traces.pcap_format import ETHERTYPE_IPV4, LINKTYPE_ETHERNET, TCP_SYN
from amqpspec.traces.pcap_reader import iter_packets

RETRANSMIT = "retransmit"
REORDER = "reorder"
SNAPLEN_TRUNCATION = "snaplen-truncation"
CAPTURE_GAP = "capture-gap"
NOISE_KINDS = (RETRANSMIT, REORDER, SNAPLEN_TRUNCATION, CAPTURE_GAP)
DESTRUCTIVE = frozenset((SNAPLEN_TRUNCATION, CAPTURE_GAP))  # bytes of the stream are lost
_ETHERTYPE = 12
_TCP = 34  # PcapWriter writes Ethernet (14) + IPv4 with IHL 5 (20) + TCP
_PORTS = struct.Struct("!HH")
_REORDER_WITHIN_NS = 10_000_000  # reordering on a wire is a matter of microseconds


@dataclass
class Packet:
    time_ns: int
    data: bytes
    wirelen: int = 0  # 0: the captured length

    def __post_init__(self) -> None:
        self.wirelen = self.wirelen or len(self.data)

    @property
    def ports(self) -> tuple[int, int]:
        return _PORTS.unpack_from(self.data, _TCP)

    def _payload_offset(self) -> int:
        return _TCP + (self.data[_TCP + 12] >> 4) * 4

    @property
    def carries_data(self) -> bool:
        """TCP payload, not a SYN."""
        return len(self.data) > self._payload_offset() and not self.data[_TCP + 13] & TCP_SYN


def read_flows(path: str | Path) -> list[list[Packet]]:
    """The packets of each TCP flow of a PcapWriter capture (Ethernet/IPv4), in order."""
    flows: dict[tuple[int, ...], list[Packet]] = {}
    for time, linktype, data in iter_packets(str(path)):
        if linktype != LINKTYPE_ETHERNET:
            continue
        if struct.unpack_from("!H", data, _ETHERTYPE)[0] != ETHERTYPE_IPV4:
            continue
        packet = Packet(round(time * 1e9), bytes(data))
        flows.setdefault(tuple(sorted(packet.ports)), []).append(packet)
    return list(flows.values())


def move_flow(
    packets: list[Packet], client_port: int, server_port: int, start_ns: int
) -> list[Packet]:
    """The flow (its first packet from the client: PcapWriter starts with the SYN) moved to
    `client_port` -> `server_port`, its first packet at `start_ns`."""
    old_client = packets[0].ports[0]
    base = packets[0].time_ns
    out = []
    for packet in packets:
        data = bytearray(packet.data)
        ports = (client_port, server_port)
        if packet.ports[0] != old_client:
            ports = (server_port, client_port)
        _PORTS.pack_into(data, _TCP, *ports)
        out.append(Packet(start_ns + packet.time_ns - base, bytes(data), packet.wirelen))
    return out


def add_noise(packets: list[Packet], kind: str, rng: random.Random) -> bool:
    """Apply one kind of noise in place, in the middle third of the data segments; False
    when the flow is too short for it (or has no two close segments to reorder)."""
    data = [index for index, packet in enumerate(packets) if packet.carries_data]
    if len(data) < 6:
        return False
    middle = data[len(data) // 3 : 2 * len(data) // 3] or data
    at = rng.choice(middle)
    if kind == RETRANSMIT:
        later = packets[min(at + 2, len(packets) - 1)].time_ns + 1000
        packets.insert(min(at + 3, len(packets)), Packet(later, packets[at].data))
    elif kind == REORDER:
        pairs = [
            (a, a + 1)
            for a in data
            if a + 1 in data
            and packets[a].ports == packets[a + 1].ports
            and packets[a + 1].time_ns - packets[a].time_ns < _REORDER_WITHIN_NS
        ]
        if not pairs:
            return False
        a, b = rng.choice(pairs)
        packets[a], packets[b] = packets[b], packets[a]
        packets[a].time_ns, packets[b].time_ns = packets[b].time_ns, packets[a].time_ns
    elif kind == SNAPLEN_TRUNCATION:
        packet = packets[at]
        cut = packet.data[: packet._payload_offset() + 4]
        packets[at] = Packet(packet.time_ns, cut, len(packet.data))
    elif kind == CAPTURE_GAP:
        del packets[at]
    else:
        raise ValueError(f"unknown noise kind {kind!r}: one of {', '.join(NOISE_KINDS)}")
    return True
