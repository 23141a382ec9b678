"""Vectorised capture reader: pcap / pcapng byte ranges -> Arrow batches of TCP segments.

Owns: `SEGMENT_SCHEMA`, `read_segments(path, start, end)` and `plan_splits(path, bytes)`,
for a local path (mapped into memory) or a URL (traces/urlfs.py: a split's bytes, with the
header or section blocks it needs, read by ranged reads into one buffer the size of the
split; the planner walks the headers through one page buffer).
The record walk (one header hop per record) is a tight struct loop; everything after it
(link layers Ethernet with VLAN tags, Linux cooked SLL/SLL2, BSD/OpenBSD loopback and raw
IP, IPv4/IPv6 with extension headers, TCP) is numpy over whole batches: no per-packet
Python and no scapy. Link types, magic numbers and header layouts come from
`traces/pcap_format.py`; the link layers handled are those of `traces/pcap_reader.py`.
Byte ranges let one capture larger than any single buffer be read as independent splits
(each split starts at a record boundary found by `plan_splits`). No AMQP here.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from amqpspec.traces import pcap_format as fmt
from amqpspec.traces import urlfs
from amqpspec.traces.pcap_format import CaptureFormatError
from amqpspec.traces.pcap_reader import capture_kind

SEGMENT_SCHEMA = pa.schema(
    [
        ("ordinal", pa.int64()),  # byte offset of the record in its file: capture order
        ("time_ns", pa.int64()),
        ("src_ip", pa.binary()),
        ("src_port", pa.int32()),
        ("dst_ip", pa.binary()),
        ("dst_port", pa.int32()),
        ("seq", pa.int64()),
        ("ack", pa.int64()),
        ("flags", pa.int16()),
        ("payload", pa.binary()),
        ("truncated", pa.bool_()),  # the snap length cut this segment's payload short
    ]
)

_RAW_LINKS = (
    fmt.LINKTYPE_RAW,
    fmt.LINKTYPE_RAW_12,
    fmt.LINKTYPE_RAW_14,
    fmt.LINKTYPE_IPV4,
    fmt.LINKTYPE_IPV6,
)
_IPV6_EXTENSIONS = (0, 43, 60, 135, 139, 140)


@dataclass(slots=True)
class _Records:
    """Where each packet of a batch is: data offsets, lengths, times, link types."""

    offset: np.ndarray  # int64: first byte of the packet data
    caplen: np.ndarray  # int64
    wirelen: np.ndarray  # int64
    time_ns: np.ndarray  # int64
    linktype: np.ndarray  # int64
    ordinal: np.ndarray  # int64: record header offset


# --- record walks ---------------------------------------------------------------------


def _walk_classic(
    data: mmap.mmap, path: str, start: int, end: int, batch: int
) -> Iterator[_Records]:
    header = fmt.classic_header(data[: fmt.PCAP_GLOBAL_HEADER_SIZE], path)
    tick_ns, linktype = header.tick_ns, header.linktype
    unpack = header.record.unpack_from
    offset = max(start, fmt.PCAP_GLOBAL_HEADER_SIZE)
    size = len(data)
    rows: list[tuple[int, int, int, int, int]] = []
    while offset < end and offset + fmt.PCAP_RECORD_HEADER_SIZE <= size:
        seconds, fraction, caplen, wirelen = unpack(data, offset)
        body = offset + fmt.PCAP_RECORD_HEADER_SIZE
        if body + caplen > size:
            break  # truncated last record (capture still being written)
        rows.append((body, caplen, wirelen, seconds * 1_000_000_000 + fraction * tick_ns, offset))
        offset = body + caplen
        if len(rows) >= batch:
            yield _records(rows, linktype)
            rows = []
    if rows:
        yield _records(rows, linktype)


def _records(rows: list, linktype: int | list[int]) -> _Records:
    table = np.array(rows, dtype=np.int64).reshape(-1, 5)
    links = (
        np.full(len(table), linktype, dtype=np.int64)
        if isinstance(linktype, int)
        else np.array(linktype, dtype=np.int64)
    )
    return _Records(table[:, 0], table[:, 1], table[:, 2], table[:, 3], links, table[:, 4])


_BLOCK_HEAD = {order: struct.Struct(order + "II") for order in "<>"}  # block type, length
_EPB_FIELDS = {order: struct.Struct(order + "IIIII") for order in "<>"}


def _walk_pcapng(
    data: mmap.mmap,
    path: str,
    start: int,
    end: int,
    batch: int,
    context: tuple[int, ...] | None = None,
) -> Iterator[_Records]:
    """Blocks starting in [start, end); the section and interface blocks before `start` are
    still read (a packet block names its interface by position): those at the offsets in
    `context` (`plan_splits_with_context`), so that the pages between them and `start` are
    never touched, or without it every block header from the file's start."""
    offset, size, order = 0, len(data), "<"
    if context is not None and start > 0:
        blocks = [*context, start]  # the section's and interfaces' blocks, then the split
        offset = blocks.pop(0) if context else start
    interfaces: list[tuple[int, float, int]] = []  # (link type, ns per tick, snaplen)
    rows: list[tuple[int, int, int, int, int]] = []
    links: list[int] = []
    head, epb = _BLOCK_HEAD[order].unpack_from, _EPB_FIELDS[order].unpack_from
    while offset + 12 <= size and offset < end:
        block_type, length = head(data, offset)  # the SHB's type reads the same either way
        if block_type == fmt.PCAPNG_SHB:
            bom = struct.unpack_from("<I", data, offset + 8)[0]
            order = "<" if bom == fmt.PCAPNG_BYTE_ORDER_MAGIC else ">"
            head, epb = _BLOCK_HEAD[order].unpack_from, _EPB_FIELDS[order].unpack_from
            length = head(data, offset)[1]
            interfaces = []
        if length < 12 or offset + length > size:
            break
        body = offset + 8
        if block_type == fmt.PCAPNG_EPB and offset >= start:  # the common block first
            iface, high, low, caplen, wirelen = epb(data, body)
            if iface >= len(interfaces):
                raise CaptureFormatError(f"{path}: packet block names unknown interface {iface}")
            linktype, tick, _snap = interfaces[iface]
            rows.append((body + 20, caplen, wirelen, round(((high << 32) | low) * tick), offset))
            links.append(linktype)
        elif block_type == fmt.PCAPNG_IDB:
            linktype, _reserved, snaplen = struct.unpack_from(order + "HHI", data, body)
            tick_ns = fmt.if_tsresol_seconds(data, order, body + 8, offset + length - 4) * 1e9
            interfaces.append((linktype, tick_ns, snaplen))
        elif offset < start:
            pass
        elif block_type == fmt.PCAPNG_SPB and interfaces:
            wirelen = struct.unpack_from(order + "I", data, body)[0]
            linktype, _tick, snaplen = interfaces[0]
            caplen = min(wirelen, snaplen or wirelen, length - 16)
            rows.append((body + 4, caplen, wirelen, 0, offset))
            links.append(linktype)
        if context is not None and offset < start:
            offset = blocks.pop(0)  # the next context block, or the split itself
            continue
        offset += length
        if len(rows) >= batch:
            yield _records(rows, links)
            rows, links = [], []
    if rows:
        yield _records(rows, links)


# --- vectorised dissection --------------------------------------------------------------


class _View:
    """Bounds-safe gathers from one buffer: a read past a packet's end gives `valid=False`."""

    def __init__(self, buf: np.ndarray) -> None:
        self.buf = buf
        self.last = len(buf) - 1

    def u8(self, pos: np.ndarray) -> np.ndarray:
        return self.buf[np.clip(pos, 0, self.last)].astype(np.int64)

    def u16(self, pos: np.ndarray) -> np.ndarray:
        return (self.u8(pos) << 8) | self.u8(pos + 1)

    def u32(self, pos: np.ndarray) -> np.ndarray:
        return (self.u16(pos) << 16) | self.u16(pos + 2)


def _network(view: _View, rec: _Records) -> tuple[np.ndarray, np.ndarray]:
    """(IP header offset, IP version or 0) per packet."""
    start, link = rec.offset, rec.linktype
    ip = np.full(len(start), -1, dtype=np.int64)
    ethertype = np.zeros(len(start), dtype=np.int64)
    eth = link == fmt.LINKTYPE_ETHERNET
    if eth.any():
        pos = start + 12
        etype = view.u16(pos)
        for _ in range(3):  # up to three stacked VLAN tags
            tagged = eth & np.isin(etype, fmt.ETHERTYPE_VLAN)
            pos = np.where(tagged, pos + 4, pos)
            etype = np.where(tagged, view.u16(pos), etype)
        ip = np.where(eth, pos + 2, ip)
        ethertype = np.where(eth, etype, ethertype)
    for linktype, type_at, ip_at in (
        (fmt.LINKTYPE_LINUX_SLL, 14, 16),
        (fmt.LINKTYPE_LINUX_SLL2, 0, 20),
    ):
        mask = link == linktype
        if mask.any():
            ip = np.where(mask, start + ip_at, ip)
            ethertype = np.where(mask, view.u16(start + type_at), ethertype)
    by_nibble = np.isin(link, (fmt.LINKTYPE_NULL, fmt.LINKTYPE_LOOP, *_RAW_LINKS))
    if by_nibble.any():
        # the loopback address family differs per OS: read the IP version instead
        at = np.where(np.isin(link, (fmt.LINKTYPE_NULL, fmt.LINKTYPE_LOOP)), start + 4, start)
        nibble = view.u8(at) >> 4
        ip = np.where(by_nibble, at, ip)
        ethertype = np.where(
            by_nibble,
            np.where(nibble == 4, fmt.ETHERTYPE_IPV4, np.where(nibble == 6, fmt.ETHERTYPE_IPV6, 0)),
            ethertype,
        )
    version = np.where(
        ethertype == fmt.ETHERTYPE_IPV4, 4, np.where(ethertype == fmt.ETHERTYPE_IPV6, 6, 0)
    )
    return ip, np.where(ip >= 0, version, 0)


def _ragged(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary Arrow array of buf[starts[i] : starts[i] + lengths[i]], gathered at once."""
    lengths = np.maximum(lengths, 0)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        index = np.arange(total, dtype=np.int64) + np.repeat(starts - offsets[:-1], lengths)
        values = buf[index]
    else:
        values = np.zeros(0, dtype=np.uint8)
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(values)]
    )


def _dissect(buf: np.ndarray, rec: _Records) -> pa.RecordBatch:
    view = _View(buf)
    packet_end = rec.offset + rec.caplen
    ip, version = _network(view, rec)
    v4, v6 = version == 4, version == 6
    # IPv4 (RFC 791)
    ihl = (view.u8(ip) & 0x0F) * 4
    total = view.u16(ip + 2)
    fragment = view.u16(ip + 6) & 0x3FFF
    protocol = np.where(v4, view.u8(ip + 9), -1)
    # IPv6 (RFC 8200), extension headers walked a few hops
    next_header = view.u8(ip + 6)
    tcp = np.where(v4, ip + ihl, ip + 40)
    for _ in range(4):
        ext = v6 & np.isin(next_header, _IPV6_EXTENSIONS)
        if not ext.any():
            break
        hop = (view.u8(tcp + 1) + 1) * 8
        next_header = np.where(ext, view.u8(tcp), next_header)
        tcp = np.where(ext, tcp + hop, tcp)
    protocol = np.where(v6, next_header, protocol)
    ip_end = np.where(v4, np.where(total > 0, ip + total, packet_end), ip + 40 + view.u16(ip + 4))
    data_offset = (view.u8(tcp + 12) >> 4) * 4
    payload_start = tcp + data_offset
    keep = (
        (protocol == fmt.IPPROTO_TCP)
        & ~(v4 & (fragment != 0))  # IP fragments are not reassembled (never seen on loopback)
        & (payload_start <= packet_end)
        & (data_offset >= 20)
    )
    index = np.nonzero(keep)[0]
    tcp, ip, v4k = tcp[index], ip[index], v4[index]
    end = np.minimum(ip_end[index], packet_end[index])
    start = payload_start[index]
    wire_cut = rec.caplen[index] < rec.wirelen[index]
    address_length = np.where(v4k, 4, 16)
    columns = [
        pa.array(rec.ordinal[index]),
        pa.array(rec.time_ns[index]),
        _ragged(buf, np.where(v4k, ip + 12, ip + 8), address_length),
        pa.array(view.u16(tcp), pa.int32()),
        _ragged(buf, np.where(v4k, ip + 16, ip + 24), address_length),
        pa.array(view.u16(tcp + 2), pa.int32()),
        pa.array(view.u32(tcp + 4)),
        pa.array(view.u32(tcp + 8)),
        pa.array(view.u8(tcp + 13), pa.int16()),
        _ragged(buf, start, end - start),
        pa.array(wire_cut & (ip_end[index] > packet_end[index])),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=SEGMENT_SCHEMA)


# --- public API ------------------------------------------------------------------------


def read_segments(
    path: str,
    start: int = 0,
    end: int | None = None,
    batch_size: int = 65536,
    context: tuple[int, ...] | None = None,
) -> Iterator[pa.RecordBatch]:
    """TCP segments of the records (pcapng: blocks) that START in [start, end) of a capture;
    `context`: a pcapng split's section and interface blocks (`plan_splits_with_context`).
    Raises CaptureFormatError."""
    if urlfs.is_url(path):
        yield from _read_url_segments(path, start, end, batch_size, context)
        return
    with open(path, "rb") as file:
        try:
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:
            raise CaptureFormatError(f"{path}: empty file") from None
        try:
            kind = capture_kind(data[:4])
            if kind == "pcap":
                walk = _walk_classic(
                    data, path, start, len(data) if end is None else end, batch_size
                )
            elif kind == "pcapng":
                walk = _walk_pcapng(
                    data, path, start, len(data) if end is None else end, batch_size, context
                )
            else:
                raise CaptureFormatError(f"{path}: not a pcap or pcapng file")
            buf = np.frombuffer(data, dtype=np.uint8)
            try:
                for records in walk:
                    yield _dissect(buf, records)
            finally:
                del buf
        finally:
            data.close()


def plan_splits(path: str, split_bytes: int = 256 * 1024 * 1024) -> list[tuple[int, int]]:
    """Byte ranges of one capture, each starting at a record (pcapng: block) boundary, about
    `split_bytes` long. Walks header to header; no packet data is read."""
    return [(start, end) for start, end, _ in plan_splits_with_context(path, split_bytes)]


def plan_splits_with_context(
    path: str, split_bytes: int = 256 * 1024 * 1024
) -> list[tuple[int, int, tuple[int, ...] | None]]:
    """`plan_splits`, each range with its context: for a pcapng, the offsets of the section
    header block and the interface blocks in force where the range starts (a split reads
    them, then its own blocks, and no page in between); None for a classic pcap."""
    if urlfs.is_url(path):
        return _plan_url(path, split_bytes)
    with open(path, "rb") as file:
        head = file.read(fmt.PCAP_GLOBAL_HEADER_SIZE)
        file.seek(0, 2)
        size = file.tell()
        kind = capture_kind(head[:4])
        if kind is None or size <= split_bytes:
            return [(0, size, None)]
        data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            hops = _classic_hops(data, path) if kind == "pcap" else _pcapng_hops(data)
            return _splits(hops, kind, size, split_bytes)
        finally:
            data.close()


def _splits(
    hops: Iterator[tuple[int, int]], kind: str, size: int, split_bytes: int
) -> list[tuple[int, int, tuple[int, ...] | None]]:
    """Ranges of about `split_bytes` from the (offset, block type) of every record."""
    splits: list[tuple[int, int, tuple[int, ...] | None]] = []
    begin, context = 0, None
    section: list[int] = []  # the SHB and IDBs in force at the current block
    for offset, block_type in hops:
        if offset - begin >= split_bytes:
            splits.append((begin, offset, context))
            begin = offset
            context = tuple(section) if kind == "pcapng" else None
        if block_type == fmt.PCAPNG_SHB:
            section = [offset]
        elif block_type == fmt.PCAPNG_IDB:
            section.append(offset)
    splits.append((begin, size, context))
    return splits


def _classic_hops(data: mmap.mmap, path: str) -> Iterator[tuple[int, int]]:
    """(offset, 0) of each record."""
    order = fmt.classic_header(data[: fmt.PCAP_GLOBAL_HEADER_SIZE], path).order
    unpack = struct.Struct(order + "I").unpack_from
    offset, size = fmt.PCAP_GLOBAL_HEADER_SIZE, len(data)
    while offset + fmt.PCAP_RECORD_HEADER_SIZE <= size:
        yield offset, 0
        offset += fmt.PCAP_RECORD_HEADER_SIZE + unpack(data, offset + 8)[0]


def _pcapng_hops(data: mmap.mmap) -> Iterator[tuple[int, int]]:
    """(offset, block type) of each block."""
    offset, size, order = 0, len(data), "<"
    while offset + 12 <= size:
        block_type = struct.unpack_from(order + "I", data, offset)[0]
        if block_type == fmt.PCAPNG_SHB:
            bom = struct.unpack_from("<I", data, offset + 8)[0]
            order = "<" if bom == fmt.PCAPNG_BYTE_ORDER_MAGIC else ">"
        length = struct.unpack_from(order + "I", data, offset + 4)[0]
        if length < 12:
            return
        yield offset, block_type
        offset += length


# --- captures by URL (traces/urlfs.py) ----------------------------------------------------


def _read_url_segments(
    url: str, start: int, end: int | None, batch_size: int, context: tuple[int, ...] | None
) -> Iterator[pa.RecordBatch]:
    """`read_segments` of a URL: [start, end) read into one buffer, after the classic
    header or the pcapng context blocks, and walked as a local file is. `end` is a record
    boundary or the file's end, as `plan_splits` gives it (its records end there)."""
    file = urlfs.open_file(url)
    try:
        size = file.size()
        if size == 0:
            raise CaptureFormatError(f"{url}: empty file")
        end = size if end is None else min(end, size)
        kind = capture_kind(file.read_at(min(size, 4), 0))
        if kind is None:
            raise CaptureFormatError(f"{url}: not a pcap or pcapng file")
        prefix: list[tuple[int, int]] = []
        if kind == "pcap" and start > fmt.PCAP_GLOBAL_HEADER_SIZE:
            prefix = [(0, fmt.PCAP_GLOBAL_HEADER_SIZE)]
        elif kind == "pcapng" and start > 0 and context:
            prefix = _context_blocks(file, context)
        begin = start if prefix else 0  # without a context a pcapng is read from its start
        window = urlfs.read_ranges(file, [*prefix, (begin, max(0, end - begin))])
    finally:
        file.close()
    skip = sum(length for _offset, length in prefix)  # where `begin` is in the window
    base = begin - skip  # file offset - window offset, for the split's own records
    within: tuple[int, ...] | None = None
    if kind == "pcapng" and prefix:
        within = tuple(sum(length for _o, length in prefix[:i]) for i in range(len(prefix)))
    if kind == "pcap":
        walk = _walk_classic(window, url, start - base, len(window), batch_size)
    else:
        walk = _walk_pcapng(window, url, start - base, len(window), batch_size, within)
    buf = np.frombuffer(window, dtype=np.uint8)
    for records in walk:
        if base:
            records.ordinal += base
        yield _dissect(buf, records)


def _context_blocks(file, context: tuple[int, ...]) -> list[tuple[int, int]]:
    """(offset, length) of a pcapng split's section header and interface blocks."""
    order = "<"
    blocks = []
    for offset in context:
        head = file.read_at(12, offset)
        if struct.unpack_from("<I", head)[0] == fmt.PCAPNG_SHB:
            bom = struct.unpack_from("<I", head, 8)[0]
            order = "<" if bom == fmt.PCAPNG_BYTE_ORDER_MAGIC else ">"
        blocks.append((offset, struct.unpack_from(order + "I", head, 4)[0]))
    return blocks


def _plan_url(url: str, split_bytes: int) -> list[tuple[int, int, tuple[int, ...] | None]]:
    """`plan_splits_with_context` of a URL: the headers walked through `urlfs.Pages`."""
    file = urlfs.open_file(url)
    try:
        size = file.size()
        kind = capture_kind(file.read_at(min(size, 4), 0))
        if kind is None or size <= split_bytes:
            return [(0, size, None)]
        pages = urlfs.Pages(file)
        hops = _classic_hops_paged(pages, url) if kind == "pcap" else _pcapng_hops_paged(pages)
        return _splits(hops, kind, size, split_bytes)
    finally:
        file.close()


def _classic_hops_paged(pages: urlfs.Pages, path: str) -> Iterator[tuple[int, int]]:
    """`_classic_hops` over pages of a URL."""
    order = fmt.classic_header(pages.read(0, fmt.PCAP_GLOBAL_HEADER_SIZE), path).order
    unpack = struct.Struct(order + "I").unpack
    offset, size = fmt.PCAP_GLOBAL_HEADER_SIZE, pages.size
    while offset + fmt.PCAP_RECORD_HEADER_SIZE <= size:
        yield offset, 0
        offset += fmt.PCAP_RECORD_HEADER_SIZE + unpack(pages.read(offset + 8, 4))[0]


def _pcapng_hops_paged(pages: urlfs.Pages) -> Iterator[tuple[int, int]]:
    """`_pcapng_hops` over pages of a URL."""
    offset, size, order = 0, pages.size, "<"
    while offset + 12 <= size:
        head = pages.read(offset, 12)
        block_type = struct.unpack_from(order + "I", head)[0]
        if block_type == fmt.PCAPNG_SHB:
            bom = struct.unpack_from("<I", head, 8)[0]
            order = "<" if bom == fmt.PCAPNG_BYTE_ORDER_MAGIC else ">"
        length = struct.unpack_from(order + "I", head, 4)[0]
        if length < 12:
            return
        yield offset, block_type
        offset += length
