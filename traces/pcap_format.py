"""Constants of the classic pcap and pcapng formats and the link layers `traces/` handles.

Owns: magic numbers, link-type numbers, header layouts, `CaptureFormatError`, and the one
parser of the classic pcap global header (`classic_header`) and of a pcapng interface's
timestamp resolution (`if_tsresol_seconds`) that every reader uses. No I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# classic pcap (https://www.tcpdump.org/manpages/pcap-savefile.5.html)
MAGIC_MICRO = 0xA1B2C3D4
MAGIC_NANO = 0xA1B23C4D
PCAP_GLOBAL_HEADER_SIZE = 24
PCAP_RECORD_HEADER_SIZE = 16

# pcapng block types
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_IDB = 0x00000001
PCAPNG_SPB = 0x00000003
PCAPNG_EPB = 0x00000006
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
PCAPNG_IF_TSRESOL = 9  # IDB option code: timestamp resolution
PCAPNG_NANO_TSRESOL = 9  # its value for 10^-9 s

# link types (https://www.tcpdump.org/linktypes.html)
LINKTYPE_NULL = 0  # BSD loopback, 4-byte address family in host byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101  # raw IPv4/IPv6
LINKTYPE_RAW_12 = 12  # DLT_RAW on some systems
LINKTYPE_RAW_14 = 14  # DLT_RAW on OpenBSD
LINKTYPE_LOOP = 108  # OpenBSD loopback, address family in network byte order
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_VLAN = (0x8100, 0x88A8, 0x9100)

IPPROTO_TCP = 6

TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04
TCP_PSH = 0x08
TCP_ACK = 0x10

GLOBAL_HEADER = struct.Struct("<IHHiIII")
RECORD_HEADER = struct.Struct("<IIII")
ETHERNET_HEADER = struct.Struct("!6s6sH")
IPV4_HEADER = struct.Struct("!BBHHHBBH4s4s")
IPV6_HEADER = struct.Struct("!IHBB16s16s")
TCP_HEADER = struct.Struct("!HHIIBBHHH")
# pcapng (little-endian as written): SHB (type, length, byte-order magic, major, minor,
# section length, trailing length), IDB before its options (type, length, link type,
# reserved, snaplen), EPB before its data (type, length, interface, timestamp high/low,
# captured and original length), an option header (code, length), a trailing length
PCAPNG_SHB_BLOCK = struct.Struct("<IIIHHqI")
PCAPNG_IDB_HEAD = struct.Struct("<IIHHI")
PCAPNG_EPB_HEAD = struct.Struct("<IIIIIII")
PCAPNG_OPTION = struct.Struct("<HH")
PCAPNG_TRAILER = struct.Struct("<I")

# IPv4 total length is 16 bits: keep every synthesized segment below it.
MAX_SEGMENT_PAYLOAD = 65000


class CaptureFormatError(ValueError):
    """The file is not a capture this reader understands."""


@dataclass(frozen=True, slots=True)
class ClassicHeader:
    """What a classic pcap's global header says about every record after it."""

    order: str  # struct byte order of the file's headers: "<" or ">"
    nanos: bool  # timestamps in nanoseconds (MAGIC_NANO), else microseconds
    linktype: int

    @property
    def tick_ns(self) -> int:
        """Nanoseconds per unit of a record's fraction field."""
        return 1 if self.nanos else 1000

    @property
    def tick_seconds(self) -> float:
        return 1e-9 if self.nanos else 1e-6

    @property
    def record(self) -> struct.Struct:
        """The record header layout (seconds, fraction, caplen, wirelen) in this order."""
        return struct.Struct(self.order + "IIII")


def classic_header(head: bytes, path: str) -> ClassicHeader:
    """The global header at the start of `head` (a classic pcap, either byte order)."""
    if len(head) < PCAP_GLOBAL_HEADER_SIZE:
        raise CaptureFormatError(f"{path}: truncated pcap global header")
    for order in "<>":
        magic = struct.unpack_from(order + "I", head, 0)[0]
        if magic in (MAGIC_MICRO, MAGIC_NANO):
            linktype = struct.unpack_from(order + "I", head, 20)[0] & 0x0FFFFFFF
            return ClassicHeader(order, magic == MAGIC_NANO, linktype)
    raise CaptureFormatError(f"{path}: not a classic pcap file")


def if_tsresol_seconds(data: bytes | memoryview, order: str, start: int, end: int) -> float:
    """Seconds per timestamp tick of a pcapng interface, from its IDB options between
    `start` and `end` (option if_tsresol, code 9; default microseconds)."""
    offset = start
    while offset + 4 <= end:
        code, length = struct.unpack_from(order + "HH", data, offset)
        if code == 0:
            break
        if code == PCAPNG_IF_TSRESOL and length >= 1:
            value = data[offset + 4]
            return 2.0 ** -(value & 0x7F) if value & 0x80 else 10.0**-value
        offset += 4 + ((length + 3) & ~3)
    return 1e-6
