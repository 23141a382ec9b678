"""In-process fuzzing of the codec, the engine and the in-memory reference broker: short
fixed-seed runs, every kept crasher replayed as a regression test, and the crasher
machinery (found, minimised, kept) on a target with a planted bug."""

from __future__ import annotations

import json

from amqpspec.fuzz.case import Step
from amqpspec.fuzz.inprocess import (
    CRASHERS_DIR,
    TARGETS,
    InProcessTarget,
    broker_one,
    codec_one,
    crashers,
    engine_one,
    run_inprocess,
)
from amqpspec.fuzz.model import Handshake


def test_every_kept_crasher_stays_fixed():
    assert CRASHERS_DIR.is_dir()
    for target, path, case in crashers():
        crash = TARGETS[target].judge(case.steps)
        assert crash is None, f"{path.name} crashes {target} again: {crash}"


def test_short_runs_of_each_target_find_nothing_on_the_clean_code(tmp_path):
    for name in ("engine", "broker"):
        result = run_inprocess(TARGETS[name], 2.0, seed=3, crashers_dir=tmp_path)
        assert result.executions > 50 and result.crashers == [], result.line()
    assert list(tmp_path.iterdir()) == []


def test_the_oracles_accept_what_the_contract_allows():
    assert codec_one(b"") is None and codec_one(b"\x00\x53\x10\xc0\xff") is None
    assert codec_one(b"AMQP\x00\x01\x00\x00" + b"\x00" * 40) is None
    assert (
        engine_one([Step(b"AMQP\x00\x01\x00\x00", "h", "header"), Step(b"\xff" * 9, "x")]) is None
    )
    assert (
        broker_one([Step(b"AMQP\x03\x01\x00\x00", "h", "header"), Step(b"\x00" * 8, "x")]) is None
    )


def test_a_planted_bug_is_found_minimised_and_kept(tmp_path):
    def judge(steps: list[Step]) -> str | None:
        if any(s.label.startswith("flow") for s in steps):
            return "PlantedError at planted.py:1: a flow"
        return None

    planted = InProcessTarget("planted", judge, Handshake())
    result = run_inprocess(planted, 1.0, seed=1, crashers_dir=tmp_path)
    assert len(result.crashers) == 1 and "PlantedError" in result.crashers[0]
    (kept,) = list(tmp_path.glob("planted-*.json"))
    record = json.loads(kept.read_text())
    assert record["target"] == "planted" and record["crash"].startswith("PlantedError")
    labels = [s["label"] for s in record["steps"]]
    assert len(labels) == 1 and labels[0].startswith("flow")  # 1-minimal
