"""`amqpspec triage synth`: a synthetic corpus with ground truth, for scoring the triage.

Owns: `SCENARIOS` (data: reference-broker fault -> conformance cases whose single
connection shows it on the wire; "clean" runs the clean broker) and `synthesize(out,
connections, seed)`. Each scenario runs once: the reference broker subprocess
(reference_broker.process.BrokerProcess, free ports) with its `--fault`, and `amqpspec run`
with those cases, whose results dir records every connection as a pcap. The corpus is then
`connections` copies of those connections, each on its own client port and time, with
seeded noise at the packet level (TCP only, AMQP bytes untouched): retransmits,
reordering, port reuse (two connections on one 4-tuple), and on clean connections only the
destructive kinds, snap-length truncation and capture gaps (a defect-only connection must
produce no cluster). Files are written as micro- and nanosecond pcaps, pcapng (editcap,
when installed) and gzip'd. `truth.json` says which connection carries which fault.
Writes only under `out`; the broker and the suite run as subprocesses.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from traces.pcap_format import (
    ETHERTYPE_IPV4,
    GLOBAL_HEADER,
    LINKTYPE_ETHERNET,
    MAGIC_MICRO,
    MAGIC_NANO,
    RECORD_HEADER,
    TCP_SYN,
)
from traces.pcap_reader import iter_packets

# fault -> cases (chosen by running them: their one connection shows the fault to the
# checker). ignore-drain is left out on purpose: on the wire it is the same bug as
# no-drain-reply (no drain answer), so the triage rightly puts both in one cluster.
SCENARIOS: dict[str, tuple[str, ...]] = {
    "clean": ("2.6.7/credit-1", "2.6.7/drain-exact", "2.6.7/credit-regrant-in-flight"),
    "overdeliver-on-regrant": ("2.6.7/credit-grow-grant", "2.6.7/credit-regrant-after-batch"),
    "excess-credit-after-drain": ("2.6.7/drain-credit-after", "2.6.7/drain-link-usable-after"),
    "transfer-before-credit": (
        "2.5.6/alarm-consumer-keeps-consuming",
        "2.5.6/alarm-held-transfer-completes",
    ),
    "no-drain-reply": ("2.6.7/drain-credit-after", "2.6.7/drain-after-partial-consumption"),
}
LIVENESS_BOUND = 1.0  # the drain faults are liveness rules: triage the corpus with this
SERVER_PORT = 5672
PER_FILE = 3  # connections per corpus file
_ETHERNET_IP = 14  # PcapWriter writes Ethernet + IPv4 (IHL 5) + TCP
_TCP = 34


@dataclass
class _Packet:
    time_ns: int
    data: bytes
    wirelen: int = 0

    def __post_init__(self) -> None:
        self.wirelen = self.wirelen or len(self.data)


@dataclass
class _Connection:
    scenario: str
    case: str
    packets: list[_Packet]
    noise: list[str] = field(default_factory=list)


def _run_scenarios(work: Path) -> list[_Connection]:
    from reference_broker.process import BrokerProcess

    found: list[_Connection] = []
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    for scenario, cases in SCENARIOS.items():
        results = work / scenario
        faults = [] if scenario == "clean" else [scenario]
        with BrokerProcess(faults=faults, admin=True, idle_timeout=10, wait=60) as broker:
            keyword = " or ".join(case.split("/", 1)[1] for case in cases)
            target = f"--broker {broker.url} --profile reference --admin {broker.admin_url}"
            command = [sys.executable, "-m", "amqpspec.cli", "run", *target.split()]
            command += ["--results", str(results), "-q", "-k", keyword]
            subprocess.run(command, capture_output=True, env=env, timeout=600, check=False)
        for pcap in sorted(results.glob("traces/*/*.pcap")):
            for packets in _flows(pcap):
                found.append(_Connection(scenario, pcap.stem, packets))
    return found


def _flows(pcap: Path) -> list[list[_Packet]]:
    """The packets of each TCP flow of a PcapWriter capture (Ethernet/IPv4)."""
    flows: dict[tuple, list[_Packet]] = {}
    for time, linktype, data in iter_packets(str(pcap)):
        if linktype != LINKTYPE_ETHERNET or struct.unpack_from("!H", data, 12)[0] != ETHERTYPE_IPV4:
            continue
        ports = tuple(sorted(struct.unpack_from("!HH", data, _TCP)))
        flows.setdefault(ports, []).append(_Packet(round(time * 1e9), bytes(data)))
    return list(flows.values())


def _client_port(packets: list[_Packet]) -> int:
    return struct.unpack_from("!H", packets[0].data, _TCP)[0]  # PcapWriter: SYN first


def _rewrite(connection: _Connection, client_port: int, start_ns: int) -> list[_Packet]:
    """The connection moved to `client_port` -> SERVER_PORT, starting at `start_ns`."""
    old_client = _client_port(connection.packets)
    base = connection.packets[0].time_ns
    out = []
    for packet in connection.packets:
        data = bytearray(packet.data)
        sport = struct.unpack_from("!H", data, _TCP)[0]
        if sport == old_client:
            struct.pack_into("!HH", data, _TCP, client_port, SERVER_PORT)
        else:
            struct.pack_into("!HH", data, _TCP, SERVER_PORT, client_port)
        out.append(_Packet(start_ns + packet.time_ns - base, bytes(data), packet.wirelen))
    return out


def _data_positions(packets: list[_Packet]) -> list[int]:
    """Indices of packets carrying TCP payload (after the handshake)."""
    positions = []
    for index, packet in enumerate(packets):
        header = (packet.data[_TCP + 12] >> 4) * 4
        if len(packet.data) > _TCP + header and not packet.data[_TCP + 13] & TCP_SYN:
            positions.append(index)
    return positions


def _noise(packets: list[_Packet], kind: str, rng: random.Random) -> bool:
    """Apply one kind of noise in place; False when the connection is too short for it."""
    data = _data_positions(packets)
    if len(data) < 6:
        return False
    middle = data[len(data) // 3 : 2 * len(data) // 3] or data
    at = rng.choice(middle)
    if kind == "retransmit":
        later = packets[min(at + 2, len(packets) - 1)].time_ns + 1000
        packets.insert(min(at + 3, len(packets)), _Packet(later, packets[at].data))
    elif kind == "reorder":  # two adjacent segments of one direction, close in time, swap

        def port(index: int) -> bytes:
            return packets[index].data[_TCP : _TCP + 2]

        def close(a: int) -> bool:  # reordering on a wire is a matter of microseconds
            return packets[a + 1].time_ns - packets[a].time_ns < 10_000_000

        pairs = [(a, a + 1) for a in data if a + 1 in data and port(a) == port(a + 1) and close(a)]
        if not pairs:
            return False
        a, b = rng.choice(pairs)
        packets[a], packets[b] = packets[b], packets[a]
        packets[a].time_ns, packets[b].time_ns = packets[b].time_ns, packets[a].time_ns
    elif kind == "snaplen-truncation":
        packet = packets[at]
        header = _TCP + (packet.data[_TCP + 12] >> 4) * 4
        packets[at] = _Packet(packet.time_ns, packet.data[: header + 4], len(packet.data))
    elif kind == "capture-gap":
        del packets[at]
    return True


def _write(path: Path, packets: list[_Packet], nano: bool) -> None:
    with path.open("wb") as out:
        magic = MAGIC_NANO if nano else MAGIC_MICRO
        out.write(GLOBAL_HEADER.pack(magic, 2, 4, 0, 0, 262144, LINKTYPE_ETHERNET))
        for packet in sorted(packets, key=lambda p: p.time_ns):
            seconds, rest = divmod(packet.time_ns, 1_000_000_000)
            fraction = rest if nano else rest // 1000
            out.write(RECORD_HEADER.pack(seconds, fraction, len(packet.data), packet.wirelen))
            out.write(packet.data)


def _finish_file(path: Path, form: str) -> Path:
    """Convert a classic pcap to its final form: as is, pcapng or gzip'd."""
    if form == "pcapng" and shutil.which("editcap"):
        target = path.with_suffix(".pcapng")
        subprocess.run(["editcap", "-F", "pcapng", str(path), str(target)], check=True)
        path.unlink()
        return target
    if form == "gzip":
        target = path.with_name(path.name + ".gz")
        with path.open("rb") as src, gzip.open(target, "wb") as out:
            shutil.copyfileobj(src, out)
        path.unlink()
        return target
    return path


def synthesize(out: str, connections: int, seed: int) -> int:
    rng = random.Random(seed)
    root = Path(out)
    corpus = root / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    corpus.mkdir(parents=True)
    base = _run_scenarios(root / "_runs")
    by_scenario: dict[str, list[_Connection]] = {}
    for connection in base:
        by_scenario.setdefault(connection.scenario, []).append(connection)
    missing = sorted(set(SCENARIOS) - set(by_scenario))
    if missing:
        print(f"triage synth: no traces for {', '.join(missing)}", file=sys.stderr)
        return 2
    names = sorted(by_scenario)
    truth: list[dict] = []
    files: dict[str, list[_Packet]] = {}
    port, clock = 20000, 1_800_000_000 * 1_000_000_000
    previous_port: int | None = None
    for number in range(connections):
        scenario = names[number % len(names)]
        template = rng.choice(by_scenario[scenario])
        file_name = f"corpus-{number // PER_FILE:04d}.pcap"
        reuse = previous_port is not None and rng.random() < 0.15
        client_port = previous_port if reuse else port
        port += 1
        packets = _rewrite(template, client_port, clock)
        clock += 50_000_000 + (packets[-1].time_ns - packets[0].time_ns)
        noise = ["port-reuse"] if reuse else []
        kinds = ["retransmit", "reorder"]
        if scenario == "clean":
            kinds += ["snaplen-truncation", "capture-gap"]
        for kind in kinds:
            if rng.random() < 0.3 and _noise(packets, kind, rng):
                noise.append(kind)
        epoch = sum(
            1
            for entry in truth
            if entry["file"] == file_name and entry["client_port"] == client_port
        )
        files.setdefault(file_name, []).extend(packets)
        truth.append(
            {
                "file": file_name,
                "client_port": client_port,
                "server_port": SERVER_PORT,
                "epoch": epoch,
                "fault": None if scenario == "clean" else scenario,
                "case": template.case,
                "noise": noise,
            }
        )
        same_file = (number + 1) // PER_FILE == number // PER_FILE
        previous_port = client_port if same_file else None
    renamed: dict[str, str] = {}
    for index, (name, packets) in enumerate(sorted(files.items())):
        path = corpus / name
        _write(path, packets, nano=index % 2 == 1)
        form = ("pcap", "pcap", "pcapng", "gzip")[index % 4]
        renamed[name] = _finish_file(path, form).name
    for entry in truth:
        entry["file"] = renamed[entry["file"]]
    (root / "truth.json").write_text(
        json.dumps({"version": 1, "liveness_bound": LIVENESS_BOUND, "connections": truth}, indent=1)
        + "\n"
    )
    faults = sorted({entry["fault"] for entry in truth if entry["fault"]})
    print(
        f"triage synth: {len(truth)} connections in {len(files)} files under {corpus}, "
        f"{len(faults)} fault kinds; truth in {root / 'truth.json'}; triage with "
        f"--liveness-bound {LIVENESS_BOUND}"
    )
    return 0
