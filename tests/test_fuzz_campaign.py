"""A network campaign against the reference broker with one parser fault on: the fault is
found, minimised, written at once (findings.json, reproducer .json/.txt/.pcap), and
`amqpspec fuzz replay` reproduces it 3/3 (exit 1). The pcap dissects with the project's
scapy layer and with tshark. Free ports, fixed seed, every wait bounded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from fuzz_support import run_campaign, run_fuzz

from amqpspec.fuzz.detection import Supervised

FAULT = "die-on-channel-reuse"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    broker = Supervised([FAULT])
    out = tmp_path_factory.mktemp("campaign")
    try:
        result = run_campaign(
            broker,
            out,
            "--duration",
            "40",
            "--seed",
            "1",
            "--strategy",
            "sequences",
            "--workers",
            "2",
        )
        yield broker, out, result
    finally:
        broker.stop()


def test_the_fault_is_found_minimised_and_kept(campaign):
    _, out, result = campaign
    assert result.returncode == 1, result.stdout + result.stderr
    findings = json.loads((out / "findings.json").read_text())
    assert findings, result.stdout
    finding = next(f for f in findings if f["rule"] == "connection.close-missing")
    assert finding["kind"] == "violation" and finding["section"] == "2.4.3"
    assert finding["signature"].startswith("v2|violation|v1+connection.close-missing+2.4.3+begin+")
    assert finding["replays"] == "3/3"
    # 1-minimal: the two begins on one channel after the handshake, nothing else
    assert finding["frames"][-2:] == ["begin", "begin[reused channel]"] or finding["frames"][
        -1
    ].startswith("begin")
    assert len(finding["frames"]) <= len(finding["original_frames"])
    folder = out / "findings" / finding["id"]
    assert sorted(os.listdir(folder)) == ["reproducer.json", "reproducer.pcap", "reproducer.txt"]
    assert "close-missing" in (folder / "reproducer.txt").read_text()


def test_replay_reproduces_it(campaign):
    broker, out, _ = campaign
    finding = json.loads((out / "findings.json").read_text())[0]
    folder = out / "findings" / finding["id"]
    result = run_fuzz(
        "replay",
        str(folder),
        "--broker",
        broker.url,
        "--profile",
        "reference",
        "--times",
        "3",
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"reproduced 3/3 {finding['signature']}" in result.stdout


def test_clean_broker_does_not_reproduce_it(campaign, tmp_path):
    _, out, _ = campaign
    finding = json.loads((out / "findings.json").read_text())[0]
    clean = Supervised([])
    try:
        result = run_fuzz(
            "replay",
            str(out / "findings" / finding["id"]),
            "--broker",
            clean.url,
            "--profile",
            "reference",
            "--times",
            "2",
            timeout=120,
        )
    finally:
        clean.stop()
    assert result.returncode == 0 and "reproduced 0/2" in result.stdout


def test_reproducer_pcap_dissects_with_scapy(campaign):
    from scapy.layers.inet import TCP
    from scapy.utils import rdpcap

    from amqpspec.fuzz.scapy_amqp import AMQP, AMQPFrame

    _, out, _ = campaign
    finding = json.loads((out / "findings.json").read_text())[0]
    packets = rdpcap(str(out / "findings" / finding["id"] / "reproducer.pcap"))
    names = []
    for packet in packets:
        payload = bytes(packet[TCP].payload) if packet.haslayer(TCP) else b""
        layer = AMQP(payload).getlayer(AMQPFrame) if payload else None
        while layer is not None:  # every frame of the segment
            names.append(getattr(layer.performative, "NAME", "?"))
            layer = layer.payload.getlayer(AMQPFrame)
    assert "open" in names and names.count("begin") >= 2, names


@pytest.mark.tshark
def test_reproducer_pcap_dissects_with_tshark(campaign):
    tshark = shutil.which("tshark")
    assert tshark, "tshark is a required test tool (apt-get install tshark)"
    _, out, _ = campaign
    finding = json.loads((out / "findings.json").read_text())[0]
    pcap = out / "findings" / finding["id"] / "reproducer.pcap"
    result = subprocess.run(
        [tshark, "-r", str(pcap), "-Y", "amqp"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and "begin" in result.stdout.lower()
