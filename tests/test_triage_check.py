"""spark_triage.check and .reproducers without Spark: verdicts, signatures, capture defects,
port reuse, and minimal reproducers that re-trigger their signature from the written pcap."""

from __future__ import annotations

from collections import defaultdict

from capture_files import PROTON_C_PCAP, RABBITMQ_PCAP
from traces_support.crafted import write_capture

from amqpspec.spark_triage.check import check_flow, items_of, segments_of
from amqpspec.spark_triage.reproducers import minimize, signatures_of, write_reproducer
from amqpspec.traces.pcap_vector import read_segments

CREDIT = "v1+link.credit.transfer-beyond-credit+2.6.7+transfer+opened"


def _flows(path: str) -> dict[tuple, list]:
    flows: dict[tuple, list] = defaultdict(list)
    for entry in segments_of(read_segments(path)):
        flows[tuple(sorted((entry[0].src, entry[0].dst)))].append(entry)
    return flows


def _check(path: str):
    violations, connections = [], []
    for segments in _flows(path).values():
        v, c = check_flow("src", segments)
        violations += v
        connections += c
    return violations, connections


def test_rabbitmq_overdelivery_has_the_credit_signature_and_broker():
    violations, connections = _check(str(RABBITMQ_PCAP))
    assert len(connections) == 1 and connections[0].verdict == "MUST"
    assert connections[0].broker_product == "RabbitMQ"
    assert connections[0].broker_version == "3.10.8"
    credit = [v for v in violations if v.signature == CREDIT]
    assert len(credit) == 4
    assert all(v.performative == "transfer" and v.origin == "server" for v in credit)
    assert credit[0].frame_index == 13655 and credit[0].handle == 0


def test_proton_c_broker_has_no_must_violation():
    """The Proton C broker is clean; two of its Proton clients' receivers grant credit with
    delivery-count 0 before the broker's attach (2.7.4: "...this field MUST NOT be set")."""
    violations, connections = _check(str(PROTON_C_PCAP))
    assert len(connections) == 4
    assert not [v for v in violations if v.level == "MUST" and v.origin == "server"]
    client = {v.signature.split("+")[1] for v in violations}
    assert client == {"link.flow.receiver-delivery-count-before-attach"}
    assert sorted(c.verdict for c in connections) == ["MUST", "MUST", "OK", "OK"]


def test_crafted_capture_defects_are_counted_not_dropped(tmp_path):
    path = str(tmp_path / "c.pcap")
    write_capture(path)  # a retransmission, an overlap, out-of-order, server seq wrap
    _violations, connections = _check(path)
    (row,) = connections
    assert row.verdict != "UNCHECKED" and row.frames > 30
    assert row.defects.get("retransmit", 0) >= 1
    assert row.defects.get("overlap", 0) >= 1
    assert row.defects.get("out-of-order", 0) >= 1
    assert "gap" not in row.defects  # every hole was filled


def test_sequence_wrap_is_reported_and_not_mistaken_for_a_retransmit():
    from amqpspec.traces.tcp_stream import LOST, HalfStream

    defects: dict[str, int] = {}
    half = HalfStream(defects)
    half.syn(0xFFFFFFF0)
    assert half.accept(0xFFFFFFF1, b"x" * 32, 0.1) == [(b"x" * 32, 0.1)]
    assert half.accept(0x11, b"y" * 8, 0.2) == [(b"y" * 8, 0.2)]
    assert defects == {"sequence-wrap": 1}
    assert half.accept(0x40, b"z" * 8, 0.3) == []  # bytes 0x19-0x3f lost: held
    assert half.finish(0.4) == [(LOST, 0.4), (b"z" * 8, 0.3)]
    assert defects == {"sequence-wrap": 1, "gap": 1}


def test_each_defect_is_named_by_the_one_sequence_tracker():
    """Out-of-order, retransmit, overlap and a conflicting resend, each once; the bytes
    come out in order, the first copy kept."""
    from amqpspec.traces.tcp_stream import HalfStream

    defects: dict[str, int] = {}
    half = HalfStream(defects)
    half.syn(99)
    out = [half.accept(100, b"aaaa", 0.0)]  # 100-103
    out.append(half.accept(108, b"cccc", 0.1))  # ahead: a hole at 104-107
    assert defects == {}
    out.append(half.accept(104, b"bbbb", 0.2))  # fills it
    assert defects == {"out-of-order": 1}
    out.append(half.accept(100, b"aaaa", 0.3))  # the same bytes again
    out.append(half.accept(100, b"AAAA", 0.4))  # the same place, other bytes
    out.append(half.accept(110, b"ccdd", 0.5))  # half old, half new
    delivered = b"".join(p for chunks in out for p, _t in chunks if p is not None)
    assert delivered == b"aaaabbbbccccdd"
    assert defects == {
        "out-of-order": 1,
        "retransmit": 2,
        "conflicting-retransmit": 1,
        "overlap": 1,
    }


def test_port_reuse_gives_two_connections_with_distinct_keys(tmp_path):
    segments = []
    for number in range(2):
        path = str(tmp_path / f"c{number}.pcap")
        write_capture(path)
        for segment, cut in segments_of(read_segments(path)):
            segment.time += number * 5.0
            segments.append((segment, cut))
    _violations, connections = check_flow("src", segments)
    assert len(connections) == 2
    assert connections[0].connection_key != connections[1].connection_key
    assert connections[0].connection_key.endswith("|0")


def test_reproducer_is_small_and_retriggers_from_its_pcap(tmp_path):
    (items,) = items_of("src", segments_of(read_segments(str(RABBITMQ_PCAP)))).values()
    smallest = minimize(items, CREDIT, upto=13655)
    assert CREDIT in signatures_of(smallest)
    assert len(smallest) <= 20
    for index in range(len(smallest)):  # 1-minimal
        assert CREDIT not in signatures_of(smallest[:index] + smallest[index + 1 :])
    result = write_reproducer(smallest, CREDIT, tmp_path, "127.0.0.1:34458", "127.0.0.1:5672")
    assert result.rechecked
    assert (tmp_path / f"{CREDIT}.txt").read_text().count("@transfer") >= 1


def test_known_issues_match_rule_and_product():
    from amqpspec.spark_triage.known_issues import known_issue

    rule = "link.credit.transfer-beyond-credit"
    assert known_issue(rule, ["RabbitMQ 3.10.8"])["issue"] == "RabbitMQ #2597"
    assert known_issue(rule, ["amqpspec reference broker"]) is None
    assert known_issue("link.drain.no-reply", ["ActiveMQ 5"])["issue"] == "go-amqp#255"


def test_a_silence_longer_than_the_gap_splits_a_connection():
    """A run after a long silence is a connection whose start was not captured: its own
    key (epoch 1), not checked; the first run keeps its verdict."""
    segments = list(segments_of(read_segments(str(RABBITMQ_PCAP))))
    for segment, _cut in segments[len(segments) // 2 :]:
        segment.time += 1000.0
    whole = check_flow("src", segments, gap_seconds=2000.0)[1]
    violations, split = check_flow("src", segments, gap_seconds=600.0)
    assert len(whole) == 1 and whole[0].verdict == "MUST"
    assert [row.connection_key[-2:] for row in split] == ["|0", "|1"]
    assert split[1].verdict == "UNCHECKED" and split[1].frames > 1000
    assert split[0].defects.get("start-not-captured") == 1
    assert split[0].frames + split[1].frames == whole[0].frames
    assert {v.connection_key for v in violations} == {split[0].connection_key}


def test_young_collections_are_spaced_during_a_check_and_restored_after():
    import gc

    seen: list[tuple[int, int, int]] = []

    def watched(segments):
        for entry in segments:
            seen.append(gc.get_threshold())
            yield entry

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        (segments,) = list(_flows(str(PROTON_C_PCAP)).values())[:1]
        _violations, connections = check_flow("src", watched(segments))
        assert connections and seen
        assert {threshold[0] for threshold in seen} == {10_000}
        assert {threshold[1:] for threshold in seen} == {(10, 10)}
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
