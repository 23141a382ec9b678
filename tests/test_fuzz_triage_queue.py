"""Triage off the hot path (fuzz.campaign): every candidate of a new signature is either
triaged (a finding, or rejected) or, when the budget's grace is over, kept under
DIR/candidates/ as a reproducer that `amqpspec fuzz replay` runs: none is lost. A real
campaign against the reference broker with two parser faults, the grace set to nothing."""

from __future__ import annotations

import json

from fuzz_support import run_fuzz

from amqpspec.fuzz import campaign as campaign_module
from amqpspec.fuzz.campaign import CANDIDATES_DIR, Campaign, CampaignConfig
from amqpspec.fuzz.detection import Supervised, target_for

FAULTS = ["die-on-channel-reuse", "die-on-nested-descriptor"]


def test_no_candidate_is_lost_when_the_grace_is_over(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(campaign_module, "TRIAGE_GRACE_MIN_S", 0.0)
    monkeypatch.setattr(campaign_module, "TRIAGE_GRACE_SHARE", 0.0)
    broker = Supervised(FAULTS)
    try:
        config = CampaignConfig(target_for(broker), str(tmp_path), seed=1, duration=3.0, workers=4)
        campaign = Campaign(config)
        stats = campaign.run()
        assert stats.candidates >= 1, "the faults gave no candidate"
        assert stats.queued == 0
        assert stats.triaged + stats.kept == stats.candidates
        # DIR/candidates/ holds the kept candidates and the examples of behaviours triaged
        # enough (fuzz.campaign PER_BEHAVIOUR), one folder per signature
        folders = sorted((tmp_path / CANDIDATES_DIR).iterdir()) if stats.kept else []
        records = {f: json.loads((f / "reproducer.json").read_text()) for f in folders}
        kept = [f for f in folders if records[f]["signature"] not in campaign._examples]
        assert len(kept) == stats.kept
        for folder in kept:
            record = records[folder]
            assert record["triaged"] is False and record["signature"].startswith("v2|")
        if kept:  # a kept candidate replays like a finding
            replay = run_fuzz(
                "replay", str(kept[0]), "--broker", broker.url, "--profile", "reference"
            )
            assert replay.returncode in (0, 1), replay.stdout + replay.stderr
            assert "reproduced" in replay.stdout
    finally:
        broker.stop()
