"""DIR/findings.md: findings grouped by broker behaviour, for a maintainer.

- The committed RabbitMQ 3.10 campaign (reports/fuzz-brokers/rabbitmq3, written by an older
  version of the fuzzer: no evidence in findings.json, no broker FIN in the pcaps):
  `amqpspec fuzz report DIR` puts its 6 "mistyped field accepted" findings in one behaviour
  and its 4 framing-error drops in another, with the manifest ids at stake.
- A real campaign against the reference broker with two faults (die-on-channel-reuse: a
  well-formed begin on a channel in use kills the connection; die-on-nested-descriptor: a
  described descriptor does): findings.md lists every finding of findings.json once, the
  reused channel is a behaviour of its own, at least one behaviour has several examples,
  each reproducer marks the bad frame (`!!`) that findings.json's evidence names and labels
  the fuzzer's own close, and its replay command reproduces the finding.
- A campaign killed (SIGKILL) after its first confirmed finding leaves a findings.md that
  lists every finding of its findings.json.
Free ports, fixed seed, every wait bounded.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest
from fuzz_support import REPO, run_campaign, run_fuzz

from amqpspec.fuzz.detection import Supervised
from amqpspec.traces.pcap_format import TCP_FIN
from amqpspec.traces.pcap_reader import iter_tcp_segments

FAULTS = ["die-on-channel-reuse", "die-on-nested-descriptor"]
RABBITMQ = os.path.join(REPO, "reports", "fuzz-brokers", "rabbitmq3")
MISTYPED = {
    "e595cd525312",
    "4da4135e3612",
    "737cfef7aa6e",
    "f7a359eb90c9",
    "bb74403b0531",
    "bb3c373e0fe4",
}
FRAMING_DROPS = {"6e1ff6c1b2c1", "48b3475c0ba9", "c73d5264731a", "0a4845f24128"}


def sections(text: str) -> dict[str, str]:
    """findings.md's behaviour sections by heading."""
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def example_ids(section: str) -> set[str]:
    return set(re.findall(r"^\| `([0-9a-f]{12})` \|", section, flags=re.M))


def reproducer_block(section: str) -> list[str]:
    block = section.split("```", 2)[1]
    return [line for line in block.splitlines() if line.strip()]


# ----------------------------------------------------------------- committed RabbitMQ run


@pytest.fixture(scope="module")
def rabbitmq(tmp_path_factory):
    out = tmp_path_factory.mktemp("rabbitmq3") / "rabbitmq3"
    shutil.copytree(RABBITMQ, out)
    (out / "findings.md").unlink(missing_ok=True)
    result = run_fuzz("report", str(out), timeout=120)
    return out, result


def test_report_groups_the_rabbitmq_findings_by_behaviour(rabbitmq):
    out, result = rabbitmq
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 behaviour(s) from 12 finding(s)" in result.stdout, result.stdout
    assert "6x accepts a field of the wrong type instead of refusing it" in result.stdout
    text = (out / "findings.md").read_text()
    groups = sections(text)
    by_ids = {frozenset(example_ids(s)): s for s in groups.values()}
    assert frozenset(MISTYPED) in by_ids, sorted(map(sorted, by_ids))
    assert frozenset(FRAMING_DROPS) in by_ids, sorted(map(sorted, by_ids))
    mistyped = by_ids[frozenset(MISTYPED)]
    assert "accepts a field of the wrong type instead of refusing it" in mistyped
    assert "No MUST of the text binds the broker here" in mistyped
    assert "`2.3.2/amqp-frames.1`" in mistyped  # what the bad frame breaks (its sender's)
    assert "close without an error after the fuzzer's own close" in mistyped  # RabbitMQ's
    drops = by_ids[frozenset(FRAMING_DROPS)]
    assert "`2.4.3/closing-a-connection.1` (MUST" in drops
    assert "Prior to closing a Connection, each peer MUST write a close frame" in drops
    assert "`2.3.1/frame-layout.3`" in drops  # DOFF 1
    # every finding in exactly one behaviour
    listed = [i for s in groups.values() for i in example_ids(s)]
    records = json.loads((out / "findings.json").read_text())
    assert sorted(listed) == sorted(r["id"] for r in records)


def test_rabbitmq_reproducers_mark_the_bad_frame(rabbitmq):
    out, _ = rabbitmq
    for heading, section in sections((out / "findings.md").read_text()).items():
        lines = reproducer_block(section)
        marked = [line for line in lines if line.startswith("!!")]
        assert len(marked) == 1, (heading, lines)
        assert "-> fuzzer step" in marked[0]
        teardown = [line for line in lines if "TEARDOWN" in line]
        assert teardown and all("not a step of the case" in t for t in teardown), lines
        assert not any(t.startswith("!!") for t in teardown)
        assert re.search(r"^!! \d\d:\d\d:\d\d\.\d{3}\s+\+0\.000 ms", marked[0]), marked[0]
        assert "amqpspec fuzz replay " in section and "reproducer.pcap`" in section


# ----------------------------------------------------------------- a real campaign


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    broker = Supervised(FAULTS)
    out = tmp_path_factory.mktemp("behaviours")
    try:
        result = run_campaign(broker, out, "--duration", "40", "--seed", "1", "--workers", "2")
        yield broker, out, result
    finally:
        broker.stop()


def _report(out):
    text = (out / "findings.md").read_text()
    return text, sections(text), json.loads((out / "findings.json").read_text())


def test_campaign_writes_findings_md_by_behaviour(campaign):
    _, out, result = campaign
    assert result.returncode == 1, result.stdout + result.stderr
    text, groups, records = _report(out)
    assert "by broker behaviour:" in result.stdout
    listed = [i for s in groups.values() for i in example_ids(s)]
    assert sorted(listed) == sorted(r["id"] for r in records), (listed, records)
    assert len(groups) < len(records), text  # several findings are one behaviour
    assert max(len(example_ids(s)) for s in groups.values()) >= 2
    # the reused channel (a well-formed begin) is a behaviour of its own
    by_id = {r["id"]: r for r in records}
    own = [s for s in groups.values() if "a well-formed begin frame" in s.split("\n", 3)[2]]
    assert own, text
    for section in own:
        for finding in example_ids(section):
            frames = by_id[finding]["frames"]
            assert frames[-1].startswith("begin") and frames[-2].startswith("begin"), frames
    for section in groups.values():
        if "`connection.close-missing`" in section:  # the broker breaks 2.4.3, quoted
            assert "`2.4.3/closing-a-connection.1` (MUST" in section
            assert "Prior to closing a Connection, each peer MUST write a close frame" in section


def test_campaign_reproducers_mark_the_evidence_bad_frame(campaign):
    _, out, _ = campaign
    _, groups, records = _report(out)
    by_id = {r["id"]: r for r in records}
    for heading, section in groups.items():
        example = re.search(r"Minimal reproducer \(`([0-9a-f]{12})`", section).group(1)
        evidence = by_id[example]["evidence"]
        lines = reproducer_block(section)
        marked = [line for line in lines if line.startswith("!!")]
        assert len(marked) == 1, (heading, lines)
        assert f"-> fuzzer step {evidence['bad_step']} " in marked[0], (evidence, marked)
        roles = [f["role"] for f in evidence["fuzzer_frames"]]
        teardowns = [line for line in lines if "FUZZER'S OWN TEARDOWN" in line]
        assert len(teardowns) == sum("teardown" in r for r in roles), (roles, lines)
        # the broker dropped the connection: its FIN is in the pcap, before the fuzzer's
        pcap = out / "findings" / example / "reproducer.pcap"
        assert f"pcap: `{pcap}`" in section
        fins = [s for s in iter_tcp_segments(str(pcap)) if s.flags & TCP_FIN]
        assert fins and fins[0].src[1] == 5672, [(s.src, s.flags) for s in fins]
        assert "<- broker: TCP close (FIN)" in "\n".join(lines)


def test_campaign_replay_command_reproduces(campaign):
    _, out, _ = campaign
    _, groups, _ = _report(out)
    section = next(iter(groups.values()))
    command = re.search(r"Replay: `amqpspec fuzz (replay [^`]+)`", section).group(1)
    args = shlex.split(command)
    args[args.index("--times") + 1] = "1"
    assert "reference" in args  # the campaign's profile, from DIR/campaign.json
    result = run_fuzz(*args, timeout=120)
    assert result.returncode == 1 and "reproduced 1/1" in result.stdout, result.stdout


def test_report_rewrites_the_same_findings_md(campaign, tmp_path):
    _, out, _ = campaign
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = (copy / "findings.md").read_text()
    (copy / "findings.md").unlink()
    result = run_fuzz("report", str(copy), timeout=120)
    assert result.returncode == 0, result.stderr
    after = (copy / "findings.md").read_text()

    def stable(text: str) -> str:  # the write time and the directory differ
        return re.sub(r"Written [^f]*from", "", text).replace(str(out), str(copy))

    assert stable(after) == stable(before)


# ----------------------------------------------------------------- killed


def test_killed_campaign_keeps_findings_md_consistent(tmp_path):
    broker = Supervised(["die-on-channel-reuse"])
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=REPO)
    command = [sys.executable, "-m", "amqpspec.cli", "fuzz", "--broker", broker.url]
    command += ["--profile", "reference", "--out", str(out), "--quiet", "--duration", "120"]
    command += ["--seed", "1", "--strategy", "sequences"]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            path = out / "findings.json"
            if path.exists() and json.loads(path.read_text() or "[]"):
                break
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
        broker.stop()
    records = json.loads((out / "findings.json").read_text())
    assert records, "no finding within 90 s"
    groups = sections((out / "findings.md").read_text())
    listed = [i for s in groups.values() for i in example_ids(s)]
    assert len(listed) == len(set(listed))
    # findings.md is written before findings.json: it lists every finding of findings.json,
    # and at most the one being added when the kill came, whose files are all on disk
    assert {r["id"] for r in records} <= set(listed), (listed, records)
    for extra in set(listed) - {r["id"] for r in records}:
        assert (out / "findings" / extra / "reproducer.pcap").exists()


def test_a_checker_rule_marks_the_brokers_frame(tmp_path):
    """RabbitMQ 3.10's transfers beyond credit (reports/fuzz-brokers/rabbitmq3-run1): the
    `!!` is on the broker's transfer the checker flags (delivery-id 10), not on ours."""
    out = tmp_path / "run1"
    shutil.copytree(os.path.join(REPO, "reports", "fuzz-brokers", "rabbitmq3-run1"), out)
    result = run_fuzz("report", str(out), timeout=120)
    assert result.returncode == 0, result.stderr
    groups = sections((out / "findings.md").read_text())
    credit = next(s for s in groups.values() if "`53ef34f37953`" in s)
    assert "`2.6.7/flow-control.11` (PROHIBITED" in credit
    marked = [line for line in reproducer_block(credit) if line.startswith("!!")]
    assert len(marked) == 1 and "<- broker: @transfer(20) [handle=0, delivery-id=10," in marked[0]
    assert marked[0].endswith("<== breaks link.credit.transfer-beyond-credit")
