"""Capture defects never make a cluster: a small synthetic corpus triaged with local Spark.

The connections are recorded against the reference broker (a subprocess) by the fuzzer's
oracle, written as pcaps (fuzz.findings.write_pcap) and edited at the TCP level
(traces.pcap_edit): a faulty client that sends transfers before the broker granted credit
(2.6.7, `link.credit.transfer-without-credit`, four copies), and clean connections, two of
them with capture defects only, as `amqpspec triage synth` made them at 2,000 connections:
- a server segment carrying the broker's attach and flow cut by the snap length, its bytes
  supplied by a retransmission that comes after the client's transfers: reassembled, the
  flow lands after the transfers, and the clean client looked like the faulty one (it
  joined the faulty cluster: precision 0.9989 on the synth corpus);
- a server segment of transfers missing (a capture gap) and, later, a client segment cut:
  the client's dispositions of the lost deliveries came before the client's own stall but
  after the server's, and only the first raw item met (the client's) set the cutoff.
Each is pinned twice: by `check_flow` alone (fast) and by the Spark job and the scorer.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from triage_support import QuietProgress

from amqpspec.amqp10.checker.rules import RULES
from amqpspec.amqp10.checker.signature import OPENED, signature
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import decode_stream
from amqpspec.fuzz.case import RAW, Step
from amqpspec.fuzz.findings import write_pcap
from amqpspec.fuzz.model import Conversation, Handshake
from amqpspec.fuzz.oracle import Bounds, Target, run_case
from amqpspec.spark_triage.check import check_flow, segments_of
from amqpspec.traces.pcap_edit import Packet, move_flow, read_flows
from amqpspec.traces.pcap_vector import read_segments
from amqpspec.traces.pcap_writer import PCAP_NANO, RecordWriter

QUEUE = "triage-defects"
SERVER_PORT = 5672
FAULT = "client-transfer-without-credit"
RULE = "link.credit.transfer-without-credit"
SIGNATURE = signature(RULE, RULES[RULE].section, "transfer", OPENED)
LIVENESS_BOUND = 1.0


def _record(target: Target, steps, path: Path, pace: float, shows: str | None) -> list[Packet]:
    """The connection as recorded; again (three tries in all, as `triage synth` does) while
    it does not show exactly `shows` (None: no violation), e.g. a loaded machine answered
    the attach after the pace."""
    for _attempt in range(3):
        outcome = run_case(target, steps, pace=pace, quick=True)
        assert outcome.recording is not None
        write_pcap(str(path), outcome.recording)
        (flow,) = read_flows(path)
        if _signatures(flow, path.parent) == ({shows} if shows else set()):
            return flow
    raise AssertionError(f"{path.name}: the recorded connection does not show {shows}")


def _frames(packet: Packet) -> list[str]:
    payload = packet.data[packet._payload_offset() :]
    try:
        return [getattr(i, "name", "header") for i in decode_stream(payload, expect_header=False)]
    except DecodeError:
        return []


def _client(flow: list[Packet]) -> int:
    return flow[0].ports[0]


def _data(flow: list[Packet], client: bool) -> list[int]:
    port = _client(flow)
    return [
        i
        for i, p in enumerate(flow)
        if p.carries_data and (p.ports[0] == port) == client and _frames(p)
    ]


def _cut(packet: Packet) -> Packet:
    """The segment as a 4-byte snap length captured it (its wire length kept)."""
    return Packet(packet.time_ns, packet.data[: packet._payload_offset() + 4], len(packet.data))


def cut_then_retransmitted(flow: list[Packet]) -> list[Packet]:
    """The broker's segment with its flow cut to 4 bytes; its full copy retransmitted just
    after the client's last transfer segment."""
    flow = list(flow)
    server = next(i for i in _data(flow, False) if "flow" in _frames(flow[i]))
    last_transfer = max(i for i in _data(flow, True) if "transfer" in _frames(flow[i]))
    assert last_transfer > server, "the client's transfers came after the broker's flow"
    whole = flow[server]
    flow[server] = _cut(whole)
    flow.insert(last_transfer + 1, Packet(flow[last_transfer].time_ns + 1000, whole.data))
    return flow


def gap_then_cut(flow: list[Packet]) -> list[Packet]:
    """The broker's first segment of transfers missing, and a client segment cut after the
    client's second disposition segment (more client segments follow it)."""
    flow = list(flow)
    transfers = next(i for i in _data(flow, False) if "transfer" in _frames(flow[i]))
    settles = [i for i in _data(flow, True) if "disposition" in _frames(flow[i])]
    assert len(settles) >= 4 and settles[0] > transfers
    flow[settles[2]] = _cut(flow[settles[2]])
    del flow[transfers]
    return flow


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, list[Packet]]:
    """The three recorded connections: faulty client, clean sender, clean receiver."""
    from amqpspec.reference_broker.admin.client import ManagementClient
    from amqpspec.reference_broker.runtime.process import BrokerProcess

    root = tmp_path_factory.mktemp("recorded")
    address = f"/queues/{QUEUE}"
    handshake = Handshake(source=address, target=address)
    with BrokerProcess(admin=True) as broker:
        with ManagementClient(broker.admin_url) as admin:
            admin.declare_queue(QUEUE)
        target = Target("127.0.0.1", broker.port, handshake, Bounds(reply=1.0))
        faulty = Conversation(handshake).open()
        link = faulty.attach_sender(faulty.begin())
        for _ in range(2):
            faulty.send(link)
        *head, attach, one, two = faulty.steps()  # one write: before the broker's flow
        burst = [*head, Step(attach.data + one.data + two.data, "attach+transfers", RAW)]
        clean = Conversation(handshake).open()
        link = clean.attach_sender(clean.begin())
        for _ in range(3):
            clean.send(link)
        receiver = Conversation(handshake).open()
        session = receiver.begin()
        sender = receiver.attach_sender(session)
        for _ in range(6):
            receiver.send(sender, settled=True)
        link = receiver.attach_receiver(session, credit=6)
        for delivery in range(6):
            receiver.settle(link, delivery)
        return {
            "faulty": _record(target, burst, root / "faulty.pcap", 0.0, SIGNATURE),
            "clean": _record(target, clean.steps(), root / "clean.pcap", 0.3, None),
            "receiver": _record(target, receiver.steps(), root / "receiver.pcap", 0.3, None),
        }


def _signatures(flow: list[Packet], tmp: Path) -> set[str]:
    """The signatures `check_flow` finds on the flow, written as a pcap and read back."""
    path = tmp / "one.pcap"
    with RecordWriter(path, PCAP_NANO) as capture:
        for packet in flow:
            capture.write(packet.time_ns, packet.data, wirelen=packet.wirelen)
    flows: dict[tuple, list] = defaultdict(list)
    for entry in segments_of(read_segments(str(path))):
        flows[tuple(sorted((entry[0].src, entry[0].dst)))].append(entry)
    (segments,) = flows.values()
    violations, _rows = check_flow("one", segments, liveness_bound=LIVENESS_BOUND)
    return {v.signature for v in violations}


def test_the_templates_show_what_they_must(templates, tmp_path):
    assert _signatures(templates["faulty"], tmp_path) == {SIGNATURE}
    assert _signatures(templates["clean"], tmp_path) == set()
    assert _signatures(templates["receiver"], tmp_path) == set()


def test_a_cut_segment_retransmitted_late_gives_no_violation(templates, tmp_path):
    assert _signatures(cut_then_retransmitted(templates["clean"]), tmp_path) == set()


def test_the_earliest_stall_sets_the_cutoff_not_the_first_raw_item(templates, tmp_path):
    assert _signatures(gap_then_cut(templates["receiver"]), tmp_path) == set()


def _corpus(templates: dict[str, list[Packet]], root: Path) -> Path:
    """Eight connections in one file, each on its own client port; truth.json beside it."""
    plan = [("faulty", None, [])] * 4 + [
        ("clean", cut_then_retransmitted, ["snaplen-truncation", "retransmit"]),
        ("receiver", gap_then_cut, ["capture-gap", "snaplen-truncation"]),
        ("clean", None, []),
        ("receiver", None, []),
    ]
    packets: list[Packet] = []
    truth = []
    clock = 1_800_000_000 * 1_000_000_000
    (root / "corpus").mkdir()
    for number, (name, edit, noise) in enumerate(plan):
        flow = templates[name] if edit is None else edit(templates[name])
        moved = move_flow(flow, 30000 + number, SERVER_PORT, clock)
        clock = moved[-1].time_ns + 50_000_000
        packets += moved
        faulty = name == "faulty"
        truth.append(
            {
                "file": "corpus.pcap",
                "client_port": 30000 + number,
                "server_port": SERVER_PORT,
                "epoch": 0,
                "fault": FAULT if faulty else None,
                "signature": SIGNATURE if faulty else None,
                "noise": noise,
            }
        )
    with RecordWriter(root / "corpus" / "corpus.pcap", PCAP_NANO) as capture:
        for packet in packets:
            capture.write(packet.time_ns, packet.data, wirelen=packet.wirelen)
    (root / "truth.json").write_text(json.dumps({"version": 1, "connections": truth}))
    return root


def test_defect_only_connections_make_no_cluster_in_spark(spark, templates, tmp_path):
    from amqpspec.spark_triage.inputs import discover
    from amqpspec.spark_triage.job import run_job
    from amqpspec.spark_triage.score import score_main

    root = _corpus(templates, tmp_path)
    out = tmp_path / "triage"
    code = run_job(
        spark, discover([str(root / "corpus")]), out, 2, None, QuietProgress(), LIVENESS_BOUND
    )
    assert code == 1  # the faulty client's cluster
    assert score_main(str(out), str(root / "truth.json")) == 0
    result = json.loads((out / "score.json").read_text())
    assert result["matched"] == result["connections"] == 8
    assert result["false_clusters_on_defect_only"] == 0
    assert result["clean_with_cluster"] == 0
    assert result["pairwise_precision"] == 1.0 and result["pairwise_recall"] == 1.0
    clusters = json.loads((out / "clusters.json").read_text())
    assert [(c["signature"], c["connections"]) for c in clusters] == [(SIGNATURE, 4)]
