"""The depth sweep reaches the memory watermark: the reference broker with a 96 MiB watermark
(about 50 MiB above its idle RSS), a publisher with no consumer until the alarm has blocked
it for 1 s, then a consumer draining the queue; the alarm's events and the blocked time are
in the JSON."""

from __future__ import annotations

import json

import pytest

from amqpspec.bench.arrows import build, trends

pytestmark = pytest.mark.skipif(not build.c_arrow_available(), reason=build.MISSING)


def test_depth_sweep_records_the_memory_alarm_blocking_the_publisher(tmp_path):
    count = 60_000
    argv = ["depth", "--brokers", "reference", "--count", str(count), "--body-size", "2000"]
    argv += ["--memory-limit-mib", "96", "--blocked-wait", "1", "--timeout", "120"]
    assert trends.main([*argv, "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "trends-depth.json").read_text())
    assert (report["memory_limit_mib"], report["body_size"]) == (96, 2000)
    (run,) = report["runs"]
    assert run["sent"] == run["received"] == count
    assert sum(run["publish_rates"]) == sum(run["drain_rates"]) == count
    names = [event["event"] for event in run["events"]]
    assert (
        names.index("alarm set") < names.index("consumer started") < names.index("alarm cleared")
    ), names
    alarm = run["events"][names.index("alarm set")]
    # the alarm stopped the queue short of everything published, near the watermark
    assert 0 < alarm["depth"] < count
    assert alarm["memory_mib"] >= 96
    # the consumer started only after the alarm had held the publisher for --blocked-wait
    assert run["alarm_seconds"] >= 1.0
    assert run["publisher_blocked_seconds"] >= 0.5
    assert (tmp_path / "trends-depth.png").exists()
