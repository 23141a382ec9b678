"""`amqpspec bench arrows` (bench/arrows): the arrows count exactly through the reference
broker and peer to peer, latency comes from the message's stamp, the JSON report's schema.
Real sockets, brokers on free ports; no wall-clock assertions."""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import threading
from array import array

import pytest

from amqpspec.bench.arrows import python_arrow, run, spec, trends
from amqpspec.bench.arrows.build import MISSING, c_arrow_available
from amqpspec.bench.arrows.results import RESULT_KEYS, per_second, percentile, summarise
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.runtime.process import BrokerProcess, free_port

ARROWS = [
    "python",
    pytest.param(
        "c",
        marks=pytest.mark.skipif(not c_arrow_available(), reason=MISSING),
    ),
]


def _args(tmp_path: pathlib.Path, **changes) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    # a bound, not a speed: generous so that a loaded machine (CI, 2 cores) cannot fail it
    args = parser.parse_args(["--out", str(tmp_path / "out"), "--timeout", "180"])
    for key, value in changes.items():
        setattr(args, key, value)
    args.sender_arrow = args.sender_arrow or args.arrows
    args.receiver_arrow = args.receiver_arrow or args.arrows
    return args


@pytest.fixture(scope="module")
def broker():
    with BrokerProcess(admin=True) as process:
        with ManagementClient(f"http://127.0.0.1:{process.admin_port}") as admin:
            admin.declare_queue("arrows", durable=False)
        yield process


def _reference(broker: BrokerProcess) -> run.Target:
    return run.Target(
        "reference", "reference", "127.0.0.1", broker.port, "/queues/arrows", pid=broker.proc.pid
    )


def _peer() -> run.Target:
    return run.Target(run.PEER, "peer", "127.0.0.1", 0, "arrows", listen=True)


@pytest.mark.parametrize("arrow", ARROWS)
@pytest.mark.parametrize("settlement", ["at-least-once", "presettled"])
def test_arrows_count_exactly_through_the_reference_broker(broker, tmp_path, arrow, settlement):
    args = _args(tmp_path, count=3000, credit=100, arrows=arrow, settlement=settlement)
    result = run.run_one(_reference(broker), args, tmp_path)
    assert result["received"] == 3000
    assert result["sent"] == 3000
    assert result["receiver"]["received"] == 3000
    assert result["accepted"] == (3000 if settlement == "at-least-once" else 0)
    assert sum(result["receive_rates"]) == 3000 == sum(result["send_rates"])
    assert result["broker_process"]["pid"] == broker.proc.pid
    assert result["broker_process"]["rss_peak_bytes"] > 0
    with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as admin:
        assert int(admin.queue("arrows").get("messages") or 0) == 0


@pytest.mark.parametrize(
    ("sender", "receiver"),
    [
        ("python", "python"),
        pytest.param("c", "python", marks=ARROWS[1].marks),
        pytest.param("python", "c", marks=ARROWS[1].marks),
        pytest.param("c", "c", marks=ARROWS[1].marks),
    ],
)
def test_peer_to_peer_counts_exactly(tmp_path, sender, receiver):
    args = _args(tmp_path, count=2000, credit=50, sender_arrow=sender, receiver_arrow=receiver)
    result = run.run_one(_peer(), args, tmp_path)
    assert result["received"] == result["sent"] == result["accepted"] == 2000
    assert result["broker_process"] is None


@pytest.mark.parametrize("arrow", ARROWS)
def test_max_unsettled_bounds_the_sender_and_still_counts_exactly(broker, tmp_path, arrow):
    args = _args(tmp_path, count=500, credit=10, max_unsettled=1, arrows=arrow)
    result = run.run_one(_reference(broker), args, tmp_path)
    assert result["received"] == result["sent"] == result["accepted"] == 500


@pytest.mark.parametrize("arrow", ARROWS)
def test_duration_mode_over_several_connections_and_links_ends_on_every_last_message(
    tmp_path, arrow
):
    args = _args(tmp_path, count=0, duration=0.5, connections=2, links=2, arrows=arrow, rate=2000)
    result = run.run_one(_peer(), args, tmp_path)
    assert result["sent"] == result["received"] == result["accepted"] > 4


@pytest.mark.parametrize("receiver", ARROWS)
def test_latency_is_computed_from_the_message_stamp(tmp_path, monkeypatch, receiver):
    """A sender whose stamps say five seconds ago: every recorded latency is >= 5 s, so the
    receiver measured from the message, not from its own clock."""
    five_s = 5_000_000_000
    monkeypatch.setattr(
        python_arrow, "stamp", lambda size, t, last=False: spec.stamp(size, t - five_s, last)
    )
    port = free_port()
    records = tmp_path / "records.bin"
    receive = spec.ArrowSpec(
        "receive", port=port, listen=True, count=200, credit=20, out=str(records), timeout=60
    )
    process = run.spawn_arrow(receiver, receive, tmp_path / "build")
    try:
        run.wait_ready(process, "receiver")
        sender = python_arrow.Sender(spec.ArrowSpec("send", port=port, count=200, timeout=60))
        done = threading.Thread(target=sender.run)
        done.start()
        done.join(60)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert json.loads(out.splitlines()[-1])["received"] == 200
    sent_ns, received_ns = spec.read_records(str(records))
    assert len(sent_ns) == 200
    latencies = [r - s for s, r in zip(sent_ns, received_ns)]
    assert min(latencies) >= five_s
    figures = summarise(sent_ns, received_ns, {"sent": 200}, {})
    assert figures["latency_ms"]["p50"] >= 5000


def test_summary_figures_from_records():
    sent = array(
        "q",
        [
            0,
            0,
            0,
            0,
            1_000_000_000,
            1_000_000_000,
            1_000_000_000,
            1_000_000_000,
            1_000_000_000,
            1_000_000_000,
        ],
    )
    latency_ms = [1, 2, 3, 4, 5, 6, 7, 8, 9, 100]
    received = array("q", [s + ms * 1_000_000 for s, ms in zip(sent, latency_ms)])
    figures = summarise(sent, received, {"sent": 10, "accepted": 10}, {"received": 10})
    assert figures["latency_ms"]["p50"] == 5
    assert figures["latency_ms"]["p90"] == 9
    assert figures["latency_ms"]["p99"] == 100
    assert figures["latency_ms"]["max"] == 100
    assert figures["send_rates"] == [4, 6]
    assert figures["receive_rates"] == [4, 6]
    # the last, partial second (0.1 s long) counts at its true rate
    assert figures["receive_rate_series"] == [(0.5, 4.0), (1.05, 60.0)]
    assert figures["received"] == 10
    assert figures["latency_cdf"][-1] == (100, 1.0)
    assert percentile([], 50) != percentile([], 50)  # nan
    assert per_second([5, 2_000_000_000], 0) == [1, 0, 1]


def test_command_writes_the_json_report_and_plots(tmp_path, capsys):
    out = tmp_path / "out"
    code = run.main(
        [
            "--brokers",
            "reference,peer-to-peer",
            "--count",
            "500",
            "--arrows",
            "python",
            "--credit",
            "50",
            "--out",
            str(out),
            "--name",
            "t",
        ]
    )
    assert code == 0
    report = json.loads((out / "t.json").read_text())
    assert {"date", "command", "settings", "machine", "load_average", "runs", "plots"} <= set(
        report
    )
    assert [r["broker"] for r in report["runs"]] == ["reference", run.PEER]
    for result in report["runs"]:
        assert set(RESULT_KEYS) <= set(result)
        assert result["received"] == 500
        assert set(result["latency_ms"]) >= {"p50", "p90", "p99", "p99.9", "max"}
    assert report["runs"][0]["broker_process"]["cpu_seconds"] >= 0
    assert report["runs"][1]["of_peer_to_peer"] == 1.0
    assert report["runs"][0]["of_peer_to_peer"] > 0
    assert report["settings"]["count"] == 500
    for name in report["plots"]:
        assert (out / name).stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "msg/s" in printed and f"report {out / 't.json'}" in printed


def test_durable_messages_go_through_the_brokers_durable_queue(tmp_path):
    out = tmp_path / "out"
    code = run.main(
        [
            "--brokers",
            "reference",
            "--durable",
            "--count",
            "300",
            "--arrows",
            "python",
            "--out",
            str(out),
            "--name",
            "d",
            "--no-plots",
        ]
    )
    report = json.loads((out / "d.json").read_text())
    assert code == 0 and report["settings"]["durable"] is True
    assert report["runs"][0]["received"] == report["runs"][0]["accepted"] == 300


def test_bench_cli_lists_arrows():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import argparse, amqpspec.bench.cli as c; p = argparse.ArgumentParser(); "
            "c.add_arguments(p); p.parse_args(['arrows', '--help'])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--settlement" in result.stdout and "--rate" in result.stdout


@pytest.mark.skipif(not c_arrow_available(), reason=MISSING)  # both receive with the C arrow
def test_trends_credit_and_depth_sweeps_write_their_reports(tmp_path):
    out = tmp_path / "trends"
    assert (
        trends.main(
            [
                "credit",
                "--brokers",
                "reference",
                "--count",
                "300",
                "--windows",
                "1,10",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    credit = json.loads((out / "trends-credit.json").read_text())
    assert [(p["sweep"], p["window"]) for p in credit["points"]] == [
        ("in-flight", 1),
        ("in-flight", 10),
        ("prefetch", 1),
        ("prefetch", 10),
    ]
    assert all(p["throughput"] > 0 for p in credit["points"])
    assert (
        trends.main(["depth", "--brokers", "reference", "--count", "2000", "--out", str(out)]) == 0
    )
    depth = json.loads((out / "trends-depth.json").read_text())
    (run_,) = depth["runs"]
    assert run_["sent"] == run_["received"] == 2000
    assert sum(run_["publish_rates"]) == sum(run_["drain_rates"]) == 2000
    assert run_["publish_depth"][-1] == 2000
    assert (out / "trends-credit.png").exists() and (out / "trends-depth.png").exists()
