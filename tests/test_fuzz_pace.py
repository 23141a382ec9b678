"""Speed against slow brokers (fuzz.pace, fuzz.campaign): `--workers auto` picks the cases in
flight from the broker's answer time, and a broker behaviour is triaged `per_behaviour`
times, its further signatures kept untriaged under DIR/candidates/ as examples (none lost).
Real campaigns against the reference broker with a parser fault; fixed seeds, free ports."""

from __future__ import annotations

import json
from collections import Counter

from fuzz_support import run_fuzz

from amqpspec.fuzz.campaign import CANDIDATES_DIR, Campaign, CampaignConfig
from amqpspec.fuzz.detection import Supervised, target_for
from amqpspec.fuzz.pace import MAX_WORKERS, MIN_WORKERS, choose_workers, measure_case_latency

FAULT = "flow-without-delivery-count"  # one behaviour (2.7.4), whatever the input


def test_workers_follow_the_answer_time() -> None:
    assert choose_workers(0.002) == MIN_WORKERS  # the reference broker: both cores
    assert choose_workers(0.1) == 20  # 0.1 s x 200 cases/s
    assert choose_workers(1.5) == MAX_WORKERS  # RabbitMQ 3.10's delayed error answers
    assert choose_workers(-1.0) == MIN_WORKERS
    assert choose_workers(1.5, connections=5) == MAX_WORKERS // 5  # multi-party: 5 parties


def test_a_behaviour_is_triaged_once_and_its_other_signatures_are_kept(tmp_path) -> None:
    broker = Supervised([FAULT])
    try:
        config = CampaignConfig(
            target_for(broker), str(tmp_path), seed=1, cases=300, workers=4, per_behaviour=1
        )
        assert measure_case_latency(config) > 0.0  # measured on a real connection
        campaign = Campaign(config)
        stats = campaign.run()
        queued = campaign._behaviour_of  # signature -> behaviour, for those triaged
        # every candidate triaged (a signature rejected once may be queued once more)
        assert stats.triaged + stats.kept == stats.candidates >= len(queued)
        # a behaviour is confirmed once at most; a signature that did not confirm (its
        # replays differed, e.g. on a loaded machine) frees its place for another example
        confirmed = Counter(queued[sig] for sig in campaign._triaged)
        assert confirmed, "the fault was not confirmed"
        assert max(confirmed.values()) == 1, f"a behaviour was triaged twice: {confirmed}"
        assert stats.examples >= 1, "the fault gave one signature only: no example kept"
        examples = [
            json.loads(p.read_text()) for p in (tmp_path / CANDIDATES_DIR).glob("*/reproducer.json")
        ]
        written = {record["signature"] for record in examples}
        unconfirmed = set(queued) - campaign._triaged  # rejected, or kept untriaged: not lost
        assert all(campaign._rejected.get(s, 0) or s in written for s in unconfirmed), unconfirmed
        # every example written, none lost (a signature whose triage did not confirm may come
        # again later as an example of its behaviour)
        kept = [e for e in examples if e["signature"] in campaign._examples]
        assert len(kept) == len(campaign._examples) == stats.examples
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
