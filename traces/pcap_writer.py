"""Classic pcap writer: relayed bytes as synthesized Ethernet/IP/TCP flows tshark dissects.

Owns: `PcapWriter`. Each recorded connection becomes one TCP flow with a SYN / SYN-ACK /
ACK handshake, data segments carrying exactly the bytes relayed in each direction (one
segment per relayed chunk, split below the 16-bit IP length), correct per-direction
sequence and acknowledgement numbers, and FIN / FIN-ACK / ACK at the end. IPv4 header
checksums are computed; TCP checksums are left 0 (tshark does not verify them by
default). Nanosecond-resolution pcap. Writes with struct only; never decodes AMQP.
"""

from __future__ import annotations

import ipaddress
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from amqp10.origins import CLIENT, SERVER
from traces.pcap_format import (
    ETHERNET_HEADER,
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    GLOBAL_HEADER,
    IPPROTO_TCP,
    IPV4_HEADER,
    IPV6_HEADER,
    LINKTYPE_ETHERNET,
    MAGIC_NANO,
    MAX_SEGMENT_PAYLOAD,
    RECORD_HEADER,
    TCP_ACK,
    TCP_FIN,
    TCP_HEADER,
    TCP_PSH,
    TCP_SYN,
)

_CLIENT_MAC = bytes.fromhex("020000000001")
_SERVER_MAC = bytes.fromhex("020000000002")


def _split_address(address: str) -> tuple[str, int]:
    """'127.0.0.1:5672' or '[::1]:5672' -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _ip_checksum(header: bytes) -> int:
    total = 0
    for index in range(0, len(header), 2):
        total += (header[index] << 8) | header[index + 1]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclass(slots=True)
class _Flow:
    client_ip: bytes
    client_port: int
    server_ip: bytes
    server_port: int
    version: int
    next_seq: dict[str, int]
    ip_id: int = 0
    closed: bool = False
    last_time: float = 0.0


class PcapWriter:
    """Write TCP flows to a classic (nanosecond) pcap file object or path."""

    def __init__(self, target: str | BinaryIO, snaplen: int = 262144) -> None:
        if isinstance(target, str):
            self._file: BinaryIO = open(target, "wb")  # noqa: SIM115 - closed in close()
            self._owns_file = True
        else:
            self._file = target
            self._owns_file = False
        self._file.write(GLOBAL_HEADER.pack(MAGIC_NANO, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))
        self._flows: dict[int, _Flow] = {}
        self.packets = 0

    # -- connections ------------------------------------------------------------------
    def open_connection(self, connection_id: int, client: str, server: str, time: float) -> None:
        """Start a flow: SYN, SYN-ACK, ACK. `client`/`server` are 'host:port'."""
        client_host, client_port = _split_address(client)
        server_host, server_port = _split_address(server)
        client_ip = ipaddress.ip_address(client_host)
        server_ip = ipaddress.ip_address(server_host)
        if client_ip.version != server_ip.version:
            client_ip = ipaddress.ip_address(
                f"10.1.{connection_id >> 8 & 255}.{connection_id & 255}"
            )
            server_ip = ipaddress.ip_address("10.2.0.1")
        seed = zlib.crc32(f"{connection_id}{client}{server}".encode())
        client_isn, server_isn = seed & 0x7FFFFFFF, (seed * 7919) & 0x7FFFFFFF
        flow = _Flow(
            client_ip.packed,
            client_port,
            server_ip.packed,
            server_port,
            client_ip.version,
            {CLIENT: client_isn, SERVER: server_isn},
        )
        self._flows[connection_id] = flow
        self._segment(flow, CLIENT, time, TCP_SYN, b"", ack=0)
        flow.next_seq[CLIENT] += 1
        self._segment(flow, SERVER, time, TCP_SYN | TCP_ACK, b"")
        flow.next_seq[SERVER] += 1
        self._segment(flow, CLIENT, time, TCP_ACK, b"")

    def data(self, connection_id: int, direction: str, payload: bytes, time: float) -> None:
        """Bytes relayed in `direction` ('client' = sent by the client)."""
        flow = self._flows[connection_id]
        view = memoryview(payload)
        for start in range(0, len(view), MAX_SEGMENT_PAYLOAD):
            chunk = view[start : start + MAX_SEGMENT_PAYLOAD]
            self._segment(flow, direction, time, TCP_PSH | TCP_ACK, chunk)
            flow.next_seq[direction] = (flow.next_seq[direction] + len(chunk)) & 0xFFFFFFFF

    def close_connection(self, connection_id: int, time: float, closer: str = CLIENT) -> None:
        """End a flow: FIN from `closer`, FIN-ACK from the peer, final ACK."""
        flow = self._flows.pop(connection_id, None)
        if flow is None or flow.closed:
            return
        flow.closed = True
        peer = SERVER if closer == CLIENT else CLIENT
        self._segment(flow, closer, time, TCP_FIN | TCP_ACK, b"")
        flow.next_seq[closer] += 1
        self._segment(flow, peer, time, TCP_FIN | TCP_ACK, b"")
        flow.next_seq[peer] += 1
        self._segment(flow, closer, time, TCP_ACK, b"")

    # -- packets ----------------------------------------------------------------------
    def _segment(
        self,
        flow: _Flow,
        direction: str,
        time: float,
        flags: int,
        payload: bytes | memoryview,
        ack: int | None = None,
    ) -> None:
        flow.last_time = time
        peer = SERVER if direction == CLIENT else CLIENT
        if direction == CLIENT:
            src_ip, dst_ip = flow.client_ip, flow.server_ip
            src_port, dst_port = flow.client_port, flow.server_port
            src_mac, dst_mac = _CLIENT_MAC, _SERVER_MAC
        else:
            src_ip, dst_ip = flow.server_ip, flow.client_ip
            src_port, dst_port = flow.server_port, flow.client_port
            src_mac, dst_mac = _SERVER_MAC, _CLIENT_MAC
        if ack is None:
            ack = flow.next_seq[peer]
        tcp = TCP_HEADER.pack(
            src_port, dst_port, flow.next_seq[direction], ack, 5 << 4, flags, 65535, 0, 0
        )
        segment_length = len(tcp) + len(payload)
        if flow.version == 4:
            flow.ip_id = (flow.ip_id + 1) & 0xFFFF
            ip = IPV4_HEADER.pack(
                0x45, 0, 20 + segment_length, flow.ip_id, 0x4000, 64, IPPROTO_TCP, 0, src_ip, dst_ip
            )
            checksum = _ip_checksum(ip)
            ip = ip[:10] + checksum.to_bytes(2, "big") + ip[12:]
            ethertype = ETHERTYPE_IPV4
        else:
            ip = IPV6_HEADER.pack(6 << 28, segment_length, IPPROTO_TCP, 64, src_ip, dst_ip)
            ethertype = ETHERTYPE_IPV6
        ethernet = ETHERNET_HEADER.pack(dst_mac, src_mac, ethertype)
        length = len(ethernet) + len(ip) + segment_length
        nanos = round(time * 1e9)
        write = self._file.write
        write(RECORD_HEADER.pack(nanos // 1_000_000_000, nanos % 1_000_000_000, length, length))
        write(ethernet)
        write(ip)
        write(tcp)
        if payload:
            write(payload)
        self.packets += 1

    def flush(self) -> None:
        self._file.flush()

    def close(self, time: float | None = None) -> None:
        """Close every open flow (FIN) and the file."""
        for connection_id, flow in list(self._flows.items()):
            self.close_connection(connection_id, time if time is not None else flow.last_time)
        self._file.flush()
        if self._owns_file:
            self._file.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
