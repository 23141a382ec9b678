"""The project's one capture writer: every pcap and pcapng byte the project writes.

Owns the byte layout of written captures. `RecordWriter`: packet records of one link type
to a classic pcap with micro- or nanosecond timestamps (`PCAP_MICRO`, `PCAP_NANO`) or a
pcapng (`PCAPNG`: one section, one interface with if_tsresol 9, enhanced packet blocks),
to a file object or a path, gzip'd on request; a record may be cut (captured length below
its wire length: a snap length). `PcapWriter`: relayed bytes as synthesized
Ethernet/IP/TCP flows tshark dissects, written through a `RecordWriter`. Each recorded
connection becomes one TCP flow with a SYN / SYN-ACK / ACK handshake, data segments
carrying exactly the bytes relayed in each direction (one segment per relayed chunk, split
below the 16-bit IP length), correct per-direction sequence and acknowledgement numbers,
and FIN / FIN-ACK / ACK at the end. IPv4 header checksums are computed; TCP checksums are
left 0 (tshark does not verify them by default). Writes with struct only; never decodes
AMQP.
"""

from __future__ import annotations

import gzip
import ipaddress
import os
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.traces.pcap_format import (
    ETHERNET_HEADER,
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    GLOBAL_HEADER,
    IPPROTO_TCP,
    IPV4_HEADER,
    IPV6_HEADER,
    LINKTYPE_ETHERNET,
    MAGIC_MICRO,
    MAGIC_NANO,
    MAX_SEGMENT_PAYLOAD,
    PCAPNG_BYTE_ORDER_MAGIC,
    PCAPNG_EPB,
    PCAPNG_EPB_HEAD,
    PCAPNG_IDB,
    PCAPNG_IDB_HEAD,
    PCAPNG_IF_TSRESOL,
    PCAPNG_NANO_TSRESOL,
    PCAPNG_OPTION,
    PCAPNG_SHB,
    PCAPNG_SHB_BLOCK,
    PCAPNG_TRAILER,
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


PCAP_MICRO = "pcap"  # classic pcap, microsecond timestamps (editcap -F pcap)
PCAP_NANO = "nsecpcap"  # classic pcap, nanosecond timestamps (editcap -F nsecpcap)
PCAPNG = "pcapng"  # one section, one interface, nanosecond timestamps
FORMS = (PCAP_MICRO, PCAP_NANO, PCAPNG)


class RecordWriter:
    """Packet records of one link type to a capture file in `form` (one of FORMS).
    `target`: a file object, or a path (opened here, and gzip'd when `compress`)."""

    def __init__(
        self,
        target: str | os.PathLike[str] | BinaryIO,
        form: str = PCAP_NANO,
        snaplen: int = 262144,
        linktype: int = LINKTYPE_ETHERNET,
        compress: bool = False,
    ) -> None:
        if form not in FORMS:
            raise ValueError(f"unknown capture form {form!r}: one of {', '.join(FORMS)}")
        if isinstance(target, (str, os.PathLike)):
            opener = gzip.open if compress else open
            self._file: BinaryIO = opener(target, "wb")  # type: ignore[assignment]
            self._owns_file = True
        else:
            self._file = target
            self._owns_file = False
        self.form = form
        self.records = 0
        write = self._file.write
        if form == PCAPNG:
            size = PCAPNG_SHB_BLOCK.size
            write(PCAPNG_SHB_BLOCK.pack(PCAPNG_SHB, size, PCAPNG_BYTE_ORDER_MAGIC, 1, 0, -1, size))
            options = PCAPNG_OPTION.pack(PCAPNG_IF_TSRESOL, 1)
            options += bytes((PCAPNG_NANO_TSRESOL, 0, 0, 0)) + PCAPNG_OPTION.pack(0, 0)
            size = PCAPNG_IDB_HEAD.size + len(options) + PCAPNG_TRAILER.size
            write(PCAPNG_IDB_HEAD.pack(PCAPNG_IDB, size, linktype, 0, snaplen))
            write(options + PCAPNG_TRAILER.pack(size))
        else:
            magic = MAGIC_NANO if form == PCAP_NANO else MAGIC_MICRO
            write(GLOBAL_HEADER.pack(magic, 2, 4, 0, 0, snaplen, linktype))

    def write(self, time_ns: int, *parts: bytes | memoryview, wirelen: int = 0) -> None:
        """One packet, the concatenated `parts`, at `time_ns` (nanoseconds since the epoch);
        `wirelen`: its length on the wire when more than was captured (a snap length)."""
        caplen = sum(len(part) for part in parts)
        wirelen = max(wirelen, caplen)
        write = self._file.write
        if self.form == PCAPNG:
            pad = -caplen & 3
            size = PCAPNG_EPB_HEAD.size + caplen + pad + PCAPNG_TRAILER.size
            high, low = time_ns >> 32, time_ns & 0xFFFFFFFF
            write(PCAPNG_EPB_HEAD.pack(PCAPNG_EPB, size, 0, high, low, caplen, wirelen))
            for part in parts:
                write(part)
            write(bytes(pad) + PCAPNG_TRAILER.pack(size))
        else:
            seconds, rest = divmod(time_ns, 1_000_000_000)
            fraction = rest if self.form == PCAP_NANO else rest // 1000
            write(RECORD_HEADER.pack(seconds, fraction, caplen, wirelen))
            for part in parts:
                write(part)
        self.records += 1

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.flush()
        if self._owns_file:
            self._file.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PcapWriter:
    """Write TCP flows to a capture (a nanosecond pcap unless `form` says otherwise), a
    file object or a path."""

    def __init__(
        self, target: str | BinaryIO, snaplen: int = 262144, form: str = PCAP_NANO
    ) -> None:
        self._records = RecordWriter(target, form, snaplen)
        self._flows: dict[int, _Flow] = {}

    @property
    def packets(self) -> int:
        return self._records.records

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
        self._records.write(round(time * 1e9), ethernet, ip, tcp, payload)

    def flush(self) -> None:
        self._records.flush()

    def close(self, time: float | None = None) -> None:
        """Close every open flow (FIN) and the file."""
        for connection_id, flow in list(self._flows.items()):
            self.close_connection(connection_id, time if time is not None else flow.last_time)
        self._records.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
