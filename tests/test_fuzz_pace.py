"""Speed against slow brokers (fuzz.pace, fuzz.campaign): `--workers auto` picks the cases in
flight from the broker's answer time, and a broker behaviour is triaged `per_behaviour`
times, its further signatures kept untriaged under DIR/candidates/ as examples (none lost).
Real campaigns against the reference broker with a parser fault; fixed seeds, free ports."""

from __future__ import annotations

import json

from fuzz_support import run_fuzz

from amqpspec.fuzz.campaign import CANDIDATES_DIR, Campaign, CampaignConfig
from amqpspec.fuzz.detection import Supervised, target_for
from amqpspec.fuzz.pace import MAX_WORKERS, MIN_WORKERS, choose_workers, measure_case_latency

FAULT = "flow-without-delivery-count"  # one behaviour (2.7.4), whatever the input


def test_workers_follow_the_answer_time() -> None:
    assert choose_workers(0.002) == MIN_WORKERS  # the reference broker: both cores
    assert choose_workers(0.05) == 10
    assert choose_workers(1.5) == MAX_WORKERS  # RabbitMQ 3.10's delayed error answers
    assert choose_workers(-1.0) == MIN_WORKERS
    assert choose_workers(1.5, connections=5) == MAX_WORKERS // 5  # multi-party: 5 parties


def test_a_behaviour_is_triaged_once_and_its_other_signatures_are_kept(tmp_path) -> None:
    broker = Supervised([FAULT])
    try:
        config = CampaignConfig(
            target_for(broker), str(tmp_path), seed=1, cases=300, workers=4, per_behaviour=1
        )
        assert measure_case_latency(config) < 1.0  # the reference broker answers at once
        campaign = Campaign(config)
        stats = campaign.run()
        queued = campaign._behaviour_of  # signature -> behaviour, for those triaged
        assert stats.candidates == len(queued)
        assert len(set(queued.values())) == len(queued), "a behaviour was triaged twice"
        assert stats.examples >= 1, "the fault gave one signature only: no example kept"
        examples = [
            json.loads(p.read_text()) for p in (tmp_path / CANDIDATES_DIR).glob("*/reproducer.json")
        ]
        kept = [e for e in examples if e["signature"] not in queued]
        assert len(kept) == stats.examples  # every example written, none lost
        for record in kept:
            assert record["triaged"] is False
            assert record["behaviour"] in set(queued.values())
        replay = run_fuzz(
            "replay",
            _folder(tmp_path, kept[0]),
            "--broker",
            broker.url,
            "--profile",
            "reference",
        )
        assert replay.returncode in (0, 1), replay.stdout + replay.stderr
        assert "reproduced" in replay.stdout
    finally:
        broker.stop()


def _folder(tmp_path, record: dict) -> str:
    from amqpspec.fuzz.findings import finding_id

    return str(tmp_path / CANDIDATES_DIR / finding_id(record["signature"]))
