"""The fuzzer's pure parts: cases and reproducers, the reference model, mutators, the
client-stream judgement, signatures and the findings store (no sockets)."""

from __future__ import annotations

import json
import os
import random

import pytest

from amqpspec.amqp10.builder import build_frame
from amqpspec.amqp10.checker.signature import rule_of
from amqpspec.amqp10.composites import COMPOSITE_CLASSES
from amqpspec.fuzz.campaign import CampaignConfig, make_case
from amqpspec.fuzz.case import HEADER, Case, case_from_json, load_case, step
from amqpspec.fuzz.findings import Finding, FindingStore, finding_id, signature
from amqpspec.fuzz.model import COVERAGE_UNIVERSE, Conversation, Handshake, ServerModel, states
from amqpspec.fuzz.mutators import STRATEGIES, mutate_case
from amqpspec.fuzz.oracle import Target, stream_status
from amqpspec.fuzz.seeds import SCENARIOS, scenario


def _conversation() -> list:
    conv = Conversation(Handshake()).open()
    session = conv.begin()
    link = conv.attach_sender(session)
    conv.send(link)
    conv.detach(link)
    conv.end(session)
    conv.close()
    return conv.steps()


def test_conversation_is_the_engines_legal_client_side():
    steps = _conversation()
    assert [s.label for s in steps] == [
        "protocol-header 3.1.0.0",
        "sasl-init",
        "protocol-header 0.1.0.0",
        "open",
        "begin",
        "attach",
        "transfer",
        "detach",
        "end",
        "close",
    ]
    assert all(s.malformed is None for s in steps)
    assert stream_status(steps) == ("ok", None, "")


def test_server_model_states_and_coverage():
    steps = _conversation()
    seen = states(steps)
    assert seen[3] == "HDR_EXCH/-/-"  # the open arrives after the header exchange
    assert seen[6] == "OPENED/MAPPED/ATTACHED"  # the transfer, on an attached link
    model = ServerModel()
    for s in steps:
        model.feed(s)
    assert model.covered and model.covered <= COVERAGE_UNIVERSE


def test_stream_status_malformed_and_pending():
    steps = _conversation()
    bad = step(
        build_frame(
            COMPOSITE_CLASSES["flow"](incoming_window=1, next_outgoing_id=0, outgoing_window=1),
            doff=1,
        )
    )
    assert bad.malformed and "DOFF" in bad.malformed
    status, where, reason = stream_status([*steps[:5], bad])
    assert (status, where) == ("malformed", 5) and "framing-error" in reason
    cut = step(steps[5].data[:10])
    assert stream_status([*steps[:5], cut])[0] == "pending"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_changes_cases_and_is_deterministic(strategy):
    changed = 0
    for index in range(40):
        _, base = scenario(Handshake(), random.Random(index))
        first = mutate_case(base, strategy, random.Random(f"m{index}"))
        again = mutate_case(base, strategy, random.Random(f"m{index}"))
        assert [s.data for s in first] == [s.data for s in again]
        changed += [s.data for s in first] != [s.data for s in base]
        assert all(s.data for s in first if s.kind == HEADER)
    assert changed >= 30


def test_every_scenario_is_legal():
    for name in SCENARIOS:
        for seed in range(5):
            rng = random.Random(seed)
            conv = Conversation(Handshake(sasl="ANONYMOUS"))
            SCENARIOS[name](conv, rng)
            steps = conv.steps()
            assert stream_status(steps)[0] == "ok", name


def test_make_case_depends_on_seed_and_index_only():
    config = CampaignConfig(Target("127.0.0.1", 1), "/nonexistent", seed=7)
    a, b = make_case(config, 12), make_case(config, 12)
    assert a.seed == "7:12" and [s.data for s in a.steps] == [s.data for s in b.steps]
    assert [s.data for s in make_case(config, 13).steps] != [s.data for s in a.steps]


def test_reproducer_round_trip(tmp_path):
    case = Case(_conversation(), "fields", "3:4", "note")
    record = case.to_json(kind="hang", rule="reply-bound")
    again = case_from_json(json.loads(json.dumps(record)))
    assert [s.data for s in again.steps] == [s.data for s in case.steps]
    assert again.labels == case.labels and again.seed == "3:4"
    with pytest.raises(ValueError):
        case_from_json({"steps": []})
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    loaded, raw = load_case(str(path))
    assert raw["kind"] == "hang" and loaded.labels == case.labels


def test_signature_is_versioned_and_ignores_mutation_details():
    a = signature(
        "violation", "link.credit.x", "2.6.7", "flow[link-credit=4294967295]", "OPENED/MAPPED/-"
    )
    b = signature("violation", "link.credit.x", "2.6.7", "flow[drain storm x8]", "OPENED/MAPPED/-")
    assert a == b == "v2|violation|v1+link.credit.x+2.6.7+flow+opened|OPENED/MAPPED/-"
    # the middle part is the checker's rule signature, shared with the triage job
    assert rule_of(a.split("|")[2]) == "link.credit.x"
    closing = signature("violation", "r", "2.4.3", "close", "CLOSE_SENT/-/-")
    assert "+close-sent|" in closing
    assert finding_id(a) != finding_id(
        signature("hang", "reply-bound", "2.4.3", "flow", "OPENED/-/-")
    )


def test_findings_store_writes_each_finding_at_once(tmp_path):
    store = FindingStore(str(tmp_path))
    case = Case(_conversation(), "bytes", "0:1")
    sig = signature("hang", "reply-bound", "2.4.3", "close", "OPENED/-/-")
    finding = Finding(
        finding_id(sig),
        "hang",
        sig,
        "reply-bound",
        "2.4.3",
        "no reply",
        "",
        case.labels,
        case.labels,
        "0:1",
    )
    assert store.add(finding, case, None)
    assert not store.add(finding, case, None)  # one bucket per signature
    records = json.loads((tmp_path / "findings.json").read_text())
    assert [r["id"] for r in records] == [finding.id]
    assert set(records[0]) >= {
        "id",
        "kind",
        "signature",
        "rule",
        "section",
        "summary",
        "reproducer",
        "frames",
        "original_frames",
        "seed",
    }
    folder = tmp_path / "findings" / finding.id
    assert sorted(os.listdir(folder)) == ["reproducer.json", "reproducer.txt"]
    assert FindingStore(str(tmp_path)).known(sig)  # a resumed campaign keeps it
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]
