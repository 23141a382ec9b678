"""Fast capture reader: classic pcap / pcapng -> TCP segments, with struct only.

Owns: `iter_packets(path)` (timestamp, link type, packet bytes) for classic pcap (micro-
and nanosecond magic, either byte order) and pcapng (SHB/IDB/EPB/SPB blocks, any
if_tsresol), and `iter_tcp_segments(path)` which peels Ethernet (with VLAN tags), Linux
cooked (SLL, SLL2), BSD/OpenBSD loopback (NULL, LOOP) and raw IP link layers and
IPv4/IPv6 down to TCP. No scapy here: it is ~100x slower. Reads through mmap.
"""

from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from amqpspec.traces.pcap_format import (
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    ETHERTYPE_VLAN,
    IPPROTO_TCP,
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    LINKTYPE_RAW_12,
    LINKTYPE_RAW_14,
    MAGIC_MICRO,
    MAGIC_NANO,
    PCAP_GLOBAL_HEADER_SIZE,
    PCAPNG_BYTE_ORDER_MAGIC,
    PCAPNG_EPB,
    PCAPNG_IDB,
    PCAPNG_SHB,
    PCAPNG_SPB,
    CaptureFormatError,
    classic_header,
    if_tsresol_seconds,
)


@dataclass(slots=True)
class TcpSegment:
    time: float
    src: tuple[bytes, int]
    dst: tuple[bytes, int]
    seq: int
    ack: int
    flags: int
    payload: bytes


def capture_kind(head: bytes) -> str | None:
    """'pcap', 'pcapng' or None, from the first 4 bytes of a file."""
    if len(head) < 4:
        return None
    little = struct.unpack("<I", head[:4])[0]
    if little in (MAGIC_MICRO, MAGIC_NANO) or struct.unpack(">I", head[:4])[0] in (
        MAGIC_MICRO,
        MAGIC_NANO,
    ):
        return "pcap"
    if little == PCAPNG_SHB:
        return "pcapng"
    return None


def iter_packets(path: str) -> Iterator[tuple[float, int, bytes]]:
    """(time, link type, packet bytes) for every packet of a pcap or pcapng file."""
    with open(path, "rb") as file:
        try:
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            raise CaptureFormatError(f"{path}: empty file") from None
        try:
            kind = capture_kind(data[:4])
            if kind == "pcap":
                yield from _classic(data, path)
            elif kind == "pcapng":
                yield from _pcapng(data, path)
            else:
                raise CaptureFormatError(f"{path}: not a pcap or pcapng file")
        finally:
            data.close()


def _classic(data: mmap.mmap, path: str) -> Iterator[tuple[float, int, bytes]]:
    header = classic_header(data[:PCAP_GLOBAL_HEADER_SIZE], path)
    scale, linktype = header.tick_seconds, header.linktype
    unpack = header.record.unpack_from
    offset = PCAP_GLOBAL_HEADER_SIZE
    end = len(data)
    while offset + 16 <= end:
        seconds, fraction, caplen, _wirelen = unpack(data, offset)
        offset += 16
        if offset + caplen > end:
            break  # truncated last record (capture still being written)
        yield seconds + fraction * scale, linktype, data[offset : offset + caplen]
        offset += caplen


def _pcapng(data: mmap.mmap, path: str) -> Iterator[tuple[float, int, bytes]]:
    offset = 0
    end = len(data)
    order = "<"
    interfaces: list[tuple[int, float, int]] = []  # (linktype, seconds per tick, snaplen)
    while offset + 12 <= end:
        block_type = struct.unpack_from(order + "I", data, offset)[0]
        if block_type == PCAPNG_SHB:
            bom = struct.unpack_from("<I", data, offset + 8)[0]
            order = "<" if bom == PCAPNG_BYTE_ORDER_MAGIC else ">"
            interfaces = []
        block_length = struct.unpack_from(order + "I", data, offset + 4)[0]
        if block_length < 12 or offset + block_length > end:
            break
        body = offset + 8
        if block_type == PCAPNG_IDB:
            linktype, _reserved, snaplen = struct.unpack_from(order + "HHI", data, body)
            tick = if_tsresol_seconds(data, order, body + 8, offset + block_length - 4)
            interfaces.append((linktype, tick, snaplen))
        elif block_type == PCAPNG_EPB:
            iface, high, low, caplen, _wirelen = struct.unpack_from(order + "IIIII", data, body)
            linktype, tick, _snap = interfaces[iface]
            start = body + 20
            yield ((high << 32) | low) * tick, linktype, data[start : start + caplen]
        elif block_type == PCAPNG_SPB and interfaces:
            wirelen = struct.unpack_from(order + "I", data, body)[0]
            linktype, _tick, snaplen = interfaces[0]
            caplen = min(wirelen, snaplen or wirelen, block_length - 16)
            yield 0.0, linktype, data[body + 4 : body + 4 + caplen]
        offset += block_length


_ETH = struct.Struct("!H")
_IPV4 = struct.Struct("!BxHxxHxBxx4s4s")
_IPV6 = struct.Struct("!4xHBx16s16s")
_TCP = struct.Struct("!HHIIBB")
_IPV6_EXTENSIONS = frozenset((0, 43, 60, 135, 139, 140))


def _network_offset(linktype: int, packet: bytes) -> tuple[int, int] | None:
    """(offset of the IP header, IP version) for a link layer, or None."""
    if linktype == LINKTYPE_ETHERNET:
        offset = 12
        ethertype = _ETH.unpack_from(packet, offset)[0]
        while ethertype in ETHERTYPE_VLAN:
            offset += 4
            ethertype = _ETH.unpack_from(packet, offset)[0]
        offset += 2
    elif linktype == LINKTYPE_LINUX_SLL:
        ethertype = _ETH.unpack_from(packet, 14)[0]
        offset = 16
    elif linktype == LINKTYPE_LINUX_SLL2:
        ethertype = _ETH.unpack_from(packet, 0)[0]
        offset = 20
    elif linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        offset = 4  # the address family's value differs per OS: read the IP version instead
        ethertype = ETHERTYPE_IPV4 if packet[4] >> 4 == 4 else ETHERTYPE_IPV6
    elif linktype in (LINKTYPE_RAW, LINKTYPE_RAW_12, LINKTYPE_RAW_14, LINKTYPE_IPV4, LINKTYPE_IPV6):
        offset = 0
        ethertype = ETHERTYPE_IPV4 if packet[0] >> 4 == 4 else ETHERTYPE_IPV6
    else:
        return None
    if ethertype == ETHERTYPE_IPV4:
        return offset, 4
    if ethertype == ETHERTYPE_IPV6:
        return offset, 6
    return None


def follow_pcap(
    path: str, finished: Callable[[], bool], poll_interval: float = 0.05
) -> Iterator[tuple[float, int, bytes]]:
    """Like iter_packets for a classic pcap that another process is still writing.

    Waits for each whole record; returns once `finished()` is true and the file is read
    to its end. Memory: one record at a time.
    """
    with open(path, "rb") as file:
        head = _read_exactly(file, PCAP_GLOBAL_HEADER_SIZE, finished, poll_interval)
        if head is None:
            return
        header = classic_header(head, path)
        scale, linktype, record = header.tick_seconds, header.linktype, header.record
        while True:
            head = _read_exactly(file, 16, finished, poll_interval)
            if head is None:
                return
            seconds, fraction, caplen, _wirelen = record.unpack(head)
            packet = _read_exactly(file, caplen, finished, poll_interval)
            if packet is None:
                return
            yield seconds + fraction * scale, linktype, packet


def _read_exactly(
    file: BinaryIO, count: int, finished: Callable[[], bool], poll_interval: float
) -> bytes | None:
    """`count` bytes from a growing file, or None at the end of a finished file."""
    data = b""
    while len(data) < count:
        chunk = file.read(count - len(data))
        if chunk:
            data += chunk
            continue
        if finished():
            chunk = file.read(count - len(data))  # written just before it finished
            if not chunk:
                return None
            data += chunk
            continue
        time.sleep(poll_interval)
    return data


def iter_tcp_segments(path: str) -> Iterator[TcpSegment]:
    """Every TCP segment of a capture (non-TCP and unfragmented-IP-less packets skipped)."""
    return tcp_segments(iter_packets(path))


def tcp_segments(packets: Iterable[tuple[float, int, bytes]]) -> Iterator[TcpSegment]:
    """The TCP segments among (time, link type, packet bytes) tuples."""
    ipv4 = _IPV4.unpack_from
    ipv6 = _IPV6.unpack_from
    tcp = _TCP.unpack_from
    for stamp, linktype, packet in packets:
        try:
            located = _network_offset(linktype, packet)
            if located is None:
                continue
            offset, version = located
            if version == 4:
                version_ihl, total, fragment, protocol, src, dst = ipv4(packet, offset)
                if protocol != IPPROTO_TCP or fragment & 0x3FFF:
                    continue  # not TCP, or an IP fragment (never seen on loopback)
                end = offset + total if total else len(packet)
                offset += (version_ihl & 0x0F) * 4
            else:
                payload_length, next_header, src, dst = ipv6(packet, offset)
                end = offset + 40 + payload_length
                offset += 40
                while next_header in _IPV6_EXTENSIONS:
                    next_header = packet[offset]
                    offset += (packet[offset + 1] + 1) * 8
                if next_header != IPPROTO_TCP:
                    continue
            sport, dport, seq, ack, data_offset, flags = tcp(packet, offset)
            start = offset + (data_offset >> 4) * 4
            yield TcpSegment(
                stamp,
                (src, sport),
                (dst, dport),
                seq,
                ack,
                flags,
                packet[start : min(end, len(packet))],
            )
        except (struct.error, IndexError):
            continue  # a packet cut short by the snap length: not ours to decode
